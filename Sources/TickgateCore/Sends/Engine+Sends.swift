/// How a send ended, as the host reports it.
public enum SendOutcome: Sendable {
    case succeeded
    case failed
}

extension Engine {
    /// Sets the send policy of a scope.
    public func setPolicy(_ policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        let policy = try policy.validated()
        try write(.scope(scope), { (store) throws(TickgateError) in try store.save(policy: policy, scope: scope) }) { state, _ in
            state.sends.setPolicy(policy, scope: scope)
            state.refusals.dropAll()
        }
    }

    /// The send policy of a scope (the default if none was set).
    public func policy(scope: KeyName) throws(TickgateError) -> SendPolicy {
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            return state.policy(of: scope)
        }
    }

    /// Sets the title templates of a scope.
    public func setTitles(_ titles: TitleSet, scope: KeyName) throws(TickgateError) {
        try write(.scope(scope), { (store) throws(TickgateError) in try store.save(titles: titles, scope: scope) }) { state, _ in
            state.setTitles(titles, scope: scope)
        }
    }

    /// The key's button now.
    public func button(_ key: CountdownKey) throws(TickgateError) -> Button {
        try refresh(key)
        return try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            return state.button(key, at: state.now())
        }
    }

    /// The user tapped "Get code": grants a send ticket (state SENDING), or
    /// throws `.coolingDown`, `.inFlight` or `.locked` with the wait. A
    /// send that names budget keys is granted only if each has room, and
    /// is charged to all of them (a refusal by a budget carries its index
    /// in `budgets`).
    /// `screened`: how the scope's guard sees it; `answered`: told the
    /// store's guard answer of a send screened in the step
    /// (`Screening.inStep`), refused or granted.
    func decideSendBegin(_ key: CountdownKey, budgets: [BudgetKey] = [], screened: Screening = .unscreened,
                         answered: (DecisionResult) -> Void = { _ in }) throws(TickgateError) -> UInt64 {
        var ticket: UInt64 = 0
        let rulesInStore = store.holdsRules
        return try decide(key, refuse: { state in
            // The store refuses a budget it does not hold before anything
            // else: only a send naming budgets this engine knows of.
            if !budgets.isEmpty && budgets.contains(where: { state.budgets.budgets[$0.budget] == nil }) { return nil }
            return state.refusals.refuseSend(key, budgets: budgets, at: state.now())
        }, { (state) throws(TickgateError) in
            ticket = state.sends.takeTicketNumber()
            return .sendBegin(policy: state.policy(of: key.scope), tickInterval: defaultTickInterval, ticket: ticket,
                              screening: screened)
        }, budgets: { (state) throws(TickgateError) in
            budgets.isEmpty ? [] : try state.budgets.checked(budgets, definedHere: !rulesInStore)
        }) { (state, _, result) throws(TickgateError) -> UInt64 in
            if case .inStep = screened { answered(result) }
            if let refusal = result.refusal { throw refusal }
            guard var countdown = result.after.countdown else {
                throw TickgateError(.storeCorrupt, "the store granted a send for \(key.description) without a ticket")
            }
            state.nextInstance &+= 1
            countdown.instance = state.nextInstance
            countdown.ticket = ticket
            let slot = state.replace(with: countdown, at: result.now, known: result.knownSlot)
            state.sends.open(ticket, place: state.place(of: slot), charged: budgets, at: result.now,
                             localKey: result.localOnly ? key : nil)
            let queued = state.dispatch.pending.count
            if state.emit(.sending, key, instance: countdown.instance, remaining: .zero,
                          duration: .zero, state: .sending) {
                poller.wake()
            }
            if result.localOnly { state.dispatch.pending.markLocalOnly(from: queued) }
            return ticket
        }
    }

    /// Closes a send ticket. On success the cooldown starts (the policy's
    /// next step, the server's retry-after if longer, or the time until the
    /// window frees a send if longer still) and its length is returned; on
    /// failure the key is free at once and zero is returned.
    /// `follow`: the send's guarded code, followed for its outcome in the
    /// same step by a store that screens in its decisions; `followed` is
    /// told what that step decided (nil: not followed there).
    func decideSendEnd(_ ticket: UInt64, _ outcome: SendOutcome, serverRetryAfter: Span = .zero,
                       follow: OutcomeFollow? = nil,
                       followed: ([DecidedCode]?) -> Void = { _ in }) throws(TickgateError) -> Span {
        guard serverRetryAfter >= .zero, serverRetryAfter <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "server retry-after is outside 0 ... 365 days")
        }
        var key: CountdownKey?
        // A failed send's key: its callbacks running now are waited for
        // once its lane is free (`waitForCallbacks`).
        var freed: Set<CountdownKey> = []
        defer { waitForCallbacks(of: freed) }
        let local = locked.withLock { state in state.sends.localTickets.contains(ticket) }
        return try decide(resolving: { (state) throws(TickgateError) -> CountdownKey in
            guard let slot = state.slot(ofTicket: ticket) else { throw state.endedTicketError(ticket) }
            let found = state.table.key(slot)
            key = found
            return found
        }, { (state) throws(TickgateError) -> KeyDecision in
            // The ticket's run, as memory holds it.
            guard let key, let slot = state.slot(ofTicket: ticket), state.table.find(key) == slot,
                  let sending = state.countdown(slot, key: key) else {
                throw state.endedTicketError(ticket)
            }
            // Only a failed send touches its budgets (it returns the charge).
            return .sendEnd(ticket: ticket, ticketDeadline: sending.deadline, outcome: outcome,
                            serverRetryAfter: serverRetryAfter,
                            policy: state.policy(of: key.scope), tickInterval: defaultTickInterval,
                            chargedAt: outcome == .failed ? state.sends.charges[ticket]?.at : nil, follow: follow)
        }, budgets: { (state) throws(TickgateError) in
            guard outcome == .failed, let charge = state.sends.charges[ticket] else { return [] }
            return try state.budgets.rows(charge.budgets)
        }, inMemory: local) { (state, _, result) throws(TickgateError) -> Span in
            guard let key else { throw state.endedTicketError(ticket) }
            if let refusal = result.refusal {
                guard refusal.status == .expired else {
                    // Another process ended or replaced the run: the
                    // reconcile before this recorded how.
                    throw state.sends.tickets[ticket] == nil ? state.endedTicketError(ticket) : refusal
                }
                // Its timeout passed; the timer has not fired yet, but the
                // ticket is expired all the same.
                if let slot = state.table.find(key), let run = state.countdown(slot), run.ticket == ticket {
                    state.remove(slot: slot)
                    state.sends.recordEnd(of: ticket, .expired)
                    if state.emit(.sendFailed, key, instance: 0, remaining: .zero, duration: .zero,
                                  state: state.restingState(key)) {
                        poller.wake()
                    }
                }
                throw TickgateError(.expired, "ticket \(ticket) expired before it was ended; its key was freed then")
            }
            guard var countdown = result.after.countdown else {
                // Failed: the key is free at once, and its charges (if it
                // had any) went back (its own notice is not heard here).
                if state.sends.charges[ticket] != nil { state.refusals.noticedBudgets() }
                state.sends.recordEnd(of: ticket, .failed)
                if let slot = state.table.find(key) { state.remove(slot: slot) }
                if state.emit(.sendFailed, key, instance: 0, remaining: .zero, duration: .zero,
                              state: state.restingState(key)) {
                    poller.wake()
                }
                freed = [key]
                return .zero
            }
            state.sends.recordEnd(of: ticket, .succeeded)
            state.sends.setRecord(result.after.record, for: key)
            followed(result.followed)
            if result.localOnly { state.sends.decidedAlone(key) }
            state.nextInstance &+= 1
            countdown.instance = state.nextInstance
            state.begin(countdown, at: result.now, known: result.knownSlot)
            return countdown.duration
        }
    }

    // MARK: The send path on the caller's bytes

    /// `decideSendBegin` (no budgets) for a key given as bytes, made in
    /// memory under one lock with no names made, by the same rules
    /// (`KeyDecision.windowFull`, the ticket's timeout), when nothing needs
    /// the full path: no store, no guard on the scope, no observer of it, no
    /// callback running. Returns nil, having changed nothing, when something
    /// does.
    func decideSendBegin(_ key: RawKey) throws(TickgateError) -> UInt64? {
        try locked.withLock { (state) throws(TickgateError) -> UInt64? in
            if needsFullPath(key, state) || state.isGuarded(scopeBytes: key.scope) { return nil }
            // Taken before the decision, as the full path does: a refusal
            // leaves a gap.
            let ticket = state.sends.takeTicketNumber()
            let now = state.now()
            let policy = state.policy(scopeBytes: key.scope)
            let lookup = state.withTable { $0.lookup(scope: key.scope, subject: key.subject) }
            var ended: (ticket: UInt64, phase: Phase)?
            if case let .found(slot) = lookup {
                if state.isRunning(slot, at: now), let running = state.countdown(slot) {
                    throw Self.busyError(running, at: now)
                }
                let record = state.table.record(slot)
                ended = (record.ticket, record.phase)
            }
            if let free = KeyDecision.windowFull(policy: policy, at: now, record: {
                state.sends.records.value(scope: key.scope, subject: key.subject)
            }) {
                throw Refusal.window(free).error(key.names(), at: now)
            }
            // Granted: a ticket whose run ended in the slot (its timer has
            // not fired yet) expired.
            if let ended, ended.phase == .sending { state.sends.recordEnd(of: ended.ticket, .expired) }
            state.nextInstance &+= 1
            let instance = state.nextInstance
            let deadline = now.advanced(by: policy.ticketTimeout)
            let interval = defaultTickInterval
            let slot = state.withTable { table -> Int32 in
                switch lookup {
                case let .found(found):
                    table.update(found, deadline: deadline, duration: policy.ticketTimeout, tickInterval: interval,
                                 phase: .sending, instance: instance, ticket: ticket)
                    return found
                case let .missing(miss):
                    return table.insert(scope: key.scope, subject: key.subject, deadline: deadline,
                                        duration: policy.ticketTimeout, tickInterval: interval, phase: .sending,
                                        instance: instance, ticket: ticket, after: miss)
                }
            }
            state.withWheel { $0.schedule(slot, at: deadline) }
            state.armIfEarlier()
            state.sends.open(ticket, place: state.place(of: slot), at: now)
            return ticket
        }
    }

    /// `decideSendEnd` of a send that succeeded, made in memory under one
    /// lock by the ticket's slot, with no names made, by the same rules
    /// (`KeyDecision.succeeded`), when nothing needs the full path (as for
    /// `decideSendBegin`; nor budgets charged, a guard's code pending, or
    /// a ticket past its timeout). Returns nil, having changed nothing,
    /// when something does.
    func decideSendEnd(succeeded ticket: UInt64, serverRetryAfter: Span) -> Span? {
        guard decidesInEngine, serverRetryAfter >= .zero, serverRetryAfter <= Limits.maximumDuration else { return nil }
        return locked.withLock { (state) -> Span? in
            guard !state.closed, state.dispatch.runningEvent == nil, let slot = state.slot(ofTicket: ticket),
                  state.sends.charges[ticket] == nil,
                  state.guards.pending.isEmpty || state.guards.pending[ticket] == nil else { return nil }
            let now = state.now()
            let run = state.table.record(slot)
            let scope = state.table.scopeBytes(run.scope)
            guard run.phase == .sending, run.deadline > now, !state.isObserved(scopeBytes: scope) else { return nil }
            let subject = state.table.subjectBytes(slot)
            let policy = state.policy(scopeBytes: scope)
            let (until, phase) = state.sends.updateRecord(scope: scope, subject: subject) { record in
                KeyDecision.succeeded(&record, policy: policy, serverRetryAfter: serverRetryAfter, at: now)
            }
            state.sends.recordEnd(of: ticket, .succeeded)
            state.nextInstance &+= 1
            let instance = state.nextInstance
            let duration = until.since(now)
            state.withTable { table in
                table.update(slot, deadline: until, duration: duration, tickInterval: defaultTickInterval,
                             phase: phase, instance: instance, ticket: 0)
            }
            state.withWheel { $0.schedule(slot, at: until) }
            state.armIfEarlier()
            return duration
        }
    }

    /// A wrong code was typed: counts it against the key's current code.
    /// Returns how many more wrong codes the code survives (nil: no cap);
    /// zero means this one killed it (state CODE_DEAD once no cooldown
    /// runs, event `.codeDead`). Throws `.notFound` if no code was sent
    /// since the last `verified`, `.codeDead` if the code is dead already.
    public func verifyFailed(_ key: CountdownKey) throws(TickgateError) -> Int? {
        let left = try countingVerify(wrong: true, killed: { $0 == 0 }) { () throws(TickgateError) in
            try decideVerifyFailed(key)
        }
        if left == 0 { followOutcomes(key, .killed) }
        return left
    }

    private func decideVerifyFailed(_ key: CountdownKey) throws(TickgateError) -> Int? {
        try decide(key, refuse: { state in state.refusals.refuseVerify(key, at: state.now()) }, { (state) throws(TickgateError) in
            .verifyFailed(policy: state.policy(of: key.scope))
        }) { (state, _, result) throws(TickgateError) -> Int? in
            if let refusal = result.refusal { throw refusal }
            guard let record = result.after.record else {
                throw TickgateError(.storeCorrupt, "the store counted a wrong code for \(key.description) without a record")
            }
            state.sends.setRecord(record, for: key)
            let maximum = result.maximumWrongCodes ?? state.policy(of: key.scope).maximumWrongCodes
            if record.codeDead {
                let now = result.now
                let button = state.button(key, at: now)
                if state.emit(.codeDead, key, instance: 0, remaining: button.remaining,
                              duration: state.counting(key, at: now)?.duration ?? .zero, state: button.state) {
                    poller.wake()
                }
                return 0
            }
            return SendRules.wrongCodesLeft(after: record.wrongCodes, maximum: maximum)
        }
    }

    /// The host verified the code: escalation restarts, a cooldown is
    /// cancelled and the key is IDLE (a lock of the window stays). Throws
    /// `.codeDead` (changing nothing) if the code took too many wrong
    /// codes: then the login must be refused.
    func decideVerified(_ key: CountdownKey) throws(TickgateError) {
        var cancelled: Set<CountdownKey> = []
        // (Once its lane is free: `waitForCallbacks`.)
        defer { waitForCallbacks(of: cancelled) }
        try decide(key, refuse: { state in state.refusals.refuseVerify(key, at: state.now()) }, { (state) throws(TickgateError) in
            .verified(policy: state.policy(of: key.scope))
        }) { (state, _, result) throws(TickgateError) in
            if let refusal = result.refusal { throw refusal }
            if result.before.countdown != nil, result.after.countdown == nil, let slot = state.table.find(key) {
                state.remove(slot: slot)
                cancelled.insert(key)
            }
            state.sends.setRecord(result.after.record, for: key)
            let now = result.now
            let button = state.button(key, at: now)
            if state.emit(.reset, key, instance: 0, remaining: button.remaining,
                          duration: state.counting(key, at: now)?.duration ?? .zero,
                          state: button.state) {
                poller.wake()
            }
        }
    }
}

extension EngineState {
    /// Why a ticket that is not open cannot be ended.
    func endedTicketError(_ ticket: UInt64) -> TickgateError {
        switch sends.endedTickets[ticket] {
        case .expired?:
            TickgateError(.expired, "ticket \(ticket) expired before it was ended; its key was freed then")
        case .succeeded?:
            TickgateError(.notFound, "ticket \(ticket) was already ended: it succeeded")
        case .failed?:
            TickgateError(.notFound, "ticket \(ticket) was already ended: it failed")
        case .cancelled?:
            TickgateError(.notFound, "ticket \(ticket) was already ended: it was cancelled with its key's countdown")
        case nil:
            TickgateError(.notFound, "no send ticket \(ticket)")
        }
    }

    /// Puts a cooldown or lock in place and tells the key's observers.
    func begin(_ countdown: Countdown, at now: Instant, known: SlotLookup = .notLookedUp) {
        replace(with: countdown, at: now, known: known)
        if emit(.started, countdown.key, instance: countdown.instance,
                      remaining: countdown.duration, duration: countdown.duration,
                      state: countdown.phase.buttonState) {
            poller.wake()
        }
    }
}
