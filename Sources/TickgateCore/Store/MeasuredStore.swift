/// The engine's store, measured: the one place every call of the engine to
/// its store goes through (the engine wraps its store in it at the open).
/// Each decision, read and write is timed into the engine's counters, and
/// a failed one counted by its kind; each notice the store hears is
/// counted, with its lag when it says when it was sent (`EngineStats`).
/// Group commits (`flush`, `flushIfDue`) and the open's `load` are not
/// calls of their own and are not timed. Timing costs two readings of the
/// boot clock and three relaxed atomic adds per call.
final class MeasuredStore: Store {
    private let inner: Store
    private let counters: EngineCounters

    init(_ inner: Store, counters: EngineCounters) {
        self.inner = inner
        self.counters = counters
    }

    @inline(__always)
    private func timed<R>(_ call: () throws(TickgateError) -> R) throws(TickgateError) -> R {
        let start = Poller.boottime()
        do throws(TickgateError) {
            let result = try call()
            counters.storeCall(since: start)
            return result
        } catch {
            counters.storeCall(since: start, failed: error)
            throw error
        }
    }

    // MARK: Calls, timed

    func decide(_ decision: KeyDecision, budgets: [BudgetRow], for key: CountdownKey, by deadline: Instant)
        throws(TickgateError) -> DecisionResult {
        try timed { () throws(TickgateError) in try inner.decide(decision, budgets: budgets, for: key, by: deadline) }
    }

    func cancelAll(scope: KeyName?) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.cancelAll(scope: scope) }
    }

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.save(policy: policy, scope: scope) }
    }

    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.save(titles: titles, scope: scope) }
    }

    func save(budget: Budget, name: KeyName) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.save(budget: budget, name: name) }
    }

    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant] {
        try timed { () throws(TickgateError) in try inner.charges(of: key) }
    }

    func resetBudget(_ key: BudgetKey) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.resetBudget(key) }
    }

    func save(guard rules: Guard?, scope: KeyName) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.save(guard: rules, scope: scope) }
    }


    /// Not timed: no round trip (a local file's read, or nothing).
    func localGuard(scope: KeyName) throws(TickgateError) -> LocalGuard {
        try inner.localGuard(scope: scope)
    }

    var screensInDecision: Bool { inner.screensInDecision }
    var decidesInEngine: Bool { inner.decidesInEngine }
    var keepsRecordStream: Bool { inner.keepsRecordStream }
    var sweepInterval: Span { inner.sweepInterval }

    func guardScreen(scope: KeyName, subject: KeyName, code: String, country: String, address: ClientAddress?,
                     rules: Guard, judge: Bool) throws(TickgateError) -> GuardScreen {
        try timed { () throws(TickgateError) in
            try inner.guardScreen(scope: scope, subject: subject, code: code, country: country, address: address,
                                  rules: rules, judge: judge)
        }
    }

    func guardReturned(scope: KeyName, subject: KeyName, code: String, country: String,
                       address: ClientAddress?) throws(TickgateError) {
        try timed { () throws(TickgateError) in
            try inner.guardReturned(scope: scope, subject: subject, code: code, country: country, address: address)
        }
    }

    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String]) throws(TickgateError) {
        try timed { () throws(TickgateError) in
            try inner.guardVerified(scope: scope, subject: subject, country: country, ranges: ranges)
        }
    }

    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, unverifiedAfter: Span,
                       sweep: Bool, records: OutcomeRecords?) throws(TickgateError) -> [DecidedCode] {
        try timed { () throws(TickgateError) -> [DecidedCode] in
            try inner.guardOutcomes(scope: scope, subject: subject, event: event, unverifiedAfter: unverifiedAfter,
                                    sweep: sweep, records: records)
        }
    }

    func guardChallengePassed(scope: KeyName, subject: KeyName, address: ClientAddress?) throws(TickgateError) {
        try timed { () throws(TickgateError) in
            try inner.guardChallengePassed(scope: scope, subject: subject, address: address)
        }
    }

    func appendRecord(_ record: GuardRecord, maximumLength: Int) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.appendRecord(record, maximumLength: maximumLength) }
    }

    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?)
        throws(TickgateError) -> Instant? {
        try timed { () throws(TickgateError) in
            try inner.saveSession(realm: realm, loggedIn: loggedIn, expiry: expiry, ttl: ttl)
        }
    }

    func session(realm: KeyName) throws(TickgateError) -> SessionState? {
        try timed { () throws(TickgateError) in try inner.session(realm: realm) }
    }

    func readSettings() throws(TickgateError) -> StoreSnapshot {
        try timed { () throws(TickgateError) in try inner.readSettings() }
    }

    func merge(_ rows: KeyRows, for key: CountdownKey, charges: [BudgetKey: [Instant]],
               by deadline: Instant) throws(TickgateError) {
        try timed { () throws(TickgateError) in try inner.merge(rows, for: key, charges: charges, by: deadline) }
    }

    // MARK: Passed through

    var warning: String? { inner.warning }
    func load() throws(TickgateError) -> StoreSnapshot { try inner.load() }
    func finishUpgrade() throws(TickgateError) -> Int { try inner.finishUpgrade() }
    func flush() throws(TickgateError) { try inner.flush() }
    func flushIfDue(at now: Instant) -> Instant? { inner.flushIfDue(at: now) }
    var flushDue: Instant? { inner.flushDue }
    func close() { inner.close() }
    var readsThrough: Bool { inner.readsThrough }
    var holdsRules: Bool { inner.holdsRules }
    var refusesLocally: Bool { inner.refusesLocally }
    var keepsBudgetRefusals: Bool { inner.keepsBudgetRefusals }
    var hearsKeys: Bool { inner.hearsKeys }
    func watchKeys() { inner.watchKeys() }

    // MARK: Notices, counted

    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void) {
        watch(changed, lag: { _ in })
    }

    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void, lag: @escaping @Sendable (Span) -> Void) {
        let counters = self.counters
        inner.watch({ notice in
            switch notice {
            case .lost: counters.bump(counters.noticeLinksLost)
            case .back: break
            default: counters.bump(counters.notices)
            }
            changed(notice)
        }, lag: { span in
            counters.noticeLag.record(span)
            lag(span)
        })
    }
}
