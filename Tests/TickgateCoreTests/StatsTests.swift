import Testing
@testable import TickgateCore

/// The engine's statistics: the histogram's buckets, the store calls the
/// measured store counts (on a store double), and a notice's stamp.
@Suite struct StatsTests {
    let alice = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("alice"))
    let bob = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("bob"))

    func engine() throws -> (Engine, DoubleStore) {
        let clock = Clock(manual: true, boot: Instant(nanoseconds: 0), wall: 0, bootID: "manual")
        let store = DoubleStore(clock: clock)
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual), clock: clock,
                                store: store, snapshot: StoreSnapshot())
        return (engine, store)
    }

    @Test func aDurationFallsInTheFirstBucketItDoesNotPass() {
        func bucket(_ nanoseconds: Int64) -> Int { LatencyHistogram.bucket(of: Span(nanoseconds: nanoseconds)) }
        #expect(bucket(-5) == 0)
        #expect(bucket(0) == 0)
        #expect(bucket(100_000) == 0)          // at most 100 µs
        #expect(bucket(100_001) == 1)          // just past it
        #expect(bucket(1_000_000) == 3)
        #expect(bucket(5_000_000_000) == 14)   // 5 s, the last bound
        #expect(bucket(5_000_000_001) == 15)   // +Inf
        #expect(bucket(Int64.max) == 15)
        #expect(EngineStats.latencyBounds.count == EngineStats.latencyBuckets)
        let histogram = LatencyHistogram()
        histogram.record(Span(nanoseconds: 150_000))
        histogram.record(Span(nanoseconds: 7_000_000_000))
        let read = histogram.read()
        #expect(read.buckets[1] == 1 && read.buckets[15] == 1 && read.buckets.reduce(0, +) == 2)
        #expect(read.sum == Span(nanoseconds: 7_000_150_000))
    }

    @Test func everyStoreCallIsTimedAndAFailureCountedByKind() throws {
        let (engine, store) = try engine()
        defer { engine.close() }
        let ticket = try engine.sendBegin(alice)
        _ = try engine.sendEnd(ticket, .succeeded)
        #expect(throws: TickgateError.self) { try engine.sendBegin(alice) }
        store.fail(bob, TickgateError(.storeIO, "down", store: .unreachable))
        #expect(throws: TickgateError.self) { try engine.sendBegin(bob) }
        // Not the store's failure: timed, not counted as a store error.
        store.fail(bob, TickgateError(.notFound, "gone"))
        #expect(throws: TickgateError.self) { try engine.verified(bob) }
        let stats = engine.stats()
        #expect(stats.storeCalls.count == 5)
        #expect(stats.storeErrors[Int(StoreFailure.unreachable.rawValue)] == 1)
        #expect(stats.storeErrors.reduce(0, +) == 1)
        #expect(stats.sendsGranted == 1)
        #expect(stats.refused(.coolingDown) == 1 && stats.refused(.storeIO) == 1)
        #expect(stats.sendsRefused.reduce(0, +) == 2)
        #expect(stats.countdowns == 1)
    }

    @Test func aNoticeSaysWhenItWasSent() {
        let keys = RedisKeys(prefix: Array("tg:".utf8), engine: Array("e1".utf8))
        let other = Array("e2@1700000000123456 k{5:loginalice}".utf8)
        let (payload, sent) = keys.unstamped(other)
        #expect(payload == Array("e2 k{5:loginalice}".utf8))
        #expect(sent == 1_700_000_000_123_456)
        #expect(keys.notice(payload) == .key(alice))
        // Its own notice, stamped, is still its own.
        #expect(keys.notice(keys.unstamped(Array("e1@5 b".utf8)).payload) == nil)
        // No stamp, or a bad one: the notice as it is, no time.
        let plain = keys.unstamped(Array("e2 g".utf8))
        #expect(plain.payload == Array("e2 g".utf8) && plain.sent == nil)
        let bad = keys.unstamped(Array("e2@12x b".utf8))
        #expect(bad.payload == Array("e2 b".utf8) && bad.sent == nil)
    }
}
