/// What happened to a key, as observers see it.
public enum EventKind: Int32, Sendable {
    /// The key's state when the subscription began.
    case state = 1
    case started = 2
    case tick = 3
    case finished = 4
    case cancelled = 5
    /// A send ticket was granted.
    case sending = 6
    /// A send failed, or its ticket expired or was cancelled.
    case sendFailed = 7
    /// `verified` reset the key.
    case reset = 8
}

/// One event for one subscription.
public struct Event: Sendable {
    public var kind: EventKind
    public var key: CountdownKey
    /// Time left on the countdown; zero when idle, finished or cancelled.
    public var remaining: Span
    /// The length the countdown was started with; zero when idle.
    public var duration: Span
    public var subscription: SubscriptionID
    /// The key's button state after the event, and its rendered title.
    public var state: ButtonState
    public var title: String
}

/// The id of a subscription: unique within an engine, never reused.
public typealias SubscriptionID = UInt64

/// What a subscription watches.
public enum SubscriptionTarget: Sendable {
    case key(CountdownKey)
    case scope(KeyName)
    /// A login gate's realm.
    case realm(KeyName)
}

/// An observer: `deliver` runs for each event (on the engine thread or in
/// `dispatch()`), `release` runs exactly once when the subscription ends.
public struct Observer: Sendable {
    public var deliver: @Sendable (Event) -> Void
    /// Receives the events of a realm subscription.
    public var deliverGate: @Sendable (GateEvent) -> Void
    public var release: @Sendable () -> Void

    public init(deliver: @escaping @Sendable (Event) -> Void = { _ in },
                deliverGate: @escaping @Sendable (GateEvent) -> Void = { _ in },
                release: @escaping @Sendable () -> Void = {}) {
        self.deliver = deliver
        self.deliverGate = deliverGate
        self.release = release
    }
}

/// One running countdown, as `Engine.list` reports it.
public struct CountdownInfo: Sendable {
    public var key: CountdownKey
    public var remaining: Span
    public var duration: Span
}
