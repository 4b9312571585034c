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

    /// `sendBegin` (no budgets, no address) for a key given as bytes: made
    /// on the bytes when nothing needs the full path, else by names.
    public func sendBegin(_ key: RawKey) throws(TickgateError) -> UInt64 {
        try countingSend { () throws(TickgateError) -> UInt64 in
            if let ticket = try decideSendBegin(key) { return ticket }
            return try screenedSendBegin(key.names(), budgets: [], from: nil)
        }
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
            followOutcomes(key, .sweep)
            return ticket
        } catch {
            record.status = error.status
            record.message = error.message
            deliver(record)
            // (Not after a store failure: the sweep would wait for it again.)
            if error.status != .storeIO, error.status != .storeUnknown { followOutcomes(key, .sweep) }
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
            guard store.refusesLocally, state.sends.localKeys.isEmpty else { return 0 }
            // (The key's own refusals only: an always-allowed send may skip
            // the budgets.)
            if let refusal = state.refusals.refuseSend(key, budgets: [], at: state.now()) { throw refusal }
            // The country's counts refuse it (the guard as this engine
            // knows it, which its notices keep the store's: no bypass, no
            // destination rule first).
            if let rules = state.guards.rules[key.scope], rules.mode == .enforce,
               rules.challengeSignals.isDisjoint(with: [.unverifiedByCountryDaily, .unverifiedByCountryHourly]),
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
        // The guard as this engine knows it; a store screens the send by
        // its own (the truth) in one step: judged and counted, or answered
        // with the guard it holds if that is another, which this engine
        // then takes and screens by again.
        let pending = GuardBook.PendingCode(scope: key.scope, subject: key.subject,
                                            code: locked.withLock { $0.guards.nextCode() },
                                            country: country, address: address)
        var rules = locked.withLock { $0.guards.rules[key.scope] }
        if store.screensInDecision, let current = rules {
            // One server: the guard screens the send in the step that
            // decides it (a guarded send costs no step of its own).
            switch try sendScreenedInStep(key, budgets: budgets, number: number, country: country, address: address,
                                          rules: current, pending: pending, spot: spot, mark: guardMark,
                                          record: &record) {
            case let .sent(ticket): return ticket
            case let .another(stored): rules = stored
            }
        }
        var screened: (reading: GuardReading, judgment: GuardJudgment, counted: Bool)?
        var judged = true
        var tries = 0
        // The lists' answers for the guard last screened by (each a walk of
        // up to 1000 entries: once a send).
        var bypass: String?
        var rule: String?
        screening: while let current = rules {
            bypass = current.alwaysAllowed(number, address)
            rule = bypass == nil ? current.refusal(of: number) : nil
            let judge = current.mode != .off && bypass == nil && rule == nil
            do throws(TickgateError) {
                switch try store.guardScreen(scope: key.scope, subject: key.subject, code: pending.code,
                                             country: country, address: address, rules: current, judge: judge) {
                case let .stale(stored):
                    adopt(stored, scope: key.scope)
                    rules = stored
                    tries += 1
                    if tries >= 3 { break screening }
                case .same:
                    break screening
                case let .judged(reading, judgment, counted):
                    screened = (reading, judgment, counted)
                    break screening
                }
            } catch {
                // The count may have been made (a reply lost): given
                // back (a screen a stopped server runs late, past its
                // deadline, changes nothing).
                if judge { giveBack(pending) }
                guard (error.status == .storeIO || error.status == .storeUnknown) && failOpen else { throw error }
                // Fail open: the store is out of reach; this engine's
                // copy of the guard decides its lists, no signal is
                // judged (the counts are the store's), and the send
                // goes on to be granted or refused by memory alone.
                judged = false
                record.message = "the store is out of reach: signals not judged"
                break screening
            }
        }
        if tries >= 3 {
            // The guard changed on every screen: nothing was counted on
            // any store (a `.stale` screen counts nothing), so a status
            // that says try again, not one that says it may be made.
            throw TickgateError(.busy,
                "the guard of \(key.scope.value) changed during the send, three times; nothing was charged: try again")
        }
        guard let rules else {
            // Removed on another engine a moment ago: unguarded (a shared
            // store refuses it if a guard came back meanwhile).
            return try decideSendBegin(key, budgets: budgets, screened: .unscreened)
        }
        record.mode = rules.mode
        record.streamLength = rules.recordStreamLength
        var named = budgets
        if let bypass {
            record.bypass = bypass
            if rules.alwaysAllowSkipsBudgets { named = [] }
        } else if let rule {
            record.rule = rule
            throw TickgateError(.destinationRefused, "codes to \(number) are refused: \(rule)")
        }
        guard bypass == nil, rules.mode != .off, judged else {
            return try decideSendBegin(key, budgets: named, screened: .screened)
        }
        // Counted and judged by the codes counted before it, in one step
        // of the store (memory: under the lock; SQLite: one transaction;
        // Redis: one script), so that sends at the same time are judged one
        // after another: a burst gets no more through than a threshold
        // allows. Given back if the key refuses it.
        guard let screened else {
            throw TickgateError(.storeCorrupt, "the store's guard answered a send it was asked to judge without a judgment",
                                store: .corrupt)
        }
        let (counts, judgment, counted) = (screened.reading.counts, screened.judgment, screened.counted)
        record.judgment = judgment
        record.counts = counts
        let answer = GuardRules.answer(judgment, mode: rules.mode, challenge: rules.challengeSignals,
                                       passed: judgment.challengePassed)
        if answer != .grant {
            if counted {
                giveBack(pending)
            } else if answer == .refuse, store.refusesLocally, store.hearsKeys,
                      !judgment.warnings.isDisjoint(with: [.unverifiedByCountryDaily, .unverifiedByCountryHourly]) {
                // Refused by the country's counts as the store read them:
                // the country's next sends are refused here until they can
                // have room (KnownGuardRefusals).
                locked.withLock { state in
                    state.refusals.guards.learn(spot, mark: guardMark, read: screened.reading, counts: counts,
                                                judgment: judgment, unverifiedAfter: rules.thresholds.unverifiedAfter,
                                                at: state.now())
                }
            }
            throw Self.pumpingSuspected(judgment, counts, country: country, rules: rules, known: false,
                                        challenge: answer == .challenge)
        }
        let ticket: UInt64
        do {
            ticket = try decideSendBegin(key, budgets: named, screened: .screened)
        } catch {
            giveBack(pending)
            throw error
        }
        keepPending(pending, ticket: ticket)
        return ticket
    }

    private enum InStep {
        /// Granted: the ticket.
        case sent(UInt64)
        /// The store holds another guard (nil: none), now this engine's:
        /// screened again, by it.
        case another(Guard?)
    }

    /// A guarded send on a store that screens it in the step that decides
    /// it (`Store.screensInDecision`), by `rules` (this engine's copy; the
    /// store checks it holds the same). Throws the refusal (the
    /// destination, the signals, the key); a refusal changed nothing.
    private func sendScreenedInStep(_ key: CountdownKey, budgets: [BudgetKey], number: PhoneNumber, country: String,
                                    address: ClientAddress?, rules: Guard, pending: GuardBook.PendingCode,
                                    spot: KnownGuardRefusals.Spot, mark: UInt64,
                                    record: inout GuardRecord) throws(TickgateError) -> InStep {
        let bypass = rules.alwaysAllowed(number, address)
        let judge = bypass == nil && rules.mode != .off && rules.refusal(of: number) == nil
        var named = budgets
        if bypass != nil, rules.alwaysAllowSkipsBudgets { named = [] }
        if bypass == nil, rules.refusal(of: number) != nil {
            // Refused by its destination: the store's guard says so first
            // (the screen's own step: a refusal costs nothing more).
            return .another(rules)
        }
        var request = GuardScreenRequest(code: pending.code, country: country, address: address, rules: rules,
                                         judge: judge)
        if rules.recordStreamLength > 0, store.keepsRecordStream {
            // The record as known before the screen: the store appends it
            // in the step that grants the send (no round trip of its own).
            var known = record
            known.mode = rules.mode
            known.streamLength = rules.recordStreamLength
            known.bypass = bypass
            request.record = known
        }
        var answer: DecisionResult?
        // What the guard's answer tells the record (and of a refusal by
        // the signals, the engine: KnownGuardRefusals).
        func take(_ answer: DecisionResult?, record: inout GuardRecord) {
            record.mode = rules.mode
            record.streamLength = rules.recordStreamLength
            if let bypass { record.bypass = bypass }
            if answer?.localOnly == true { record.message = "the store is out of reach: signals not judged" }
            if case let .judged(reading, judgment, _)? = answer?.guardScreen {
                record.judgment = judgment
                record.counts = reading.counts
            }
        }
        do {
            let ticket = try decideSendBegin(key, budgets: named, screened: .inStep(request), answered: { answer = $0 })
            take(answer, record: &record)
            // (A repeated decision's answer, whose first run appended it,
            // says nothing of its screen.)
            record.inStream = request.record != nil && answer?.localOnly != true
            // Counted (or, in a repeated answer, counted by the first run):
            // given back if the send fails.
            var counted = judge && answer?.localOnly != true
            if case let .judged(_, _, was)? = answer?.guardScreen { counted = was }
            if counted { keepPending(pending, ticket: ticket) }
            return .sent(ticket)
        } catch where error.guardAnswered {
            switch answer?.guardScreen {
            case let .stale(stored)?:
                adopt(stored, scope: key.scope)
                return .another(stored)
            case let .judged(reading, judgment, false)?:
                take(answer, record: &record)
                let counts = reading.counts
                let answer = GuardRules.answer(judgment, mode: rules.mode, challenge: rules.challengeSignals,
                                               passed: judgment.challengePassed)
                if answer == .refuse, store.refusesLocally, store.hearsKeys,
                   !judgment.warnings.isDisjoint(with: [.unverifiedByCountryDaily, .unverifiedByCountryHourly]) {
                    locked.withLock { state in
                        state.refusals.guards.learn(spot, mark: mark, read: reading, counts: counts,
                                                    judgment: judgment,
                                                    unverifiedAfter: rules.thresholds.unverifiedAfter, at: state.now())
                    }
                }
                throw Self.pumpingSuspected(judgment, counts, country: country, rules: rules, known: false,
                                            challenge: answer == .challenge)
            default:
                throw TickgateError(.storeCorrupt, "the store's guard answered a send it screened without its screen",
                                    store: .corrupt)
            }
        } catch {
            // Refused by the key (its count given back by the store).
            take(answer, record: &record)
            throw error
        }
    }

    /// Takes the guard the store holds for `scope` (nil: none): what this
    /// engine refused by the old one may not hold.
    private func adopt(_ stored: Guard?, scope: KeyName) {
        locked.withLock { state in
            state.guards.set(stored, scope: scope)
            state.refusals.dropAll()
        }
    }

    /// The person asking codes for `key`'s number from `address` passed a
    /// challenge: the next send of the number from the address goes
    /// through the guard's challenge signals, once, within its
    /// `challengePassSeconds` (the store's guard on a store, which keeps
    /// the pass). `.notFound` when the scope has no guard with challenge
    /// signals; nothing is kept on an error.
    public func challengePassed(_ key: CountdownKey, from address: ClientAddress?) throws(TickgateError) {
        _ = try PhoneNumber.parse(key.subject.value)
        try store.guardChallengePassed(scope: key.scope, subject: key.subject, address: address)
        recordChallengePassed(key, from: address)
    }

    /// A granted code is counted unverified: given back if its send fails.
    private func keepPending(_ pending: GuardBook.PendingCode, ticket: UInt64) {
        locked.withLock { state in
            state.guards.pending[ticket] = pending
            // Tickets that expired unended leave their entry: the oldest
            // go when too many are held.
            if state.guards.pending.count > GuardBook.maximumPending {
                state.guards.pending = state.guards.pending.filter { $0.key > ticket &- UInt64(GuardBook.maximumPending / 2) }
            }
        }
    }

    /// The refusal of a send judged with `judgment` (`known`: by a refusal
    /// known already, whose address counts are not known).
    /// (`challenge`: every warning asks a challenge: `.challengeRequired`.)
    private static func pumpingSuspected(_ judgment: GuardJudgment, _ counts: GuardCounts, country: String,
                                         rules: Guard, known: Bool, challenge: Bool = false) -> TickgateError {
        var warnings = judgment.warnings
        if known { warnings.formIntersection([.unverifiedByCountryDaily, .unverifiedByCountryHourly]) }
        let address = counts.hasAddress && !known
            ? "; address: \(counts.addressUnverifiedDay) of \(judgment.addressDaily) a day, \(counts.addressUnverifiedHour) of \(judgment.addressHourly) an hour, \(counts.addressCountriesDay) countries of \(rules.thresholds.addressCountriesMaximum)"
            : ""
        // The narrowest range that warned: numbers outside it are not
        // refused by it.
        let range = judgment.range.isEmpty || known ? ""
            : "; range \(judgment.range): \(judgment.rangeUnverifiedDay) of \(judgment.rangeDaily) a day, \(judgment.rangeUnverifiedHour) of \(judgment.rangeHourly) an hour"
        return TickgateError(challenge ? .challengeRequired : .pumpingSuspected,
            (challenge ? "a challenge is required: " : "") + "\(warnings.names) (\(country): \(counts.countryUnverifiedDay) unverified in a day of \(judgment.countryDaily) allowed, \(counts.countryUnverifiedHour) in an hour of \(judgment.countryHourly)\(range)\(address))"
            + (known ? "; known from an earlier read of the store, until a code is verified or given back" : ""))
    }

    /// A counted code that did not go out: counted nowhere (on a store,
    /// best effort: a code left counted errs on the safe side).
    private func giveBack(_ code: GuardBook.PendingCode) {
        try? store.guardReturned(scope: code.scope, subject: code.subject, code: code.code,
                                 country: code.country, address: code.address)
        // (Its notice is this engine's own, unheard.)
        locked.withLock { state in state.refusals.guards.noticed() }
    }

    /// Closes a send ticket (see `decideSendEnd`); a guarded code whose
    /// send failed is given back to the signals.
    public func sendEnd(_ ticket: UInt64, _ outcome: SendOutcome,
                        serverRetryAfter: Span = .zero) throws(TickgateError) -> Span {
        if outcome == .succeeded, let cooldown = decideSendEnd(succeeded: ticket, serverRetryAfter: serverRetryAfter) {
            return cooldown
        }
        let result: Span
        // A store that screens in its decisions follows the code in the
        // step that ends its send (no round trip of its own).
        let follow = outcome == .succeeded ? outcomeFollow(ticket) : nil
        var followed: [DecidedCode]?
        do {
            result = try decideSendEnd(ticket, outcome, serverRetryAfter: serverRetryAfter, follow: follow,
                                       followed: { followed = $0 })
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
        if outcome == .succeeded {
            let key = CountdownKey(scope: pending.scope, subject: pending.subject)
            if let follow, let followed {
                recordOutcomes(followed, of: key.scope, rules: follow.rules, records: follow.records)
            } else {
                followOutcomes(key, .sent(code: pending.code))
            }
        }
        return result
    }

    /// The host verified the code (see `decideVerified`); on a guarded
    /// scope the key's last code counts as verified.
    public func verified(_ key: CountdownKey) throws(TickgateError) {
        try countingVerify(wrong: false) { () throws(TickgateError) in try decideVerified(key) }
        // A store on a local file says at no cost (this engine may never
        // have sent on the scope since another process set its guard).
        if case let .known(stored) = try? store.localGuard(scope: key.scope) {
            locked.withLock { state in state.guards.set(stored, scope: key.scope) }
        }
        guard let rules = locked.withLock({ $0.guards.rules[key.scope] }), rules.mode != .off,
              let number = try? PhoneNumber.parse(key.subject.value) else { return }
        let country = Guard.country(of: number)
        // (Before the signals count it: the number's last code, which it
        // marks verified, tells a followed code replaced from verified.)
        followOutcomes(key, .verified)
        // Best effort: the verification stands; a miss leaves the code
        // counted unverified (the safe side).
        // (The number's ranges: the store counts them if its guard has
        // range signals, whatever this engine's copy says.)
        try? store.guardVerified(scope: key.scope, subject: key.subject, country: country,
                                 ranges: GuardRules.ranges(of: number))
        locked.withLock { state in state.refusals.guards.noticed() }
    }
}
