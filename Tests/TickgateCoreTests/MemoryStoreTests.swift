import Testing
@testable import TickgateCore

/// An engine opened with no store talks to its memory through `Store`
/// (`MemoryStore`), as it talks to SQLite and Redis.
@Suite struct MemoryStoreTests {
    let alice = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("alice"))

    @Test func anEngineWithNoStoreHasItsMemoryAsItsStore() throws {
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
        defer { engine.close() }
        #expect(engine.store is MemoryStore)
        #expect(engine.decidesInEngine)
        // Nothing else shares memory: nothing to read through, no stream,
        // and a sweep costs no round trip.
        #expect(!engine.store.readsThrough && !engine.store.holdsRules && !engine.store.refusesLocally)
        #expect(!engine.store.keepsRecordStream && engine.store.sweepInterval == .zero)
        #expect(try engine.finishStoreUpgrade() == 0)
    }

    @Test func aReadIsMemoryAndADecisionThatWritesIsTheEngines() throws {
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
        defer { engine.close() }
        try engine.start(alice, duration: .milliseconds(5_000))
        let deadline = engine.storeDeadline()
        let read = try engine.store.decide(.read, budgets: [], for: alice, by: deadline)
        #expect(read.before.countdown?.duration == .milliseconds(5_000))
        #expect(read.after.countdown?.deadline == read.before.countdown?.deadline && read.refusal == nil)
        // A cancel through `decide` would be made outside the engine's
        // lock: refused, and the countdown runs on.
        #expect(throws: TickgateError.self) {
            try engine.store.decide(.cancel, budgets: [], for: alice, by: deadline)
        }
        #expect(try engine.remaining(alice) == .milliseconds(5_000))
        engine.close()
        #expect(throws: TickgateError.self) {
            try engine.store.decide(.read, budgets: [], for: alice, by: deadline)
        }
    }
}
