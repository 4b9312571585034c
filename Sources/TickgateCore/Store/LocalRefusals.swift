/// Refusals an engine on a shared store (Redis) makes without a round trip:
/// what the store already refused, or set in place, for a key. A key known
/// to be cooling down, in flight or locked (its countdown, until its
/// deadline), a full window of sends (until it frees), a spent budget (for
/// a send naming the same budget keys, until it frees) or a dead code
/// refuses again here, with the status and remaining time the store would
/// give. Grants always go to the store.
///
/// What is known is learned from this engine's own decisions and reads,
/// and only while the store's notices are heard; it is dropped when a
/// notice names the key (another engine changed it), when a budget's
/// charges go back (a failed send, a reset, a write-back), when the rules
/// change, when the notice link is lost, and at its deadline. The one
/// window where a local refusal can be stale: a change on another engine
/// whose notice has not arrived yet (docs/redis.md, "Refusals without a
/// round trip"); it refuses, the safe side.
///
/// A decision's result is kept only if no notice of its key came while it
/// was made (the notice may tell of a change after it): each key falls in
/// one of `Self.buckets` counters, bumped by a notice, and a decision keeps
/// its result only if its bucket's counter and the link's epoch did not
/// move meanwhile (a shared bucket only costs a result not kept).
struct LocalRefusals {
    /// What a key's sends are refused by.
    enum Send {
        /// A countdown runs: cooling down, in flight or locked.
        case busy(Countdown)
        /// The window of sends is full until the instant.
        case window(Instant)
        /// Budget key `index` of `budgets` (a send naming exactly these)
        /// is spent until the instant.
        case budget(Instant, budgets: [BudgetKey], index: Int)
    }

    struct Entry {
        var send: Send?
        /// The code took too many wrong codes: verifies are refused until
        /// the instant (before the store may drop the key's record).
        var deadUntil: Instant?
    }

    /// Off: the store has no notices of keys (memory, SQLite), or the host
    /// turned them off.
    var enabled = false
    /// Spent budgets are kept too (one Redis server: every change of a
    /// budget's charges that frees room is announced).
    var keepsBudgets = false
    private(set) var entries: [CountdownKey: Entry] = [:]
    /// Countries of guarded scopes whose pumping counts refuse sends.
    var guards = KnownGuardRefusals()
    /// Sends and verifies refused here, without asking (`EngineStats`).
    private(set) var refusedSends: UInt64 = 0
    private(set) var refusedVerifies: UInt64 = 0
    private var budgetEntries = 0
    /// Bumped when every result in flight must be dropped (the link was
    /// lost, the rules changed).
    private var epoch: UInt64 = 0
    /// Bumped when a budget's charges went back: spent budgets in flight
    /// are not kept.
    private var budgetEpoch: UInt64 = 0
    private var noticed = [UInt32](repeating: 0, count: Self.buckets)
    /// The last time expired entries were swept (at most once a second).
    private var swept = Instant(nanoseconds: 0)

    static let buckets = 4096
    /// At most this many keys are known (about 100 bytes each); past it
    /// nothing new is kept until entries expire.
    static let capacity = 100_000
    /// A dead code's refusal lasts at most this long after its last send:
    /// the store keeps the key's record at least that long.
    static let deadLife = Span(nanoseconds: 86_400 * 1_000_000_000)

    /// What a decision on `key` must show when it is applied for its
    /// result to be kept.
    struct Mark: Equatable {
        fileprivate var epoch: UInt64
        fileprivate var budgetEpoch: UInt64
        fileprivate var bucket: Int
        fileprivate var count: UInt32
    }

    func mark(_ key: CountdownKey) -> Mark? {
        guard enabled else { return nil }
        let bucket = Self.bucket(key)
        return Mark(epoch: epoch, budgetEpoch: budgetEpoch, bucket: bucket, count: noticed[bucket])
    }

    private static func bucket(_ key: CountdownKey) -> Int { key.hashValue & (buckets - 1) }

    // MARK: Refusing

    /// The store's refusal of a send on `key` naming `budgets`, if known.
    mutating func refuseSend(_ key: CountdownKey, budgets: [BudgetKey], at now: Instant) -> TickgateError? {
        guard enabled, !entries.isEmpty, let entry = entries[key], let send = entry.send else { return nil }
        let refusal = knownRefusal(of: send, key, budgets: budgets, at: now)
        if refusal != nil { refusedSends &+= 1 }
        return refusal
    }

    private mutating func knownRefusal(of send: Send, _ key: CountdownKey, budgets: [BudgetKey],
                                       at now: Instant) -> TickgateError? {
        switch send {
        case let .busy(countdown) where countdown.deadline > now:
            return Engine.busyError(countdown, at: now)
        case let .window(free) where free > now:
            return Refusal.window(free).error(key, at: now)
        case let .budget(free, named, index) where free > now:
            // The key's own state (checked first by the store) is known
            // free: the refusal held for this send only if it names the
            // same budget keys.
            guard named == budgets else { return nil }
            return Refusal.budget(free, index: index).error(named[index].description, at: now)
        default:
            // Over: the store's question again (a dead code may still hold).
            update(key) { entry in entry.send = nil }
            return nil
        }
    }

    /// The store's refusal of a verify (right or wrong code) on `key`.
    mutating func refuseVerify(_ key: CountdownKey, at now: Instant) -> TickgateError? {
        guard enabled, !entries.isEmpty, let until = entries[key]?.deadUntil else { return nil }
        guard until > now else {
            update(key) { entry in entry.deadUntil = nil }
            return nil
        }
        refusedVerifies &+= 1
        return Refusal.dead.error(key, at: now)
    }

    /// Changes `key`'s entry, dropping it once it refuses nothing.
    private mutating func update(_ key: CountdownKey, _ change: (inout Entry) -> Void) {
        guard var entry = entries[key] else { return }
        if case .budget? = entry.send { budgetEntries -= 1 }
        change(&entry)
        if case .budget? = entry.send { budgetEntries += 1 }
        entries[key] = entry.send == nil && entry.deadUntil == nil ? nil : entry
    }

    // MARK: Learning

    /// Keeps what the store said of `key` (its rows after a decision or a
    /// read, and the decision's refusal), if nothing was noticed meanwhile
    /// and the store's notices are heard now.
    mutating func learn(_ key: CountdownKey, _ mark: Mark?, rows: KeyRows, refused: Refusal?, budgets: [BudgetKey],
                        hearing: Bool, at now: Instant) {
        guard enabled else { return }
        guard let mark, hearing, mark.epoch == epoch, mark.count == noticed[mark.bucket] else {
            drop(key)
            return
        }
        var entry = Entry()
        if let countdown = rows.countdown, countdown.deadline > now {
            entry.send = .busy(countdown)
        } else if case let .window(free)? = refused, free > now {
            entry.send = .window(free)
        } else if case let .budget(free, index)? = refused, keepsBudgets, free > now, index < budgets.count,
                  mark.budgetEpoch == budgetEpoch {
            entry.send = .budget(free, budgets: budgets, index: index)
        }
        if let record = rows.record, record.codeDead, let last = record.lastSend,
           last.advanced(by: Self.deadLife) > now {
            entry.deadUntil = last.advanced(by: Self.deadLife)
        }
        guard entry.send != nil || entry.deadUntil != nil else {
            drop(key)
            return
        }
        if entries[key] == nil {
            guard entries.count < Self.capacity || sweep(at: now) else { return }
        }
        if case .budget? = entries[key]?.send { budgetEntries -= 1 }
        if case .budget? = entry.send { budgetEntries += 1 }
        entries[key] = entry
    }

    /// Drops what is known of `key` (this engine changed it).
    mutating func drop(_ key: CountdownKey) {
        guard !entries.isEmpty, let old = entries.removeValue(forKey: key) else { return }
        if case .budget? = old.send { budgetEntries -= 1 }
    }

    /// Drops expired entries, at most once a second; true if there is room.
    private mutating func sweep(at now: Instant) -> Bool {
        guard now.since(swept) >= Span(nanoseconds: 1_000_000_000) else { return false }
        swept = now
        entries = entries.filter { _, entry in
            switch entry.send {
            case let .busy(countdown)?: if countdown.deadline > now { return true }
            case let .window(free)?: if free > now { return true }
            case let .budget(free, _, _)?: if free > now { return true }
            case nil: break
            }
            return (entry.deadUntil ?? now) > now
        }
        budgetEntries = entries.values.reduce(0) { count, entry in
            if case .budget? = entry.send { return count + 1 }
            return count
        }
        return entries.count < Self.capacity
    }

    // MARK: Notices

    /// Another engine changed `key`.
    mutating func noticed(_ key: CountdownKey) {
        guard enabled else { return }
        noticed[Self.bucket(key)] &+= 1
        drop(key)
    }

    /// A budget's charges went back (or were reset, or written back):
    /// every spent budget may have room.
    mutating func noticedBudgets() {
        guard enabled else { return }
        budgetEpoch &+= 1
        guard budgetEntries > 0 else { return }
        entries = entries.compactMapValues { entry in
            var entry = entry
            if case .budget? = entry.send { entry.send = nil }
            return entry.send == nil && entry.deadUntil == nil ? nil : entry
        }
        budgetEntries = 0
    }

    /// Anything may have changed (the rules, a scope-wide cancel, a lost
    /// link): nothing known holds.
    mutating func dropAll() {
        epoch &+= 1
        entries.removeAll()
        budgetEntries = 0
        guards.noticed()
    }

    /// The refusal of a guarded send to `spot`'s country that the store's
    /// counts gave and still give, if known.
    mutating func refuseGuarded(_ spot: KnownGuardRefusals.Spot, at now: Instant) -> KnownGuardRefusals.Known? {
        guard enabled, let known = guards.refusal(spot, at: now) else { return nil }
        refusedSends &+= 1
        return known
    }
}
