/// The SQLite store: every decision is one transaction (`BEGIN IMMEDIATE`),
/// so processes sharing the file decide on the same key state. With a
/// commit delay, decisions join one open transaction (each in a savepoint)
/// that is committed at most `commitDelay` after its first write.
///
/// One connection, behind the store's own lock (never the engine's): its
/// decisions run one at a time, and their waits for another process's
/// write lock end at the store's timeout.
final class SQLiteStore: Store {
    private struct State {
        var file: SQLiteFile?
        /// Group commit: when the open transaction began.
        var groupSince: Instant?
        /// Group commit: a failed commit, reported by every later call.
        var failure: TickgateError?
        /// Change notices: the file's data version seen last.
        var dataVersion: Int64?
    }

    /// Change notices: the thread that watches the file (apart from the
    /// store's lock, which a decision may hold while it waits).
    private let watcher = LockedValue<(thread: SQLiteWatcher?, closed: Bool)>((nil, false))

    private let state: LockedValue<State>
    let commitDelay: Span
    let path: String
    /// The engine's clock: decisions are made at its readings.
    let clock: Clock

    init(options: StoreOptions, clock: Clock) throws(TickgateError) {
        self.clock = clock
        guard options.commitDelay >= .zero, options.commitDelay <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "store commit delay is outside 0 ... 365 days")
        }
        commitDelay = options.commitDelay
        path = options.path
        let file = try SQLiteFile.open(path: options.path, startFreshIfCorrupt: options.startFreshIfCorrupt,
                                       fullSync: options.fullSync, timeout: options.timeout)
        state = LockedValue(State(file: file))
    }

    /// Replaces the file by a new empty one after moving it aside (a row
    /// out of range at open, with `startFreshIfCorrupt`).
    func startFresh(options: StoreOptions) throws(TickgateError) {
        try state.withLock { (state) throws(TickgateError) in
            state.file = nil
            _ = try SQLiteFile.moveAside(options.path)
            state.file = try SQLiteFile.open(path: options.path, startFreshIfCorrupt: false,
                                             fullSync: options.fullSync, timeout: options.timeout)
        }
    }

    // MARK: Transactions

    /// Runs one decision's reads and writes atomically: its own committed
    /// transaction, or a savepoint in the open group. Nothing of it is
    /// kept if it throws. Its wait for another process's write lock ends
    /// within the store's timeout, or by `deadline` if that comes sooner.
    private func transaction<R>(by deadline: Instant? = nil,
                                _ body: (SQLiteFile) throws(TickgateError) -> R) throws(TickgateError) -> R {
        try state.withLock { (state) throws(TickgateError) -> R in
            guard let file = state.file else { throw TickgateError(.closed, "the store \(path) is closed") }
            if let failure = state.failure { throw failure }
            if commitDelay == .zero {
                try file.begin(by: deadline)
                do throws(TickgateError) {
                    let result = try body(file)
                    try file.commit()
                    return result
                } catch {
                    file.rollback()
                    throw error
                }
            }
            try file.begin(by: deadline)
            if state.groupSince == nil { state.groupSince = clock.now() }
            try file.savepoint()
            let result: R
            do throws(TickgateError) {
                result = try body(file)
                try file.release()
            } catch {
                file.rollbackToSavepoint()
                if !file.inTransaction { state.groupSince = nil }
                throw error
            }
            if let since = state.groupSince, clock.now() >= since.advanced(by: commitDelay) {
                Self.commitGroup(&state, commitDelay)
            }
            return result
        }
    }

    private static func commitGroup(_ state: inout State, _ delay: Span) {
        state.groupSince = nil
        guard let file = state.file, file.inTransaction else { return }
        do {
            try file.commit()
        } catch {
            state.failure = TickgateError(.storeIO,
                "the store could not commit changes made in the last \(delay.millisecondsRoundedUp) ms: \(error.message)")
        }
    }

    /// Group commit: when the open transaction must be committed, if one
    /// is open.
    var flushDue: Instant? {
        guard commitDelay > .zero else { return nil }
        return state.withLockIfAvailable { $0.groupSince }?.map { $0.advanced(by: commitDelay) }
    }

    /// Group commit: commits the open transaction if it is due at `now`,
    /// unless another call holds the store (that call commits it then).
    /// Never waits; returns when the open transaction is due, if one still
    /// is.
    func flushIfDue(at now: Instant) -> Instant? {
        guard commitDelay > .zero else { return nil }
        let due = state.withLockIfAvailable { (state) -> Instant? in
            guard let since = state.groupSince else { return nil }
            let due = since.advanced(by: commitDelay)
            guard now >= due else { return due }
            Self.commitGroup(&state, commitDelay)
            return nil
        }
        return due ?? nil
    }

    /// Nothing to finish: this release reads and writes one schema, which
    /// the open migrated the file to (a release that raises the schema
    /// must keep writing the file's schema until it is finished).
    func finishUpgrade() throws(TickgateError) -> Int { Int(SQLiteFile.schemaVersion) }

    func flush() throws(TickgateError) {
        try state.withLock { (state) throws(TickgateError) in
            if state.file != nil { Self.commitGroup(&state, commitDelay) }
            if let failure = state.failure { throw failure }
        }
    }

    func close() {
        let thread = watcher.withLock { box -> SQLiteWatcher? in
            box.closed = true
            defer { box.thread = nil }
            return box.thread
        }
        thread?.stop()
        state.withLock { state in
            if state.file != nil { Self.commitGroup(&state, commitDelay) }
            state.file = nil
        }
    }

    // MARK: Notices

    /// Starts a thread that looks at the file's data version every
    /// `SQLiteWatcher.interval` and reports nil (re-read what is observed)
    /// when another engine or process committed a change.
    /// Never waits for the store: the version to compare with is read now
    /// if the store is free, else at the thread's first look.
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void) {
        let thread = SQLiteWatcher(changed: changed) { [weak self] in self?.changedElsewhere() ?? false }
        let started = watcher.withLock { box -> Bool in
            if box.closed || box.thread != nil { return false }
            box.thread = thread
            return true
        }
        guard started else { return }
        _ = state.withLockIfAvailable { state in
            if let file = state.file, !file.inTransaction { state.dataVersion = try? file.dataVersion() }
        }
        if !thread.start() { watcher.withLock { $0.thread = nil } }
    }

    /// Whether the file changed by another connection since the last look
    /// (never waits: a busy store is looked at next time).
    private func changedElsewhere() -> Bool {
        state.withLockIfAvailable { state -> Bool in
            guard let file = state.file, !file.inTransaction, let version = try? file.dataVersion() else {
                return false
            }
            defer { state.dataVersion = version }
            return state.dataVersion.map { $0 != version } ?? false
        } ?? false
    }

    // MARK: Decisions

    func decide(_ decision: KeyDecision, budgets named: [BudgetRow], for key: CountdownKey, by deadline: Instant)
        throws(TickgateError) -> DecisionResult {
        try transaction(by: deadline) { (file) throws(TickgateError) -> DecisionResult in
            // The rules are the file's: another process may have changed
            // the scope's policy or a budget since this engine read them.
            var decision = decision
            if decision.isUnscreenedSend, !(try file.guards(scope: key.scope).isEmpty) {
                throw TickgateError.guarded(key.scope)
            }
            if decision.policy != nil, let policy = try file.policies(scope: key.scope).first?.1 {
                decision = decision.with(policy: policy)
            }
            var named = named
            for index in named.indices {
                if let budget = try file.budgets(name: named[index].key.budget).first?.1 {
                    named[index].budget = budget
                } else if named[index].budget.windows.isEmpty {
                    return DecisionResult(before: KeyRows(), after: KeyRows(), now: clock.now(),
                                          refusal: Refusal.noBudget(index: index)
                                              .error("\"\(named[index].key.budget.value)\""))
                }
            }
            // Read and checked in full before anything is decided: a
            // corrupt row fails the call with nothing changed.
            let storedCountdown = try file.countdown(key)
            let storedRecord = try file.record(key)
            // Per budget key: nil when the decision reads only the charge
            // each window's cap needs (every charge is of this boot), else
            // every charge as read (an earlier boot's need the wall clock).
            var storedCharges: [[(rowid: Int64, at: Instant)]?] = []
            // The clock is read once the store is ours: the decision's
            // moment follows every decision before it.
            let now = clock.now()
            let before = KeyRows(countdown: storedCountdown.flatMap { Self.countdown($0, clock, at: now) },
                                 record: storedRecord.map { Self.record($0, clock, at: now) })
            var budgets: [BudgetRow] = []
            for var row in named {
                // Charges of this boot older than every window are dropped.
                let stale = now.advanced(by: Span(nanoseconds: -row.budget.horizon.nanoseconds)).nanoseconds
                try file.deleteCharges(row.key, bootID: clock.bootID, before: stale)
                if try file.hasCharges(of: row.key, otherThan: clock.bootID) {
                    let charges = try file.charges(of: row.key, bootID: clock.bootID, after: stale)
                        .map { (rowid: $0.rowid, at: clock.moment(of: $0.at, at: now)) }
                        .sorted { $0.at < $1.at }
                    row.charges = charges.map(\.at)
                    storedCharges.append(charges)
                } else {
                    var back: [Int: Instant] = [:]
                    for window in row.budget.windows where back[window.maximumSends] == nil {
                        if let boot = try file.charge(of: row.key, bootID: clock.bootID, back: window.maximumSends) {
                            back[window.maximumSends] = min(Instant(nanoseconds: boot), now)
                        }
                    }
                    row.back = back
                    storedCharges.append(nil)
                }
                budgets.append(row)
            }
            var after = before
            let changes: KeyDecision.Changes
            do throws(TickgateError) {
                changes = try decision.apply(to: &after, budgets: &budgets, key: key, at: now)
            } catch {
                return DecisionResult(before: before, after: before, now: now, refusal: error)
            }
            if changes.contains(.countdown) {
                if let countdown = after.countdown {
                    try file.save(Self.row(countdown, clock, at: now))
                } else if storedCountdown != nil {
                    try file.deleteCountdown(key)
                }
            }
            if changes.contains(.record) {
                if let record = after.record {
                    try file.save(Self.row(record, for: key, clock, at: now))
                } else if storedRecord != nil {
                    try file.deleteRecord(key)
                }
            }
            if changes.contains(.budgets) {
                for (row, stored) in zip(budgets, storedCharges) {
                    if let stored {
                        try Self.write(row, over: stored, file, clock, at: now)
                        continue
                    }
                    if let charged = row.charged { try file.insertCharge(row.key, at: clock.stamp(charged, at: now)) }
                    if let refunded = row.refunded {
                        try file.deleteCharge(of: row.key, bootID: clock.bootID, boot: refunded.nanoseconds)
                    }
                }
            }
            var result = DecisionResult(before: before, after: after, now: now, refusal: nil)
            result.maximumWrongCodes = decision.policy?.maximumWrongCodes
            return result
        }
    }

    /// Makes a budget key's charge rows hold `row.charges`: deletes the
    /// rows it no longer holds, inserts the new charges.
    private static func write(_ row: BudgetRow, over stored: [(rowid: Int64, at: Instant)], _ file: SQLiteFile,
                              _ clock: Clock, at now: Instant) throws(TickgateError) {
        var wanted: [Instant: Int] = [:]
        for charge in row.charges { wanted[charge, default: 0] += 1 }
        for charge in stored {
            if let count = wanted[charge.at], count > 0 {
                wanted[charge.at] = count - 1
            } else {
                try file.deleteCharge(rowid: charge.rowid)
            }
        }
        for (charge, count) in wanted where count > 0 {
            for _ in 0..<count { try file.insertCharge(row.key, at: clock.stamp(charge, at: now)) }
        }
    }

    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant] {
        try transaction { (file) throws(TickgateError) -> [Instant] in
            let now = clock.now()
            return try file.charges(of: key, bootID: clock.bootID, after: -1)
                .map { clock.moment(of: $0.at, at: now) }.sorted()
        }
    }

    func resetBudget(_ key: BudgetKey) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.deleteCharges(key) }
    }

    func save(budget: Budget, name: KeyName) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.save(budget: budget, name: name) }
    }

    func cancelAll(scope: KeyName?) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.deleteCountdowns(scope: scope) }
    }

    func save(guard rules: Guard?, scope: KeyName) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.save(guard: rules, scope: scope) }
    }

    func localGuard(scope: KeyName) throws(TickgateError) -> LocalGuard {
        .known(try transaction { (file) throws(TickgateError) -> Guard? in try file.guards(scope: scope).first?.1 })
    }

    // The signals on the file's wall clock: every process on the file
    // counts on the same one.
    var screensInDecision: Bool { false }
    var decidesInEngine: Bool { false }

    func guardScreen(scope: KeyName, subject: KeyName, code: String, country: String, address: ClientAddress?,
                     rules: Guard, judge: Bool) throws(TickgateError) -> GuardScreen {
        try transaction { (file) throws(TickgateError) -> GuardScreen in
            let now = clock.wallNow()
            let stored = try file.guards(scope: scope).first?.1
            guard stored?.storedText == rules.storedText else { return .stale(stored) }
            guard judge else { return .same }
            let ranges = rules.ranges(ofSubject: subject)
            let (counts, days, rangeDays) = try file.guardCounts(scope: scope, subject: subject, country: country, ranges: ranges,
                                                                 address: address?.description,
                                                                 unverifiedAfter: rules.thresholds.unverifiedAfter, now: now)
            var reading = GuardReading(counts: counts, days: days, today: now / 86_400_000_000_000)
            reading.rangeDays = rangeDays
            reading.counts = reading.judged(by: rules.thresholds)
            var judgment = GuardRules.judge(reading.counts, by: rules.thresholds)
            var answer = GuardRules.answer(judgment, mode: rules.mode, challenge: rules.challengeSignals, passed: false)
            if answer == .challenge,
               try file.takeChallengePass(scope: scope, subject: subject, address: address?.description, now: now) {
                judgment.challengePassed = true
                answer = .grant
            }
            let counted = answer == .grant
            if counted {
                try file.guardSent(scope: scope, subject: subject, code: code, country: country,
                                   address: address?.description,
                                   inCountry: GuardRules.countsInCountry(judgment), now: now)
            }
            return .judged(reading, judgment, counted: counted)
        }
    }

    func guardChallengePassed(scope: KeyName, subject: KeyName, address: ClientAddress?) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in
            guard let rules = try file.guards(scope: scope).first?.1, !rules.challengeSignals.isEmpty else {
                throw TickgateError(.notFound, "the scope \(scope.value) has no guard with challenge signals")
            }
            let now = clock.wallNow()
            try file.keepChallengePass(scope: scope, subject: subject, address: address?.description, now: now,
                                       until: now + Int64(rules.challengePassSeconds) * 1_000_000_000)
        }
    }

    func guardReturned(scope: KeyName, subject: KeyName, code: String, country: String,
                       address: ClientAddress?) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.guardReturned(scope: scope, code: code) }
    }

    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String]) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in
            let counted = try file.guards(scope: scope).first?.1.rangeSignals == true
            try file.guardVerified(scope: scope, subject: subject, country: country, ranges: counted ? ranges : [],
                                   now: clock.wallNow())
        }
    }

    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, unverifiedAfter: Span,
                       sweep: Bool, records: OutcomeRecords?) throws(TickgateError) -> [DecidedCode] {
        try transaction { (file) throws(TickgateError) -> [DecidedCode] in
            let now = clock.wallNow()
            let due = GuardRules.windows(at: Instant(nanoseconds: now), unverifiedAfter: unverifiedAfter).unverifiedUntil
            return try file.guardOutcomes(scope: scope, subject: subject, event: event, due: due.nanoseconds,
                                          limit: sweep ? FollowedCodes.sweepLimit : 0, now: now)
        }
    }

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.save(policy: policy, scope: scope) }
    }

    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {
        try transaction { (file) throws(TickgateError) in try file.save(titles: titles, scope: scope) }
    }

    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?)
        throws(TickgateError) -> Instant? {
        try transaction { (file) throws(TickgateError) in
            let now = clock.now()
            let session = loggedIn
                ? StoredSession(realm: realm, expiry: expiry.map { clock.stamp($0, at: now) }, ttl: ttl ?? .zero)
                : nil
            try file.save(session, realm: realm)
        }
        return expiry
    }

    /// Every engine on the file decides by the file's policies and budgets.
    var holdsRules: Bool { true }

    // What a local file is not: every call reads and writes the file, and
    // its watcher re-reads what is observed on any change (no notices of
    // keys, no lag to tell, no refusals kept without asking, no record
    // stream: records go to subscribers).
    var warning: String? { nil }
    var readsThrough: Bool { false }
    var refusesLocally: Bool { false }
    var keepsBudgetRefusals: Bool { false }
    var hearsKeys: Bool { false }
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void, lag: @escaping @Sendable (Span) -> Void) {
        watch(changed)
    }
    func watchKeys() {}
    /// A file keeps no record stream: its guard's records go to the
    /// engine's record observers only.
    var keepsRecordStream: Bool { false }
    func appendRecord(_ record: GuardRecord, maximumLength: Int) throws(TickgateError) {}
    var sweepInterval: Span { .milliseconds(1_000) }
    /// Memory has the sessions (re-read from the file on its changes).
    func session(realm: KeyName) throws(TickgateError) -> SessionState? { nil }
    /// A grant made alone past a file that stayed locked is not written
    /// back: the file holds what every process decided.
    func merge(_ rows: KeyRows, for key: CountdownKey, charges: [BudgetKey: [Instant]],
               by deadline: Instant) throws(TickgateError) {}

    /// The file's settings (another process may have changed them).
    func readSettings() throws(TickgateError) -> StoreSnapshot {
        try transaction { (file) throws(TickgateError) -> StoreSnapshot in
            var snapshot = StoreSnapshot()
            snapshot.policies = try file.policies()
            snapshot.titles = try file.titles()
            snapshot.budgets = try file.budgets()
            snapshot.guards = try file.guards()
            return snapshot
        }
    }

    func load() throws(TickgateError) -> StoreSnapshot {
        try state.withLock { (state) throws(TickgateError) -> StoreSnapshot in
            guard let file = state.file else { throw TickgateError(.closed, "the store \(path) is closed") }
            let now = clock.now()
            var snapshot = StoreSnapshot()
            try file.begin()
            do throws(TickgateError) {
                let countdownRows = try file.countdowns()
                let recordRows = try file.records()
                snapshot.policies = try file.policies()
                snapshot.titles = try file.titles()
                snapshot.budgets = try file.budgets()
                snapshot.guards = try file.guards()
                let sessionRows = try file.sessions()
                for row in countdownRows {
                    if let countdown = Self.countdown(row, clock, at: now) {
                        snapshot.countdowns.append(countdown)
                    } else {
                        try file.deleteCountdown(row.key)
                    }
                }
                try file.commit()
                snapshot.records = recordRows.map { ($0.key, Self.record($0, clock, at: now)) }
                for session in sessionRows {
                    guard let expiry = session.expiry else {
                        snapshot.sessions.append((session.realm, nil))
                        continue
                    }
                    let ttl = session.ttl > .zero ? session.ttl : Limits.maximumDuration
                    let end = clock.deadline(of: expiry, length: ttl, at: now)
                    if end > now { snapshot.sessions.append((session.realm, end)) }
                }
            } catch {
                file.rollback()
                throw error
            }
            return snapshot
        }
    }

    // MARK: Rows

    static func row(_ countdown: Countdown, _ clock: Clock, at now: Instant) -> StoredCountdown {
        StoredCountdown(key: countdown.key, phase: countdown.phase, duration: countdown.duration,
                        tickInterval: countdown.tickInterval, deadline: clock.stamp(countdown.deadline, at: now))
    }

    /// The countdown a checked row describes, or nil if it has ended.
    static func countdown(_ row: StoredCountdown, _ clock: Clock, at now: Instant) -> Countdown? {
        let end = clock.deadline(of: row.deadline, length: row.duration, at: now)
        guard end > now else { return nil }
        return Countdown(key: row.key, phase: row.phase, instance: 0, deadline: end,
                         duration: row.duration, tickInterval: row.tickInterval)
    }

    static func row(_ record: SendRecord, for key: CountdownKey, _ clock: Clock, at now: Instant) -> StoredRecord {
        StoredRecord(key: key, consecutive: record.consecutive, hasSent: record.hasSent,
                     lastSend: record.lastSend.map { clock.stamp($0, at: now) },
                     sends: record.sends.map { clock.stamp($0, at: now) },
                     wrongCodes: record.wrongCodes, codeDead: record.codeDead)
    }

    static func record(_ row: StoredRecord, _ clock: Clock, at now: Instant) -> SendRecord {
        SendRecord(sends: row.sends.map { clock.moment(of: $0, at: now) }.sorted(),
                   consecutive: row.consecutive,
                   lastSend: row.lastSend.map { clock.moment(of: $0, at: now) }, hasSent: row.hasSent,
                   wrongCodes: row.wrongCodes, codeDead: row.codeDead)
    }
}
