import CTickgateShim

extension Engine {
    /// Starts a countdown of `duration` for `key`; returns `duration`.
    /// Throws `.coolingDown` (with the time left) if the key is counting,
    /// unless `restart` is set.
    @discardableResult
    public func start(_ key: CountdownKey, duration: Span, tickInterval: Span? = nil,
                      restart: Bool = false) throws(TickgateError) -> Span {
        let duration = try duration.validatedDuration()
        let interval = try tickInterval?.validatedTickInterval() ?? defaultTickInterval
        return try decide(key, { (_) throws(TickgateError) in
            .start(duration: duration, tickInterval: interval, restart: restart)
        }) { (state, _, result) throws(TickgateError) -> Span in
            if let refusal = result.refusal { throw refusal }
            guard var countdown = result.after.countdown else { return duration }
            state.nextInstance &+= 1
            countdown.instance = state.nextInstance
            state.replace(with: countdown, at: result.now, known: result.knownSlot)
            if state.emit(.started, key, instance: countdown.instance,
                          remaining: duration, duration: duration, state: .cooling) {
                poller.wake()
            }
            return duration
        }
    }

    /// The error for a key that cannot start or send: what it is busy with
    /// and for how long.
    static func busyError(_ running: Countdown, at now: Instant) -> TickgateError {
        let remaining = running.deadline.since(now)
        let key = running.key.description
        let left = "\(remaining.millisecondsRoundedUp) ms"
        switch running.phase {
        case .sending:
            return TickgateError(.inFlight, "a send for \(key) is in flight: its ticket expires in \(left)",
                                 remaining: remaining)
        case .cooling:
            return TickgateError(.coolingDown, "\(key) is cooling down: \(left) left", remaining: remaining)
        case .locked:
            return TickgateError(.locked, "\(key) reached its cap of sends: locked for \(left)",
                                 remaining: remaining)
        }
    }

    /// Cancels the key's countdown. Once this returns (outside that
    /// countdown's own callback), no tick or finish of it runs.
    public func cancel(_ key: CountdownKey) throws(TickgateError) {
        let ended = try decide(key, { (_) throws(TickgateError) in .cancel }) { (state, _, result) throws(TickgateError) -> Bool in
            if let refusal = result.refusal { throw refusal }
            guard let run = state.cancel(key, at: result.now) else { return false }
            if state.emit(.cancelled, key, instance: 0, remaining: .zero, duration: run.duration,
                          state: state.restingState(key)) {
                poller.wake()
            }
            return true
        }
        if ended { waitForCallbacks(of: [key]) }
    }

    /// Waits while a callback for an event of one of `keys` runs on another
    /// thread, with no lane held: the callback may call the engine on its
    /// key or scope, and would wait for a lane this call held (on a store;
    /// a `cancel_all` of its own, forever).
    func waitForCallbacks(of keys: Set<CountdownKey>) {
        guard !keys.isEmpty else { return }
        locked.withLockWaiting { state, held in state.waitUntilNotRunning(keys, held) }
    }

    /// Cancels every countdown of `scope` (or of every scope when nil);
    /// returns how many.
    @discardableResult
    public func cancelAll(scope: KeyName? = nil) throws(TickgateError) -> Int {
        let cancelled = try lanes.withScope(scope) { () throws(TickgateError) -> Set<CountdownKey> in
            try self.write(nil, { (store) throws(TickgateError) in try store.cancelAll(scope: scope) }) { state, _ in
                state.refusals.dropAll()
                return state.cancelAll(scope: scope)
            }
        }
        waitForCallbacks(of: cancelled)
        return cancelled.count
    }

    /// The time the key's countdown still runs; throws `.notFound` if it is
    /// not counting.
    public func remaining(_ key: CountdownKey) throws(TickgateError) -> Span {
        try refresh(key)
        return try locked.withLock { (state) throws(TickgateError) -> Span in
            try state.checkOpen()
            let now = state.now()
            guard let running = state.counting(key, at: now) else {
                throw TickgateError(.notFound, "no countdown is running for \(key.description)")
            }
            return running.deadline.since(now)
        }
    }

    /// The running countdowns of `scope` (or all), ordered by key.
    public func list(scope: KeyName? = nil) throws(TickgateError) -> [CountdownInfo] {
        try locked.withLock { (state) throws(TickgateError) -> [CountdownInfo] in
        try state.checkOpen()
        let now = state.now()
        var result: [CountdownInfo] = []
        for slot in state.table.liveSlots() {
            guard let countdown = state.countdown(slot),
                  countdown.deadline > now, countdown.phase != .sending else { continue }
            if let scope, countdown.key.scope != scope { continue }
            result.append(CountdownInfo(key: countdown.key,
                                        remaining: countdown.deadline.since(now),
                                        duration: countdown.duration))
        }
        result.sort { $0.key < $1.key }
        return result
        }
    }

    // MARK: Fast paths by the caller's bytes

    /// Whether a change of the key's countdown needs the full path: a store
    /// to write (any but memory), observers of its scope (or of it) to
    /// tell, a callback to wait for, or a closed engine to report. Otherwise the fast paths
    /// below find the key by its bytes and make no names; observers of
    /// other scopes cost them one comparison each. Lock held.
    @inline(__always)
    func needsFullPath(_ key: RawKey, _ state: EngineState) -> Bool {
        !decidesInEngine || state.closed || state.dispatch.runningEvent != nil
            || state.isObserved(scopeBytes: key.scope)
    }

    /// `start` for a key given as bytes.
    public func start(_ key: RawKey, duration: Span, tickInterval: Span? = nil,
                      restart: Bool = false) throws(TickgateError) {
        let duration = try duration.validatedDuration()
        let interval = try tickInterval?.validatedTickInterval() ?? defaultTickInterval
        let done = try locked.withLock { (state) throws(TickgateError) -> Bool in
            if needsFullPath(key, state) { return false }
            let now = state.now()
            state.nextInstance &+= 1
            let instance = state.nextInstance
            let deadline = now.advanced(by: duration)
            let slot = try state.withTable { (table) throws(TickgateError) -> Int32 in
                switch table.lookup(scope: key.scope, subject: key.subject) {
                case .found(let found):
                    let record = table.record(found)
                    if record.deadline > now, !restart, let running = state.countdown(found) {
                        throw Self.busyError(running, at: now)
                    }
                    if record.phase == .sending {
                        state.sends.recordEnd(of: record.ticket, record.deadline <= now ? .expired : .cancelled)
                    }
                    table.update(found, deadline: deadline, duration: duration, tickInterval: interval,
                                 phase: .cooling, instance: instance, ticket: 0)
                    return found
                case .missing(let miss):
                    return table.insert(scope: key.scope, subject: key.subject, deadline: deadline,
                                        duration: duration, tickInterval: interval, phase: .cooling,
                                        instance: instance, ticket: 0, after: miss)
                }
            }
            state.withWheel { $0.schedule(slot, at: deadline) }
            state.armIfEarlier()
            return true
        }
        if !done { try start(key.names(), duration: duration, tickInterval: interval, restart: restart) }
    }

    /// `cancel` for a key given as bytes.
    public func cancel(_ key: RawKey) throws(TickgateError) {
        let done = try locked.withLock { (state) throws(TickgateError) -> Bool in
            if needsFullPath(key, state) { return false }
            let now = state.now()
            guard let slot = state.withTable({ $0.find(scope: key.scope, subject: key.subject) }),
                  state.cancel(slot: slot, at: now) != nil else {
                throw TickgateError(.notFound, "no countdown is running for \(key.names().description)")
            }
            return true
        }
        if !done { try cancel(key.names()) }
    }

    /// `remaining` for a key given as bytes.
    public func remaining(_ key: RawKey) throws(TickgateError) -> Span {
        if store.readsThrough { try refresh(key.names()) }
        let remaining = try locked.withLock { (state) throws(TickgateError) -> Span? in
        try state.checkOpen()
        let now = state.now()
        return state.withTable { table -> Span? in
            guard let slot = table.find(scope: key.scope, subject: key.subject), table.isLive(slot) else {
                return nil
            }
            let record = table.record(slot)
            return record.deadline > now && record.phase != .sending ? record.deadline.since(now) : nil
        }
        }
        guard let remaining else {
            throw TickgateError(.notFound, "no countdown is running for \(key.names().description)")
        }
        return remaining
    }
}

extension EngineState {
    /// Puts `countdown` in its key's slot, ending whatever ran there (an
    /// open ticket becomes cancelled). Returns the slot.
    @discardableResult
    func replace(with countdown: Countdown, at now: Instant, known: SlotLookup = .notLookedUp) -> Int32 {
        // The old run is read from its record: no names are made (nor
        // copied) unless an observer is told of its end.
        let slot: Int32?
        switch known {
        case .notLookedUp: slot = table.find(countdown.key)
        case .absent: slot = nil
        case let .found(found): slot = found
        }
        if let slot, table.isLive(slot) {
            let old = table.record(slot)
            if old.phase == .sending, old.ticket != countdown.ticket {
                sends.recordEnd(of: old.ticket, old.deadline <= now ? .expired : .cancelled)
            }
            // The run in the slot reached its deadline but its timer has
            // not fired yet: announce its end before the new run starts
            // (`emit` tells no one when nothing is observed).
            if old.deadline <= now, hasCountdownObservers,
               emit(old.phase == .sending ? .sendFailed : .finished, countdown.key,
                    instance: old.instance, remaining: .zero, duration: old.duration,
                    state: restingState(countdown.key)) {
                poller.wake()
            }
        }
        let placed = insert(countdown, at: now, known: SlotLookup(slot))
        armIfEarlier()
        return placed
    }

    /// Ends every countdown of `scope` (or all) in memory; returns the keys
    /// it ended (their callbacks running now are the caller's to wait for).
    func cancelAll(scope: KeyName?) -> Set<CountdownKey> {
        let now = self.now()
        var keys = table.liveSlots().filter { isRunning($0, at: now) }
            .map { table.key($0) }
        if let scope { keys = keys.filter { $0.scope == scope } }
        var cancelled: Set<CountdownKey> = []
        var wake = false
        for key in keys.sorted() {
            guard let run = cancel(key, at: now) else { continue }
            cancelled.insert(key)
            wake = emit(.cancelled, key, instance: 0, remaining: .zero,
                        duration: run.duration, state: restingState(key)) || wake
        }
        if wake { poller.wake() }
        return cancelled
    }

    /// Waits while a callback for an event of one of these keys runs on
    /// another thread (any run of the key: a host cannot tell runs apart,
    /// so a tick of a replaced run counts too).
    func waitUntilNotRunning(_ keys: Set<CountdownKey>, _ held: Guarded<EngineState>.Held) {
        guard !keys.isEmpty else { return }
        let me = tgshim_thread_self()
        while let running = dispatch.runningKey, dispatch.dispatcher != me, keys.contains(running) {
            held.wait()
        }
    }
}
