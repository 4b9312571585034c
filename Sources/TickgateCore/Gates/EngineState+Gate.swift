extension EngineState {
    // MARK: Gate timers

    /// Ends sessions whose TTL passed and cancels requests that waited too long.
    func fireGateTimers(at now: Instant) {
        while let entry = gates.timerHeap.first, entry.time <= now {
            let timer = gates.timers[Int(entry.slot)]
            gates.cancelTimer(entry.slot)
            switch timer {
            case .session(let realm)?:
                guard var gate = gates.realms[realm], gate.loggedIn else { continue }
                gate.expiryTimer = nil
                gates.realms[realm] = gate
                endSession(realm, kind: .expired, at: now)
            case .request(let id)?:
                guard var request = gates.requests[id], request.phase == .queued else { continue }
                request.timeoutTimer = nil
                request.phase = .cancelling
                gates.requests[id] = request
                if var gate = gates.realms[request.realm] {
                    gate.queue.removeAll { $0 == id }
                    // Nobody answered the login screen: the next request
                    // that queues asks for it again.
                    if gate.queue.isEmpty { gate.presenting = false }
                    gates.realms[request.realm] = gate
                }
                dispatch.pending.append(PendingEvent(.cancel(id, .timedOut)))
                emitGate(.queueChanged, request.realm, at: now)
            case nil:
                continue
            }
        }
    }

    // MARK: Sessions and queues

    /// Logs a realm out (by logout or expiry): requests that need login and
    /// have not run are cancelled with `.loggedOut`.
    func endSession(_ realm: KeyName, kind: GateEventKind, at now: Instant) {
        var gate = gates.realms[realm] ?? Gate()
        let wasLoggedIn = gate.loggedIn
        gate.loggedIn = false
        gate.expiry = nil
        gates.cancelTimer(gate.expiryTimer)
        gate.expiryTimer = nil
        let hadQueue = !gate.queue.isEmpty
        gate.queue.removeAll()
        gate.presenting = false
        gates.realms[realm] = gate
        let doomed = gates.requests.filter {
            $0.value.realm == realm && $0.value.needsLogin && $0.value.phase != .cancelling
        }.keys.sorted()
        for id in doomed {
            guard var request = gates.requests[id] else { continue }
            gates.cancelTimer(request.timeoutTimer)
            request.timeoutTimer = nil
            request.phase = .cancelling
            gates.requests[id] = request
            dispatch.pending.append(PendingEvent(.cancel(id, .loggedOut)))
        }
        if wasLoggedIn { emitGate(kind, realm, at: now) }
        if hadQueue { emitGate(.queueChanged, realm, at: now) }
        forgetIfIdle(realm)
    }

    /// Logs a realm in until `expiry` (nil: no expiry): its queued requests
    /// run.
    func startSession(_ realm: KeyName, expiry: Instant?, at now: Instant) {
        var gate = gates.realms[realm] ?? Gate()
        gate.loggedIn = true
        gates.cancelTimer(gate.expiryTimer)
        gate.expiry = expiry
        gate.expiryTimer = expiry.map { gates.scheduleTimer(.session(realm), at: $0) }
        gate.presenting = false
        let queued = gate.queue
        gate.queue.removeAll()
        gates.realms[realm] = gate
        emitGate(.loggedIn, realm, at: now)
        for id in queued {
            guard var request = gates.requests[id] else { continue }
            gates.cancelTimer(request.timeoutTimer)
            request.timeoutTimer = nil
            request.phase = .ready
            gates.requests[id] = request
            dispatch.pending.append(PendingEvent(.run(id)))
        }
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

    /// Drops a realm that holds nothing (no session, nothing queued, no
    /// setting of its own), so ended sessions leave no memory behind.
    func forgetIfIdle(_ realm: KeyName) {
        guard let gate = gates.realms[realm], !gate.loggedIn, gate.queue.isEmpty, !gate.presenting,
              gate.requestTimeout == Gate().requestTimeout else { return }
        gates.realms.removeValue(forKey: realm)
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
