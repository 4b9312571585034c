import Synchronization

/// A histogram of durations in fixed buckets, kept with atomics: recording
/// one is a few comparisons and two relaxed adds, with no lock, from any
/// thread. Bucket i counts the durations above bound i - 1 and at most
/// bound i (µs, `bounds`); the last has no upper bound. Readers get each
/// bucket's own count (not cumulative) and the sum; the count is their
/// total, so the two always agree.
struct LatencyHistogram: ~Copyable, Sendable {
    /// The buckets' upper bounds in µs, the last one unbounded
    /// (TG_STATS_LATENCY_BOUNDS_US). Built on each call, never kept in a
    /// global: a global is made once by the Swift runtime's `swift_once`,
    /// which ThreadSanitizer cannot see through, so the first readers on
    /// two threads were reported as a race.
    static var bounds: [Int64] { (0..<bucketCount).map(bound) }
    static let bucketCount = 16

    /// Bucket `index`'s upper bound in µs.
    @inline(__always)
    static func bound(_ index: Int) -> Int64 {
        switch index {
        case 0: 100
        case 1: 250
        case 2: 500
        case 3: 1_000
        case 4: 2_500
        case 5: 5_000
        case 6: 10_000
        case 7: 25_000
        case 8: 50_000
        case 9: 100_000
        case 10: 250_000
        case 11: 500_000
        case 12: 1_000_000
        case 13: 2_500_000
        case 14: 5_000_000
        default: Int64.max
        }
    }

    private let buckets: InlineArray<16, Atomic<UInt64>>
    private let nanoseconds = Atomic<UInt64>(0)

    init() {
        buckets = InlineArray { _ in Atomic(0) }
    }

    /// The bucket of a duration: the first whose bound it does not pass
    /// (negative durations count as zero).
    @inline(__always)
    static func bucket(of span: Span) -> Int {
        let micros = span.nanoseconds <= 0 ? 0 : (span.nanoseconds - 1) / 1_000 + 1
        var index = 0
        while index < bucketCount - 1 && micros > bound(index) { index += 1 }
        return index
    }

    @inline(__always)
    func record(_ span: Span) {
        buckets[Self.bucket(of: span)].wrappingAdd(1, ordering: .relaxed)
        nanoseconds.wrappingAdd(UInt64(clamping: span.nanoseconds), ordering: .relaxed)
    }

    /// Each bucket's count, and the sum of the durations.
    func read() -> (buckets: [UInt64], sum: Span) {
        var counts = [UInt64](repeating: 0, count: Self.bucketCount)
        for index in 0..<Self.bucketCount { counts[index] = buckets[index].load(ordering: .relaxed) }
        let total = nanoseconds.load(ordering: .relaxed)
        return (counts, Span(nanoseconds: Int64(clamping: total)))
    }
}
