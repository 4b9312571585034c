import CTickgateShim

/// The countdown engine: countdowns keyed by (scope, subject), one timing
/// wheel, one clock, one OS timer, and the observers of keys and scopes.
///
/// Every method may be called from any thread, including from inside an
/// observer callback. All state lives in `locked`, reachable only under its
/// lock; callbacks always run with the lock released, and so does every
/// store round trip.
public final class Engine: @unchecked Sendable {
    let locked: Guarded<EngineState>
    let clock: Clock
    let poller: Poller
    public let delivery: Delivery
    public let clockKind: ClockKind
    let defaultTickInterval: Span
    /// The engine thread (engine-thread delivery only), 0 before it starts.
    private var thread: UInt = 0
    /// Where the keys live: the store the options named (called with no
    /// engine lock held), or with none the engine's own memory
    /// (`MemoryStore`).
    let store: Store
    /// `store.decidesInEngine`, read once: the hot paths ask it on every
    /// call.
    let decidesInEngine: Bool
    /// One store decision at a time per key.
    let lanes = KeyLanes()
    /// Grant sends in memory while the store is unreachable.
    let failOpen: Bool
    /// The longest one call waits for the store, in all: its key's lane,
    /// a write-back and the decision share it (`storeDeadline()`).
    let storeTimeout: Span
    /// What the engine did (`stats()`), counted without its lock.
    let counters = EngineCounters()

    public convenience init(options: EngineOptions = EngineOptions()) throws(TickgateError) {
        let clock = Clock(manual: options.clock == .manual, boot: options.manualBoot,
                          wall: options.manualWall, bootID: options.manualBootID)
        var store: Store?
        var snapshot = StoreSnapshot()
        if let redis = options.redis {
            let opened = try RedisStore(options: redis, clock: clock)
            do {
                snapshot = try opened.load()
            } catch {
                // The store's threads and connections go with the failed open.
                opened.close()
                throw error
            }
            store = opened
        } else if let storeOptions = options.store {
            let opened = try SQLiteStore(options: storeOptions, clock: clock)
            do {
                snapshot = try opened.load()
            } catch where error.status == .storeCorrupt && storeOptions.startFreshIfCorrupt {
                // A row out of range is a corrupt store like a bad page is;
                // nothing was applied, so the new store starts empty.
                try opened.startFresh(options: storeOptions)
            }
            store = opened
        }
        do {
            try self.init(options: options, clock: clock, store: store, snapshot: snapshot)
        } catch {
            store?.close()
            throw error
        }
        // A shared store (Redis) tells of changes to the rules at once, so
        // this engine's copies for local reads follow them. (A SQLite file
        // is looked at once an engine observes something: an app that only
        // decides runs no thread for it, and its decisions read the file's
        // rules anyway.)
        if self.store.readsThrough { watchStore() }
        // Refusals made again without a round trip need every key's
        // notice (LocalRefusals).
        if self.store.refusesLocally {
            self.store.watchKeys()
            let keepsBudgets = self.store.keepsBudgetRefusals
            locked.withLock { state in
                state.refusals.enabled = true
                state.refusals.keepsBudgets = keepsBudgets
            }
        }
    }

    /// What the open saw in the store that its operator should change
    /// (a Redis maxmemory-policy that evicts live keys), or nil.
    public var storeWarning: String? { store.warning }

    /// An engine on `store` (any `Store`; tests pass their own; nil: the
    /// engine's own memory), starting from `snapshot`.
    init(options: EngineOptions, clock: Clock, store: Store?, snapshot: StoreSnapshot) throws(TickgateError) {
        defaultTickInterval = try options.tickInterval.validatedTickInterval()
        delivery = options.delivery
        clockKind = options.clock
        self.clock = clock
        failOpen = options.redis?.failOpen ?? false
        storeTimeout = options.redis?.timeout ?? options.store?.timeout ?? Limits.defaultStoreTimeout
        poller = try Poller()
        locked = Guarded(EngineState(clock: clock, poller: poller, defaultTickInterval: defaultTickInterval))
        // Every call to a store goes through one place that times it
        // (memory's calls are no round trips, and not timed).
        let counters = self.counters
        self.store = store.map { MeasuredStore($0, counters: counters) } ?? MemoryStore(locked)
        decidesInEngine = self.store.decidesInEngine
        locked.withLock { state in state.restore(snapshot) }
        if options.delivery == .engineThread { try startThread() }
    }

    /// The engine's clock.
    public func now() -> Instant { clock.now() }

    /// Stops the engine: no callback runs once this returns (except the one
    /// that called it, which finishes), every subscription's `release` runs
    /// exactly once, and every later call fails with `.closed`. Returns
    /// false if it was closed already.
    @discardableResult
    public func close() -> Bool {
        let me = tgshim_thread_self()
        let onEngineThread = thread != 0 && thread == me
        let closed = locked.withLockWaiting { (state, held) -> (releases: [Observer], requests: [GateRequestHandlers])? in
            if state.closed { return nil }
            state.closed = true
            var releases: [Observer] = []
            for id in state.observers.subscriptions.keys.sorted() {
                guard let subscription = state.unregister(id) else { continue }
                if id == state.dispatch.runningSubscription && state.dispatch.dispatcher == me {
                    state.dispatch.deferredReleases.append(subscription.observer)
                } else {
                    releases.append(subscription.observer)
                }
            }
            let requests = state.gates.requests.keys.sorted().compactMap { state.gates.requests[$0]?.handlers }
            state.gates.removeAll()
            state.dispatch.pending.removeAll()
            state.table.removeAll()
            state.wheel.removeAll()
            if onEngineThread { state.dispatch.detachThread = true }
            while state.dispatch.dispatching
                    && (state.dispatch.runningSubscription != 0 || state.gates.runningRequest != 0)
                    && state.dispatch.dispatcher != me {
                held.wait()
            }
            held.broadcast()
            return (releases, requests)
        }
        guard let closed else { return false }
        // Commits what a group commit holds (it waits for a decision under
        // way; every later one fails as closed).
        store.close()
        poller.arm(at: nil)
        poller.wake()
        if thread != 0 && !onEngineThread { _ = tgshim_thread_join(thread) }
        for observer in closed.releases { observer.release() }
        for handlers in closed.requests { handlers.release() }
        return true
    }

    // MARK: The engine thread

    private func startThread() throws(TickgateError) {
        let context = Unmanaged.passRetained(self).toOpaque()
        var id: UInt = 0
        let err = tgshim_thread_start({ context in
            guard let context else { return nil }
            let engine = Unmanaged<Engine>.fromOpaque(context).takeRetainedValue()
            engine.runThread()
            return nil
        }, context, &id)
        if err != 0 {
            Unmanaged<Engine>.fromOpaque(context).release()
            throw TickgateError(.system, "cannot start the engine thread: errno \(err)")
        }
        thread = id
    }

    private func runThread() {
        while true {
            poller.wait()
            let closed = locked.withLock { state in state.closed ? state.dispatch.detachThread : nil }
            if let detach = closed {
                if detach { _ = tgshim_thread_detach(tgshim_thread_self()) }
                return
            }
            // The pass reads the requests it serves after draining the
            // wake-ups, so no request's wake-up is consumed unserved.
            let target = (try? dispatchPass().served) ?? 0
            locked.withLockWaiting { state, held in
                if state.dispatch.passesCompleted < target { state.dispatch.passesCompleted = target }
                held.broadcast()
            }
        }
    }
}
