import Synchronization

/// The engine's counters behind `EngineStats`, kept with atomics: counting
/// is one relaxed add, with no lock, from whichever thread made the call
/// (the engine's lock is never taken for it). Only grow.
final class EngineCounters: Sendable {
    let sendsGranted = Atomic<UInt64>(0)
    private let sendsRefused: InlineArray<32, Atomic<UInt64>>
    let failOpenGrants = Atomic<UInt64>(0)
    let writeBacks = Atomic<UInt64>(0)
    let writeBackFailures = Atomic<UInt64>(0)
    let verified = Atomic<UInt64>(0)
    let wrongCodes = Atomic<UInt64>(0)
    let codesKilled = Atomic<UInt64>(0)
    let verifiesRefusedDead = Atomic<UInt64>(0)
    let storeCalls = LatencyHistogram()
    private let storeErrors: InlineArray<16, Atomic<UInt64>>
    let notices = Atomic<UInt64>(0)
    let noticeLag = LatencyHistogram()
    let noticeLinksLost = Atomic<UInt64>(0)

    init() {
        sendsRefused = InlineArray { _ in Atomic(0) }
        storeErrors = InlineArray { _ in Atomic(0) }
    }

    @inline(__always)
    func bump(_ counter: borrowing Atomic<UInt64>) {
        counter.wrappingAdd(1, ordering: .relaxed)
    }

    /// A send refused (or failed) with `status`.
    @inline(__always)
    func sendRefused(_ status: Status) {
        let raw = Int(status.rawValue)
        sendsRefused[raw > 0 && raw < EngineStats.statusSlots ? raw : 0].wrappingAdd(1, ordering: .relaxed)
    }

    /// A store call that started at `start` (boot clock) ended now, with
    /// `error` if it failed.
    @inline(__always)
    func storeCall(since start: Instant, failed error: TickgateError? = nil) {
        storeCalls.record(Poller.boottime().since(start))
        guard let error else { return }
        switch error.status {
        case .storeIO, .storeUnknown, .storeCorrupt, .storeVersion:
            break
        default:
            // Not the store's failure (the engine closed under the call).
            guard error.storeFailure != .none else { return }
        }
        let raw = Int(error.storeFailure.rawValue)
        storeErrors[raw < EngineStats.failureSlots ? raw : 0].wrappingAdd(1, ordering: .relaxed)
    }

    /// The counters as they are now (the gauges left at zero).
    func read() -> EngineStats {
        var stats = EngineStats()
        stats.sendsGranted = sendsGranted.load(ordering: .relaxed)
        for slot in 0..<EngineStats.statusSlots { stats.sendsRefused[slot] = sendsRefused[slot].load(ordering: .relaxed) }
        stats.failOpenGrants = failOpenGrants.load(ordering: .relaxed)
        stats.writeBacks = writeBacks.load(ordering: .relaxed)
        stats.writeBackFailures = writeBackFailures.load(ordering: .relaxed)
        stats.verified = verified.load(ordering: .relaxed)
        stats.wrongCodes = wrongCodes.load(ordering: .relaxed)
        stats.codesKilled = codesKilled.load(ordering: .relaxed)
        stats.verifiesRefusedDead = verifiesRefusedDead.load(ordering: .relaxed)
        let calls = storeCalls.read()
        stats.storeCalls = EngineStats.Latencies(buckets: calls.buckets, sum: calls.sum)
        for slot in 0..<EngineStats.failureSlots { stats.storeErrors[slot] = storeErrors[slot].load(ordering: .relaxed) }
        stats.notices = notices.load(ordering: .relaxed)
        let lag = noticeLag.read()
        stats.noticeLag = EngineStats.Latencies(buckets: lag.buckets, sum: lag.sum)
        stats.noticeLinksLost = noticeLinksLost.load(ordering: .relaxed)
        return stats
    }
}
