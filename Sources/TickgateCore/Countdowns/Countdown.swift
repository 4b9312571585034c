/// What a countdown's time means for the key's button.
enum Phase: UInt8 {
    /// A send ticket is open until the deadline (then it expires).
    case sending
    /// The cooldown after a send (or a bare `start`).
    case cooling
    /// The window's cap is reached until the deadline.
    case locked

    var buttonState: ButtonState {
        switch self {
        case .sending: .sending
        case .cooling: .cooling
        case .locked: .locked
        }
    }
}

/// A running countdown in its slot.
struct Countdown {
    var key: CountdownKey
    var phase: Phase = .cooling
    /// The open ticket (phase `.sending`), else 0.
    var ticket: UInt64 = 0
    /// Distinguishes this run of the key from earlier and later runs.
    var instance: UInt64
    var deadline: Instant
    var duration: Span
    var tickInterval: Span
}
