/// What an engine did since it was opened, and what it holds now, as
/// `Engine.stats()` reads it (C: `tg_stats`). Counters only grow: there is
/// no reset, and a monitor takes differences (as Prometheus's counters
/// do); the gauges say what holds at the read. Read without waiting on the
/// store; each counter is read on its own, so a read taken while calls run
/// may see one call's counts partly.
public struct EngineStats: Sendable, Equatable {
    /// The slots of `sendsRefused`, by `Status` raw value
    /// (TG_STATS_STATUS_SLOTS).
    public static let statusSlots = 32
    /// The slots of `storeErrors`, by `StoreFailure` raw value
    /// (TG_STATS_STORE_FAILURE_SLOTS).
    public static let failureSlots = 16
    /// The latency buckets' upper bounds in µs; the last has none
    /// (`Int64.max`).
    public static var latencyBounds: [Int64] { LatencyHistogram.bounds }
    /// How many buckets a histogram has (TG_STATS_LATENCY_BUCKETS).
    public static let latencyBuckets = 16

    /// Durations in fixed buckets (`latencyBounds`).
    public struct Latencies: Sendable, Equatable {
        /// Each bucket's own count (not cumulative).
        public var buckets: [UInt64]
        /// Every duration recorded, added up.
        public var sum: Span
        /// How many were recorded: the buckets' total.
        public var count: UInt64 { buckets.reduce(0, &+) }

        public init(buckets: [UInt64] = [UInt64](repeating: 0, count: EngineStats.latencyBuckets),
                    sum: Span = .zero) {
            self.buckets = buckets
            self.sum = sum
        }
    }

    // MARK: Sends (sendBegin, every path)

    /// Send tickets granted, "fail open" grants included.
    public var sendsGranted: UInt64 = 0
    /// Sends not granted, by the status they failed with (cooling down, in
    /// flight, locked, a store error, ...), at the status's raw value; slot
    /// 0 counts a status without a slot of its own (none today).
    public var sendsRefused = [UInt64](repeating: 0, count: EngineStats.statusSlots)
    /// Of the refused sends, those refused by this engine without asking
    /// the store (`LocalRefusals`, on Redis).
    public var sendsRefusedLocally: UInt64 = 0
    /// Of the granted sends, those granted by this engine alone while the
    /// store could not be reached (fail open).
    public var failOpenGrants: UInt64 = 0
    /// Keys this engine decided alone and then wrote back to the store once
    /// it answered again, and the write-backs that failed (tried again at
    /// the next call).
    public var writeBacks: UInt64 = 0
    public var writeBackFailures: UInt64 = 0

    // MARK: Verifications

    /// Codes verified (`verified` returned).
    public var verified: UInt64 = 0
    /// Wrong codes counted (`verifyFailed` returned), and of them those
    /// that killed their code (the cap's last).
    public var wrongCodes: UInt64 = 0
    public var codesKilled: UInt64 = 0
    /// `verified` and `verifyFailed` refused because the code is dead
    /// (`.codeDead`), and of them those refused without asking the store.
    public var verifiesRefusedDead: UInt64 = 0
    public var verifiesRefusedLocally: UInt64 = 0

    // MARK: The store

    /// Every decision, read and write this engine asked of its store (the
    /// open's load and group commits aside), by how long it took, failed
    /// ones included. Memory (no store) makes none.
    public var storeCalls = Latencies()
    /// Store calls that failed with a store error, by kind (`StoreFailure`
    /// raw value; slot 0: a store error without a kind).
    public var storeErrors = [UInt64](repeating: 0, count: EngineStats.failureSlots)

    // MARK: Notices (a shared store's news of other engines' changes)

    /// Notices heard: a key, the settings, budgets or a session changed
    /// elsewhere (SQLite: the file changed elsewhere).
    public var notices: UInt64 = 0
    /// Of them, those that carried when they were sent, and how long each
    /// took to arrive (Redis: the decisions' notices).
    public var noticeLag = Latencies()
    /// Times the notice link was lost.
    public var noticeLinksLost: UInt64 = 0

    // MARK: Gauges: what the engine holds now

    /// Keys whose refusal this engine knows without asking (`LocalRefusals`).
    public var localRefusalsKept: UInt64 = 0
    /// Countdowns held in memory (running, sending or locked).
    public var countdowns: UInt64 = 0
    /// Keys whose send record memory holds.
    public var sendRecords: UInt64 = 0
    /// Keys decided alone (fail open) that wait to be written back.
    public var localGrantsPending: UInt64 = 0

    public init() {}

    /// Sends refused with `status`.
    public func refused(_ status: Status) -> UInt64 {
        let slot = Int(status.rawValue)
        return slot > 0 && slot < Self.statusSlots ? sendsRefused[slot] : 0
    }
}
