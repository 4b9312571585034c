/// The rules of a key's sends, as pure functions: state, settings and a
/// time in, the decision out; no store, no lock, no clock read.
/// `KeyDecision` (memory and SQLite) calls them; `Store/Redis/Scripts/
/// rules.lua` is the same rules for every Redis script, function by
/// function (the same names in snake case), and `Tests/rules/*.json` holds
/// the cases both must answer alike.
enum SendRules {
    /// The consecutive count after a granted send at `now`: a send
    /// `quietReset` or more after the last one restarts the schedule (zero:
    /// never), then the send counts one more, saturating at
    /// `RuleConstants.maximumConsecutiveSends`.
    static func consecutive(after count: Int, lastSend: Instant?, quietReset: Span, at now: Instant) -> Int {
        var count = count
        if let lastSend, quietReset > .zero, now.since(lastSend) >= quietReset { count = 0 }
        return min(max(count, 0), RuleConstants.maximumConsecutiveSends - 1) + 1
    }

    /// The cooldown after the `count`-th consecutive send (1-based): the
    /// schedule's step, its last step repeating.
    static func cooldown(_ cooldowns: [Span], afterConsecutive count: Int) -> Span {
        guard !cooldowns.isEmpty else { return .zero }
        return cooldowns[min(max(count, 1), cooldowns.count) - 1]
    }

    /// The key's countdown after a granted send at `now`: the step or the
    /// server's retry-after, whichever is longer, cooling; locked instead
    /// until the window frees a send, if that is later.
    static func countdownAfterSend(step: Span, serverRetryAfter: Span, windowFrees: Instant?,
                                   at now: Instant) -> (deadline: Instant, phase: Phase) {
        let until = now.advanced(by: max(step, serverRetryAfter))
        if let windowFrees, windowFrees > until { return (windowFrees, .locked) }
        return (until, .cooling)
    }

    /// How many of `sends` (oldest first) the window no longer counts at
    /// `now`: all of them when the policy has no cap, else those at or
    /// before `now - window`.
    static func expiredSends(_ sends: [Instant], maximumSends: Int, window: Span, at now: Instant) -> Int {
        guard maximumSends > 0 else { return sends.count }
        let horizon = now.advanced(by: Span(nanoseconds: -window.nanoseconds))
        return sends.firstIndex(where: { $0 > horizon }) ?? sends.count
    }

    /// When the window frees a send, if it is full at `now`: the send
    /// `maximumSends` back from the newest leaves it then.
    static func windowFrees(_ sends: [Instant], maximumSends: Int, window: Span, at now: Instant) -> Instant? {
        guard maximumSends > 0, sends.count >= maximumSends else { return nil }
        let free = sends[sends.count - maximumSends].advanced(by: window)
        return free > now ? free : nil
    }

    /// One more wrong code against the current code: the count (saturating
    /// past `RuleConstants.maximumWrongCodes`) and whether the code is dead
    /// now (the cap reached; a cap of zero: never).
    static func wrongCode(after count: Int, maximum: Int) -> (count: Int, dead: Bool) {
        let count = min(max(count, 0), RuleConstants.maximumWrongCodes) + 1
        return (count, maximum > 0 && count >= maximum)
    }

    /// How many more wrong codes the current code survives after `count`
    /// (nil: the policy has no cap).
    static func wrongCodesLeft(after count: Int, maximum: Int) -> Int? {
        maximum > 0 ? max(maximum - count, 0) : nil
    }

    /// How long a store keeps a key: while its countdown runs and while its
    /// record still decides something: the quiet reset of its last send (a
    /// year with none, a day at least) and the window of its newest send.
    /// Never before `now`; nil when nothing is left to keep.
    static func keyLife(countdownDeadline: Instant?, lastSend: Instant?, newestSend: Instant?,
                        quietReset: Span, window: Span, at now: Instant) -> Instant? {
        var life = countdownDeadline
        if let lastSend {
            var quiet = quietReset > .zero ? quietReset : Span(microseconds: RuleConstants.yearMicroseconds)
            quiet = max(quiet, Span(microseconds: RuleConstants.dayMicroseconds))
            life = max(life ?? lastSend, lastSend.advanced(by: quiet))
        }
        if let newestSend { life = max(life ?? newestSend, newestSend.advanced(by: window)) }
        return life.map { max($0, now) }
    }
}

extension Span {
    /// `microseconds` µs (the unit of the rules' constants).
    init(microseconds: Int64) { self.init(nanoseconds: microseconds &* 1_000) }
}
