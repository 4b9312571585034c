/// What became of a guarded code after its send: the records' outcomes
/// (`GuardRecord.outcome`), so an operator reads conversion per country and
/// per range from the records.
///
/// A code is followed from its successful send (when the engine that sent
/// it had someone to hear its records: a record subscription or a store's
/// record stream) until its one outcome is known: verified, replaced by a
/// newer code of the number, killed by wrong codes, or never verified
/// (`unverifiedAfter` past its send, found by a sweep). Each store keeps the
/// codes followed (memory: this; SQLite: rows of guard_due; Redis:
/// Scripts/outcomes.lua), and takes a code off in the step that decides its
/// outcome, so one engine, exactly one, reports it.
public enum CodeOutcome: Int32, Sendable, CaseIterable {
    case verified = 1
    /// A newer code of the number was sent before this one was verified.
    case replaced = 2
    /// Killed by wrong codes (`verifyFailed` reached the policy's cap).
    case killed = 3
    /// Not verified within the guard's `unverifiedAfter` of its send.
    case neverVerified = 4
    /// Not a code's outcome: the host said the person passed a challenge
    /// for the number (`challengePassed`).
    case challengePassed = 5

    /// Its name in the records (the stream's `outcome` field).
    public var name: String {
        switch self {
        case .verified: "verified"
        case .replaced: "replaced"
        case .killed: "killed"
        case .neverVerified: "never_verified"
        case .challengePassed: "challenge_passed"
        }
    }
}

/// The event that may decide codes' outcomes (`Store.guardOutcomes`).
enum OutcomeEvent: Equatable {
    /// `code`'s send succeeded: followed from now; the number's code
    /// followed before it is replaced.
    case sent(code: String)
    /// The number's code was verified.
    case verified
    /// The number's code was killed by wrong codes.
    case killed
    /// Nothing but the sweep.
    case sweep

    /// The outcome it gives the number's followed code.
    var outcome: CodeOutcome? {
        switch self {
        case .sent: .replaced
        case .verified: .verified
        case .killed: .killed
        case .sweep: nil
        }
    }
}

/// The records of the outcomes a store's step decides, which a store that
/// keeps the guard's record stream appends in that step
/// (`Store.guardOutcomes`, `OutcomeFollow`).
struct OutcomeRecords {
    /// The stream's length (`Guard.recordStreamLength`, > 0).
    var streamLength: Int
    var mode: Guard.Mode
    /// The records' wall-clock time (ns since 1970), read before the step.
    var wallNanoseconds: Int64
}

/// A code whose outcome a store decided.
struct DecidedCode: Equatable {
    var code: String
    var subject: String
    var country: String
    var address: String
    /// How long before the decision the code was sent.
    var age: Span
    var outcome: CodeOutcome
}

/// Memory's followed codes of one scope.
struct FollowedCodes {
    private struct Code {
        var subject: KeyName
        var country: String
        var address: ClientAddress?
        var sentAt: Instant
    }

    private var codes: [String: Code] = [:]
    private var bySubject: [KeyName: String] = [:]
    /// Codes by when sent, oldest first (from `head`; codes decided
    /// otherwise stay until the sweep passes them).
    private var order: [(Instant, String)] = []
    private var head = 0
    /// Most codes one scope follows: past it, the oldest are reported
    /// never verified early rather than held.
    static let capacity = 1_000_000
    /// Most codes one sweep reports.
    static let sweepLimit = 64

    var isEmpty: Bool { codes.isEmpty }

    /// `event` for `subject` (`latest`: the number's last code the ledger
    /// counted, if it is known), then (if `sweep`) the sweep: every code
    /// it decided.
    mutating func apply(_ event: OutcomeEvent, subject: KeyName, sent: ConversionLedger.Code?, latest: String?,
                        at now: Instant, unverifiedAfter: Span, sweep: Bool = true) -> [DecidedCode] {
        var decided: [DecidedCode] = []
        if let outcome = event.outcome, let followed = bySubject[subject] {
            var stays = false
            if case let .sent(code) = event { stays = code == followed }
            if !stays, let code = take(followed, at: now) {
                // Verified or killed, but the number's last code is another
                // (sent while no one listened): this one was replaced.
                let replaced = latest != nil && latest != followed
                decided.append(DecidedCode(code: followed, subject: code.subject.value, country: code.country,
                                           address: code.address?.description ?? "", age: now.since(code.sentAt),
                                           outcome: replaced ? .replaced : outcome))
            }
        }
        if case let .sent(code) = event, let sent, codes[code] == nil {
            codes[code] = Code(subject: subject, country: sent.country, address: sent.address, sentAt: sent.sentAt)
            bySubject[subject] = code
            order.append((sent.sentAt, code))
        }
        let due = GuardRules.windows(at: now, unverifiedAfter: unverifiedAfter).unverifiedUntil
        while sweep, head < order.count, decided.count < Self.sweepLimit,
              order[head].0 <= due || codes.count > Self.capacity {
            let id = order[head].1
            head += 1
            if let code = take(id, at: now) {
                decided.append(DecidedCode(code: id, subject: code.subject.value, country: code.country,
                                           address: code.address?.description ?? "", age: now.since(code.sentAt),
                                           outcome: .neverVerified))
            }
        }
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
        return decided
    }

    private mutating func take(_ id: String, at now: Instant) -> Code? {
        guard let code = codes.removeValue(forKey: id) else { return nil }
        if bySubject[code.subject] == id { bySubject[code.subject] = nil }
        return code
    }
}
