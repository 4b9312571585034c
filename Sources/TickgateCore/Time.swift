/// A point on an engine's clock, in nanoseconds since the clock's origin.
public struct Instant: Comparable, Hashable, Sendable {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

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

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Span(nanoseconds: 0)
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

/// The ranges every duration and interval must fall in.
public enum Limits {
    public static let maximumKeyBytes = 256
    public static let maximumDuration = Span.milliseconds(31_536_000_000)
    public static let minimumTickInterval = Span.milliseconds(10)
    public static let maximumTickInterval = Span.milliseconds(86_400_000)
    public static let defaultTickInterval = Span.milliseconds(1_000)
    /// The manual clock stops short of this, far from Int64's end.
    public static let maximumManualTime = Instant(nanoseconds: 100 * 365 * 86_400 * 1_000_000_000)
}
