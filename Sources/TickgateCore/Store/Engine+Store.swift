// The engine and its store: decisions made by the store with no engine
// lock held, their results applied to memory, and restore at open.

extension Engine {
    // MARK: Decisions

    /// Makes a decision on `key` and applies its result to memory.
    ///
    /// On memory (`Store.decidesInEngine`) the decision is made and applied
    /// in one hold of the lock. On any other store, `prepare` runs under
    /// the lock (it reads what the decision needs: a policy, a ticket), the
    /// store decides with no engine lock
    /// held (only the key's lane, so one key's decisions apply in the
    /// store's order), and `apply` runs under the lock after memory was
    /// made to agree with what the store held before the decision (another
    /// process or engine may have changed the key). `apply` gets refusals
    /// too, in `result.refusal`. `budgets`, run under the lock with
    /// `prepare`, names the budget keys the decision reads and charges.
    /// `refuse`: on a shared store, the refusal this engine already knows
    /// the store would give (`LocalRefusals`), thrown without asking it
    /// (not escaping: nothing is allocated for it on the way to memory).
    func decide<R>(_ key: CountdownKey, refuse: (EngineState) -> TickgateError? = { _ in nil },
                   _ prepare: (EngineState) throws(TickgateError) -> KeyDecision,
                   budgets: (EngineState) throws(TickgateError) -> [BudgetRow] = { _ in [] },
                   apply: (EngineState, Guarded<EngineState>.Held, DecisionResult) throws(TickgateError) -> R)
        throws(TickgateError) -> R {
        try decide(resolving: { (_) throws(TickgateError) in key }, refuse: refuse, prepare, budgets: budgets,
                   apply: apply)
    }

    /// `decide` for a key found under the lock (a ticket's key).
    /// `inMemory` decides in memory even with a store (a ticket granted
    /// "fail open" ends where it began).
    func decide<R>(resolving resolve: (EngineState) throws(TickgateError) -> CountdownKey,
                   refuse: (EngineState) -> TickgateError? = { _ in nil },
                   _ prepare: (EngineState) throws(TickgateError) -> KeyDecision,
                   budgets: (EngineState) throws(TickgateError) -> [BudgetRow] = { _ in [] },
                   inMemory: Bool = false,
                   apply: (EngineState, Guarded<EngineState>.Held, DecisionResult) throws(TickgateError) -> R)
        throws(TickgateError) -> R {
        if decidesInEngine || inMemory {
            return try decideInMemory(resolving: resolve, prepare, budgets: budgets, localOnly: inMemory,
                                      apply: apply)
        }
        // One store timeout for the whole call: the wait for the key's
        // lane, the write-back and the decision all end by it.
        let deadline = storeDeadline()
        let (key, local) = try locked.withLock { (state) throws(TickgateError) -> (CountdownKey, Bool) in
            try state.checkOpen()
            let key = try resolve(state)
            let local = !state.sends.localKeys.isEmpty
            // Known already: refused again with no round trip (not while
            // grants made alone wait to go back: memory is not the store's).
            if !local, let refusal = refuse(state) { throw refusal }
            return (key, local)
        }
        // What was granted alone during an outage goes back first, so this
        // decision is made on it (a local ticket's own end stays local).
        if local && !inMemory { writeBackLocalGrants(by: deadline) }
        return try lanes.with(.key(key), by: deadline) { () throws(TickgateError) -> R in
            let (decision, named, mark) = try locked.withLock { (state) throws(TickgateError) in
                try state.checkOpen()
                return (try prepare(state), try budgets(state), state.refusals.mark(key))
            }
            let result: DecisionResult
            do throws(TickgateError) {
                result = try store.decide(decision, budgets: named, for: key, by: deadline)
            } catch where (error.status == .storeIO || error.status == .storeUnknown) && failOpen
                && decision.isSendBegin {
                // Fail open: the server is out of reach, the send is
                // granted (or refused) by this engine's memory alone.
                let granted = try decideInMemory(resolving: { _ in key }, prepare, budgets: budgets,
                                                 localOnly: true, apply: apply)
                counters.bump(counters.failOpenGrants)
                return granted
            } catch where error.status == .storeUnknown {
                // The change may have been made (its notice is this
                // engine's own, unheard): nothing known of the key holds,
                // nor of the budgets whose charges it may have given back.
                locked.withLock { state in
                    state.refusals.noticed(key)
                    if !named.isEmpty { state.refusals.noticedBudgets() }
                }
                throw error
            }
            let flushDue = store.flushDue
            let hearing = mark != nil && store.hearsKeys
            return try locked.withLockWaiting { (state, held) throws(TickgateError) -> R in
                // Closed while the store decided: a change it made stands
                // (`TG_E_CLOSED` would say nothing changed).
                if state.closed, result.refusal == nil, !decision.isRead { throw Self.closedDuringChange() }
                try state.checkOpen()
                state.noteFlush(flushDue)
                state.reconcile(key, to: result.before, at: result.now)
                if mark != nil {
                    state.refusals.learn(key, mark, rows: result.after, refused: result.refused,
                                         budgets: named.map(\.key), hearing: hearing, at: result.now)
                }
                return try apply(state, held, result)
            }
        }
    }

    /// The deadline of a call that starts now (a boot-clock instant): the
    /// store timeout from now, for everything the call waits for.
    func storeDeadline() -> Instant { Poller.boottime().advanced(by: storeTimeout) }

    /// The decision made on memory, under the lock: on `MemoryStore`, or
    /// (`localOnly`) when the store could not be reached.
    private func decideInMemory<R>(resolving resolve: (EngineState) throws(TickgateError) -> CountdownKey,
                                   _ prepare: (EngineState) throws(TickgateError) -> KeyDecision,
                                   budgets: (EngineState) throws(TickgateError) -> [BudgetRow],
                                   localOnly: Bool,
                                   apply: (EngineState, Guarded<EngineState>.Held, DecisionResult) throws(TickgateError) -> R)
        throws(TickgateError) -> R {
        try locked.withLockWaiting { (state, held) throws(TickgateError) -> R in
            try state.checkOpen()
            let key = try resolve(state)
            let decision = try prepare(state)
            let now = state.now()
            // Decided here alone: what was known of the store's key is not.
            if localOnly { state.refusals.drop(key) }
            let (rows, slot) = state.keyRows(key, at: now)
            var result = DecisionResult(before: rows, after: rows, now: now, refusal: nil,
                                        knownSlot: SlotLookup(slot), localOnly: localOnly)
            let named = try budgets(state)
            // A budget this engine never heard of (the store holds the
            // rules) cannot be checked here.
            if let unknown = named.firstIndex(where: { $0.budget.windows.isEmpty }) {
                throw Refusal.noBudget(index: unknown).error("\"\(named[unknown].key.budget.value)\"")
            }
            // The charges move into the decision and back: changed in
            // place, never copied.
            var charged = named.isEmpty ? named : state.budgets.take(named)
            do throws(TickgateError) {
                _ = try decision.apply(to: &result.after, budgets: &charged, key: key, at: now)
            } catch {
                // A refusal leaves the rows as they were.
                result.refusal = error
            }
            if !charged.isEmpty { state.budgets.store(charged) }
            return try apply(state, held, result)
        }
    }

    /// Runs a store write that is not a key decision (a policy, titles, a
    /// session, a scope-wide cancel) with no engine lock held, then
    /// `apply` under the lock (on memory the write changes nothing:
    /// `apply` writes memory).
    func write<R>(_ lane: Lane?, _ store: (Store) throws(TickgateError) -> Void,
                  apply: (EngineState, Guarded<EngineState>.Held) throws(TickgateError) -> R) throws(TickgateError) -> R {
        let current = self.store
        if let lane {
            return try lanes.with(lane) { () throws(TickgateError) -> R in
                try write(to: current, store, apply: apply)
            }
        }
        return try write(to: current, store, apply: apply)
    }

    private func write<R>(to current: Store, _ store: (Store) throws(TickgateError) -> Void,
                          apply: (EngineState, Guarded<EngineState>.Held) throws(TickgateError) -> R)
        throws(TickgateError) -> R {
        try locked.withLock { (state) throws(TickgateError) in try state.checkOpen() }
        do throws(TickgateError) {
            try store(current)
        } catch where error.status == .storeUnknown {
            // A rule, a reset or a scope-wide cancel may have been made:
            // nothing this engine knew to refuse holds.
            locked.withLock { state in state.refusals.dropAll() }
            throw error
        }
        let flushDue = current.flushDue
        return try locked.withLockWaiting { (state, held) throws(TickgateError) -> R in
            // (Memory's write changed nothing: `apply` writes memory.)
            if state.closed, !decidesInEngine { throw Self.closedDuringChange() }
            try state.checkOpen()
            state.noteFlush(flushDue)
            return try apply(state, held)
        }
    }

    /// The engine was closed (on another thread, or by a callback) while
    /// its store made a call's change: the change was made, and memory and
    /// the call's answer are gone with the engine. Not `TG_E_CLOSED`, which
    /// says nothing was done.
    static func closedDuringChange() -> TickgateError {
        TickgateError(.storeUnknown, "the engine was closed while its store made this change: the store holds it, "
                      + "this call's answer is lost (read the key from an engine opened on the store)")
    }

    /// Finishes a rolling upgrade: raises the store's format to the newest
    /// this release reads, unless engines that cannot read it are live
    /// (`Store.finishUpgrade`). Returns the store's format after the call;
    /// 0 on memory, which has none.
    public func finishStoreUpgrade() throws(TickgateError) -> Int {
        try locked.withLock { (state) throws(TickgateError) in try state.checkOpen() }
        return try store.finishUpgrade()
    }

    /// Group commit: commits the store's open transaction, due or not
    /// (before callbacks run: `dispatchPass`). Never waits for the store
    /// (if another call holds it, that call commits); call with no lock
    /// held.
    func commitOpenGroup(at now: Instant) {
        guard let due = store.flushDue else { return }
        guard let left = store.flushIfDue(at: max(now, due)) else { return }
        locked.withLock { state in if !state.closed { state.noteFlush(left) } }
    }
}

extension EngineState {
    /// Group commit: arms the timer for the store's open transaction.
    func noteFlush(_ due: Instant?) {
        guard let due else { return }
        if let current = flushDeadline, current <= due { return }
        flushDeadline = due
        armIfEarlier()
    }

    // MARK: Reconciling with other processes

    /// How far apart the store's deadline of a run and memory's may be for
    /// both to be taken as one run (of the same phase and length): the
    /// store's time maps onto this engine's clock a little differently
    /// after each round trip; another engine's new run of the same length
    /// this close is the same countdown to anyone reading it.
    static let sameRun = Span.milliseconds(100)

    /// Makes memory agree with what the store held for one key before a
    /// decision (another process or engine may have changed it), with the
    /// events that change makes.
    func reconcile(_ key: CountdownKey, to rows: KeyRows, at now: Instant) {
        let memory = running(key, at: now)
        switch (memory, rows.countdown) {
        case let (memory?, nil):
            // Another process ended it.
            _ = cancel(key, at: now)
            if emit(.cancelled, key, instance: 0, remaining: .zero, duration: memory.duration,
                    state: restingState(key)) {
                poller.wake()
            }
        case let (memory?, stored?) where memory.deadline != stored.deadline && memory.phase == stored.phase
            && memory.duration == stored.duration && memory.deadline.since(stored.deadline) <= Self.sameRun
            && stored.deadline.since(memory.deadline) <= Self.sameRun:
            // The same run, its deadline mapped onto this engine's clock by
            // a later round trip (the store's time is mapped by the tightest
            // bound so far): it keeps its instance and its ticket (a
            // ticket's end finds its run), and takes the store's deadline.
            var countdown = stored
            countdown.instance = memory.instance
            countdown.ticket = memory.ticket
            insert(countdown, at: now)
            armIfEarlier()
        case let (memory, stored?) where memory == nil || memory?.deadline != stored.deadline
            || memory?.phase != stored.phase:
            // Another process started or changed it.
            var countdown = stored
            nextInstance &+= 1
            countdown.instance = nextInstance
            insert(countdown, at: now)
            armIfEarlier()
            let kind: EventKind = countdown.phase == .sending ? .sending : .started
            if emit(kind, key, instance: countdown.instance,
                    remaining: countdown.phase == .sending ? .zero : countdown.deadline.since(now),
                    duration: countdown.duration, state: countdown.phase.buttonState) {
                poller.wake()
            }
        default:
            break
        }
        sends.setRecord(rows.record, for: key)
    }

    // MARK: Restore

    /// Takes the store's settings as this engine's copies (for local reads:
    /// `tg_policy_get`, button titles), dropping what the store no longer
    /// holds.
    func adoptSettings(_ settings: StoreSnapshot) {
        sends.replacePolicies(Dictionary(settings.policies, uniquingKeysWith: { $1 }))
        let titles = Dictionary(settings.titles, uniquingKeysWith: { $1 })
        for scope in sends.titles.keys where titles[scope] == nil { setTitles(nil, scope: scope) }
        for (scope, set) in titles where sends.titles[scope] != set { setTitles(set, scope: scope) }
        budgets.replaceBudgets(Dictionary(settings.budgets, uniquingKeysWith: { $1 }))
        guards.replaceRules(Dictionary(settings.guards, uniquingKeysWith: { $1 }))
    }

    /// Loads everything the store holds into a new engine's state. Every
    /// row is read and checked before anything is applied, so a corrupt
    /// row leaves the state empty.
    func restore(_ snapshot: StoreSnapshot) {
        let now = self.now()
        for var countdown in snapshot.countdowns {
            nextInstance &+= 1
            countdown.instance = nextInstance
            insert(countdown, at: now)
        }
        for (key, record) in snapshot.records { sends.setRecord(record, for: key) }
        for (scope, policy) in snapshot.policies { sends.setPolicy(policy, scope: scope) }
        for (scope, titles) in snapshot.titles { setTitles(titles, scope: scope) }
        for (name, budget) in snapshot.budgets { budgets.set(budget, name: name) }
        for (scope, rules) in snapshot.guards { guards.set(rules, scope: scope) }
        for session in snapshot.sessions { gates.logIn(session.realm, expiry: session.expiry) }
        armIfEarlier()
    }
}
