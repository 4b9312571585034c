/// A point on an engine's clock, in nanoseconds since the clock's origin.
public struct Instant: Comparable, Hashable, Sendable {
    public var nanoseconds: Int64

    @inlinable public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// The span from `earlier` to `self` (negative if `earlier` is later).
    public func since(_ earlier: Instant) -> Span {
        Span(nanoseconds: nanoseconds &- earlier.nanoseconds)
    }

    public func advanced(by span: Span) -> Instant {
        Instant(nanoseconds: nanoseconds &+ span.nanoseconds)
    }
}

/// A length of time, in nanoseconds. Deadlines are `Instant`s; durations,
/// remaining times and tick intervals are `Span`s; the two never mix.
public struct Span: Comparable, Hashable, Sendable {
    public var nanoseconds: Int64

    @inlinable public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    @inlinable public static var zero: Span { Span(nanoseconds: 0) }
    static let nanosecondsPerMillisecond: Int64 = 1_000_000
    static let nanosecondsPerSecond: Int64 = 1_000_000_000

    /// `milliseconds` as a span; the caller keeps it within
    /// `Limits.maximumDuration` (far from overflow).
    public static func milliseconds(_ milliseconds: Int64) -> Span {
        Span(nanoseconds: milliseconds &* nanosecondsPerMillisecond)
    }

    public static func < (a: Span, b: Span) -> Bool { a.nanoseconds < b.nanoseconds }

    /// Whole milliseconds, rounded up, so a running countdown never reads 0.
    public var millisecondsRoundedUp: Int64 {
        Span.divideRoundingUp(nanoseconds, Span.nanosecondsPerMillisecond)
    }

    /// Whole seconds, rounded up: what a button shows ("Resend (59s)").
    public var displaySeconds: Int64 {
        Span.divideRoundingUp(nanoseconds, Span.nanosecondsPerSecond)
    }

    private static func divideRoundingUp(_ value: Int64, _ unit: Int64) -> Int64 {
        value <= 0 ? 0 : (value - 1) / unit + 1
    }
}

/// The ranges every duration and interval must fall in: constants the
/// compiler folds in (no lazy global on a hot path).
public enum Limits {
    @inlinable public static var maximumKeyBytes: Int { 256 }
    /// 365 days.
    @inlinable public static var maximumDuration: Span { Span(nanoseconds: RuleConstants.yearMicroseconds * 1_000) }
    @inlinable public static var minimumTickInterval: Span { Span(nanoseconds: 10 * 1_000_000) }
    /// One day.
    @inlinable public static var maximumTickInterval: Span { Span(nanoseconds: 86_400_000 * 1_000_000) }
    @inlinable public static var defaultTickInterval: Span { Span(nanoseconds: 1_000 * 1_000_000) }
    /// How long a call waits for the store by default
    /// (TG_STORE_TIMEOUT_DEFAULT_MS).
    @inlinable public static var defaultStoreTimeout: Span { Span(nanoseconds: 5_000 * 1_000_000) }
    /// Most successful sends a policy's window may count (and a store row
    /// may list).
    @inlinable public static var maximumWindowSends: Int { RuleConstants.maximumWindowSends }
    /// A key's count of consecutive sends stops here (it only picks the
    /// schedule's step, and the last step repeats).
    @inlinable public static var maximumConsecutiveSends: Int { RuleConstants.maximumConsecutiveSends }
    /// The manual clock stops short of this, far from Int64's end.
    @inlinable public static var maximumManualTime: Instant {
        Instant(nanoseconds: 100 * 365 * 86_400 * 1_000_000_000)
    }
}
