import CTickgateShim

extension Engine {
    /// Host-thread delivery: the descriptor to poll for reading.
    public func descriptor() throws(TickgateError) -> Int32 {
        guard delivery == .hostThread else {
            throw TickgateError(.wrongMode, "the engine delivers on its own thread; it has no descriptor to poll")
        }
        try lock.withLock { () throws(TickgateError) in try checkOpen() }
        return poller.descriptor
    }

    /// Host-thread delivery: runs every due callback on the calling thread;
    /// returns how many ran.
    public func dispatch() throws(TickgateError) -> Int {
        guard delivery == .hostThread else {
            throw TickgateError(.wrongMode, "the engine delivers on its own thread; dispatch is for host-thread engines")
        }
        return try dispatchPass()
    }

    /// Manual clock: moves time forward. With engine-thread delivery, returns
    /// once the engine thread has delivered what became due (unless called
    /// from inside a callback).
    public func advance(by step: Span) throws(TickgateError) {
        guard clock == .manual else {
            throw TickgateError(.wrongMode, "the engine runs on the system clock; only a manual clock can be advanced")
        }
        guard step >= .zero, step <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "a clock step must be between 0 and 31536000000 ms")
        }
        let me = tgshim_thread_self()
        lock.lock()
        defer { lock.unlock() }
        try checkOpen()
        let now = state.now().advanced(by: step)
        guard now <= Limits.maximumManualTime else {
            throw TickgateError(.invalidDuration, "the manual clock cannot go past 100 years")
        }
        state.manualNow = now
        state.passesRequested &+= 1
        let target = state.passesRequested
        poller.wake()
        guard delivery == .engineThread, state.dispatcher != me else { return }
        while state.passesCompleted < target && !state.closed { lock.wait() }
    }

    /// One delivery pass: fire due timers, then run the queued callbacks one
    /// at a time with the lock released, skipping any whose subscription
    /// ended or whose countdown run was cancelled meanwhile.
    func dispatchPass() throws(TickgateError) -> Int {
        let me = tgshim_thread_self()
        lock.lock()
        if state.closed {
            lock.unlock()
            throw TickgateError(.closed, "the engine is closed")
        }
        if state.dispatching {
            lock.unlock()
            throw TickgateError(.busy, "a dispatch of this engine is already running")
        }
        state.dispatching = true
        state.dispatcher = me
        poller.drain()
        state.fireDueTimers(at: state.now())
        if state.manualNow == nil {
            let first = state.heap.first?.time
            if first != state.armed {
                state.armed = first
                poller.arm(at: first)
            }
        }
        let batch = state.pending
        state.pending.removeAll(keepingCapacity: true)
        lock.unlock()

        var delivered = 0
        for item in batch {
            lock.lock()
            guard !state.closed, state.isDeliverable(item),
                  let subscription = state.subscriptions[item.event.subscription] else {
                lock.unlock()
                continue
            }
            state.runningSubscription = item.event.subscription
            state.runningInstance = item.instance
            lock.unlock()

            subscription.observer.deliver(item.event)
            delivered += 1

            lock.lock()
            state.runningSubscription = 0
            state.runningInstance = 0
            let releases = state.deferredReleases
            state.deferredReleases.removeAll()
            lock.broadcast()
            lock.unlock()
            for observer in releases { observer.release() }
        }

        lock.lock()
        for item in batch where item.event.kind == .finished || item.event.kind == .sendFailed {
            if state.finishing[item.event.key] == item.instance {
                state.finishing.removeValue(forKey: item.event.key)
            }
        }
        state.dispatching = false
        state.dispatcher = 0
        let releases = state.deferredReleases
        state.deferredReleases.removeAll()
        lock.broadcast()
        lock.unlock()
        for observer in releases { observer.release() }
        return delivered
    }
}
