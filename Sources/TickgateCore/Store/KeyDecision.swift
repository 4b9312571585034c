/// A decision on one key, made the same way by every store: memory on the
/// engine's state, SQLite inside one transaction, Redis inside one script.
/// `apply` is the rule; it refuses by throwing and then changes nothing.
enum KeyDecision {
    /// Start a countdown unless one runs (or replace it if `restart`).
    case start(duration: Span, tickInterval: Span, restart: Bool)
    /// End the running countdown.
    case cancel
    /// "Get code": open a send ticket unless the key is busy or its window
    /// is full.
    case sendBegin(policy: SendPolicy, tickInterval: Span)
    /// Close the send ticket whose countdown ends at `ticketDeadline`.
    case sendEnd(ticketDeadline: Instant, outcome: SendOutcome, serverRetryAfter: Span,
                 policy: SendPolicy, tickInterval: Span)
    /// The code was verified: escalation restarts, a cooldown ends.
    case verified(policy: SendPolicy)

    /// What `apply` changed.
    struct Changes: OptionSet {
        let rawValue: UInt8
        static let countdown = Changes(rawValue: 1)
        static let record = Changes(rawValue: 2)
    }

    /// Makes the decision on `rows` (the key's state at `now`). Throws the
    /// refusal (busy, locked, not found, expired) with `rows` unchanged.
    func apply(to rows: inout KeyRows, key: CountdownKey, at now: Instant) throws(TickgateError) -> Changes {
        let running = rows.countdown.flatMap { $0.deadline > now ? $0 : nil }
        switch self {
        case let .start(duration, tickInterval, restart):
            if !restart, let running { throw Engine.busyError(running, at: now) }
            rows.countdown = Countdown(key: key, instance: 0, deadline: now.advanced(by: duration),
                                       duration: duration, tickInterval: tickInterval)
            return .countdown

        case .cancel:
            guard running != nil else {
                throw TickgateError(.notFound, "no countdown is running for \(key.description)")
            }
            rows.countdown = nil
            return .countdown

        case let .sendBegin(policy, tickInterval):
            if let running { throw Engine.busyError(running, at: now) }
            if var record = rows.record {
                record.prune(at: now, policy: policy)
                if let free = record.windowFrees(at: now, policy: policy) {
                    // The window is full (its lock was cancelled): refused,
                    // and like every refusal it starts nothing.
                    let wait = free.since(now)
                    throw TickgateError(.locked,
                        "\(key.description) reached its cap of sends: the window frees a send in \(wait.millisecondsRoundedUp) ms",
                        remaining: wait)
                }
            }
            rows.countdown = Countdown(key: key, phase: .sending, instance: 0,
                                       deadline: now.advanced(by: policy.ticketTimeout),
                                       duration: policy.ticketTimeout, tickInterval: tickInterval)
            return .countdown

        case let .sendEnd(ticketDeadline, outcome, serverRetryAfter, policy, tickInterval):
            guard let sending = rows.countdown, sending.phase == .sending,
                  sending.deadline == ticketDeadline else {
                if ticketDeadline <= now {
                    throw TickgateError(.expired, "the ticket expired before it was ended; its key was freed then")
                }
                throw TickgateError(.notFound, "the ticket was cancelled with its key's countdown")
            }
            if sending.deadline <= now {
                throw TickgateError(.expired, "the ticket expired before it was ended; its key was freed then")
            }
            guard outcome == .succeeded else {
                rows.countdown = nil
                return .countdown
            }
            var record = rows.record ?? SendRecord()
            if let last = record.lastSend, policy.quietReset > .zero, now.since(last) >= policy.quietReset {
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
            rows.record = record
            rows.countdown = Countdown(key: key, phase: phase, instance: 0, deadline: until,
                                       duration: until.since(now), tickInterval: tickInterval)
            return [.countdown, .record]

        case let .verified(policy):
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
            if record?.sends.isEmpty == true { record = nil }
            rows.record = record
            return changes
        }
    }
}
