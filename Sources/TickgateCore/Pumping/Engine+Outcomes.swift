// The records' outcomes (Pumping/CodeOutcomes.swift): a guarded code is
// followed from its successful send while someone hears this engine's
// records (a record subscription, or the store's record stream), and its
// outcome is recorded once known. Best effort, as the records are: an
// outcome lost to a store failure is not retried (the decisions stand).

extension Engine {
    /// Someone hears the outcomes of `scope`: its outcome observers here,
    /// or the store's record stream (Redis) that the guard keeps.
    private func listening(_ scope: KeyName, _ rules: Guard) -> Bool {
        if rules.recordStreamLength > 0, store.keepsRecordStream { return true }
        return locked.withLock { !($0.observers.outcomeObservers[scope]?.isEmpty ?? true) }
    }

    /// `event` for `key`'s number on its guarded scope, then the sweep:
    /// records every code whose outcome it decided. `.sent` follows the
    /// code only while someone listens; `.verified` and `.killed` always
    /// ask (another engine may follow the number's code), sweeping only
    /// while someone listens; `.sweep` only while someone listens, and at
    /// most once per the store's `sweepInterval`.
    func followOutcomes(_ key: CountdownKey, _ event: OutcomeEvent) {
        guard let rules = locked.withLock({ $0.guards.rules[key.scope] }), rules.mode != .off else { return }
        let hears = listening(key.scope, rules)
        switch event {
        case .sent, .sweep:
            guard hears else { return }
        case .verified, .killed:
            break
        }
        let unverifiedAfter = rules.thresholds.unverifiedAfter
        let interval = store.sweepInterval
        if event == .sweep, interval > .zero {
            let due = locked.withLock { (state) -> Bool in
                let now = state.now()
                if let last = state.guards.lastSweep[key.scope], now.since(last) < interval { return false }
                state.guards.lastSweep[key.scope] = now
                return true
            }
            guard due else { return }
        }
        // (An engine no one hears takes off only the number's code: its
        // sweep would report others' codes to no one.)
        let records = streamedRecords(rules)
        guard let decided = try? store.guardOutcomes(scope: key.scope, subject: key.subject, event: event,
                                                     unverifiedAfter: unverifiedAfter, sweep: hears,
                                                     records: records) else { return }
        recordOutcomes(decided, of: key.scope, rules: rules, records: records)
    }

    /// The outcomes' records a store's step appends to the guard's record
    /// stream (nil: the store keeps none, or the guard has none); their
    /// time is now, before the step.
    private func streamedRecords(_ rules: Guard) -> OutcomeRecords? {
        guard rules.recordStreamLength > 0, store.keepsRecordStream else { return nil }
        return OutcomeRecords(streamLength: rules.recordStreamLength, mode: rules.mode,
                              wallNanoseconds: clock.wallNow())
    }

    /// A successful send's guarded code, to be followed in the step that
    /// ends the send (`KeyDecision.sendEnd`'s `follow`): as `.sent` would
    /// follow it, on a store that screens in its decisions; nil otherwise.
    func outcomeFollow(_ ticket: UInt64) -> OutcomeFollow? {
        guard store.screensInDecision,
              let (pending, rules) = locked.withLock({ (state) -> (GuardBook.PendingCode, Guard)? in
                  guard let pending = state.guards.pending[ticket],
                        let rules = state.guards.rules[pending.scope] else { return nil }
                  return (pending, rules)
              }),
              rules.mode != .off, listening(pending.scope, rules) else { return nil }
        return OutcomeFollow(code: pending.code, unverifiedAfter: rules.thresholds.unverifiedAfter, sweep: true,
                             records: streamedRecords(rules), rules: rules)
    }

    /// The records of the codes whose outcome a step decided, for the
    /// scope's subscribers (`records`: the step appended them to the
    /// stream, at that time).
    func recordOutcomes(_ decided: [DecidedCode], of scope: KeyName, rules known: Guard? = nil,
                        records: OutcomeRecords?) {
        guard !decided.isEmpty, let rules = known ?? locked.withLock({ $0.guards.rules[scope] }) else { return }
        let wallAt = records?.wallNanoseconds ?? clock.wallNow()
        for code in decided {
            var record = GuardRecord(scope: scope, number: code.subject,
                                     address: code.address.isEmpty ? nil : try? ClientAddress.parse(code.address),
                                     wallMilliseconds: wallAt / 1_000_000)
            record.country = code.country
            record.mode = rules.mode
            record.streamLength = rules.recordStreamLength
            record.outcome = code.outcome
            record.codeSentWallMilliseconds = (wallAt - code.age.nanoseconds) / 1_000_000
            record.inStream = records != nil
            deliver(record)
        }
    }

    /// The record of a passed challenge (no code's outcome: the pass waits
    /// for the number's next send).
    func recordChallengePassed(_ key: CountdownKey, from address: ClientAddress?) {
        guard let rules = locked.withLock({ $0.guards.rules[key.scope] }), listening(key.scope, rules),
              let number = try? PhoneNumber.parse(key.subject.value) else { return }
        var record = GuardRecord(scope: key.scope, number: key.subject.value, address: address,
                                 wallMilliseconds: clock.wallNow() / 1_000_000)
        record.country = Guard.country(of: number)
        record.callingCode = number.callingCode
        record.mode = rules.mode
        record.streamLength = rules.recordStreamLength
        record.outcome = .challengePassed
        deliver(record)
    }
}
