/// The state of a key's "Get code" button. Raw values are `tg_button_state`.
public enum ButtonState: Int32, Sendable {
    /// Never sent, or reset by `verified`.
    case idle = 0
    /// A send ticket is open.
    case sending = 1
    /// Cooling down after a send.
    case cooling = 2
    /// Cooled down after at least one send.
    case readyAgain = 3
    /// The window's cap of sends is reached.
    case locked = 4
    /// The code took too many wrong codes and no cooldown runs: a new
    /// send is the only way on.
    case codeDead = 5

    /// Whether the button may be tapped.
    public var isEnabled: Bool { self == .idle || self == .readyAgain || self == .codeDead }
}

/// A key's button at one moment.
public struct Button: Sendable {
    public var state: ButtonState
    public var remaining: Span
    public var title: String
}
