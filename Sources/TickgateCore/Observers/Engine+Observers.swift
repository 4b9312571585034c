import CTickgateShim

extension Engine {
    /// Observes a key or a scope. The first events are the current state
    /// (one STATE for a key; one per running countdown for a scope).
    public func subscribe(_ target: SubscriptionTarget,
                          _ observer: Observer) throws(TickgateError) -> SubscriptionID {
        // Notices of other engines' changes of keys start with the first
        // key or scope observer (an engine that observes none needs none).
        watchStore()
        switch target {
        case .realm, .records, .outcomes: break
        case .key, .scope: store.watchKeys()
        }
        // The key as the store holds it now, so its first event is right.
        if case let .key(key) = target { try refresh(key) }
        if case let .realm(realm) = target { try syncSession(realm) }
        return try locked.withLock { (state) throws(TickgateError) -> SubscriptionID in
        try state.checkOpen()
        let id = state.register(target, observer)
        let now = state.now()
        let wasEmpty = state.dispatch.pending.isEmpty
        switch target {
        case .key(let key):
            state.queueState(of: key, for: id, at: now)
            state.rescheduleForTicks(key, at: now)
        case .realm(let realm):
            state.dispatch.pending.append(PendingEvent(.gate(
                state.gateEvent(.state, realm, at: now, subscription: id))))
        case .scope(let scope):
            let keys = state.table.liveSlots().map { state.table.key($0) }
                .filter { $0.scope == scope }.sorted()
            for key in keys where state.counting(key, at: now) != nil {
                state.queueState(of: key, for: id, at: now)
                state.rescheduleForTicks(key, at: now)
            }
        case .records, .outcomes:
            break
        }
        state.armIfEarlier()
        if wasEmpty && !state.dispatch.pending.isEmpty { poller.wake() }
        return id
        }
    }

    /// Ends a subscription. Once this returns (outside its own callback) its
    /// callback does not run again and `release` has run; from inside its
    /// own callback, `release` runs when that callback returns.
    public func unsubscribe(_ id: SubscriptionID) throws(TickgateError) {
        let me = tgshim_thread_self()
        let observer = try locked.withLockWaiting { (state, held) throws(TickgateError) -> Observer? in
            try state.checkOpen()
            guard let subscription = state.unregister(id) else {
                throw TickgateError(.notFound, "no subscription has id \(id)")
            }
            if state.dispatch.runningSubscription == id {
                if state.dispatch.dispatcher == me {
                    state.dispatch.deferredReleases.append(subscription.observer)
                    return nil
                }
                while state.dispatch.runningSubscription == id { held.wait() }
            }
            return subscription.observer
        }
        observer?.release()
    }
}
