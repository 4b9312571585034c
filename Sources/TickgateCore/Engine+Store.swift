import CTickgateShim

// The durable store: write-through of every change, restore at open, and
// reconciling with other processes that share the file.

extension Engine {
    // MARK: Moments across restarts

    /// The stamp of an instant of this engine's clock; lock held.
    func stamp(_ instant: Instant, at now: Instant) -> Stamp {
        Stamp(bootID: state.bootID, boot: instant.nanoseconds,
              wall: state.wallNow() &+ instant.since(now).nanoseconds)
    }

    /// A stored deadline as an instant of this engine's clock: the boot
    /// clock within the same boot; across a reboot the wall clock, but
    /// never more than `length` from now (a clock set backwards cannot
    /// extend a countdown); lock held.
    func deadline(of stamp: Stamp, length: Span, at now: Instant) -> Instant {
        let latest = now.advanced(by: length)
        if stamp.bootID == state.bootID { return min(Instant(nanoseconds: stamp.boot), latest) }
        let left = stamp.wall &- state.wallNow()
        return min(now.advanced(by: Span(nanoseconds: max(left, 0))), latest)
    }

    /// A stored past moment (a send) as an instant, never in the future.
    func moment(of stamp: Stamp, at now: Instant) -> Instant {
        if stamp.bootID == state.bootID { return min(Instant(nanoseconds: stamp.boot), now) }
        let ago = state.wallNow() &- stamp.wall
        return now.advanced(by: Span(nanoseconds: -max(ago, 0)))
    }

    // MARK: Rows

    static func phaseCode(_ phase: Phase) -> Int64 {
        switch phase {
        case .sending: 0
        case .cooling: 1
        case .locked: 2
        }
    }

    func row(_ countdown: Countdown, at now: Instant) -> StoredCountdown {
        StoredCountdown(scope: countdown.key.scope.value, subject: countdown.key.subject.value,
                        phase: Self.phaseCode(countdown.phase),
                        duration: countdown.duration.nanoseconds,
                        tickInterval: countdown.tickInterval.nanoseconds,
                        deadline: stamp(countdown.deadline, at: now))
    }

    /// The countdown a row describes, or nil if it has ended; lock held.
    func countdown(_ row: StoredCountdown, at now: Instant) -> Countdown? {
        guard let scope = try? KeyName(row.scope, role: "scope"),
              let subject = try? KeyName(row.subject, role: "subject"),
              row.duration > 0, row.duration <= Limits.maximumDuration.nanoseconds else { return nil }
        let phase: Phase
        switch row.phase {
        case 0: phase = .sending
        case 1: phase = .cooling
        case 2: phase = .locked
        default: return nil
        }
        let interval = Span(nanoseconds: row.tickInterval)
        let tick = (try? interval.validatedTickInterval()) ?? defaultTickInterval
        let length = Span(nanoseconds: row.duration)
        let end = deadline(of: row.deadline, length: length, at: now)
        guard end > now else { return nil }
        state.nextInstance &+= 1
        return Countdown(key: CountdownKey(scope: scope, subject: subject), phase: phase,
                         instance: state.nextInstance, deadline: end, duration: length,
                         tickInterval: tick)
    }

    func row(_ record: SendRecord, for key: CountdownKey, at now: Instant) -> StoredRecord {
        StoredRecord(scope: key.scope.value, subject: key.subject.value, consecutive: Int64(record.consecutive),
                     hasSent: record.hasSent, lastSend: record.lastSend.map { stamp($0, at: now) },
                     sends: record.sends.map { stamp($0, at: now) })
    }

    func record(_ row: StoredRecord, at now: Instant) -> SendRecord {
        SendRecord(sends: row.sends.map { moment(of: $0, at: now) }.sorted(),
                   consecutive: Int(clamping: max(row.consecutive, 0)),
                   lastSend: row.lastSend.map { moment(of: $0, at: now) }, hasSent: row.hasSent)
    }

    // MARK: Transactions

    /// Starts one change of the engine's state: checks the engine is open,
    /// opens its store transaction, and reads the clock. Call with the lock
    /// held, and pair with `endChange()` in a defer.
    func beginChange() throws(TickgateError) -> Instant {
        try checkOpen()
        try storeBegin()
        return state.now()
    }

    /// Ends a change: drops its store transaction if it wrote nothing, and
    /// releases the lock.
    func endChange() {
        storeAbandon()
        lock.unlock()
    }

    /// Starts a store transaction for one operation (group commit: joins
    /// the open one). Pair with `storeAbandon()` in a defer; lock held.
    func storeBegin() throws(TickgateError) {
        guard let store else { return }
        if let failure = storeFailure { throw failure }
        try store.begin()
    }

    /// Writes one operation's changes: committed before this returns, or
    /// (group commit) kept in the open transaction until the flush. On a
    /// failure nothing of the operation is kept; lock held.
    func storeWrite(_ writes: (Store) throws(TickgateError) -> Void) throws(TickgateError) {
        guard let store else { return }
        if commitDelay == .zero {
            do {
                try store.begin()
                try writes(store)
                try store.commit()
            } catch {
                store.rollback()
                throw error
            }
        } else {
            try store.begin()
            try store.savepoint()
            do {
                try writes(store)
                try store.release()
            } catch {
                store.rollbackToSavepoint()
                throw error
            }
            if state.flushDeadline == nil {
                state.flushDeadline = state.now().advanced(by: commitDelay)
                armIfEarlier()
            }
        }
    }

    /// Ends an operation's transaction if it wrote nothing; lock held.
    func storeAbandon() {
        guard let store, commitDelay == .zero else { return }
        store.rollback()
    }

    /// Group commit: commits the open transaction; lock held. A failure is
    /// kept and reported by every later change.
    func flushStore() {
        guard let store, store.inTransaction else {
            state.flushDeadline = nil
            return
        }
        state.flushDeadline = nil
        do {
            try store.commit()
        } catch {
            storeFailure = TickgateError(.storeIO,
                "the store could not commit changes made in the last \(commitDelay.millisecondsRoundedUp) ms: \(error.message)")
        }
    }

    // MARK: Reconciling with other processes

    /// Makes memory agree with the store for one key, inside the
    /// operation's transaction, so that processes sharing a store decide
    /// on the same cooldowns; lock held.
    func reconcile(_ key: CountdownKey, at now: Instant) throws(TickgateError) {
        guard let store else { return }
        let stored = try store.countdown(scope: key.scope.value, subject: key.subject.value)
            .flatMap { countdown($0, at: now) }
        let memory = state.running(key, at: now)
        switch (memory, stored) {
        case let (memory?, nil):
            // Another process ended it.
            _ = state.cancel(key, at: now)
            if state.emit(.cancelled, key, instance: 0, remaining: .zero, duration: memory.duration,
                          state: state.restingState(key)) {
                poller.wake()
            }
        case let (memory, stored?) where memory == nil || memory?.deadline != stored.deadline
            || memory?.phase != stored.phase:
            // Another process started or changed it.
            state.insert(stored, at: now)
            armIfEarlier()
            let kind: EventKind = stored.phase == .sending ? .sending : .started
            if state.emit(kind, key, instance: stored.instance,
                          remaining: stored.phase == .sending ? .zero : stored.deadline.since(now),
                          duration: stored.duration, state: stored.phase.buttonState) {
                poller.wake()
            }
        default:
            break
        }
        if let row = try store.record(scope: key.scope.value, subject: key.subject.value) {
            state.records[key] = record(row, at: now)
        } else {
            state.records.removeValue(forKey: key)
        }
    }

    // MARK: Restore

    /// Loads everything the store holds into a new engine's state and drops
    /// countdowns that ended while it was closed; lock held.
    func restore() throws(TickgateError) {
        guard let store else { return }
        let now = state.now()
        try store.begin()
        do {
            for row in try store.countdowns() {
                if let countdown = countdown(row, at: now) {
                    state.insert(countdown, at: now)
                } else {
                    try store.deleteCountdown(scope: row.scope, subject: row.subject)
                }
            }
            for row in try store.records() {
                guard let scope = try? KeyName(row.scope, role: "scope"),
                      let subject = try? KeyName(row.subject, role: "subject") else { continue }
                state.records[CountdownKey(scope: scope, subject: subject)] = record(row, at: now)
            }
            for (scope, policy) in try store.policies() {
                if let name = try? KeyName(scope, role: "scope") { state.policies[name] = policy }
            }
            for (scope, titles) in try store.titles() {
                if let name = try? KeyName(scope, role: "scope") { state.titles[name] = titles }
            }
            for session in try store.sessions() {
                guard let realm = try? KeyName(session.realm, role: "realm") else { continue }
                var gate = Gate()
                if let expiry = session.expiry {
                    let ttl = session.ttl > 0 ? Span(nanoseconds: min(session.ttl, Limits.maximumDuration.nanoseconds))
                        : Limits.maximumDuration
                    let end = deadline(of: expiry, length: ttl, at: now)
                    guard end > now else { continue }
                    gate.expiry = end
                    gate.expiryTimer = state.scheduleGateTimer(.session(realm), at: end)
                }
                gate.loggedIn = true
                state.gates[realm] = gate
            }
            try store.commit()
        } catch {
            store.rollback()
            throw error
        }
        armIfEarlier()
    }
}
