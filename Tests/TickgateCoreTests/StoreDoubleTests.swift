import Glibc
import Synchronization
import Testing
@testable import TickgateCore

/// A store double: keeps rows in memory, makes decisions by the same rule
/// as every store (`KeyDecision.apply`), and on command holds a key's next
/// decision until released, or fails it. It locks per key, so decisions
/// on different keys run in parallel inside it.
final class DoubleStore: Store {
    private struct Rows {
        var keys: [CountdownKey: KeyRows] = [:]
        var charges: [BudgetKey: [Instant]] = [:]
        var held: Set<CountdownKey> = []
        var failing: [CountdownKey: TickgateError] = [:]
        /// Decisions inside the store now, and the most at once.
        var inside = 0
        var mostInside = 0
        var entered: [CountdownKey: Int] = [:]
    }

    // A pthread mutex (LockedValue), which ThreadSanitizer sees; it cannot
    // see the futex of Synchronization.Mutex.
    private let rows = LockedValue(Rows())
    let clock: Clock
    /// Screens answered with another guard each time (as when engines set
    /// a scope's guard in a race), and how many screens were asked.
    let churningGuard = LockedValue(false)
    let screens = LockedValue(0)

    init(clock: Clock) { self.clock = clock }

    /// The key's next decision waits in the store until `release`.
    func hold(_ key: CountdownKey) { rows.withLock { _ = $0.held.insert(key) } }
    func release(_ key: CountdownKey) { rows.withLock { _ = $0.held.remove(key) } }
    /// The key's next decision fails with `error`.
    func fail(_ key: CountdownKey, _ error: TickgateError) { rows.withLock { $0.failing[key] = error } }
    /// Changes a key behind the engine's back, as another engine would.
    func set(_ key: CountdownKey, _ value: KeyRows) { rows.withLock { $0.keys[key] = value } }

    var mostInside: Int { rows.withLock { $0.mostInside } }
    func entered(_ key: CountdownKey) -> Int { rows.withLock { $0.entered[key] ?? 0 } }

    /// Waits (up to 5 s) until `condition` holds.
    func waitUntil(_ condition: () -> Bool) -> Bool {
        let end = Poller.boottime().advanced(by: .milliseconds(5_000))
        while !condition() {
            if Poller.boottime() > end { return false }
            usleep(1_000)
        }
        return true
    }

    func decide(_ decision: KeyDecision, budgets named: [BudgetRow], for key: CountdownKey, by deadline: Instant)
        throws(TickgateError) -> DecisionResult {
        let failure = rows.withLock { rows -> TickgateError? in
            rows.inside += 1
            rows.mostInside = max(rows.mostInside, rows.inside)
            rows.entered[key, default: 0] += 1
            return rows.failing.removeValue(forKey: key)
        }
        defer { rows.withLock { $0.inside -= 1 } }
        while rows.withLock({ $0.held.contains(key) }) { usleep(1_000) }
        if let failure { throw failure }
        return rows.withLock { rows in
            let now = clock.now()
            var before = rows.keys[key] ?? KeyRows()
            if let countdown = before.countdown, countdown.deadline <= now { before.countdown = nil }
            var budgets = named.map { row in
                var row = row
                row.charges = rows.charges[row.key] ?? []
                return row
            }
            var after = before
            do throws(TickgateError) {
                _ = try decision.apply(to: &after, budgets: &budgets, key: key, at: now)
            } catch {
                return DecisionResult(before: before, after: before, now: now, refusal: error)
            }
            for row in budgets { rows.charges[row.key] = row.charges }
            rows.keys[key] = after
            return DecisionResult(before: before, after: after, now: now, refusal: nil)
        }
    }

    func cancelAll(scope: KeyName?) throws(TickgateError) {
        rows.withLock { rows in
            for key in rows.keys.keys where scope == nil || key.scope == scope { rows.keys[key]?.countdown = nil }
        }
    }

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {}
    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {}
    func save(budget: Budget, name: KeyName) throws(TickgateError) {}
    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant] { rows.withLock { $0.charges[key] ?? [] } }
    func resetBudget(_ key: BudgetKey) throws(TickgateError) { rows.withLock { _ = $0.charges.removeValue(forKey: key) } }
    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?) throws(TickgateError) -> Instant? {
        expiry
    }
    func load() throws(TickgateError) -> StoreSnapshot { StoreSnapshot() }
    func finishUpgrade() throws(TickgateError) -> Int { 1 }
    func flush() throws(TickgateError) {}
    func flushIfDue(at now: Instant) -> Instant? { nil }
    var flushDue: Instant? { nil }
    func close() {}
}

final class Flag: Sendable {
    private let atomic = Atomic<Bool>(false)
    var value: Bool { atomic.load(ordering: .acquiring) }
    func set(_ value: Bool) { atomic.store(value, ordering: .releasing) }
}

/// Runs `body` on a thread of its own; `join` waits for it.
final class Background: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: () -> Void

    init(_ body: @escaping () -> Void) {
        self.body = body
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let me = Unmanaged<Background>.fromOpaque(context).takeRetainedValue()
            me.body()
            return nil
        }, context)
    }

    func join() { pthread_join(thread, nil) }
}

@Suite struct StoreDoubleTests {
    let alice = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("alice"))
    let bob = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("bob"))

    func engine() throws -> (Engine, DoubleStore) {
        let clock = Clock(manual: true, boot: Instant(nanoseconds: 0), wall: 0, bootID: "manual")
        let store = DoubleStore(clock: clock)
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual), clock: clock,
                                store: store, snapshot: StoreSnapshot())
        return (engine, store)
    }

    @Test func decisionsOnDifferentKeysRunInParallel() throws {
        let (engine, store) = try engine()
        defer { engine.close() }
        store.hold(alice)
        let started = Flag()
        let waiting = Background {
            started.set((try? engine.start(self.alice, duration: .milliseconds(60_000))) != nil)
        }
        #expect(store.waitUntil { store.entered(alice) == 1 })
        // Alice's decision waits inside the store; Bob's runs beside it,
        // and calls that need no store answer at once.
        try engine.start(bob, duration: .milliseconds(30_000))
        #expect(store.mostInside == 2)
        #expect(try engine.remaining(bob) == .milliseconds(30_000))
        #expect(try engine.button(alice).state == .idle)
        #expect(!started.value)
        store.release(alice)
        waiting.join()
        #expect(started.value)
        #expect(try engine.remaining(alice) == .milliseconds(60_000))
    }

    @Test func oneKeysDecisionsApplyInTheStoresOrder() throws {
        let (engine, store) = try engine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(alice), recorder.observer)
        store.hold(alice)
        let first = Background { _ = try? engine.start(self.alice, duration: .milliseconds(60_000)) }
        #expect(store.waitUntil { store.entered(alice) == 1 })
        let second = Background { _ = try? engine.cancel(self.alice) }
        // The cancel waits for the start (its key's lane), outside the store.
        usleep(100_000)
        #expect(store.entered(alice) == 1)
        store.release(alice)
        first.join()
        second.join()
        #expect(store.entered(alice) == 2)
        _ = try engine.dispatch()
        #expect(recorder.take().map(\.0) == [.state, .started, .cancelled])
        #expect(throws: TickgateError.self) { try engine.remaining(alice) }
    }

    @Test func aFailedDecisionChangesNothing() throws {
        let (engine, store) = try engine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(alice), recorder.observer)
        _ = try engine.dispatch()
        _ = recorder.take()
        store.fail(alice, TickgateError(.storeIO, "store down"))
        #expect(throws: TickgateError.self) { try engine.start(alice, duration: .milliseconds(60_000)) }
        _ = try engine.dispatch()
        #expect(recorder.take().isEmpty)
        #expect(throws: TickgateError.self) { try engine.remaining(alice) }
        try engine.start(alice, duration: .milliseconds(60_000))
        #expect(try engine.remaining(alice) == .milliseconds(60_000))
    }

    @Test func aChangeByAnotherEngineReachesMemoryAtTheNextDecision() throws {
        let (engine, store) = try engine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(alice), recorder.observer)
        store.set(alice, KeyRows(countdown: Countdown(key: alice, instance: 0,
                                                      deadline: Instant(nanoseconds: 0).advanced(by: .milliseconds(45_000)),
                                                      duration: .milliseconds(45_000), tickInterval: .milliseconds(1_000))))
        do {
            try engine.start(alice, duration: .milliseconds(60_000))
            Issue.record("the start should be refused")
        } catch {
            #expect(error.status == .coolingDown)
            #expect(error.remaining == .milliseconds(45_000))
        }
        #expect(try engine.remaining(alice) == .milliseconds(45_000))
        _ = try engine.dispatch()
        #expect(recorder.take().map(\.0) == [.state, .started])
    }
}

/// What the double is not: a store no other engine shares (no notices, no
/// reads through, no rules of its own, nothing to write back, no records).
/// `Store` has no defaults: every store says each of these.
extension DoubleStore {
    var warning: String? { nil }
    var decidesInEngine: Bool { false }
    var keepsRecordStream: Bool { false }
    var sweepInterval: Span { .milliseconds(1_000) }
    var readsThrough: Bool { false }
    var holdsRules: Bool { false }
    var refusesLocally: Bool { false }
    var keepsBudgetRefusals: Bool { false }
    var hearsKeys: Bool { false }
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void) {}
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void, lag: @escaping @Sendable (Span) -> Void) {}
    func watchKeys() {}
    func appendRecord(_ record: GuardRecord, maximumLength: Int) throws(TickgateError) {}
    func localGuard(scope: KeyName) throws(TickgateError) -> LocalGuard { .unknown }
    func session(realm: KeyName) throws(TickgateError) -> SessionState? { nil }
    func readSettings() throws(TickgateError) -> StoreSnapshot { StoreSnapshot() }
    func merge(_ rows: KeyRows, for key: CountdownKey, charges: [BudgetKey: [Instant]],
               by deadline: Instant) throws(TickgateError) {}
}
