// A guarded scope's sends: the number, the always-allow and destination
// lists and the pumping signals are checked before the key's own decision
// (cooldowns, window, budgets); a granted code is counted unverified until
// `verified`, and given back when its send fails.

extension Engine {
    /// Sets (or with nil, removes) a scope's guard. From then on every send
    /// of the scope goes through it (its subjects must be E.164 numbers).
    public func setGuard(_ rules: Guard?, scope: KeyName) throws(TickgateError) {
        let rules = try rules?.validated()
        try write(.scope(scope), { (store) throws(TickgateError) in try store.save(guard: rules, scope: scope) }) { state, _ in
            state.guards.set(rules, scope: scope)
            state.refusals.dropAll()
        }
    }

    /// The user tapped "Get code": grants a send ticket (state SENDING), or
    /// throws. A guarded scope's send passes its guard first
    /// (`.invalidNumber`, `.destinationRefused`, `.pumpingSuspected`),
    /// then the key's policy and `budgets` (a refusal by a budget carries
    /// its index in `budgets`). `address`: the client's, for the signals
    /// counted per address and the always-allow ranges.
    public func sendBegin(_ key: CountdownKey, budgets: [BudgetKey] = [],
                          from address: ClientAddress? = nil) throws(TickgateError) -> UInt64 {
        try countingSend { () throws(TickgateError) in try screenedSendBegin(key, budgets: budgets, from: address) }
    }

    private func screenedSendBegin(_ key: CountdownKey, budgets: [BudgetKey],
                                   from address: ClientAddress?) throws(TickgateError) -> UInt64 {
        let guarded = try locked.withLock { (state) throws(TickgateError) -> Bool in
            try state.checkOpen()
            return state.guards.rules[key.scope] != nil
        }
        if guarded { return try guardedSendBegin(key, budgets: budgets, from: address) }
        do {
            return try decideSendBegin(key, budgets: budgets)
        } catch where error.scopeIsGuarded {
            // The store holds a guard for the scope that this engine had
            // not heard of yet (set by another engine or process a moment
            // ago, or its notice link is down): the send goes through it,
            // as on every other engine.
            try refreshSettings()
            return try guardedSendBegin(key, budgets: budgets, from: address)
        }
    }

    private func guardedSendBegin(_ key: CountdownKey, budgets: [BudgetKey],
                                  from address: ClientAddress?) throws(TickgateError) -> UInt64 {
        var record = GuardRecord(scope: key.scope, number: key.subject.value, address: address,
                                 wallMilliseconds: clock.wallNow() / 1_000_000)
        // The mode of the guard as this engine knows it, for a send refused
        // before the store's is read (a subject that is no number).
        record.mode = locked.withLock { $0.guards.rules[key.scope]?.mode } ?? .off
        do {
            let ticket = try screenAndSend(key, budgets: budgets, address: address, record: &record)
            record.status = .ok
            record.ticket = ticket
            deliver(record)
            return ticket
        } catch {
            record.status = error.status
            record.message = error.message
            deliver(record)
            throw error
        }
    }

    private func screenAndSend(_ key: CountdownKey, budgets: [BudgetKey], address: ClientAddress?,
                               record: inout GuardRecord) throws(TickgateError) -> UInt64 {
        let number = try PhoneNumber.parse(key.subject.value)
        let country = Guard.country(of: number)
        record.country = country
        record.callingCode = number.callingCode
        // A refusal known already costs no round trip (LocalRefusals).
        let spot = KnownGuardRefusals.Spot(scope: key.scope, country: country)
        let guardMark = try locked.withLock { (state) throws(TickgateError) -> UInt64 in
            try state.checkOpen()
            guard let store, store.refusesLocally, state.sends.localKeys.isEmpty else { return 0 }
            // (The key's own refusals only: an always-allowed send may skip
            // the budgets.)
            if let refusal = state.refusals.refuseSend(key, budgets: [], at: state.now()) { throw refusal }
            // The country's counts refuse it (the guard as this engine
            // knows it, which its notices keep the store's: no bypass, no
            // destination rule first).
            if let rules = state.guards.rules[key.scope], rules.mode == .enforce,
               rules.alwaysAllowed(number, address) == nil, rules.refusal(of: number) == nil,
               let known = state.refusals.refuseGuarded(spot, at: state.now()) {
                record.mode = rules.mode
                record.streamLength = rules.recordStreamLength
                record.counts = known.counts
                record.judgment = known.judgment
                throw Self.pumpingSuspected(known.judgment, known.counts, country: country, rules: rules,
                                            known: true)
            }
            return state.refusals.guards.epoch
        }
        // The guard, as the store holds it.
        var reading: GuardReading
        var judged = true
        if let store {
            do {
                reading = try store.guardReading(scope: key.scope, country: country, address: address)
            } catch where (error.status == .storeIO || error.status == .storeUnknown) && failOpen {
                // Fail open: the store is out of reach; this engine's copy
                // of the guard decides its lists, no signal is judged (the
                // counts are the store's), and the send goes on to be
                // granted or refused by memory alone.
                reading = GuardReading(rules: locked.withLock { $0.guards.rules[key.scope] }, counts: GuardCounts())
                judged = false
                record.message = "the store is out of reach: signals not judged"
            }
        } else {
            reading = try locked.withLock { (state) throws(TickgateError) -> GuardReading in
                try state.checkOpen()
                return GuardReading(rules: state.guards.rules[key.scope], counts: GuardCounts())
            }
        }
        guard let rules = reading.rules else {
            // Removed on another engine a moment ago: unguarded.
            locked.withLock { state in state.guards.set(nil, scope: key.scope) }
            return try decideSendBegin(key, budgets: budgets, screened: true)
        }
        record.mode = rules.mode
        record.streamLength = rules.recordStreamLength
        var named = budgets
        let bypass = rules.alwaysAllowed(number, address)
        if let bypass {
            record.bypass = bypass
            if rules.alwaysAllowSkipsBudgets { named = [] }
        } else if let rule = rules.refusal(of: number) {
            record.rule = rule
            throw TickgateError(.destinationRefused, "codes to \(number) are refused: \(rule)")
        }
        guard bypass == nil, rules.mode != .off, judged else {
            return try decideSendBegin(key, budgets: named, screened: true)
        }
        // Counted first and judged by the codes counted before it, in one
        // step (memory: under the lock; a store: one transaction or
        // script), so that sends at the same time are judged one after
        // another: a burst gets no more through than a threshold allows.
        // Given back if it is refused, by the signals or by the key.
        let pending = GuardBook.PendingCode(scope: key.scope, subject: key.subject,
                                            code: locked.withLock { $0.guards.nextCode() },
                                            country: country, address: address)
        let (counts, counted) = try countSent(pending, rules: rules, read: reading)
        let judgment = rules.thresholds.judge(counts)
        record.judgment = judgment
        record.counts = counts
        if rules.mode == .enforce, !judgment.warnings.isEmpty {
            if counted {
                giveBack(pending)
            } else if let store, store.refusesLocally, store.hearsKeys,
                      !judgment.warnings.isDisjoint(with: [.unverifiedByCountryDaily, .unverifiedByCountryHourly]) {
                // Refused by the country's counts as the store read them:
                // the country's next sends are refused here until they can
                // have room (KnownGuardRefusals).
                locked.withLock { state in
                    state.refusals.guards.learn(spot, mark: guardMark, read: reading, counts: counts,
                                                judgment: judgment, unverifiedAfter: rules.thresholds.unverifiedAfter,
                                                at: state.now())
                }
            }
            throw Self.pumpingSuspected(judgment, counts, country: country, rules: rules, known: false)
        }
        let ticket: UInt64
        do {
            ticket = try decideSendBegin(key, budgets: named, screened: true)
        } catch {
            giveBack(pending)
            throw error
        }
        locked.withLock { state in
            state.guards.pending[ticket] = pending
            // Tickets that expired unended leave their entry: the oldest
            // go when too many are held.
            if state.guards.pending.count > GuardBook.maximumPending {
                state.guards.pending = state.guards.pending.filter { $0.key > ticket &- UInt64(GuardBook.maximumPending / 2) }
            }
        }
        return ticket
    }

    /// The refusal of a send judged with `judgment` (`known`: by a refusal
    /// known already, whose address counts are not known).
    private static func pumpingSuspected(_ judgment: GuardJudgment, _ counts: GuardCounts, country: String,
                                         rules: Guard, known: Bool) -> TickgateError {
        var warnings = judgment.warnings
        if known { warnings.formIntersection([.unverifiedByCountryDaily, .unverifiedByCountryHourly]) }
        let address = counts.hasAddress && !known
            ? "; address: \(counts.addressUnverifiedDay) of \(judgment.addressDaily) a day, \(counts.addressUnverifiedHour) of \(judgment.addressHourly) an hour, \(counts.addressCountriesDay) countries of \(rules.thresholds.addressCountriesMaximum)"
            : ""
        return TickgateError(.pumpingSuspected,
            "\(warnings.names) (\(country): \(counts.countryUnverifiedDay) unverified in a day of \(judgment.countryDaily) allowed, \(counts.countryUnverifiedHour) in an hour of \(judgment.countryHourly)\(address))"
            + (known ? "; known from an earlier read of the store, until a code is verified or given back" : ""))
    }

    /// Counts `code` unverified and answers the counts before it, in one
    /// step; a send the counts already refuse (in ENFORCE) is not counted
    /// (`counted` false). `read`: what the store's read of the guard saw,
    /// which refuses without a count when it is over a threshold already.
    private func countSent(_ code: GuardBook.PendingCode, rules: Guard,
                           read: GuardReading) throws(TickgateError) -> (GuardCounts, counted: Bool) {
        func refuses(_ counts: GuardCounts) -> Bool {
            rules.mode == .enforce && !rules.thresholds.judge(counts).warnings.isEmpty
        }
        let historyDays = rules.thresholds.historyDays
        guard let store else {
            return try locked.withLock { (state) throws(TickgateError) -> (GuardCounts, counted: Bool) in
                try state.checkOpen()
                let now = state.now()
                var ledger = state.guards.ledgers[code.scope] ?? ConversionLedger()
                let counts = ledger.counts(country: code.country, address: code.address, historyDays: historyDays,
                                           unverifiedAfter: rules.thresholds.unverifiedAfter, at: now)
                if refuses(counts) { return (counts, false) }
                ledger.sent(code.code, subject: code.subject, country: code.country, address: code.address, at: now,
                            historyDays: historyDays)
                state.guards.ledgers[code.scope] = ledger
                return (counts, true)
            }
        }
        let before = read.judged(by: rules.thresholds)
        if refuses(before) { return (before, false) }
        do {
            return (try store.guardSent(scope: code.scope, subject: code.subject, code: code.code,
                                        country: code.country, address: code.address).judged(by: rules.thresholds),
                    true)
        } catch {
            // The count may have been made (a reply lost): given back (a
            // count a stopped server makes late, past its deadline,
            // changes nothing).
            giveBack(code)
            throw error
        }
    }

    /// A counted code that did not go out: counted nowhere (on a store,
    /// best effort: a code left counted errs on the safe side).
    private func giveBack(_ code: GuardBook.PendingCode) {
        if let store {
            try? store.guardReturned(scope: code.scope, subject: code.subject, code: code.code,
                                     country: code.country, address: code.address)
            // (Its notice is this engine's own, unheard.)
            locked.withLock { state in state.refusals.guards.noticed() }
        } else {
            locked.withLock { state in state.guards.ledgers[code.scope]?.returned(code.code) }
        }
    }

    /// Closes a send ticket (see `decideSendEnd`); a guarded code whose
    /// send failed is given back to the signals.
    public func sendEnd(_ ticket: UInt64, _ outcome: SendOutcome,
                        serverRetryAfter: Span = .zero) throws(TickgateError) -> Span {
        let result: Span
        do {
            result = try decideSendEnd(ticket, outcome, serverRetryAfter: serverRetryAfter)
        } catch {
            // An expired or ended ticket's code stays counted (it may have
            // gone out); bad input leaves the ticket as it was.
            if error.status == .expired || error.status == .notFound {
                _ = locked.withLock { $0.guards.pending.removeValue(forKey: ticket) }
            }
            throw error
        }
        guard let pending = locked.withLock({ $0.guards.pending.removeValue(forKey: ticket) }) else { return result }
        if outcome == .failed { giveBack(pending) }
        return result
    }

    /// The host verified the code (see `decideVerified`); on a guarded
    /// scope the key's last code counts as verified.
    public func verified(_ key: CountdownKey) throws(TickgateError) {
        try countingVerify(wrong: false) { () throws(TickgateError) in try decideVerified(key) }
        // A store on a local file says at no cost (this engine may never
        // have sent on the scope since another process set its guard).
        if let store, case let .known(stored) = try? store.localGuard(scope: key.scope) {
            locked.withLock { state in state.guards.set(stored, scope: key.scope) }
        }
        guard let rules = locked.withLock({ $0.guards.rules[key.scope] }), rules.mode != .off,
              let number = try? PhoneNumber.parse(key.subject.value) else { return }
        let country = Guard.country(of: number)
        if let store {
            // Best effort: the verification stands; a miss leaves the code
            // counted unverified (the safe side).
            try? store.guardVerified(scope: key.scope, subject: key.subject, country: country)
            locked.withLock { state in state.refusals.guards.noticed() }
        } else {
            locked.withLock { state in
                state.guards.ledgers[key.scope, default: ConversionLedger()]
                    .verified(subject: key.subject, country: country, at: state.now(),
                              historyDays: rules.thresholds.historyDays)
            }
        }
    }
}
