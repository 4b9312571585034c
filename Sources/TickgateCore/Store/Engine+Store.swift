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
        // Both wall readings are non-negative (checked on load): no wrap.
        let left = stamp.wall - state.wallNow()
        return now.advanced(by: Span(nanoseconds: min(max(left, 0), length.nanoseconds)))
    }

    /// A stored past moment (a send) as an instant, never in the future.
    func moment(of stamp: Stamp, at now: Instant) -> Instant {
        if stamp.bootID == state.bootID { return min(Instant(nanoseconds: stamp.boot), now) }
        let ago = state.wallNow() - stamp.wall
        return now.advanced(by: Span(nanoseconds: -max(ago, 0)))
    }

    // MARK: Rows

    func row(_ countdown: Countdown, at now: Instant) -> StoredCountdown {
        StoredCountdown(key: countdown.key, phase: countdown.phase, duration: countdown.duration,
                        tickInterval: countdown.tickInterval, deadline: stamp(countdown.deadline, at: now))
    }

    /// The countdown a checked row describes, or nil if it has ended; lock
    /// held.
    func countdown(_ row: StoredCountdown, at now: Instant) -> Countdown? {
        let end = deadline(of: row.deadline, length: row.duration, at: now)
        guard end > now else { return nil }
        state.nextInstance &+= 1
        return Countdown(key: row.key, phase: row.phase, instance: state.nextInstance, deadline: end,
                         duration: row.duration, tickInterval: row.tickInterval)
    }

    func row(_ record: SendRecord, for key: CountdownKey, at now: Instant) -> StoredRecord {
        StoredRecord(key: key, consecutive: record.consecutive, hasSent: record.hasSent,
                     lastSend: record.lastSend.map { stamp($0, at: now) },
                     sends: record.sends.map { stamp($0, at: now) })
    }

    func record(_ row: StoredRecord, at now: Instant) -> SendRecord {
        SendRecord(sends: row.sends.map { moment(of: $0, at: now) }.sorted(),
                   consecutive: row.consecutive,
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
        // Both rows are read (and checked) before memory changes, so a
        // corrupt row fails the call with nothing changed.
        let storedRow = try store.countdown(key)
        let recordRow = try store.record(key)
        let stored = storedRow.flatMap { countdown($0, at: now) }
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
        if let recordRow {
            state.records[key] = record(recordRow, at: now)
        } else {
            state.records.removeValue(forKey: key)
        }
    }

    // MARK: Restore

    /// Loads everything the store holds into a new engine's state and drops
    /// countdowns that ended while it was closed. Every row is read and
    /// checked before anything is applied, so a corrupt row leaves the
    /// state empty; lock held.
    func restore() throws(TickgateError) {
        guard let store else { return }
        let now = state.now()
        let countdownRows: [StoredCountdown]
        let recordRows: [StoredRecord]
        let policyRows: [(KeyName, SendPolicy)]
        let titleRows: [(KeyName, TitleSet)]
        let sessionRows: [StoredSession]
        try store.begin()
        do {
            countdownRows = try store.countdowns()
            recordRows = try store.records()
            policyRows = try store.policies()
            titleRows = try store.titles()
            sessionRows = try store.sessions()
            for row in countdownRows where deadline(of: row.deadline, length: row.duration, at: now) <= now {
                try store.deleteCountdown(row.key)
            }
            try store.commit()
        } catch {
            store.rollback()
            throw error
        }
        for row in countdownRows {
            if let countdown = countdown(row, at: now) { state.insert(countdown, at: now) }
        }
        for row in recordRows { state.records[row.key] = record(row, at: now) }
        for (scope, policy) in policyRows { state.policies[scope] = policy }
        for (scope, titles) in titleRows { state.titles[scope] = titles }
        for session in sessionRows {
            var gate = Gate()
            if let expiry = session.expiry {
                let ttl = session.ttl > .zero ? session.ttl : Limits.maximumDuration
                let end = deadline(of: expiry, length: ttl, at: now)
                guard end > now else { continue }
                gate.expiry = end
                gate.expiryTimer = state.scheduleGateTimer(.session(session.realm), at: end)
            }
            gate.loggedIn = true
            state.gates[session.realm] = gate
        }
        armIfEarlier()
    }
}
