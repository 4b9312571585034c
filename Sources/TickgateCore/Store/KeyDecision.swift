/// A decision on one key, made the same way by every store: memory on the
/// engine's state, SQLite inside one transaction, Redis inside one script.
/// `apply` is the rule; it refuses by throwing and then changes nothing.
enum KeyDecision {
    /// Start a countdown unless one runs (or replace it if `restart`).
    case start(duration: Span, tickInterval: Span, restart: Bool)
    /// End the running countdown.
    case cancel
    /// "Get code": open send ticket `ticket` unless the key is busy, its
    /// window is full or a budget it names is spent; charges every budget.
    /// `screening`: how the scope's guard sees it (`Screening`).
    case sendBegin(policy: SendPolicy, tickInterval: Span, ticket: UInt64, screening: Screening = .unscreened)
    /// Close send ticket `ticket`, whose countdown ends at `ticketDeadline`;
    /// a failed send returns the charge made at `chargedAt` to the budgets.
    /// `follow`: a successful send's guarded code, followed for its outcome
    /// in the same step by a store that screens in its decisions
    /// (`Store.screensInDecision`; the others ignore it).
    case sendEnd(ticket: UInt64, ticketDeadline: Instant, outcome: SendOutcome, serverRetryAfter: Span,
                 policy: SendPolicy, tickInterval: Span, chargedAt: Instant?, follow: OutcomeFollow? = nil)
    /// The code was verified: escalation restarts, a cooldown ends.
    case verified(policy: SendPolicy)
    /// A wrong code was typed against the key's current code.
    case verifyFailed(policy: SendPolicy)
    /// Only read the key (a query on a store other engines change).
    case read

    /// The send policy the decision is made by, if it needs one.
    var policy: SendPolicy? {
        switch self {
        case let .sendBegin(policy, _, _, _), let .sendEnd(_, _, _, _, policy, _, _, _), let .verified(policy),
             let .verifyFailed(policy):
            policy
        case .start, .cancel, .read:
            nil
        }
    }

    /// The same decision by `policy` (the store's).
    func with(policy: SendPolicy) -> KeyDecision {
        switch self {
        case let .sendBegin(_, tick, ticket, screening):
            .sendBegin(policy: policy, tickInterval: tick, ticket: ticket, screening: screening)
        case let .sendEnd(ticket, deadline, outcome, retry, _, tick, chargedAt, follow):
            .sendEnd(ticket: ticket, ticketDeadline: deadline, outcome: outcome, serverRetryAfter: retry,
                     policy: policy, tickInterval: tick, chargedAt: chargedAt, follow: follow)
        case .verified: .verified(policy: policy)
        case .verifyFailed: .verifyFailed(policy: policy)
        case .start, .cancel, .read: self
        }
    }

    var isSendBegin: Bool {
        if case .sendBegin = self { return true }
        return false
    }

    /// A send the scope's guard did not see: the store checks there is none.
    /// A read (`.read`): the store changes nothing.
    var isRead: Bool {
        if case .read = self { return true }
        return false
    }

    var isUnscreenedSend: Bool {
        if case .sendBegin(_, _, _, .unscreened) = self { return true }
        return false
    }

    /// What `apply` changed.
    struct Changes: OptionSet {
        let rawValue: UInt8
        static let countdown = Changes(rawValue: 1)
        static let record = Changes(rawValue: 2)
        static let budgets = Changes(rawValue: 4)
    }

    /// Makes the decision on `rows` (the key's state at `now`) and on the
    /// rows of the budget keys it names (`self.budgets` with their
    /// charges, in that order). Throws the refusal (busy, locked, not
    /// found, expired) with both unchanged.
    func apply(to rows: inout KeyRows, budgets: inout [BudgetRow], key: CountdownKey,
               at now: Instant) throws(TickgateError) -> Changes {
        let running = rows.countdown.flatMap { $0.deadline > now ? $0 : nil }
        switch self {
        case .read:
            return []

        case let .start(duration, tickInterval, restart):
            if !restart, let running { throw Engine.busyError(running, at: now) }
            rows.countdown = Countdown(key: key, instance: 0, deadline: now.advanced(by: duration),
                                       duration: duration, tickInterval: tickInterval)
            return .countdown

        case .cancel:
            guard running != nil else { throw Refusal.noCountdown.error(key) }
            rows.countdown = nil
            return .countdown

        case let .sendBegin(policy, tickInterval, _, _):
            if let running { throw Engine.busyError(running, at: now) }
            if let free = Self.windowFull(policy: policy, at: now, record: { rows.record }) {
                throw Refusal.window(free).error(key, at: now)
            }
            var changes: Changes = .countdown
            if !budgets.isEmpty {
                try Self.charge(&budgets, at: now)
                changes.insert(.budgets)
            }
            rows.countdown = Countdown(key: key, phase: .sending, instance: 0,
                                       deadline: now.advanced(by: policy.ticketTimeout),
                                       duration: policy.ticketTimeout, tickInterval: tickInterval)
            return changes

        case let .sendEnd(_, ticketDeadline, outcome, serverRetryAfter, policy, tickInterval, chargedAt, _):
            guard let sending = rows.countdown, sending.phase == .sending,
                  sending.deadline == ticketDeadline else {
                throw (ticketDeadline <= now ? Refusal.expired : Refusal.ticket).error(key)
            }
            if sending.deadline <= now { throw Refusal.expired.error(key) }
            guard outcome == .succeeded else {
                rows.countdown = nil
                guard let chargedAt, !budgets.isEmpty else { return .countdown }
                Self.refund(&budgets, chargedAt, at: now)
                return [.countdown, .budgets]
            }
            let (until, phase) = Self.succeeded(&rows.record, policy: policy, serverRetryAfter: serverRetryAfter,
                                                at: now)
            rows.countdown = Countdown(key: key, phase: phase, instance: 0, deadline: until,
                                       duration: until.since(now), tickInterval: tickInterval)
            return [.countdown, .record]

        case let .verified(policy):
            if rows.record?.codeDead == true { throw Refusal.dead.error(key) }
            var changes: Changes = .record
            if running?.phase == .cooling {
                rows.countdown = nil
                changes.insert(.countdown)
            }
            var record = rows.record
            record?.prune(at: now, policy: policy)
            record?.consecutive = 0
            record?.hasSent = false
            record?.lastSend = nil
            record?.wrongCodes = 0
            if record?.sends.isEmpty == true { record = nil }
            rows.record = record
            return changes

        case let .verifyFailed(policy):
            guard var record = rows.record, record.hasSent else { throw Refusal.unsent.error(key) }
            if record.codeDead { throw Refusal.dead.error(key) }
            let wrong = SendRules.wrongCode(after: record.wrongCodes, maximum: policy.maximumWrongCodes)
            record.wrongCodes = wrong.count
            if wrong.dead { record.codeDead = true }
            rows.record = record
            return .record
        }
    }

    /// A send's begin on a key with no countdown running: when the window
    /// frees a send if it is full (its lock was cancelled: refused, and like
    /// every refusal it starts nothing), else nil. Reads the key's record
    /// only, and only if the policy caps the window (an uncapped window
    /// is never full). The send path on the caller's bytes decides by it too.
    static func windowFull(policy: SendPolicy, at now: Instant, record: () -> SendRecord?) -> Instant? {
        guard policy.windowMaximumSends > 0, var record = record() else { return nil }
        record.prune(at: now, policy: policy)
        return record.windowFrees(at: now, policy: policy)
    }

    /// A send that succeeded at `now`: changes the key's record (nil: it had
    /// none) and returns the end and phase of the countdown that follows.
    /// The send path on the caller's bytes decides by it too.
    static func succeeded(_ record: inout SendRecord?, policy: SendPolicy, serverRetryAfter: Span,
                          at now: Instant) -> (until: Instant, phase: Phase) {
        var sent = record ?? SendRecord()
        sent.consecutive = SendRules.consecutive(after: sent.consecutive, lastSend: sent.lastSend,
                                                 quietReset: policy.quietReset, at: now)
        sent.prune(at: now, policy: policy)
        sent.lastSend = now
        sent.hasSent = true
        // A new code: the wrong codes of the last one no longer count.
        sent.wrongCodes = 0
        sent.codeDead = false
        if policy.windowMaximumSends > 0 { sent.sends.append(now) }
        let after = SendRules.countdownAfterSend(
            step: policy.cooldown(afterConsecutive: sent.consecutive), serverRetryAfter: serverRetryAfter,
            windowFrees: sent.windowFrees(at: now, policy: policy), at: now)
        record = sent
        return (after.deadline, after.phase)
    }

    /// Charges one send at `now` to every budget, or throws the refusal of
    /// the budget that frees last with nothing charged.
    private static func charge(_ budgets: inout [BudgetRow], at now: Instant) throws(TickgateError) {
        // Checked before anything changes (no copy of the charges).
        var refusal: (index: Int, free: Instant)?
        for index in budgets.indices {
            if let free = budgets[index].frees(at: now), refusal.map({ free > $0.free }) ?? true {
                refusal = (index, free)
            }
        }
        if let refusal {
            throw Refusal.budget(refusal.free, index: refusal.index)
                .error(budgets[refusal.index].key.description, at: now)
        }
        for index in budgets.indices { budgets[index].charge(at: now) }
    }

    /// Returns a failed send's charge (made at `chargedAt`) to every budget.
    private static func refund(_ budgets: inout [BudgetRow], _ chargedAt: Instant, at now: Instant) {
        for index in budgets.indices { budgets[index].refund(chargedAt, at: now) }
    }
}

/// How a send's guard sees it (`KeyDecision.sendBegin`).
enum Screening {
    /// No guard saw it: a store that holds a guard for the scope refuses
    /// it (`TickgateError.guarded`).
    case unscreened
    /// The scope's guard passed it, or the scope has none.
    case screened
    /// The store screens it by the scope's guard in the step that decides
    /// it (`Store.screensInDecision`): the answer is the result's
    /// `guardScreen`; a send the guard does not pass is refused with
    /// `TickgateError.guardAnswered`, the key unchanged.
    case inStep(GuardScreenRequest)
}

/// A guarded send's screen, as `Store.guardScreen` takes it.
struct GuardScreenRequest {
    var code: String
    var country: String
    var address: ClientAddress?
    /// The guard the engine chose the send's lists by.
    var rules: Guard
    /// Judge it by the signals (not bypassed, refused or off).
    var judge: Bool
    /// The send's decision record, as known before the screen (its mode,
    /// stream length, bypass), when the store keeps the guard's record
    /// stream (`Store.keepsRecordStream`) and the guard has one: a store
    /// that screens in its decision appends it there if it grants the send
    /// (the engine's copy then appends nothing: `GuardRecord.inStream`).
    var record: GuardRecord?
}

/// A successful send's code, followed for its outcome in the step that
/// ends the send (`KeyDecision.sendEnd`; see `Engine.followOutcomes`).
struct OutcomeFollow {
    var code: String
    var unverifiedAfter: Span
    /// Sweep too (someone hears the outcomes).
    var sweep: Bool
    /// Their records, appended in the step (nil: the guard keeps no stream).
    var records: OutcomeRecords?
    /// The guard the code was followed by (its records' mode, whatever
    /// becomes of the guard meanwhile).
    var rules: Guard
}

/// Why a store refused a decision, as every store names it (the Redis
/// script answers with these names); `error` gives the caller's status and
/// message.
enum Refusal: Equatable {
    /// A countdown runs (the status follows its phase: `Engine.busyError`).
    case busy
    /// The key's window of sends is full until the instant.
    case window(Instant)
    /// A budget key the send names is spent until the instant.
    case budget(Instant, index: Int)
    /// A budget the send names is not set.
    case noBudget(index: Int)
    /// No countdown runs (a cancel).
    case noCountdown
    /// The send ticket's timeout passed before it was ended.
    case expired
    /// The send ticket was cancelled or replaced with its key's countdown.
    case ticket
    /// The key's code took too many wrong codes.
    case dead
    /// No code was sent since the key was last verified.
    case unsent

    /// The error for `key` (a budget's: its description), at `now`.
    func error(_ key: CountdownKey, at now: Instant = Instant(nanoseconds: 0)) -> TickgateError {
        error(key.description, at: now)
    }

    func error(_ name: String, at now: Instant = Instant(nanoseconds: 0)) -> TickgateError {
        switch self {
        case .busy:
            TickgateError(.coolingDown, "\(name) is counting down")
        case let .window(free):
            TickgateError(.locked,
                "\(name) reached its cap of sends: the window frees a send in \(free.since(now).millisecondsRoundedUp) ms",
                remaining: free.since(now))
        case let .budget(free, index):
            TickgateError(.locked,
                "\(name) is spent: it frees a send in \(free.since(now).millisecondsRoundedUp) ms",
                remaining: free.since(now), budgetIndex: index)
        case .noBudget:
            TickgateError(.notFound, "no budget named \(name) (set it with tg_budget_set)")
        case .noCountdown:
            TickgateError(.notFound, "no countdown is running for \(name)")
        case .expired:
            TickgateError(.expired, "the ticket expired before it was ended; its key was freed then")
        case .ticket:
            TickgateError(.notFound, "the ticket was cancelled with its key's countdown")
        case .dead:
            TickgateError(.codeDead, "the code of \(name) took too many wrong codes: a new send revives it")
        case .unsent:
            TickgateError(.notFound, "no code was sent to \(name) since it was last verified")
        }
    }
}
