/// Where an engine runs observer callbacks.
public enum Delivery: Sendable {
    /// On the engine's own thread.
    case engineThread
    /// On the host's thread, inside `Engine.dispatch()`, when
    /// `Engine.descriptor()` is readable.
    case hostThread
}

/// Which clock measures remaining time.
public enum ClockKind: Sendable {
    /// CLOCK_BOOTTIME: counts through sleep, ignores wall-clock changes.
    case system
    /// Starts at 0 and moves only by `Engine.advance(by:)`.
    case manual
}

public struct EngineOptions: Sendable {
    public var delivery: Delivery
    public var clock: ClockKind
    /// Tick interval of countdowns started without one.
    public var tickInterval: Span

    public init(delivery: Delivery = .engineThread, clock: ClockKind = .system,
                tickInterval: Span = Limits.defaultTickInterval) {
        self.delivery = delivery
        self.clock = clock
        self.tickInterval = tickInterval
    }
}

extension Span {
    /// Throws unless the span is a valid tick interval.
    func validatedTickInterval() throws(TickgateError) -> Span {
        guard self >= Limits.minimumTickInterval, self <= Limits.maximumTickInterval else {
            throw TickgateError(.invalidDuration,
                "tick interval must be between 10 ms and 86400000 ms")
        }
        return self
    }

    /// Throws unless the span is a valid countdown length.
    func validatedDuration() throws(TickgateError) -> Span {
        guard nanoseconds > 0, self <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration,
                "duration must be between 1 ms and 31536000000 ms (365 days)")
        }
        return self
    }
}
