/// What a store holds for one key, as instants of the engine's clock (a
/// store converts its own moments: boot and wall stamps, server time).
/// Countdowns here carry no instance or ticket: those are the engine's.
struct KeyRows {
    /// The key's countdown if it has time left.
    var countdown: Countdown?
    var record: SendRecord?
}

/// A decision as a store made it: the key before it (which may differ from
/// the engine's memory: another engine or process changed it), after it,
/// the moment it was made, and its refusal if it was refused (then
/// `after` equals `before` and nothing was written).
struct DecisionResult {
    var before: KeyRows
    var after: KeyRows
    var now: Instant
    var refusal: TickgateError?
    /// Why, as the store said it (stores that hold the rules): what an
    /// engine keeps to refuse the same again without asking
    /// (`LocalRefusals`).
    var refused: Refusal?
    /// A decision made in memory only: the key's slot in the countdown
    /// table when it was made, so applying it need not look the key up
    /// again. Stores leave it `.notLookedUp`.
    var knownSlot: SlotLookup = .notLookedUp
    /// Made in memory only because the store could not be reached (a send
    /// granted "fail open").
    var localOnly = false
    /// The cap of wrong codes the store decided with (a store that holds
    /// the rules); nil: the engine's policy.
    var maximumWrongCodes: Int?
    /// A send screened in the same step (`Screening.inStep`): the guard's
    /// answer (nil: the store did not say, as a repeated decision's answer
    /// does not).
    var guardScreen: GuardScreen?
    /// A send's end that followed its code in the same step
    /// (`KeyDecision.sendEnd`'s `follow`): the codes whose outcome it
    /// decided (nil: not followed there, or a repeated decision's answer,
    /// which does not say).
    var followed: [DecidedCode]?
}

/// A store's answer to a guarded send's screen (`Store.guardScreen`).
enum GuardScreen {
    /// The store holds another guard for the scope (nil: none): nothing
    /// was counted; the engine takes it and screens again.
    case stale(Guard?)
    /// The store holds the engine's guard, and the send was not judged.
    case same
    /// Judged by the store's thresholds: the counts before the send (with
    /// the history's daily maximum), the judgment, and whether the code was
    /// counted (not: enforced and warned).
    case judged(GuardReading, GuardJudgment, counted: Bool)
}

/// Everything a store holds, read at open.
struct StoreSnapshot {
    var countdowns: [Countdown] = []
    var records: [(CountdownKey, SendRecord)] = []
    var policies: [(KeyName, SendPolicy)] = []
    var titles: [(KeyName, TitleSet)] = []
    var sessions: [(realm: KeyName, expiry: Instant?)] = []
    var budgets: [(KeyName, Budget)] = []
    var guards: [(KeyName, Guard)] = []
}

/// What a store holds for one guarded send: the signals' counts (`GuardCounts`, with the
/// country's verified codes per day for its history).
struct GuardReading {
    var counts: GuardCounts
    /// Codes to the country verified per day of the store's clock.
    var days: [Int64: Int] = [:]
    /// The same per range of `counts.ranges` (SQLite; Redis answers each
    /// range's maximum).
    var rangeDays: [[Int64: Int]] = []
    var today: Int64 = 0
    /// Redis: the server's clock at the read (µs), and when the oldest code
    /// counted in the country's day and in its hour was sent (nil: none),
    /// from which an engine knows how long a refusal by the country's
    /// counts holds with no verification (`KnownGuardRefusals`).
    var serverNow: Int64?
    var oldestInDay: Int64?
    var oldestInHour: Int64?

    /// The counts with the daily maximum over the guard's history.
    func judged(by thresholds: GuardThresholds) -> GuardCounts {
        var counts = self.counts
        counts.countryVerifiedDailyMaximum = GuardRules.verifiedDailyMaximum(days, today: today,
                                                                             historyDays: thresholds.historyDays)
        for (index, history) in rangeDays.enumerated() where index < counts.ranges.count {
            counts.ranges[index].verifiedDailyMaximum = GuardRules.verifiedDailyMaximum(
                history, today: today, historyDays: thresholds.historyDays)
        }
        return counts
    }
}

/// Where an engine's keys, settings and guard counts live: an interface of
/// decisions, each made atomically on the store's own side (one SQLite
/// transaction; one Redis script), so that every engine and process sharing
/// the store decides on the same key state. An engine opened with no store
/// has `MemoryStore`, its own state: it makes the same decisions
/// (`KeyDecision.apply`) under the engine's lock (`decidesInEngine`).
///
/// The engine calls a store with none of its own locks held, and never
/// two decisions on one key at a time (`KeyLanes`); a store may run
/// decisions on different keys in parallel. Every call returns or fails
/// within the store's timeout (a decision and a write-back by the
/// deadline it is given, all of its waits and retries included); a failed
/// call changed nothing.
protocol Store: AnyObject, Sendable {
    /// What the open saw that the store's operator should change, or nil.
    var warning: String? { get }
    /// True if the store is the engine's own memory (`MemoryStore`): the
    /// engine decides on a key and applies the decision in one hold of its
    /// lock (no lane, no second step), and calls `decide` only to `.read`.
    var decidesInEngine: Bool { get }
    /// Reads the key (and the charges of `budgets`, the budget keys the
    /// decision names), makes `decision` on them and writes the result, by
    /// `deadline` (a boot-clock instant: the engine call's, which may have
    /// spent some of its store timeout already).
    func decide(_ decision: KeyDecision, budgets: [BudgetRow], for key: CountdownKey, by deadline: Instant)
        throws(TickgateError) -> DecisionResult

    /// Ends every countdown of `scope` (of every scope if nil).
    func cancelAll(scope: KeyName?) throws(TickgateError)

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError)
    func save(titles: TitleSet, scope: KeyName) throws(TickgateError)
    func save(budget: Budget, name: KeyName) throws(TickgateError)
    /// Sets a scope's guard (nil: none).
    func save(guard: Guard?, scope: KeyName) throws(TickgateError)

    /// The scope's guard as the store holds it, if reading it costs no
    /// round trip (a local file: SQLite); `.unknown` if it does (Redis).
    func localGuard(scope: KeyName) throws(TickgateError) -> LocalGuard
    /// A send to `subject` on a guarded scope, screened in one step (one
    /// transaction, one script): unless the store holds `rules` for the
    /// scope (the guard the engine chose the send's lists by), nothing is
    /// counted and the store's guard is the answer; if `judge`, the send's
    /// counts are read and judged by the store's thresholds
    /// (`GuardRules.judge`) and `code` is counted unverified unless the
    /// guard is enforced and the judgment warns.
    func guardScreen(scope: KeyName, subject: KeyName, code: String, country: String, address: ClientAddress?,
                     rules: Guard, judge: Bool) throws(TickgateError) -> GuardScreen
    /// A granted code did not go out (a failed send): counted nowhere.
    func guardReturned(scope: KeyName, subject: KeyName, code: String, country: String,
                       address: ClientAddress?) throws(TickgateError)
    /// True if `decide` screens a guarded send in the step that decides it
    /// (`Screening.inStep`: one Redis server), so a guarded send costs no
    /// step of its own.
    var screensInDecision: Bool { get }
    /// True if the store keeps a scope's record stream (Redis) for readers
    /// of its own: a guard's `record_stream_length` means something here.
    var keepsRecordStream: Bool { get }
    /// Appends a decision record to the scope's record stream (Redis; a
    /// store that keeps none appends nothing).
    func appendRecord(_ record: GuardRecord, maximumLength: Int) throws(TickgateError)
    /// `subject`'s last code was verified (`country`: the subject's).
    /// The person passed a challenge: a pass for the next send of `subject`
    /// from `address`, for the store's guard's `challengePassSeconds`
    /// (`.notFound` if the scope has no guard with challenge signals). A
    /// screen uses it up (`GuardJudgment.challengePassed`).
    func guardChallengePassed(scope: KeyName, subject: KeyName, address: ClientAddress?) throws(TickgateError)
    /// `ranges`: the subject's; counted if the store's guard has range
    /// signals.
    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String]) throws(TickgateError)
    /// The codes followed for their outcome (Pumping/CodeOutcomes.swift):
    /// `event` for `subject`, then (if `sweep`) the sweep of codes
    /// unverified `unverifiedAfter` past their send. Answers the codes
    /// whose outcome it decided, each taken off in this step: one call
    /// reports each.
    /// `records`: the outcomes' records, appended by the same step to the
    /// guard's record stream by a store that keeps one
    /// (`keepsRecordStream`; the others ignore it).
    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, unverifiedAfter: Span,
                       sweep: Bool, records: OutcomeRecords?) throws(TickgateError) -> [DecidedCode]
    /// How often a send may sweep the codes followed (`guardOutcomes` with
    /// `.sweep`) per scope: a sweep that costs a round trip runs at most
    /// once in this span.
    var sweepInterval: Span { get }

    /// A budget key's charges, oldest first (none: an empty list).
    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant]
    /// Drops every charge of a budget key.
    func resetBudget(_ key: BudgetKey) throws(TickgateError)
    /// A realm's session: logged in until `expiry` (nil: no expiry) with
    /// length `ttl`, or logged out (`loggedIn` false). Returns the expiry
    /// as the store set it (a store on its own clock sets its own).
    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?)
        throws(TickgateError) -> Instant?

    /// A realm's session as the store holds it now, if the store is read
    /// through (nil: memory has it).
    func session(realm: KeyName) throws(TickgateError) -> SessionState?

    /// The settings (policies, titles, budgets) as the store holds them now.
    func readSettings() throws(TickgateError) -> StoreSnapshot

    /// Writes back a key's state and budget charges that this engine
    /// decided alone while the store was out of reach, merged so that the
    /// stricter state wins (the later countdown, every send and charge),
    /// by `deadline` (a boot-clock instant, as for `decide`).
    func merge(_ rows: KeyRows, for key: CountdownKey, charges: [BudgetKey: [Instant]],
               by deadline: Instant) throws(TickgateError)

    /// Everything the store holds, at open; drops countdowns that ended
    /// while no engine ran.
    func load() throws(TickgateError) -> StoreSnapshot

    /// Finishes a rolling upgrade (docs/upgrading.md): raises the format
    /// the store's data is written in to the newest this release reads,
    /// unless an engine that cannot read it is live on the store
    /// (`.olderEnginesLive`, nothing changed). Until then every engine
    /// writes the store's current format, the one the oldest live release
    /// reads. Returns the store's format after the call.
    func finishUpgrade() throws(TickgateError) -> Int

    /// Commits what a group commit holds; throws a failed commit.
    func flush() throws(TickgateError)

    /// Group commit: commits the open transaction if it is due at `now`,
    /// without waiting (if another call holds the store, that call commits
    /// it). Returns when a still open transaction is due.
    func flushIfDue(at now: Instant) -> Instant?

    /// Group commit: when the open transaction is due, if one is open.
    var flushDue: Instant? { get }

    /// Commits what is held and lets go of the store; later calls fail.
    func close()

    /// True if other engines change the store's keys while this one runs
    /// and tell it only by notices (Redis): a query reads the key first.
    var readsThrough: Bool { get }

    /// True if every decision reads its policy and budgets from the store
    /// (Redis): the engine's copies serve local reads only.
    var holdsRules: Bool { get }

    /// True if this store announces every change of a key and every
    /// budget charge that goes back (Redis), so an engine may refuse again
    /// what the store refused, without asking, until told otherwise
    /// (`LocalRefusals`); `keepsBudgetRefusals`: spent budgets too.
    var refusesLocally: Bool { get }
    var keepsBudgetRefusals: Bool { get }
    /// True while the watch hears the keys' notices.
    var hearsKeys: Bool { get }

    /// Starts telling `changed` what other engines changed, on a thread of
    /// the store's. Stops at `close`.
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void)
    /// `watch`, also telling `lag` how long each notice that says when it
    /// was sent took to arrive (Redis; other stores tell none).
    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void, lag: @escaping @Sendable (Span) -> Void)

    /// Tells the watch of `watch` to hear changes of keys too (it may hear
    /// only settings and sessions until then): from when this returns, or,
    /// if the store could not confirm it in time, from a re-read of what is
    /// observed once it does.
    func watchKeys()
}

/// A realm's session as a store holds it.
struct SessionState: Equatable {
    var loggedIn: Bool
    var expiry: Instant?
}

/// What a store's change notice says.
enum StoreNotice: Sendable, Equatable {
    /// Another engine changed the key.
    case key(CountdownKey)
    /// Another engine changed a policy, titles or a budget.
    case settings
    /// Another engine gave budget charges back (a failed send, a reset,
    /// a write-back): a spent budget may have room.
    case budgets
    /// Another engine gave a guarded code back or verified one: a
    /// country's pumping counts may have room.
    case guardCounts
    /// Another engine logged the realm in or out.
    case session(KeyName)
    /// Another engine or process changed something, unnamed (SQLite):
    /// re-read what is observed, the settings and the sessions.
    case anything
    /// The notice link was lost: changes from now on may go unheard.
    case lost
    /// The link is back (after `lost`): anything may have changed meanwhile.
    case back
}

