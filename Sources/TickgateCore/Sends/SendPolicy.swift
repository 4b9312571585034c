/// How a scope's keys may send: the escalating cooldown schedule, the cap
/// of sends per sliding window, when escalation resets, and how long a send
/// ticket may stay open.
public struct SendPolicy: Sendable, Equatable {
    public static let maximumSteps = RuleConstants.maximumSteps

    /// Cooldown after the 1st, 2nd, ... consecutive send; the last repeats.
    public var cooldowns: [Span]
    /// At most this many sends per `window`; 0 means no cap.
    public var windowMaximumSends: Int
    public var window: Span
    /// A send this long after the previous one restarts the schedule; zero
    /// means never (only `verified` does).
    public var quietReset: Span
    public var ticketTimeout: Span
    /// Wrong codes a sent code survives: the last one kills it (until a
    /// new send). Zero means no cap.
    public var maximumWrongCodes: Int

    /// Most wrong codes a policy may allow per code (TG_WRONG_CODES_MAX).
    @inlinable public static var maximumWrongCodesLimit: Int { RuleConstants.maximumWrongCodes }

    public init(cooldowns: [Span] = [.milliseconds(60_000)], windowMaximumSends: Int = 0,
                window: Span = .zero, quietReset: Span = .milliseconds(3_600_000),
                ticketTimeout: Span = .milliseconds(30_000), maximumWrongCodes: Int = 5) {
        self.cooldowns = cooldowns
        self.windowMaximumSends = windowMaximumSends
        self.window = window
        self.quietReset = quietReset
        self.ticketTimeout = ticketTimeout
        self.maximumWrongCodes = maximumWrongCodes
    }

    /// The default policy, made once (`SendPolicy()` allocates its array
    /// of cooldowns): what a scope with no policy of its own decides by.
    static let standard = SendPolicy()

    /// Throws unless every field is in range.
    public func validated() throws(TickgateError) -> SendPolicy {
        guard (1...Self.maximumSteps).contains(cooldowns.count) else {
            throw TickgateError(.invalidArgument, "a policy needs 1 to \(Self.maximumSteps) cooldown steps")
        }
        for (index, step) in cooldowns.enumerated() {
            guard step.nanoseconds > 0, step <= Limits.maximumDuration else {
                throw TickgateError(.invalidDuration, "cooldown step \(index + 1) is outside 1 ms ... 365 days")
            }
        }
        guard windowMaximumSends >= 0, windowMaximumSends <= Limits.maximumWindowSends else {
            throw TickgateError(.invalidArgument,
                "window_max_sends \(windowMaximumSends) is outside 0 ... \(Limits.maximumWindowSends)")
        }
        if windowMaximumSends > 0, !(window.nanoseconds > 0 && window <= Limits.maximumDuration) {
            throw TickgateError(.invalidDuration, "window is outside 1 ms ... 365 days")
        }
        guard quietReset >= .zero, quietReset <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "quiet reset is outside 0 ... 365 days")
        }
        guard ticketTimeout.nanoseconds > 0, ticketTimeout <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "ticket timeout is outside 1 ms ... 365 days")
        }
        guard (0...Self.maximumWrongCodesLimit).contains(maximumWrongCodes) else {
            throw TickgateError(.invalidArgument,
                "max_wrong_codes \(maximumWrongCodes) is outside 0 ... \(Self.maximumWrongCodesLimit)")
        }
        return self
    }

    /// The cooldown after the `count`-th consecutive send (1-based).
    func cooldown(afterConsecutive count: Int) -> Span {
        SendRules.cooldown(cooldowns, afterConsecutive: count)
    }
}

/// What the engine remembers of a key's sends.
struct SendRecord {
    /// Successful sends still inside the policy's window, oldest first.
    var sends: [Instant] = []
    /// Consecutive sends since the last reset (drives the schedule), at
    /// most `Limits.maximumConsecutiveSends`.
    var consecutive = 0
    var lastSend: Instant?
    /// Cooled down after at least one send (READY_AGAIN rather than IDLE).
    var hasSent = false
    /// Wrong codes typed against the current code.
    var wrongCodes = 0
    /// The current code took the policy's maximum of wrong codes: only a
    /// new send revives the key.
    var codeDead = false

    /// Drops the sends the window no longer counts (`SendRules`).
    mutating func prune(at now: Instant, policy: SendPolicy) {
        let expired = SendRules.expiredSends(sends, maximumSends: policy.windowMaximumSends,
                                             window: policy.window, at: now)
        if expired == sends.count { sends.removeAll() } else if expired > 0 { sends.removeFirst(expired) }
    }

    /// When the window frees a send, if it is full now (`SendRules`).
    func windowFrees(at now: Instant, policy: SendPolicy) -> Instant? {
        SendRules.windowFrees(sends, maximumSends: policy.windowMaximumSends, window: policy.window, at: now)
    }
}
