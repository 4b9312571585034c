/// The Redis store's time: decisions run on the server's clock (`TIME` in
/// every script) or, for tests on a manual clock, on the engine's; replies'
/// times are mapped onto the engine's clock, and every call carries the
/// moment past which the server must not run it.
final class RedisClock: Sendable {
    let engineClock: Clock
    let source: RedisOptions.TimeSource
    let timeout: Span

    private struct State {
        var engineTime = ServerClock()
        var realTime = ServerClock()
        /// The same mapping, moved by every tighter reading (no 1 ms
        /// steadiness): for measuring a notice's lag, never for deadlines.
        var measuring = ServerClock()
        /// The run id of the primary whose time the mapping was learned
        /// on (Sentinel only: RedisStore+Clock.swift).
        var primary: String?
    }

    private let state = LockedValue(State())

    init(_ clock: Clock, source: RedisOptions.TimeSource, timeout: Span) {
        engineClock = clock
        self.source = source
        self.timeout = timeout
    }

    /// One call's readings: the engine's and the boot clock's at its start,
    /// its deadline on the boot clock, the decision time to send ('' for
    /// the server's) and the server time past which it must not run.
    struct Call {
        var engineStart: Instant
        var realStart: Instant
        var deadline: Instant
        var now: [UInt8]
        var notAfter: [UInt8]
    }

    /// A call starting now; it ends within the store timeout, or by
    /// `callDeadline` if that comes sooner (an engine call that spent some
    /// of its timeout already: waiting for its key, writing back).
    func begin(by callDeadline: Instant? = nil) -> Call {
        let engineStart = engineClock.now()
        let realStart = Poller.boottime()
        var deadline = realStart.advanced(by: timeout)
        if let callDeadline, callDeadline < deadline { deadline = callDeadline }
        var now: [UInt8] = []
        if source == .engine { now = Array(String(engineStart.nanoseconds / 1_000).utf8) }
        // The server's time at the deadline, never later than it is: a
        // call that the server reads after its caller gave up is refused.
        let notAfter = state.withLock { $0.realTime.server(of: deadline) }
        return Call(engineStart: engineStart, realStart: realStart, deadline: deadline, now: now,
                    notAfter: notAfter.map { Array(String($0).utf8) } ?? [])
    }

    /// Learns from a reply's clock readings (`now` the decision time, `real`
    /// the server's, µs); returns the offset that maps the reply's times
    /// onto the engine's clock.
    func finish(_ call: Call, now: Int64, real: Int64) -> Int64 {
        let engineEnd = engineClock.now()
        let realEnd = Poller.boottime()
        return state.withLock { state in
            state.realTime.observe(start: call.realStart, end: realEnd, server: real)
            state.measuring.observe(start: call.realStart, end: realEnd, server: real, steady: false)
            if source == .engine { return 0 }
            if engineClock.isManual {
                state.engineTime.observe(start: call.engineStart, end: engineEnd, server: now)
            } else {
                state.engineTime = state.realTime
            }
            return state.engineTime.offset ?? 0
        }
    }

    /// The decision time (µs) of a call whose TIME reply gave `real`, and
    /// the offset that maps it onto the engine's clock.
    func moment(_ call: Call, real: Int64) -> (now: Int64, offset: Int64) {
        let now = source == .engine ? call.engineStart.nanoseconds / 1_000 : real
        return (now, finish(call, now: now, real: real))
    }

    /// The store's time (µs) that the engine's mapping expects at two
    /// boot-clock readings, if it has one (no decision was answered yet:
    /// none).
    func expected(start: Instant, end: Instant) -> (low: Int64, high: Int64)? {
        guard source == .server else { return nil }
        return state.withLock { state in
            guard let low = state.realTime.server(of: start), let high = state.realTime.server(of: end) else { return nil }
            return (low, high)
        }
    }

    /// The store's time (µs) at the boot clock's `instant` by the tightest
    /// mapping learned so far (never later than it is, and early by at most
    /// the round trip it was learned from), if one was learned: a notice's
    /// lag (RedisWatcher).
    func storeMicros(atBoot instant: Instant) -> Int64? {
        state.withLock { $0.measuring.server(of: instant) }
    }

    /// Records that the mapping now rests on the primary `runID`; answers
    /// the one it rested on before.
    func rest(on runID: String) -> String? {
        state.withLock { state in
            defer { state.primary = runID }
            return state.primary
        }
    }

    /// The decision time (µs) of the engine's `instant`, if the mapping is
    /// known.
    func micros(of instant: Instant) -> Int64? {
        if source == .engine { return instant.nanoseconds / 1_000 }
        return state.withLock { $0.engineTime.server(of: instant) }
    }

    /// The engine-clock instant of decision time `micros` under `offset`.
    static func instant(_ micros: Int64, _ offset: Int64) -> Instant {
        Instant(nanoseconds: micros &* 1_000 &+ offset)
    }

    static func micros(_ span: Span) -> [UInt8] { Array(String(span.nanoseconds / 1_000).utf8) }

    /// The store's time (µs): a TIME reply plus the clock key's correction
    /// (a GET reply; none is 0).
    static func storeTime(_ time: RedisReply, _ skew: RedisReply, _ server: String) throws(TickgateError) -> Int64 {
        try serverTime(time, server) + (try correction(skew, server))
    }

    /// The largest correction (µs): a day. Servers whose clocks differ by
    /// more are refused, not followed.
    static let maximumCorrection: Int64 = 86_400_000_000

    /// The clock key's correction (µs) of a GET reply.
    static func correction(_ reply: RedisReply, _ server: String) throws(TickgateError) -> Int64 {
        switch reply {
        case .null:
            return 0
        case let .string(bytes):
            // "RUNID:VALUE": the primary it was set for, and the value.
            let text = String(decoding: bytes.prefix(80), as: UTF8.self)
            guard let value = Int64(text.split(separator: ":", omittingEmptySubsequences: false).last ?? ""),
                  abs(value) <= maximumCorrection else { break }
            return value
        case let .error(text):
            throw TickgateError(.storeIO, "the Redis server \(server) refused to read the clock's correction: \(text.prefix(200))",
                                store: .auth)
        default:
            break
        }
        throw TickgateError(.storeCorrupt, "the Redis server \(server) holds a bad clock correction", store: .corrupt)
    }

    /// The server's time (µs) of a TIME reply.
    static func serverTime(_ reply: RedisReply, _ server: String) throws(TickgateError) -> Int64 {
        guard case let .array(parts) = reply, parts.count == 2, let seconds = parts[0].text.flatMap({ Int64($0) }),
              let micros = parts[1].text.flatMap({ Int64($0) }), seconds >= 0, seconds < Int64(1) << 33,
              (0..<1_000_000).contains(micros) else {
            throw TickgateError(.storeCorrupt, "the Redis server \(server) sent a bad TIME reply", store: .corrupt)
        }
        return seconds * 1_000_000 + micros
    }
}

/// Maps the server's clock onto one of the engine's: `offset` is added to
/// a server time (in ns) to give the engine's instant. Each call that reads
/// the server's time between the engine's readings `start` and `end` says
/// the true offset lies in [start - server, end - server]; the offset kept
/// is the smallest upper end seen, so a deadline is never mapped earlier
/// than it is (a countdown never finishes early) and never later than by
/// one round trip. It moves only by 1 ms or more, or when a reading proves
/// it too small (the server's clock was set back), so that the same server
/// time keeps mapping to the same instant (not `steady`: by any tighter
/// reading, for measuring only).
struct ServerClock {
    var offset: Int64?

    mutating func observe(start: Instant, end: Instant, server micros: Int64, steady: Bool = true) {
        let server = micros &* 1_000
        let high = end.nanoseconds &- server
        let low = start.nanoseconds &- server
        guard let current = offset else {
            offset = high
            return
        }
        if high < current &- (steady ? 1_000_000 : 0) || low > current { offset = high }
    }

    /// The server's time (µs) at the engine's `instant`, if known: never
    /// later than it is.
    func server(of instant: Instant) -> Int64? {
        offset.map { (instant.nanoseconds &- $0) / 1_000 }
    }
}
