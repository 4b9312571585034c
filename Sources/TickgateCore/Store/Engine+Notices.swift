// Keys other engines change: read through on a query, and refreshed for
// observers when the store's change notices name them.

extension Engine {
    /// Makes memory agree with what the store holds for `key` (with the
    /// events that makes), if other engines change the store (`always`: on
    /// a change notice, whatever the store).
    func refresh(_ key: CountdownKey, always: Bool = false) throws(TickgateError) {
        guard let store, always || store.readsThrough else { return }
        try lanes.with(.key(key)) { () throws(TickgateError) in
            try locked.withLock { (state) throws(TickgateError) in try state.checkOpen() }
            let result = try store.decide(.read, budgets: [], for: key)
            try locked.withLock { (state) throws(TickgateError) in
                try state.checkOpen()
                state.reconcile(key, to: result.before, at: result.now)
            }
        }
    }

    /// A change notice: re-reads `key` if someone here observes it; nil
    /// (notices were interrupted) re-reads every key observed.
    func noticed(_ key: CountdownKey?) {
        let keys = locked.withLock { state -> [CountdownKey] in
            if state.closed { return [] }
            if let key { return state.observes(key) ? [key] : [] }
            return state.observedKeys()
        }
        // A failure here (the store went away again) is retried by the
        // next interruption's full re-read.
        for key in keys { try? refresh(key, always: true) }
    }

    /// Starts the store's notices, once (at the first observer).
    func watchStore() {
        store?.watch { [weak self] key in self?.noticed(key) }
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
