/// The store of an engine opened with none: the engine's own memory.
///
/// Nothing outside the engine shares it, so it has no rows of its own: the
/// engine's state is its content. Decisions on a key are made and applied
/// by the engine in one hold of its lock (`decidesInEngine`: the engine
/// never calls `decide` with a decision that writes); settings, sessions
/// and cancels are written by the engine's own apply, so their writes here
/// change nothing. The guard's counts live in the state's `GuardBook`, and
/// each of its calls below is one step under the lock, as a store's one
/// transaction is.
final class MemoryStore: Store {
    private let locked: Guarded<EngineState>

    init(_ locked: Guarded<EngineState>) {
        self.locked = locked
    }

    // MARK: What memory is

    var warning: String? { nil }
    var decidesInEngine: Bool { true }
    var readsThrough: Bool { false }
    var holdsRules: Bool { false }
    var refusesLocally: Bool { false }
    var keepsBudgetRefusals: Bool { false }
    var hearsKeys: Bool { false }
    var screensInDecision: Bool { false }
    var keepsRecordStream: Bool { false }
    /// A sweep costs no round trip here: each send may sweep.
    var sweepInterval: Span { .zero }

    // MARK: Keys

    /// Reads `key` as memory holds it (`.read`). A decision that writes is
    /// the engine's, under its lock (`decidesInEngine`).
    func decide(_ decision: KeyDecision, budgets: [BudgetRow], for key: CountdownKey, by deadline: Instant)
        throws(TickgateError) -> DecisionResult {
        guard case .read = decision else {
            throw TickgateError(.invalidArgument, "memory's decisions are made under the engine's lock")
        }
        return try locked.withLock { (state) throws(TickgateError) -> DecisionResult in
            try state.checkOpen()
            let now = state.now()
            let rows = state.keyRows(key, at: now).rows
            return DecisionResult(before: rows, after: rows, now: now, refusal: nil)
        }
    }

    /// Memory's keys are the engine's: nothing to write back or merge.
    func merge(_ rows: KeyRows, for key: CountdownKey, charges: [BudgetKey: [Instant]],
               by deadline: Instant) throws(TickgateError) {}

    // Written by the engine's apply, which follows each of these.
    func cancelAll(scope: KeyName?) throws(TickgateError) {}
    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {}
    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {}
    func save(budget: Budget, name: KeyName) throws(TickgateError) {}
    func save(guard rules: Guard?, scope: KeyName) throws(TickgateError) {}
    func resetBudget(_ key: BudgetKey) throws(TickgateError) {}
    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?)
        throws(TickgateError) -> Instant? { expiry }

    // MARK: Reads

    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant] {
        try locked.withLock { (state) throws(TickgateError) -> [Instant] in
            try state.checkOpen()
            return state.budgets.charges[key] ?? []
        }
    }

    /// Memory has the session (nil).
    func session(realm: KeyName) throws(TickgateError) -> SessionState? { nil }

    func readSettings() throws(TickgateError) -> StoreSnapshot {
        try locked.withLock { (state) throws(TickgateError) -> StoreSnapshot in
            try state.checkOpen()
            var settings = StoreSnapshot()
            settings.policies = state.sends.policies.map { ($0.key, $0.value) }
            settings.titles = state.sends.titles.map { ($0.key, $0.value) }
            settings.budgets = state.budgets.budgets.map { ($0.key, $0.value) }
            settings.guards = state.guards.rules.map { ($0.key, $0.value) }
            return settings
        }
    }

    /// An engine with no store starts empty.
    func load() throws(TickgateError) -> StoreSnapshot { StoreSnapshot() }

    // MARK: The guard

    /// The engine's copy is the guard itself: it stands (read and set
    /// again, it could undo a guard set meanwhile).
    func localGuard(scope: KeyName) throws(TickgateError) -> LocalGuard { .unknown }

    /// Counts `code` unverified and answers the counts before it and their
    /// judgment, in one step under the lock; a send the counts refuse (in
    /// ENFORCE) is not counted.
    func guardScreen(scope: KeyName, subject: KeyName, code: String, country: String, address: ClientAddress?,
                     rules: Guard, judge: Bool) throws(TickgateError) -> GuardScreen {
        let historyDays = rules.thresholds.historyDays
        return try locked.withLock { (state) throws(TickgateError) -> GuardScreen in
            try state.checkOpen()
            // (A copy of the book's guard: equal at the cost of comparing
            // the thresholds, its lists shared, not compared.)
            let stored = state.guards.rules[scope]
            guard stored == rules else { return .stale(stored) }
            guard judge else { return .same }
            let now = state.now()
            // Taken out of the book while it is read and written: a copy
            // left in the book would make each counted send copy the
            // whole ledger (copy on write), every code of the last day.
            let held = state.guards.ledgers[scope] != nil
            var ledger = state.guards.ledgers.removeValue(forKey: scope) ?? ConversionLedger()
            let ranges = rules.ranges(ofSubject: subject)
            let counts = ledger.counts(subject: subject, country: country, ranges: ranges, address: address,
                                       historyDays: historyDays, unverifiedAfter: rules.thresholds.unverifiedAfter,
                                       at: now)
            var judgment = GuardRules.judge(counts, by: rules.thresholds)
            let passKey = GuardBook.passKey(subject, address)
            let passed = state.guards.passes[scope]?[passKey].map { $0 > now } ?? false
            switch GuardRules.answer(judgment, mode: rules.mode, challenge: rules.challengeSignals, passed: passed) {
            case .refuse, .challenge:
                if held { state.guards.ledgers[scope] = ledger }
                return .judged(GuardReading(counts: counts), judgment, counted: false)
            case .grant:
                if GuardRules.refuses(judgment, mode: rules.mode) {
                    // Through its warnings by the pass, used up.
                    judgment.challengePassed = true
                    state.guards.passes[scope]?[passKey] = nil
                }
            }
            ledger.sent(code, subject: subject, country: country, ranges: ranges, address: address,
                        inCountry: GuardRules.countsInCountry(judgment), at: now, historyDays: historyDays)
            state.guards.ledgers[scope] = ledger
            return .judged(GuardReading(counts: counts), judgment, counted: true)
        }
    }

    func guardReturned(scope: KeyName, subject: KeyName, code: String, country: String,
                       address: ClientAddress?) throws(TickgateError) {
        locked.withLock { state in state.guards.ledgers[scope]?.returned(code) }
    }

    /// Memory keeps no record stream (`keepsRecordStream`).
    func appendRecord(_ record: GuardRecord, maximumLength: Int) throws(TickgateError) {}

    func guardChallengePassed(scope: KeyName, subject: KeyName, address: ClientAddress?) throws(TickgateError) {
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            guard let rules = state.guards.rules[scope], !rules.challengeSignals.isEmpty else {
                throw TickgateError(.notFound, "the scope \(scope.value) has no guard with challenge signals")
            }
            let now = state.now()
            let key = GuardBook.passKey(subject, address)
            // A new pass in a full table: the expired ones go first (a
            // pass leaves when its send uses it, or here). Until the table
            // is full a pass costs one insert, in place.
            if state.guards.passes[scope]?[key] == nil, let held = state.guards.passes[scope],
               held.count >= GuardBook.maximumPasses {
                let live = held.filter { $0.value > now }
                guard live.count < GuardBook.maximumPasses else {
                    throw TickgateError(.busy,
                        "\(GuardBook.maximumPasses) challenge passes of \(scope.value) wait for their send; try again when one is used or expires")
                }
                state.guards.passes[scope] = live
            }
            state.guards.passes[scope, default: [:]][key] =
                now.advanced(by: Span(nanoseconds: Int64(rules.challengePassSeconds) * 1_000_000_000))
        }
    }

    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String]) throws(TickgateError) {
        locked.withLock { state in
            guard let rules = state.guards.rules[scope], rules.mode != .off else { return }
            state.guards.ledgers[scope, default: ConversionLedger()]
                .verified(subject: subject, country: country, at: state.now(),
                          historyDays: rules.thresholds.historyDays)
        }
    }

    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, unverifiedAfter: Span,
                       sweep: Bool, records: OutcomeRecords?) throws(TickgateError) -> [DecidedCode] {
        locked.withLock { state in
            let now = state.now()
            let ledger = state.guards.ledgers[scope]
            var sent: ConversionLedger.Code?
            if case let .sent(code) = event { sent = ledger?.codes[code] }
            return state.guards.followed[scope, default: FollowedCodes()]
                .apply(event, subject: subject, sent: sent, latest: ledger?.latest[subject],
                       at: now, unverifiedAfter: unverifiedAfter, sweep: sweep)
        }
    }

    // MARK: Upgrades, commits, notices: none

    /// Memory has no stored format (0).
    func finishUpgrade() throws(TickgateError) -> Int { 0 }
    func flush() throws(TickgateError) {}
    func flushIfDue(at now: Instant) -> Instant? { nil }
    var flushDue: Instant? { nil }
    func close() {}
    /// Nothing else changes memory: no notices.
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void) {}
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void, lag: @escaping @Sendable (Span) -> Void) {}
    func watchKeys() {}
}
