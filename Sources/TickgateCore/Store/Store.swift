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
    /// A decision made in memory only: the key's slot in the countdown
    /// table when it was made (nil inside: no slot), so applying it need
    /// not look the key up again. Stores leave it unset.
    var knownSlot: Int32?? = .none
    /// Made in memory only because the store could not be reached (a send
    /// granted "fail open").
    var localOnly = false
}

/// Everything a store holds, read at open.
struct StoreSnapshot {
    var countdowns: [Countdown] = []
    var records: [(CountdownKey, SendRecord)] = []
    var policies: [(KeyName, SendPolicy)] = []
    var titles: [(KeyName, TitleSet)] = []
    var sessions: [(realm: KeyName, expiry: Instant?)] = []
    var budgets: [(KeyName, Budget)] = []
}

/// A durable store shared by engines: an interface of decisions, each made
/// atomically on the store's own side (one SQLite transaction; one Redis
/// script), so that every engine and process sharing the store decides on
/// the same key state. Memory (no store) makes the same decisions
/// (`KeyDecision.apply`) on the engine's own state under its lock.
///
/// The engine calls a store with none of its own locks held, and never
/// two decisions on one key at a time (`KeyLanes`); a store may run
/// decisions on different keys in parallel. Every call returns or fails
/// within the store's timeout; a failed call changed nothing.
protocol Store: AnyObject, Sendable {
    /// Reads the key (and the charges of `budgets`, the budget keys the
    /// decision names), makes `decision` on them and writes the result.
    func decide(_ decision: KeyDecision, budgets: [BudgetRow], for key: CountdownKey)
        throws(TickgateError) -> DecisionResult

    /// Ends every countdown of `scope` (of every scope if nil).
    func cancelAll(scope: KeyName?) throws(TickgateError)

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError)
    func save(titles: TitleSet, scope: KeyName) throws(TickgateError)
    func save(budget: Budget, name: KeyName) throws(TickgateError)

    /// A budget key's charges, oldest first (none: an empty list).
    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant]
    /// Drops every charge of a budget key.
    func resetBudget(_ key: BudgetKey) throws(TickgateError)
    /// A realm's session: logged in until `expiry` (nil: no expiry) with
    /// length `ttl`, or logged out (`loggedIn` false).
    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?)
        throws(TickgateError)

    /// Everything the store holds, at open; drops countdowns that ended
    /// while no engine ran.
    func load() throws(TickgateError) -> StoreSnapshot

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

    /// Starts telling `changed` of keys that other engines changed, on a
    /// thread of the store's (nil: notices were interrupted, so any change
    /// may have been missed). Stops at `close`.
    func watch(_ changed: @escaping @Sendable (CountdownKey?) -> Void)
}

extension Store {
    var readsThrough: Bool { false }
    func watch(_ changed: @escaping @Sendable (CountdownKey?) -> Void) {}
}
