// Keys other engines change: read through on a query, and refreshed for
// observers when the store's change notices name them.

extension Engine {
    /// Makes memory agree with what the store holds for `key` (with the
    /// events that makes), if other engines change the store (`always`: on
    /// a change notice, whatever the store).
    func refresh(_ key: CountdownKey, always: Bool = false) throws(TickgateError) {
        guard always || store.readsThrough else { return }
        // A caller's query: one store timeout for the lane, the write-back
        // and the read.
        let deadline = storeDeadline()
        // What was granted alone during an outage goes back first (one
        // look under the lock the read takes anyway).
        let local = try locked.withLock { (state) throws(TickgateError) -> Bool in
            try state.checkOpen()
            return !state.sends.localKeys.isEmpty
        }
        if local { writeBackLocalGrants(by: deadline) }
        if always {
            // A notice, on the store's thread (no caller waits for it): it
            // waits for the key's lane as long as the decision that holds it
            // takes, then reads within a store timeout of its own.
            try lanes.with(.key(key)) { () throws(TickgateError) in try reread(key, on: store, by: storeDeadline()) }
        } else {
            try lanes.with(.key(key), by: deadline) { () throws(TickgateError) in
                try reread(key, on: store, by: deadline)
            }
        }
    }

    /// Reads `key` from `store` by `deadline` and makes memory agree (its
    /// lane held).
    private func reread(_ key: CountdownKey, on store: Store, by deadline: Instant) throws(TickgateError) {
        let mark = store.refusesLocally ? locked.withLock { state in state.refusals.mark(key) } : nil
        let result = try store.decide(.read, budgets: [], for: key, by: deadline)
        let hearing = mark != nil && store.hearsKeys
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            state.reconcile(key, to: result.before, at: result.now)
            // What the read shows refuses sends (a running countdown)
            // or verifies (a dead code) without asking, until noticed.
            if mark != nil {
                state.refusals.learn(key, mark, rows: result.before, refused: nil, budgets: [],
                                     hearing: hearing, at: result.now)
            }
        }
    }

    /// A change notice: re-reads what it names if this engine holds or
    /// observes it; after a lost link, everything it holds and observes.
    func noticed(_ notice: StoreNotice) {
        switch notice {
        case let .key(key):
            let observed = locked.withLock { state -> Bool in
                state.refusals.noticed(key)
                return !state.closed && state.observes(key)
            }
            if observed { try? refresh(key, always: true) }
        case .budgets:
            locked.withLock { state in state.refusals.noticedBudgets() }
        case .guardCounts:
            locked.withLock { state in state.refusals.guards.noticed() }
        case .settings:
            // A policy or a budget's windows changed what the store refuses.
            locked.withLock { state in state.refusals.dropAll() }
            try? refreshSettings()
        case let .session(realm):
            if locked.withLock({
                !$0.closed && ($0.gates.realms[realm] != nil || $0.observers.realmObservers[realm] != nil)
            }) {
                try? syncSession(realm)
            }
        case .lost:
            locked.withLock { state in state.refusals.dropAll() }
            storeEvent(.storeLost)
        case .anything, .back:
            locked.withLock { state in state.refusals.dropAll() }
            // A failure here (the store went away again) is retried by the
            // next interruption's full re-read.
            if hasLocalGrants { writeBackLocalGrants(by: storeDeadline()) }
            try? refreshSettings()
            let (keys, realms) = locked.withLock { state -> ([CountdownKey], [KeyName]) in
                if state.closed { return ([], []) }
                return (state.observedKeys(), Array(state.gates.realms.keys))
            }
            for key in keys { try? refresh(key, always: true) }
            for realm in realms { try? syncSession(realm) }
            if notice == .back { storeEvent(.storeBack) }
        }
    }

    /// Tells every key and scope subscription that the store was lost or
    /// is back (with the key's state as memory holds it).
    private func storeEvent(_ kind: EventKind) {
        locked.withLock { state in
            guard !state.closed else { return }
            let wasEmpty = state.dispatch.pending.isEmpty
            state.queueStoreEvent(kind, at: state.now())
            if wasEmpty && !state.dispatch.pending.isEmpty { poller.wake() }
        }
    }

    /// Replaces this engine's copies of the settings (policies, titles,
    /// budgets) with the store's, if the store holds the rules.
    func refreshSettings() throws(TickgateError) {
        guard store.holdsRules else { return }
        let settings = try store.readSettings()
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            state.adoptSettings(settings)
        }
    }

    /// Starts the store's notices, once (at the first observer).
    func watchStore() {
        store.watch { [weak self] notice in self?.noticed(notice) }
    }
}

extension EngineState {
    func observes(_ key: CountdownKey) -> Bool {
        observers.keyObservers[key] != nil || observers.scopeObservers[key.scope] != nil
    }

    /// The keys observed here: those with observers, and the keys memory
    /// knows of each observed scope.
    func observedKeys() -> [CountdownKey] {
        var keys = Set(observers.keyObservers.keys)
        if !observers.scopeObservers.isEmpty {
            for slot in table.liveSlots() {
                let key = table.key(slot)
                if observers.scopeObservers[key.scope] != nil { keys.insert(key) }
            }
            for key in sends.records.keys where observers.scopeObservers[key.scope] != nil { keys.insert(key) }
        }
        return keys.sorted()
    }
}
