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

/// Where and how an engine keeps its state across restarts.
public struct StoreOptions: Sendable {
    /// The SQLite file; created 0600 if missing.
    public var path: String
    /// Zero: every change is committed before its call returns. Otherwise
    /// changes are committed together at most this long after the first.
    public var commitDelay: Span
    /// Move a corrupt store aside and start a new one (else refuse to open).
    public var startFreshIfCorrupt: Bool
    /// Sync to disk on every commit (survives power loss, not only crashes).
    public var fullSync: Bool
    /// The longest a call waits for the store (another process holding its
    /// write lock), retries included.
    public var timeout: Span

    public init(path: String, commitDelay: Span = .zero, timeout: Span = Limits.defaultStoreTimeout,
                startFreshIfCorrupt: Bool = false, fullSync: Bool = false) {
        self.path = path
        self.commitDelay = commitDelay
        self.timeout = timeout
        self.startFreshIfCorrupt = startFreshIfCorrupt
        self.fullSync = fullSync
    }
}

public struct EngineOptions: Sendable {
    public var delivery: Delivery
    public var clock: ClockKind
    /// Tick interval of countdowns started without one.
    public var tickInterval: Span
    /// nil keeps state in memory only.
    public var store: StoreOptions?
    /// A Redis server shared by every engine (instead of `store`).
    public var redis: RedisOptions?
    /// The manual clock's first readings: its boot clock, its wall clock
    /// (nanoseconds since the epoch) and the id of its "boot".
    public var manualBoot: Instant
    public var manualWall: Int64
    public var manualBootID: String

    public init(delivery: Delivery = .engineThread, clock: ClockKind = .system,
                tickInterval: Span = Limits.defaultTickInterval, store: StoreOptions? = nil,
                manualBoot: Instant = Instant(nanoseconds: 0), manualWall: Int64 = 0,
                manualBootID: String = "manual") {
        self.delivery = delivery
        self.clock = clock
        self.tickInterval = tickInterval
        self.store = store
        self.manualBoot = manualBoot
        self.manualWall = manualWall
        self.manualBootID = manualBootID
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
