/// What happened to a key, as observers see it.
public enum EventKind: Int32, Sendable {
    /// The key's state when the subscription began.
    case state = 1
    case started = 2
    case tick = 3
    case finished = 4
    case cancelled = 5
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
}

/// The id of a subscription: unique within an engine, never reused.
public typealias SubscriptionID = UInt64

/// What a subscription watches.
public enum SubscriptionTarget: Sendable {
    case key(CountdownKey)
    case scope(KeyName)
}

/// An observer: `deliver` runs for each event (on the engine thread or in
/// `dispatch()`), `release` runs exactly once when the subscription ends.
public struct Observer: Sendable {
    public var deliver: @Sendable (Event) -> Void
    public var release: @Sendable () -> Void

    public init(deliver: @escaping @Sendable (Event) -> Void,
                release: @escaping @Sendable () -> Void = {}) {
        self.deliver = deliver
        self.release = release
    }
}

/// One running countdown, as `Engine.list` reports it.
public struct CountdownInfo: Sendable {
    public var key: CountdownKey
    public var remaining: Span
    public var duration: Span
}
