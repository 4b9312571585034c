// The Redis store's decisions: each one run of Scripts/decide.lua, which
// decides on what the store holds (the key, its scope's policy, the
// budgets); the engine applies its answer, deciding nothing again.

extension RedisStore {
    func decide(_ decision: KeyDecision, budgets named: [BudgetRow], for key: CountdownKey, by deadline: Instant)
        throws(TickgateError) -> DecisionResult {
        if case .read = decision { return try read(key, by: deadline) }
        if cluster != nil { return try decideOnCluster(decision, budgets: named, for: key, by: deadline) }
        return try decideOnce(decision, budgets: named, for: key, call: clock.begin(by: deadline), onCluster: nil)
    }

    /// One run of Scripts/decide.lua. `onCluster`: nil on one server (the
    /// script reads the policy and charges the budgets itself); on a
    /// cluster, the scope's policy as the settings hold it and the
    /// budgets' verdict (RedisStore+Cluster.swift).
    func decideOnce(_ decision: KeyDecision, budgets named: [BudgetRow], for key: CountdownKey, call: RedisClock.Call,
                    onCluster: (policy: [UInt8], verdict: [UInt8])?) throws(TickgateError) -> DecisionResult {
        var op = ""
        var tick = Span.zero
        var a: [UInt8] = [], b: [UInt8] = [], c: [UInt8] = []
        var screen: GuardScreenRequest?
        var follow: OutcomeFollow?
        var guardKey: [UInt8] = []
        switch decision {
        case .read:
            break
        case let .start(duration, tickInterval, restart):
            op = "start"
            tick = tickInterval
            a = RedisClock.micros(duration)
            b = restart ? [UInt8(ascii: "1")] : [UInt8(ascii: "0")]
        case .cancel:
            op = "cancel"
        case let .sendBegin(_, tickInterval, ticket, screening):
            op = "begin"
            tick = tickInterval
            c = ticketName(ticket)
            switch screening {
            case .unscreened: break
            case .screened: a = [UInt8(ascii: "s")]
            case var .inStep(request):
                // On a cluster the guard's slot is another: screened first.
                guard onCluster == nil else { throw TickgateError(.storeUnknown, "a guarded send screened in its step on a cluster") }
                a = [UInt8(ascii: "g")]
                request.record?.ticket = ticket
                screen = request
            }
        case let .sendEnd(ticket, _, outcome, retry, _, tickInterval, _, following):
            op = "end"
            tick = tickInterval
            // (On a cluster the guard's slot is another: the engine follows
            // the code with a call of its own.)
            if outcome == .succeeded, onCluster == nil { follow = following }
            a = Array((follow != nil ? "follow" : outcome == .succeeded ? "ok" : "fail").utf8)
            b = RedisClock.micros(retry)
            c = ticketName(ticket)
        case .verified:
            op = "verified"
        case .verifyFailed:
            op = "failed"
        }
        let tag = keys.tag(key)
        var names = [keys.hash(tag: tag)]
        var arguments: [[UInt8]] = [
            Array(op.utf8), call.now, call.notAfter, Array(String(slackMilliseconds).utf8),
            keys.keyChannel, keys.keyNotice(tag: tag), RedisClock.micros(tick), onCluster?.policy ?? Self.defaultPolicy,
            Array(key.scope.value.utf8), a, b, c, nextDecision(), keys.engine,
            // An answer is kept for a retry as long as its call may last.
            Array(String(options.timeout.nanoseconds / 1_000 + 1_000_000).utf8),
        ]
        if let onCluster {
            arguments.append(onCluster.verdict)
        } else {
            names.append(keys.settings)
            for row in named {
                names.append(keys.budget(row.key))
                arguments.append(Array(row.key.budget.value.utf8))
            }
            if screen != nil || follow != nil {
                // Scripts/decide.lua: a screen or a follow names the guard's
                // key, then its own arguments.
                let base = keys.guardBase(key.scope)
                guardKey = base + Array("guard".utf8)
                names.append(guardKey)
                if let screen {
                    arguments += [base, Array(screen.country.utf8), Array((screen.address?.description ?? "").utf8),
                                  Array(screen.code.utf8), Array(key.subject.value.utf8),
                                  Array(screen.rules.storedText.utf8), screen.judge ? [UInt8(ascii: "1")] : [],
                                  Array(screen.rules.ranges(ofSubject: key.subject).joined(separator: ",").utf8)]
                    if let record = screen.record, record.streamLength > 0 {
                        // The record the script appends if it grants the send.
                        arguments.append(Array(String(record.streamLength).utf8))
                        for (field, value) in Self.decisionFields(record, judgedInStep: screen.judge) {
                            arguments += [Array(field.utf8), Array(value.utf8)]
                        }
                    }
                }
                if let follow {
                    arguments += [base, Array(key.subject.value.utf8), Array(follow.code.utf8),
                                  Array(String(follow.unverifiedAfter.nanoseconds / 1000).utf8),
                                  Array(String(follow.sweep ? FollowedCodes.sweepLimit : 0).utf8)]
                        + Self.outcomeTemplate(follow.records, scope: key.scope)
                }
            }
        }
        let reply = try run("decide", keys: names, arguments: arguments, by: call.deadline)
        let fields = try ReplyReader(reply, key: names[0], server: address.description)
        let code = try fields.text(0)
        if code == "corrupt" { throw fields.corrupt() }
        let now = try fields.integer(1, 0...Int64(1) << 53)
        let real = try fields.integer(2, 0...Int64(1) << 53)
        let offset = clock.finish(call, now: now, real: real)
        if code == "late" { throw late("the decision on \(key.description)") }
        if code == "guarded" { throw TickgateError.guarded(key.scope) }
        guard code == "ok" || code == "refused" || (code == "guard" && screen != nil) else {
            throw fields.corrupt("code \(code.prefix(40))")
        }
        let moment = RedisClock.instant(now, offset)
        let before = try RedisRows.keyRows(packed: try fields.element(3), for: key, name: names[0], now: now, offset: offset)
        let why = try fields.text(5)
        let first = try fields.integer(6, -1...Int64(1) << 53)
        let second = try fields.integer(7, -1...Int64(Budget.maximumKeysPerSend))
        // A guarded send's screen (its 9th element; none in a repeated
        // decision's answer).
        var screened: GuardScreen?
        if let screen, fields.elements.count > 8, case .array = fields.elements[8] {
            screened = try guardScreen(ReplyReader(fields.elements[8], key: guardKey,
                                                   server: address.description),
                                       address: screen.address)
        }
        if code == "guard" {
            guard screened != nil else { throw fields.corrupt("a guard's answer without its screen") }
            var result = DecisionResult(before: before, after: before, now: moment,
                                        refusal: TickgateError.guardAnswer(key.scope))
            result.guardScreen = screened
            return result
        }
        guard code == "refused" else {
            let after = try RedisRows.keyRows(packed: try fields.element(4), for: key, name: names[0], now: now, offset: offset)
            var result = DecisionResult(before: before, after: after, now: moment, refusal: nil)
            result.guardScreen = screened
            if follow != nil, fields.elements.count > 8, case .array = fields.elements[8] {
                // Best effort, as the outcomes are: the send's end stands.
                result.followed = (try? outcomes(ReplyReader(fields.elements[8], key: guardKey, server: address.description))) ?? []
            }
            if case .verifyFailed = decision {
                guard first >= 0, first <= Int64(SendPolicy.maximumWrongCodesLimit) else { throw fields.corrupt("cap") }
                result.maximumWrongCodes = Int(first)
            }
            return result
        }
        let refusal: Refusal
        switch why {
        case "busy": refusal = .busy
        case "window" where first >= 0: refusal = .window(RedisClock.instant(first, offset))
        case "budget" where first >= 0 && second >= 0 && second < named.count:
            refusal = .budget(RedisClock.instant(first, offset), index: Int(second))
        case "nobudget" where second >= 0 && second < named.count: refusal = .noBudget(index: Int(second))
        case "none": refusal = .noCountdown
        case "expired": refusal = .expired
        case "ticket": refusal = .ticket
        case "dead": refusal = .dead
        case "unsent": refusal = .unsent
        default: throw fields.corrupt("refusal \(why.prefix(40))")
        }
        let error: TickgateError
        switch refusal {
        case .busy:
            error = before.countdown.map { Engine.busyError($0, at: moment) } ?? refusal.error(key, at: moment)
        case let .budget(_, index):
            error = refusal.error(named[index].key.description, at: moment)
        case let .noBudget(index):
            error = refusal.error("\"\(named[index].key.budget.value)\"", at: moment)
        default:
            error = refusal.error(key, at: moment)
        }
        var result = DecisionResult(before: before, after: before, now: moment, refusal: error, refused: refusal)
        result.guardScreen = screened
        return result
    }

    /// A query: TIME, HGETALL and the clock's correction pipelined (one round trip, no script:
    /// a read needs no atomic write), checked as the script checks them.
    private func read(_ key: CountdownKey, by deadline: Instant) throws(TickgateError) -> DecisionResult {
        let call = clock.begin(by: deadline)
        let name = keys.hash(key)
        let (real, replies) = try timedRead([[Array("HGETALL".utf8), name]], on: name, by: call.deadline)
        let (now, offset) = clock.moment(call, real: real)
        let rows = try RedisRows.keyRows(replies[0], for: key, name: name, now: now, offset: offset)
        return DecisionResult(before: rows, after: rows, now: RedisClock.instant(now, offset), refusal: nil)
    }

    /// A call the server refused because it came past its deadline: it
    /// changed nothing.
    func late(_ what: String) -> TickgateError {
        TickgateError(.storeIO,
            "the Redis server \(address.description) did not answer within the store timeout (\(what) was not made)",
            store: .timeout)
    }

    /// A send ticket's name in the store: this engine's and its number.
    func ticketName(_ ticket: UInt64) -> [UInt8] { Array("\(engineName):\(ticket)".utf8) }

    /// How long a key outlives what it still decides. Redis replicates a
    /// key's expiry as an instant of the primary's clock: a new primary
    /// whose clock is ahead expires it early by as much, so keys get a
    /// minute more (server clocks up to a minute apart across a failover
    /// keep every cooldown; docs/redis.md, "Sentinel and failover"). Engine time moves by itself
    /// in tests, so it gets more.
    var slackMilliseconds: Int64 { options.time == .engine ? 600_000 : 60_000 }

    /// The policy of a scope that has none in the store.
    static let defaultPolicy = encode(SendPolicy())

    static func encode(_ policy: SendPolicy) -> [UInt8] {
        let steps = policy.cooldowns.map { String($0.nanoseconds / 1_000) }.joined(separator: ",")
        let rest = [Int64(policy.windowMaximumSends), policy.window.nanoseconds / 1_000,
                    policy.quietReset.nanoseconds / 1_000, policy.ticketTimeout.nanoseconds / 1_000,
                    Int64(policy.maximumWrongCodes)].map(String.init)
        return Array(([steps] + rest).joined(separator: "|").utf8)
    }

    // MARK: Scope-wide cancel

    func cancelAll(scope: KeyName?) throws(TickgateError) {
        if cluster != nil { return try cancelAllOnCluster(scope: scope) }
        let pattern = keys.hashPattern(scope: scope)
        var cursor = "0"
        repeat {
            let call = clock.begin()
            let reply = try exchange(on: nil, by: call.deadline, changes: false) { (connection, _) throws(TickgateError) in
                [try connection.command([Array("SCAN".utf8), Array(cursor.utf8), Array("MATCH".utf8), pattern,
                                         Array("COUNT".utf8), Array("1000".utf8)])]
            }[0]
            let (next, names) = try scanned(reply, address.description)
            cursor = next
            try cancelKeys(names)
        } while cursor != "0"
    }
}

extension RedisStore {
    // MARK: Fail open, then reconcile

    func merge(_ rows: KeyRows, for key: CountdownKey, charges: [BudgetKey: [Instant]],
               by deadline: Instant) throws(TickgateError) {
        let call = clock.begin(by: deadline)
        func micros(_ instant: Instant?) throws(TickgateError) -> [UInt8] {
            guard let instant else { return Array("-1".utf8) }
            guard let value = clock.micros(of: instant) else {
                throw TickgateError(.storeIO, "the Redis server \(address.description) has not told its time yet",
                                    store: .unreachable)
            }
            return Array(String(max(value, 0)).utf8)
        }
        let tag = keys.tag(key)
        let countdown = rows.countdown
        let record = rows.record
        let budgetKeys = charges.keys.sorted { $0.description < $1.description }
        var arguments: [[UInt8]] = [
            call.now, call.notAfter, Array(String(slackMilliseconds).utf8), keys.keyChannel, keys.keyNotice(tag: tag),
            Self.defaultPolicy, Array(key.scope.value.utf8), try micros(countdown?.deadline),
            Array(String(countdown?.phase.rawValue ?? 0).utf8), RedisClock.micros(countdown?.duration ?? .zero),
            RedisClock.micros(countdown?.tickInterval ?? .zero),
            record == nil ? Array("-1".utf8) : try micros(record?.lastSend ?? Instant(nanoseconds: 0)),
            Array(String(record?.consecutive ?? 0).utf8),
        ]
        var sends: [String] = []
        for send in record?.sends ?? [] { sends.append(String(decoding: try micros(send), as: UTF8.self)) }
        arguments.append(Array(sends.joined(separator: ",").utf8))
        for budgetKey in budgetKeys {
            var times: [String] = []
            for charge in charges[budgetKey] ?? [] { times.append(String(decoding: try micros(charge), as: UTF8.self)) }
            arguments.append(Array(times.joined(separator: ",").utf8))
        }
        if cluster != nil {
            let charges = Array(zip(budgetKeys, arguments[14...].map { $0 }))
            return try mergeOnCluster(arguments: Array(arguments[..<14]) + [keys.engine], for: key, tag: tag,
                                      charges: charges, call: call)
        }
        arguments.append(keys.engine)
        let names = [keys.hash(tag: tag), keys.settings] + budgetKeys.map { keys.budget($0) }
        let reply = try run("merge", keys: names, arguments: arguments, by: call.deadline)
        let fields = try ReplyReader(reply, key: names[0], server: address.description)
        switch try fields.text(0) {
        case "ok": return
        case "late": throw late("the write-back of \(key.description)")
        default: throw fields.corrupt()
        }
    }
}
