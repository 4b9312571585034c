import CTickgateShim

extension Engine {
    /// Asks to run an action that may need login; see `tg_gate_require`.
    public func require(realm: KeyName, needsLogin: Bool, coalesceKey: KeyName? = nil,
                        _ handlers: GateRequestHandlers) throws(TickgateError)
        -> (request: UInt64, result: RequireResult) {
        // On a shared store the session is the store's: a login or logout
        // through any engine decides here at once. A queued request waits
        // for the store's notices (a login elsewhere runs it).
        if needsLogin {
            do throws(TickgateError) {
                try syncSession(realm)
            } catch {
                // Refused: the action never runs, and its user data goes.
                handlers.release()
                throw error
            }
            watchStore()
        }
        let answer = try locked.withLock { (state) throws(TickgateError) -> (request: UInt64, result: RequireResult) in
            try state.checkOpen()
            let now = state.now()
            let wasEmpty = state.dispatch.pending.isEmpty
            let live = state.gates.realms[realm]?.isLive(at: now) ?? false
            if let key = coalesceKey?.value, needsLogin, !live,
               let existing = state.gates.queued(realm, coalesceKey: key) {
                return (existing, .coalesced)
            }
            let id: UInt64
            let result: RequireResult
            if !needsLogin || live {
                id = state.gates.runNow(realm: realm, needsLogin: needsLogin, coalesceKey: coalesceKey?.value,
                                        handlers)
                state.dispatch.pending.append(PendingEvent(.run(id)))
                result = .runsNow
            } else {
                let present: Bool
                (id, present) = state.gates.enqueue(realm: realm, coalesceKey: coalesceKey?.value, handlers, at: now)
                if present { state.emitGate(.loginRequired, realm, at: now) }
                state.emitGate(.queueChanged, realm, at: now)
                state.armIfEarlier()
                result = .queued
            }
            if wasEmpty && !state.dispatch.pending.isEmpty { poller.wake() }
            return (id, result)
        }
        // A coalesced request is not kept: its user data goes now.
        if answer.result == .coalesced { handlers.release() }
        return answer
    }

    /// Withdraws a request that has not run; see `tg_gate_withdraw`.
    public func withdraw(_ id: UInt64) throws(TickgateError) {
        let me = tgshim_thread_self()
        let request = try locked.withLockWaiting { (state, held) throws(TickgateError) -> GateRequest in
            try state.checkOpen()
            guard let request = state.gates.withdraw(id) else {
                // It may be running on another thread: return once it is done.
                while id != 0 && state.gates.runningRequest == id && state.dispatch.dispatcher != me { held.wait() }
                throw TickgateError(.notFound, "request \(id) already ran, was cancelled, or is unknown")
            }
            if request.phase == .queued {
                let wasEmpty = state.dispatch.pending.isEmpty
                state.emitGate(.queueChanged, request.realm, at: state.now())
                if wasEmpty && !state.dispatch.pending.isEmpty { poller.wake() }
            }
            return request
        }
        request.handlers.release()
    }

    /// The user logged in; see `tg_gate_login_succeeded`.
    public func loginSucceeded(realm: KeyName, sessionTTL: Span?) throws(TickgateError) {
        if let ttl = sessionTTL {
            guard ttl.nanoseconds > 0, ttl <= Limits.maximumDuration else {
                throw TickgateError(.invalidDuration, "session TTL is outside 1 ms ... 365 days")
            }
        }
        var expiry = sessionTTL.map { clock.now().advanced(by: $0) }
        try changeGate(.realm(realm), { (store) throws(TickgateError) in
            // A store on its own clock sets the end on it.
            expiry = try store.saveSession(realm: realm, loggedIn: true, expiry: expiry, ttl: sessionTTL)
        }) { (state, now) throws(TickgateError) in
            state.startSession(realm, expiry: expiry, at: now)
        }
    }

    /// Makes memory agree with the realm's session as a read-through store
    /// holds it (another engine may have logged it in or out).
    func syncSession(_ realm: KeyName) throws(TickgateError) {
        guard store.readsThrough else { return }
        try lanes.with(.realm(realm)) { () throws(TickgateError) in
            try locked.withLock { (state) throws(TickgateError) in try state.checkOpen() }
            guard let session = try store.session(realm: realm) else { return }
            try locked.withLock { (state) throws(TickgateError) in
                try state.checkOpen()
                let wasEmpty = state.dispatch.pending.isEmpty
                state.adopt(session, realm: realm, at: state.now())
                state.gates.forgetIfIdle(realm)
                state.armIfEarlier()
                if wasEmpty && !state.dispatch.pending.isEmpty { poller.wake() }
            }
        }
    }

    /// The user abandoned the login screen; see `tg_gate_login_cancelled`.
    public func loginCancelled(realm: KeyName) throws(TickgateError) {
        try changeGate(nil, nil) { (state, now) throws(TickgateError) in
            let queued = state.gates.releaseQueue(realm, to: .cancelling)
            for id in queued { state.dispatch.pending.append(PendingEvent(.cancel(id, .loginCancelled))) }
            if !queued.isEmpty { state.emitGate(.queueChanged, realm, at: now) }
            state.gates.forgetIfIdle(realm)
        }
    }

    /// The user logged out; see `tg_gate_logout`.
    public func logout(realm: KeyName) throws(TickgateError) {
        try changeGate(.realm(realm), { (store) throws(TickgateError) in
            _ = try store.saveSession(realm: realm, loggedIn: false, expiry: nil, ttl: nil)
        }) { (state, now) throws(TickgateError) in
            state.endSession(realm, kind: .loggedOut, at: now)
        }
    }

    /// Whether the realm's session is live, and the time to its expiry
    /// (zero for none).
    public func session(realm: KeyName) throws(TickgateError) -> (loggedIn: Bool, remaining: Span) {
        try syncSession(realm)
        return try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            let event = state.gateEvent(.state, realm, at: state.now())
            return (event.loggedIn, event.sessionRemaining)
        }
    }

    /// How long requests queued from now on wait for login.
    public func setRequestTimeout(realm: KeyName, _ timeout: Span) throws(TickgateError) {
        guard timeout.nanoseconds > 0, timeout <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "request timeout is outside 1 ms ... 365 days")
        }
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            state.gates.setRequestTimeout(realm, timeout)
        }
    }

    /// Runs a gate change: its store write (if any) with no engine lock
    /// held, then `body` under the lock; wakes the dispatcher if it queued
    /// anything.
    private func changeGate(_ lane: Lane?, _ storeWrite: ((Store) throws(TickgateError) -> Void)?,
                            _ body: (EngineState, Instant) throws(TickgateError) -> Void) throws(TickgateError) {
        func change(_ state: EngineState) throws(TickgateError) {
            let wasEmpty = state.dispatch.pending.isEmpty
            try body(state, state.now())
            state.armIfEarlier()
            if wasEmpty && !state.dispatch.pending.isEmpty { poller.wake() }
        }
        guard let storeWrite else {
            // Nothing to store (a cancelled login): memory only.
            return try locked.withLock { (state) throws(TickgateError) in
                try state.checkOpen()
                try change(state)
            }
        }
        try write(lane, storeWrite) { (state, _) throws(TickgateError) in try change(state) }
    }
}
