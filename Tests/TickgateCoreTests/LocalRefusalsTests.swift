import Testing
@testable import TickgateCore

/// What an engine on a shared store keeps to refuse again without asking,
/// and everything that drops it (the server side is test_local_refusals.py).
@Suite struct LocalRefusalsTests {
    let key = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("+8613800000000"))
    let other = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("+8613800000001"))
    let ip = BudgetKey(budget: try! KeyName("ip"), key: try! KeyName("203.0.113.7"))
    let day = BudgetKey(budget: try! KeyName("day"), key: try! KeyName("cn"))
    let now = Instant(nanoseconds: 1_000_000_000_000)

    func cooling(_ key: CountdownKey, for span: Span) -> KeyRows {
        KeyRows(countdown: Countdown(key: key, phase: .cooling, instance: 0, deadline: now.advanced(by: span),
                                     duration: span, tickInterval: .milliseconds(1_000)), record: nil)
    }

    func enabled(budgets: Bool = true) -> LocalRefusals {
        var refusals = LocalRefusals()
        refusals.enabled = true
        refusals.keepsBudgets = budgets
        return refusals
    }

    @Test func aRunningCountdownRefusesWithTheStoresStatusUntilItsDeadline() throws {
        var refusals = enabled()
        let mark = refusals.mark(key)
        refusals.learn(key, mark, rows: cooling(key, for: .milliseconds(60_000)), refused: .busy, budgets: [],
                       hearing: true, at: now)
        let later = now.advanced(by: .milliseconds(10_000))
        let answer = refusals.refuseSend(key, budgets: [ip], at: later)
        let refusal = try #require(answer)
        #expect(refusal.status == .coolingDown)
        #expect(refusal.remaining == .milliseconds(50_000))
        #expect(refusals.refuseSend(other, budgets: [], at: later) == nil)
        // At its deadline it is the store's question again, and forgotten.
        #expect(refusals.refuseSend(key, budgets: [], at: now.advanced(by: .milliseconds(60_000))) == nil)
        #expect(refusals.entries.isEmpty)
    }

    @Test func nothingIsKeptWhileNoticesAreNotHeardOrWhenOff() {
        var refusals = enabled()
        refusals.learn(key, refusals.mark(key), rows: cooling(key, for: .milliseconds(60_000)), refused: nil,
                       budgets: [], hearing: false, at: now)
        #expect(refusals.entries.isEmpty)
        var off = LocalRefusals()
        #expect(off.mark(key) == nil)
        off.learn(key, nil, rows: cooling(key, for: .milliseconds(60_000)), refused: nil, budgets: [],
                  hearing: true, at: now)
        #expect(off.refuseSend(key, budgets: [], at: now) == nil)
    }

    @Test func aNoticeDuringTheDecisionKeepsItsResultOut() {
        var refusals = enabled()
        let mark = refusals.mark(key)
        refusals.noticed(key)   // another engine changed the key meanwhile
        refusals.learn(key, mark, rows: cooling(key, for: .milliseconds(60_000)), refused: nil, budgets: [],
                       hearing: true, at: now)
        #expect(refusals.refuseSend(key, budgets: [], at: now) == nil)
        // A lost link (or changed rules) keeps out every result in flight.
        let second = refusals.mark(key)
        refusals.dropAll()
        refusals.learn(key, second, rows: cooling(key, for: .milliseconds(60_000)), refused: nil, budgets: [],
                       hearing: true, at: now)
        #expect(refusals.entries.isEmpty)
    }

    @Test func aNoticeDropsWhatWasKnown() {
        var refusals = enabled()
        refusals.learn(key, refusals.mark(key), rows: cooling(key, for: .milliseconds(60_000)), refused: nil,
                       budgets: [], hearing: true, at: now)
        refusals.learn(other, refusals.mark(other), rows: cooling(other, for: .milliseconds(60_000)),
                       refused: nil, budgets: [], hearing: true, at: now)
        refusals.noticed(key)
        #expect(refusals.refuseSend(key, budgets: [], at: now) == nil)
        #expect(refusals.refuseSend(other, budgets: [], at: now) != nil)
        refusals.dropAll()
        #expect(refusals.refuseSend(other, budgets: [], at: now) == nil)
    }

    @Test func aSpentBudgetRefusesOnlyASendNamingTheSameBudgets() throws {
        var refusals = enabled()
        let free = now.advanced(by: .milliseconds(30_000))
        refusals.learn(key, refusals.mark(key), rows: KeyRows(), refused: .budget(free, index: 1),
                       budgets: [day, ip], hearing: true, at: now)
        let answer = refusals.refuseSend(key, budgets: [day, ip], at: now)
        let refusal = try #require(answer)
        #expect(refusal.status == .locked)
        #expect(refusal.budgetIndex == 1)
        #expect(refusal.remaining == .milliseconds(30_000))
        #expect(refusals.refuseSend(key, budgets: [ip], at: now) == nil)
        #expect(refusals.refuseSend(key, budgets: [], at: now) == nil)
        // Charges went back somewhere: every spent budget may have room.
        refusals.noticedBudgets()
        #expect(refusals.refuseSend(key, budgets: [day, ip], at: now) == nil)
        // A store whose budgets free room unannounced (a cluster) keeps none.
        var cluster = enabled(budgets: false)
        cluster.learn(key, cluster.mark(key), rows: KeyRows(), refused: .budget(free, index: 0), budgets: [ip],
                      hearing: true, at: now)
        #expect(cluster.entries.isEmpty)
    }

    @Test func chargesGoingBackDuringTheDecisionKeepOnlyItsBudgetOut() {
        var refusals = enabled()
        let free = now.advanced(by: .milliseconds(30_000))
        let mark = refusals.mark(key)
        refusals.noticedBudgets()
        refusals.learn(key, mark, rows: KeyRows(), refused: .budget(free, index: 0), budgets: [ip],
                       hearing: true, at: now)
        #expect(refusals.entries.isEmpty)
        let second = refusals.mark(other)
        refusals.noticedBudgets()
        refusals.learn(other, second, rows: cooling(other, for: .milliseconds(5_000)), refused: .busy,
                       budgets: [ip], hearing: true, at: now)
        #expect(refusals.refuseSend(other, budgets: [ip], at: now)?.status == .coolingDown)
    }

    @Test func aFullWindowAndADeadCodeRefuseUntilTheyEnd() throws {
        var refusals = enabled()
        let free = now.advanced(by: .milliseconds(20_000))
        var record = SendRecord()
        record.lastSend = now
        record.codeDead = true
        refusals.learn(key, refusals.mark(key), rows: KeyRows(countdown: nil, record: record),
                       refused: .window(free), budgets: [], hearing: true, at: now)
        let answer1 = refusals.refuseSend(key, budgets: [ip], at: now)
        #expect(try #require(answer1).status == .locked)
        let answer2 = refusals.refuseVerify(key, at: now)
        #expect(try #require(answer2).status == .codeDead)
        // The window frees first; the dead code lasts while the store keeps
        // the record (a day after the last send at least).
        let later = free.advanced(by: .milliseconds(1))
        #expect(refusals.refuseSend(key, budgets: [], at: later) == nil)
        #expect(refusals.refuseVerify(key, at: later)?.status == .codeDead)
        #expect(refusals.refuseVerify(key, at: now.advanced(by: LocalRefusals.deadLife)) == nil)
    }

    @Test func atCapacityExpiredKeysMakeRoomAndLiveOnesAreKept() {
        var refusals = enabled()
        for n in 0..<LocalRefusals.capacity {
            let subject = try! KeyName("+86\(n)")
            let key = CountdownKey(scope: try! KeyName("login"), subject: subject)
            refusals.learn(key, refusals.mark(key), rows: cooling(key, for: .milliseconds(n % 2 == 0 ? 10 : 60_000)),
                           refused: nil, budgets: [], hearing: true, at: now)
        }
        #expect(refusals.entries.count == LocalRefusals.capacity)
        // Full of live keys: a new one is not kept (it is asked for).
        refusals.learn(key, refusals.mark(key), rows: cooling(key, for: .milliseconds(60_000)), refused: nil,
                       budgets: [], hearing: true, at: now)
        #expect(refusals.refuseSend(key, budgets: [], at: now) == nil)
        // Later, half have expired: swept, and the new one is kept.
        let later = now.advanced(by: .milliseconds(2_000))
        refusals.learn(key, refusals.mark(key), rows: cooling(key, for: .milliseconds(60_000)), refused: nil,
                       budgets: [], hearing: true, at: later)
        #expect(refusals.entries.count == LocalRefusals.capacity / 2 + 1)
        #expect(refusals.refuseSend(key, budgets: [], at: later) != nil)
    }
}
