import CTickgateShim

extension Engine {
    /// Host-thread delivery: the descriptor to poll for reading.
    public func descriptor() throws(TickgateError) -> Int32 {
        guard delivery == .hostThread else {
            throw TickgateError(.wrongMode, "the engine delivers on its own thread; it has no descriptor to poll")
        }
        try locked.withLock { (state) throws(TickgateError) in try state.checkOpen() }
        return poller.descriptor
    }

    /// Host-thread delivery: runs every due callback on the calling thread;
    /// returns how many ran.
    public func dispatch() throws(TickgateError) -> Int {
        guard delivery == .hostThread else {
            throw TickgateError(.wrongMode, "the engine delivers on its own thread; dispatch is for host-thread engines")
        }
        return try dispatchPass().delivered
    }

    /// Manual clock: moves time forward. With engine-thread delivery, returns
    /// once the engine thread has delivered what became due (unless called
    /// from inside a callback).
    public func advance(by step: Span) throws(TickgateError) {
        guard clock.isManual else {
            throw TickgateError(.wrongMode, "the engine runs on the system clock; only a manual clock can be advanced")
        }
        guard step >= .zero, step <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "a clock step must be between 0 and 31536000000 ms")
        }
        let me = tgshim_thread_self()
        try locked.withLockWaiting { (state, held) throws(TickgateError) in
            try state.checkOpen()
            let now = state.now().advanced(by: step)
            guard now <= Limits.maximumManualTime else {
                throw TickgateError(.invalidDuration, "the manual clock cannot go past 100 years")
            }
            clock.advance(to: now, by: step)
            state.dispatch.passesRequested &+= 1
            let target = state.dispatch.passesRequested
            guard delivery == .engineThread else {
                // Host thread: the descriptor turns readable only if something
                // became due.
                if let next = state.nextTimerTime, next <= now { poller.wake() }
                return
            }
            poller.wake()
            guard state.dispatch.dispatcher != me else { return }
            while state.dispatch.passesCompleted < target && !state.closed { held.wait() }
        }
    }

    /// Manual clock: sets the wall part (nanoseconds since the epoch).
    public func setWall(_ wall: Int64) throws(TickgateError) {
        guard clock.isManual else {
            throw TickgateError(.wrongMode, "the engine runs on the system clock; only a manual clock's wall can be set")
        }
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            clock.setWall(wall)
        }
    }

    /// Commits what a group commit holds now.
    public func flush() throws(TickgateError) {
        try locked.withLock { (state) throws(TickgateError) in try state.checkOpen() }
        try store.flush()
    }

    /// One delivery pass: fire due timers, then run the queued callbacks one
    /// at a time with the lock released, skipping any whose subscription
    /// ended or whose countdown run was cancelled meanwhile.
    func dispatchPass() throws(TickgateError) -> (delivered: Int, served: UInt64) {
        let me = tgshim_thread_self()
        let (batch, served, now, flushDue) = try locked.withLock {
            (state) throws(TickgateError) -> (EventQueue, UInt64, Instant, Bool) in
            if state.closed { throw TickgateError(.closed, "the engine is closed") }
            if state.dispatch.dispatching {
                throw TickgateError(.busy, "a dispatch of this engine is already running")
            }
            state.dispatch.dispatching = true
            state.dispatch.dispatcher = me
            poller.drain()
            let served = state.dispatch.passesRequested
            let now = state.now()
            state.fireDueTimers(at: now)
            var flushDue = false
            if let flush = state.flushDeadline, flush <= now {
                state.flushDeadline = nil
                flushDue = true
            }
            if !clock.isManual {
                let first = state.nextTimerTime
                if first != state.armed {
                    state.armed = first
                    poller.arm(at: first)
                }
            }
            // The queue is swapped for an empty one, not copied.
            let batch = state.dispatch.pending
            state.dispatch.pending = state.dispatch.spareQueue ?? EventQueue()
            state.dispatch.spareQueue = nil
            return (batch, served, now, flushDue)
        }
        // Group commit: a transaction left open would hold the store's
        // file for as long as the callbacks run (another engine on the file
        // waits that long; one a callback calls, for its whole timeout):
        // committed before any host code runs.
        if flushDue || !batch.isEmpty { commitOpenGroup(at: now) }

        // One lock round trip per callback: claim the next item, run it
        // unlocked, then clear the running marks and claim the next. The
        // item stays in `item` (moved out of the batch, never copied), with
        // its observer (an event) or its call (a gate's item).
        var delivered = 0
        var item: PendingEvent?
        var observer: Observer?
        var call: Call?
        var claimed = locked.withLock { state in Self.claimNext(state, batch, &item, &observer, &call) }
        while claimed {
            if let observer {
                if case .event(let event)? = item?.payload { observer.deliver(event) }
            } else if let call, let item {
                call.run(item)
            }
            delivered += 1
            // Destructors run while the item still counts as running, so a
            // thread waiting in unsubscribe, withdraw or close also waits
            // for them.
            let callReleases = call?.hasRelease == true
            let releases = locked.withLockWaiting { (state, held) -> [Observer]? in
                if !state.dispatch.deferredReleases.isEmpty || callReleases {
                    let releases = state.dispatch.deferredReleases
                    state.dispatch.deferredReleases.removeAll()
                    return releases
                }
                claimed = Self.finishItem(state, held, batch, &item, &observer, &call)
                return nil
            }
            if let releases {
                for observer in releases { observer.release() }
                if callReleases { call?.release() }
                claimed = locked.withLockWaiting { state, held in
                    Self.finishItem(state, held, batch, &item, &observer, &call)
                }
            }
        }

        let releases = locked.withLockWaiting { (state, held) -> [Observer] in
            // Keep the queue for the next pass unless it is huge.
            batch.removeAll()
            if batch.capacity <= 4096 { state.dispatch.spareQueue = batch }
            state.dispatch.dispatching = false
            state.dispatch.dispatcher = 0
            let releases = state.dispatch.deferredReleases
            state.dispatch.deferredReleases.removeAll()
            held.broadcast()
            return releases
        }
        for observer in releases { observer.release() }
        return (delivered, served)
    }

    /// Clears the running marks of the item delivered and claims the next.
    private static func finishItem(_ state: EngineState, _ held: Guarded<EngineState>.Held,
                                   _ batch: EventQueue, _ item: inout PendingEvent?,
                                   _ observer: inout Observer?, _ call: inout Call?) -> Bool {
        state.dispatch.runningSubscription = 0
        state.dispatch.runningEvent = nil
        state.gates.delivered()
        held.broadcast()
        return claimNext(state, batch, &item, &observer, &call)
    }

    /// Takes the next item of `batch` that may still be delivered into
    /// `item`, with its observer (an event) or its call (a gate's item),
    /// and marks it running; false when the batch is done.
    private static func claimNext(_ state: EngineState, _ batch: EventQueue, _ item: inout PendingEvent?,
                                  _ observer: inout Observer?, _ call: inout Call?) -> Bool {
        item = nil
        observer = nil
        // (Assigned only when set: destroying an empty `Call?` is not free.)
        if call != nil { call = nil }
        while let next = batch.take() {
            if state.closed { continue }
            // A countdown event (nearly every item) needs only its observer.
            if case .event = next.payload {
                observer = claimEvent(state, next)
                if observer == nil { continue }
            } else {
                guard let claimed = claim(state, next) else { continue }
                call = claimed
            }
            item = consume next
            return true
        }
        return false
    }

    /// A claimed delivery: the callback to run with the lock released, and
    /// what to release after it (a request's user data).
    enum Call {
        case gate(Observer)
        case record(Observer)
        case run(GateRequest, UInt64)
        case cancel(GateRequest, UInt64, CancelReason)

        /// Runs the callback for `item` (the item it was claimed from: the
        /// event stays where it is, nothing copies it).
        func run(_ item: borrowing PendingEvent) {
            switch self {
            case .gate(let observer):
                if case .gate(let event) = item.payload { observer.deliverGate(event) }
            case .record(let observer):
                if case .record(let record, _) = item.payload { observer.deliverRecord(record) }
            case .run(let request, let id): request.handlers.run(id)
            case .cancel(let request, let id, let reason): request.handlers.cancel(id, reason)
            }
        }

        var hasRelease: Bool {
            switch self {
            case .gate, .record: false
            case .run, .cancel: true
            }
        }

        func release() {
            switch self {
            case .gate, .record: break
            case .run(let request, _), .cancel(let request, _, _): request.handlers.release()
            }
        }
    }

    /// Checks that a countdown event may still be delivered and marks it
    /// running; returns its observer. Call with the lock held.
    private static func claimEvent(_ state: EngineState, _ item: borrowing PendingEvent) -> Observer? {
        guard case .event(let event) = item.payload,
              let observer = state.observer(of: event.subscription),
              state.isCurrent(event, instance: item.instance) else { return nil }
        state.dispatch.runningSubscription = event.subscription
        state.dispatch.runningEvent = (event.scope, event.subject)
        return observer
    }

    /// `claimEvent` for the other kinds of item.
    private static func claim(_ state: EngineState, _ item: borrowing PendingEvent) -> Call? {
        switch item.payload {
        case .event:
            return nil
        case .gate(let event):
            guard let subscription = state.observers.subscriptions[event.subscription] else { return nil }
            state.dispatch.runningSubscription = event.subscription
            return .gate(subscription.observer)
        case .record(_, let id):
            guard let subscription = state.observers.subscriptions[id] else { return nil }
            state.dispatch.runningSubscription = id
            return .record(subscription.observer)
        case .run(let id):
            guard let request = state.gates.deliver(id, .ready) else { return nil }
            return .run(request, id)
        case .cancel(let id, let reason):
            guard let request = state.gates.deliver(id, .cancelling) else { return nil }
            return .cancel(request, id, reason)
        }
    }
}
