import Testing
@testable import TickgateCore

/// The budget rule: a store's sparse read (per window cap, the one charge
/// that many back from the newest) decides exactly as every charge does.
@Suite struct BudgetTests {
    let key = BudgetKey(budget: try! KeyName("ip"), key: try! KeyName("203.0.113.7"))

    /// A small deterministic generator (xorshift).
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }
    }

    /// The sparse row a store reads for `charges`.
    func sparse(_ budget: Budget, _ charges: [Instant]) -> BudgetRow {
        var back: [Int: Instant] = [:]
        for window in budget.windows where charges.count >= window.maximumSends {
            back[window.maximumSends] = charges[charges.count - window.maximumSends]
        }
        return BudgetRow(key: key, budget: budget, back: back)
    }

    @Test func aSparseReadDecidesAsEveryCharge() throws {
        var random = Generator(state: 0x9E37_79B9_7F4A_7C15)
        var refused = 0
        for _ in 0..<2_000 {
            var windows: [Budget.Window] = []
            for _ in 0..<(1 + random.next(Budget.maximumWindows)) {
                windows.append(Budget.Window(maximumSends: 1 + random.next(6),
                                             length: .milliseconds(Int64(1 + random.next(5_000)))))
            }
            let budget = try Budget(windows: windows).validated()
            var charges: [Instant] = []
            var moment: Int64 = 0
            for _ in 0..<random.next(12) {
                moment += Int64(random.next(1_500))
                charges.append(Instant(nanoseconds: moment * 1_000_000))
            }
            let now = Instant(nanoseconds: (moment + Int64(random.next(3_000))) * 1_000_000)
            let full = BudgetRow(key: key, budget: budget, charges: charges)
            #expect(full.frees(at: now) == sparse(budget, charges).frees(at: now))
            // and the usage a read reports agrees: full when a send is refused
            let usage = budget.usage(of: charges, at: now)
            #expect((usage.freesIn > .zero) == (full.frees(at: now) != nil))
            if full.frees(at: now) != nil { refused += 1 }
        }
        // both outcomes are exercised
        #expect(refused > 200 && refused < 1_800)
    }

    @Test func aChargeAndARefundChangeTheListOrSayWhatToWrite() throws {
        let budget = try Budget(windows: [Budget.Window(maximumSends: 2, length: .milliseconds(1_000))]).validated()
        let now = Instant(nanoseconds: 5_000_000_000)
        var full = BudgetRow(key: key, budget: budget, charges: [Instant(nanoseconds: 1_000_000_000)])
        full.charge(at: now)
        // the charge older than the window is dropped, the new one kept
        #expect(full.charges == [now])
        full.refund(now, at: now)
        #expect(full.charges.isEmpty)
        var store = sparse(budget, [])
        store.charge(at: now)
        store.refund(now, at: now)
        #expect(store.charged == now && store.refunded == now && store.charges.isEmpty)
    }

    @Test func allOrNothingAndTheRefusalNamesTheBudgetThatFreesLast() throws {
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
        defer { engine.close() }
        let ip = try KeyName("ip"), global = try KeyName("global")
        try engine.setBudget(Budget(windows: [Budget.Window(maximumSends: 1, length: .milliseconds(60_000))]), name: ip)
        try engine.setBudget(Budget(windows: [Budget.Window(maximumSends: 1, length: .milliseconds(90_000))]),
                             name: global)
        let keys = [BudgetKey(budget: ip, key: try KeyName("a")), BudgetKey(budget: global, key: try KeyName("sms"))]
        let subject = { (name: String) throws -> CountdownKey in
            CountdownKey(scope: try KeyName("login"), subject: try KeyName(name))
        }
        _ = try engine.sendEnd(try engine.sendBegin(subject("1"), budgets: keys), .succeeded)
        do {
            _ = try engine.sendBegin(subject("2"), budgets: keys)
            Issue.record("a spent budget granted a send")
        } catch let error as TickgateError {
            #expect(error.status == .locked)
            #expect(error.budgetIndex == 1)  // "global" frees last
            #expect(error.remaining == .milliseconds(90_000))
        } catch {
            Issue.record("unexpected \(error)")
        }
        // a key of "ip" alone that was never charged: granted, and only it
        let other = [BudgetKey(budget: ip, key: try KeyName("b"))]
        _ = try engine.sendBegin(subject("3"), budgets: other)
        #expect(try engine.budgetUsage(other[0]).used == 1)
        #expect(try engine.budgetUsage(keys[0]).used == 1)
    }
}
