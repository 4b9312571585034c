extension EngineState {
    // MARK: Gate timers

    /// Ends sessions whose TTL passed and cancels requests that waited too long.
    func fireGateTimers(at now: Instant) {
        while let entry = gates.timerHeap.first, entry.time <= now {
            let timer = gates.timers[Int(entry.slot)]
            gates.cancelTimer(entry.slot)
            switch timer {
            case .session(let realm)?:
                guard gates.sessionTimerFired(realm) else { continue }
                endSession(realm, kind: .expired, at: now)
            case .request(let id)?:
                guard gates.timeOut(id), let realm = gates.requests[id]?.realm else { continue }
                dispatch.pending.append(PendingEvent(.cancel(id, .timedOut)))
                emitGate(.queueChanged, realm, at: now)
                gates.forgetIfIdle(realm)
            case nil:
                continue
            }
        }
    }

    // MARK: Sessions and queues

    /// Logs a realm out (by logout or expiry): requests that need login and
    /// have not run are cancelled with `.loggedOut`.
    func endSession(_ realm: KeyName, kind: GateEventKind, at now: Instant) {
        let ended = gates.logOut(realm)
        for id in ended.doomed { dispatch.pending.append(PendingEvent(.cancel(id, .loggedOut))) }
        if ended.wasLoggedIn { emitGate(kind, realm, at: now) }
        if ended.hadQueue { emitGate(.queueChanged, realm, at: now) }
        gates.forgetIfIdle(realm)
    }

    /// Logs a realm in until `expiry` (nil: no expiry): its queued requests
    /// run.
    func startSession(_ realm: KeyName, expiry: Instant?, at now: Instant) {
        gates.logIn(realm, expiry: expiry)
        let queued = gates.releaseQueue(realm, to: .ready)
        emitGate(.loggedIn, realm, at: now)
        for id in queued { dispatch.pending.append(PendingEvent(.run(id))) }
        if !queued.isEmpty { emitGate(.queueChanged, realm, at: now) }
    }

    /// Makes memory agree with the realm's session as the store holds it
    /// (another engine logged it in or out).
    func adopt(_ session: SessionState, realm: KeyName, at now: Instant) {
        let gate = gates.realms[realm]
        let live = gate?.isLive(at: now) ?? false
        if session.loggedIn {
            if !live || gate?.expiry != session.expiry { startSession(realm, expiry: session.expiry, at: now) }
        } else if live {
            endSession(realm, kind: .loggedOut, at: now)
        }
    }

    /// Queues a gate event for every observer of the realm.
    func emitGate(_ kind: GateEventKind, _ realm: KeyName, at now: Instant) {
        guard let ids = observers.realmObservers[realm] else { return }
        var event = gateEvent(kind, realm, at: now)
        for id in ids {
            event.subscription = id
            dispatch.pending.append(PendingEvent(.gate(event)))
        }
    }

    func gateEvent(_ kind: GateEventKind, _ realm: KeyName, at now: Instant,
                   subscription: SubscriptionID = 0) -> GateEvent {
        let gate = gates.realms[realm] ?? Gate()
        let live = gate.isLive(at: now)
        let remaining = live ? gate.expiry.map { $0.since(now) } ?? .zero : .zero
        return GateEvent(kind: kind, realm: realm.value, loggedIn: live, sessionRemaining: remaining,
                         queued: gate.queue.count, subscription: subscription)
    }
}
