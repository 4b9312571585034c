/// How a send ended, as the host reports it.
public enum SendOutcome: Sendable {
    case succeeded
    case failed
}

extension Engine {
    /// Sets the send policy of a scope.
    public func setPolicy(_ policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        let policy = try policy.validated()
        try lock.withLock { () throws(TickgateError) in
            try checkOpen()
            try storeBegin()
            defer { storeAbandon() }
            try storeWrite { (store) throws(TickgateError) in try store.save(policy: policy, scope: scope) }
            state.policies[scope] = policy
        }
    }

    /// The send policy of a scope (the default if none was set).
    public func policy(scope: KeyName) throws(TickgateError) -> SendPolicy {
        try lock.withLock { () throws(TickgateError) in
            try checkOpen()
            return state.policy(of: scope)
        }
    }

    /// Sets the title templates of a scope.
    public func setTitles(_ titles: TitleSet, scope: KeyName) throws(TickgateError) {
        try lock.withLock { () throws(TickgateError) in
            try checkOpen()
            try storeBegin()
            defer { storeAbandon() }
            try storeWrite { (store) throws(TickgateError) in try store.save(titles: titles, scope: scope) }
            state.titles[scope] = titles
        }
    }

    /// The key's button now.
    public func button(_ key: CountdownKey) throws(TickgateError) -> Button {
        try lock.withLock { () throws(TickgateError) in
            try checkOpen()
            return state.button(key, at: state.now())
        }
    }

    /// The user tapped "Get code": grants a send ticket (state SENDING), or
    /// throws `.coolingDown`, `.inFlight` or `.locked` with the wait.
    public func sendBegin(_ key: CountdownKey) throws(TickgateError) -> UInt64 {
        lock.lock()
        defer { endChange() }
        let now = try beginChange()
        try reconcile(key, at: now)
        if let running = state.running(key, at: now) {
            throw Self.busyError(running, at: now)
        }
        let policy = state.policy(of: key.scope)
        if var record = state.records[key] {
            record.prune(at: now, policy: policy)
            state.records[key] = record
            if let free = record.windowFrees(at: now, policy: policy) {
                // The window is full (its lock was cancelled): refused, and
                // like every refusal it changes nothing (no new lock starts).
                let wait = free.since(now)
                throw TickgateError(.locked,
                    "\(key.description) reached its cap of sends: the window frees a send in \(wait.millisecondsRoundedUp) ms",
                    remaining: wait)
            }
        }
        state.nextTicket &+= 1
        let ticket = state.nextTicket
        state.tickets[ticket] = key
        state.nextInstance &+= 1
        let countdown = Countdown(key: key, phase: .sending, ticket: ticket,
                                  instance: state.nextInstance,
                                  deadline: now.advanced(by: policy.ticketTimeout),
                                  duration: policy.ticketTimeout, tickInterval: defaultTickInterval)
        try storeWrite { (store) throws(TickgateError) in try store.save(row(countdown, at: now)) }
        replace(with: countdown, at: now)
        if state.emit(.sending, key, instance: countdown.instance, remaining: .zero,
                      duration: .zero, state: .sending) {
            poller.wake()
        }
        return ticket
    }

    /// Closes a send ticket. On success the cooldown starts (the policy's
    /// next step, the server's retry-after if longer, or the time until the
    /// window frees a send if longer still) and its length is returned; on
    /// failure the key is free at once and zero is returned.
    public func sendEnd(_ ticket: UInt64, _ outcome: SendOutcome,
                        serverRetryAfter: Span = .zero) throws(TickgateError) -> Span {
        guard serverRetryAfter >= .zero, serverRetryAfter <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "server retry-after is outside 0 ... 365 days")
        }
        lock.lock()
        defer { endChange() }
        let now = try beginChange()
        if let key = state.tickets[ticket] { try reconcile(key, at: now) }
        guard let key = state.tickets[ticket], let slot = state.table.find(key),
              let sending = state.countdown(slot), sending.ticket == ticket else {
            switch state.endedTickets[ticket] {
            case .expired?:
                throw TickgateError(.expired, "ticket \(ticket) expired before it was ended; its key was freed then")
            case .ended?:
                throw TickgateError(.notFound, "ticket \(ticket) was already ended")
            case .cancelled?:
                throw TickgateError(.notFound, "ticket \(ticket) was cancelled with its key's countdown")
            case nil:
                throw TickgateError(.notFound, "no send ticket \(ticket)")
            }
        }
        if sending.deadline <= now {
            // Its timeout passed; the timer has not fired yet, but the
            // ticket is expired all the same.
            state.remove(slot: slot)
            state.recordEnd(of: ticket, .expired)
            if state.emit(.sendFailed, key, instance: 0, remaining: .zero, duration: .zero,
                          state: state.restingState(key)) {
                poller.wake()
            }
            throw TickgateError(.expired, "ticket \(ticket) expired before it was ended; its key was freed then")
        }
        switch outcome {
        case .failed:
            try storeWrite { (store) throws(TickgateError) in
                try store.deleteCountdown(key)
            }
            state.recordEnd(of: ticket, .ended)
            state.remove(slot: slot)
            if state.emit(.sendFailed, key, instance: 0, remaining: .zero, duration: .zero,
                          state: state.restingState(key)) {
                poller.wake()
            }
            waitUntilNotRunning([key])
            return .zero
        case .succeeded:
            let policy = state.policy(of: key.scope)
            var record = state.records[key] ?? SendRecord()
            if let last = record.lastSend, policy.quietReset > .zero,
               now.since(last) >= policy.quietReset {
                record.consecutive = 0
            }
            record.prune(at: now, policy: policy)
            record.countSend()
            record.lastSend = now
            record.hasSent = true
            if policy.windowMaximumSends > 0 { record.sends.append(now) }
            var until = now.advanced(by: max(policy.cooldown(afterConsecutive: record.consecutive),
                                             serverRetryAfter))
            var phase = Phase.cooling
            if let free = record.windowFrees(at: now, policy: policy), free > until {
                until = free
                phase = .locked
            }
            let countdown = makeCountdown(key, phase: phase, until: until, at: now)
            try storeWrite { (store) throws(TickgateError) in
                try store.save(row(record, for: key, at: now))
                try store.save(row(countdown, at: now))
            }
            state.recordEnd(of: ticket, .ended)
            state.records[key] = record
            begin(countdown, at: now)
            return countdown.duration
        }
    }

    /// The host verified the code: escalation restarts, a cooldown is
    /// cancelled and the key is IDLE (a lock of the window stays).
    public func verified(_ key: CountdownKey) throws(TickgateError) {
        lock.lock()
        defer { endChange() }
        let now = try beginChange()
        try reconcile(key, at: now)
        let cooling = state.running(key, at: now).flatMap { $0.phase == .cooling ? $0 : nil }
        var record = state.records[key]
        record?.prune(at: now, policy: state.policy(of: key.scope))
        record?.consecutive = 0
        record?.hasSent = false
        record?.lastSend = nil
        if record?.sends.isEmpty == true { record = nil }
        try storeWrite { (store) throws(TickgateError) in
            if cooling != nil { try store.deleteCountdown(key) }
            if let record {
                try store.save(row(record, for: key, at: now))
            } else {
                try store.deleteRecord(key)
            }
        }
        var cancelled: Set<CountdownKey> = []
        if cooling != nil, let slot = state.table.find(key) {
            state.remove(slot: slot)
            cancelled.insert(key)
        }
        state.records[key] = record
        let button = state.button(key, at: now)
        if state.emit(.reset, key, instance: 0, remaining: button.remaining,
                      duration: state.counting(key, at: now)?.duration ?? .zero,
                      state: button.state) {
            poller.wake()
        }
        waitUntilNotRunning(cancelled)
    }

    /// A cooldown or lock on `key` until `deadline`; lock held.
    func makeCountdown(_ key: CountdownKey, phase: Phase, until deadline: Instant,
                       at now: Instant) -> Countdown {
        state.nextInstance &+= 1
        return Countdown(key: key, phase: phase, instance: state.nextInstance,
                         deadline: deadline, duration: deadline.since(now),
                         tickInterval: defaultTickInterval)
    }

    /// Puts a cooldown or lock in place and tells the key's observers; lock
    /// held.
    func begin(_ countdown: Countdown, at now: Instant) {
        replace(with: countdown, at: now)
        if state.emit(.started, countdown.key, instance: countdown.instance,
                      remaining: countdown.duration, duration: countdown.duration,
                      state: countdown.phase.buttonState) {
            poller.wake()
        }
    }
}
