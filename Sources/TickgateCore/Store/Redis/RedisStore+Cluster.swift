// On a Redis Cluster a key's hash, the settings and each budget key live
// in slots of their own, most often on other primaries, and one script
// cannot reach them all. A decision is then a short protocol (docs/redis.md,
// "A decision on a cluster", with what a crash at each step leaves):
//
//   1. read the scope's policy and the budgets from the settings (one
//      round trip, to the settings' primary);
//   2. a send with budgets: reserve a place on each budget key
//      (Scripts/reserve.lua: it counts against the cap at once);
//   3. decide on the key (Scripts/decide.lua, given the policy and the
//      reservations' verdict);
//   4. commit every reservation if the key granted, else release them
//      (Scripts/settle.lua). A failed send releases its charges after 3.
//
// A reservation that is neither committed nor released (the engine died,
// a primary failed, or the outcome of step 3 is unknown) expires by itself
// after `reservationLife` and is dropped by the next reservation on that
// budget key.

extension RedisStore {
    /// How long a reservation lives unless committed or released: a
    /// decision's steps take at most the store timeout, and the commit
    /// gets another; a second more for the clocks.
    var reservationLife: Span { Span(nanoseconds: options.timeout.nanoseconds &* 2 &+ 1_000_000_000) }

    func decideOnCluster(_ decision: KeyDecision, budgets named: [BudgetRow], for key: CountdownKey,
                         by deadline: Instant) throws(TickgateError) -> DecisionResult {
        let call = clock.begin(by: deadline)
        // 1. The settings: the scope's policy and every budget named.
        var fields = [Array("HMGET".utf8), keys.settings, Array(("p:" + key.scope.value).utf8)]
        for row in named { fields.append(Array(("g:" + row.key.budget.value).utf8)) }
        // An unscreened send: the scope must have no guard.
        let unscreened = decision.isUnscreenedSend
        if unscreened { fields.append(Array(("u:" + key.scope.value).utf8)) }
        let settingsName = String(decoding: keys.settings, as: UTF8.self)
        guard case var .array(values) = try read([fields], on: keys.settings, by: call.deadline)[0],
              values.count == 1 + named.count + (unscreened ? 1 : 0) else {
            throw TickgateError(.storeCorrupt, "the Redis key \(settingsName) sent a bad reply to HMGET", store: .corrupt)
        }
        func bad(_ field: String) -> (String) -> TickgateError {
            { why in
                TickgateError(.storeCorrupt, "the Redis key \(settingsName) field \"\(field.prefix(60))\" \(why)",
                              store: .corrupt)
            }
        }
        if unscreened, let last = values.popLast(), case let .string(bytes) = last, !bytes.isEmpty {
            throw TickgateError.guarded(key.scope)
        }
        var policy = Self.defaultPolicy
        switch values[0] {
        case .null: break
        case let .string(bytes):
            _ = try RedisRows.policy(bytes, bad("p:" + key.scope.value))
            policy = bytes
        default: throw bad("p:" + key.scope.value)("is not a string")
        }
        var texts: [[UInt8]] = []
        var verdict: [UInt8] = []
        for (index, value) in values.dropFirst().enumerated() {
            switch value {
            case let .string(bytes):
                _ = try RedisRows.budget(bytes, bad("g:" + named[index].key.budget.value))
                texts.append(bytes)
            case .null:
                if verdict.isEmpty { verdict = Array("nobudget|-1|\(index)".utf8) }
            default:
                throw bad("g:" + named[index].key.budget.value)("is not a string")
            }
        }
        // 2. A send with budgets: a place on each, or the one that frees last.
        var reserved: [BudgetRow] = []
        var member: [UInt8] = []
        if verdict.isEmpty, case let .sendBegin(_, _, ticket, _) = decision, !named.isEmpty {
            member = ticketName(ticket)
            var latest: (at: Int64, index: Int)?
            let life = RedisClock.micros(reservationLife)
            let results = runAll(named.enumerated().map { (index, row) in
                ("reserve", [keys.budget(row.key), keys.reservations(row.key)],
                 [call.now, call.notAfter, Array(String(slackMilliseconds).utf8), texts[index], member, life])
            }, by: call.deadline)
            for (row, result) in zip(named, results) { if case .success = result { reserved.append(row) } }
            do throws(TickgateError) {
                for result in results { if case let .failure(error) = result { throw error } }
                for (index, row) in named.enumerated() {
                    let name = keys.budget(row.key)
                    let answer = try ReplyReader(try results[index].get(), key: name, server: address.description)
                    switch try answer.text(0) {
                    case "ok":
                        break
                    case "full":
                        let at = try answer.integer(3, 0...Int64(1) << 53)
                        if at > (latest?.at ?? -1) { latest = (at, index) }
                    case "late":
                        throw late("the reservation on \(row.key.description)")
                    default:
                        throw answer.corrupt()
                    }
                }
            } catch {
                // Released on every budget key (releasing what was never
                // reserved is harmless): a reservation whose answer was
                // lost may hold all the same. If one may and cannot be
                // released now, the call's outcome is unknown until it
                // expires.
                let released = settle(named, member, commit: false, by: settleDeadline(call))
                let unknown = results.indices.contains { index in
                    if case let .failure(failure) = results[index], failure.status == .storeUnknown {
                        return !released[index]
                    }
                    return false
                }
                if unknown || error.status != .storeUnknown { throw unknown ? Self.unknown(error) : error }
                throw TickgateError(.storeIO, error.message + " (nothing was reserved or decided)",
                                    store: error.storeFailure)
            }
            if let latest { verdict = Array("budget|\(latest.at)|\(latest.index)".utf8) }
        }
        // 3. The key decides.
        let result: DecisionResult
        do throws(TickgateError) {
            result = try decideOnce(decision, budgets: named, for: key, call: call, onCluster: (policy, verdict))
        } catch {
            // Unknown: the key may have granted. Its reservations then
            // stay until they expire (never a charge without a grant).
            if error.status != .storeUnknown, !reserved.isEmpty {
                settle(reserved, member, commit: false, by: settleDeadline(call))
            }
            throw error
        }
        // 4. Commit (a grant) or release (a refusal); a failed send gives
        // its charges back.
        if !reserved.isEmpty { settle(reserved, member, commit: result.refusal == nil, by: settleDeadline(call)) }
        if result.refusal == nil, case let .sendEnd(ticket, _, outcome, _, _, _, _, _) = decision, outcome == .failed,
           !named.isEmpty {
            settle(named, ticketName(ticket), commit: false, by: settleDeadline(call))
        }
        return result
    }

    /// The last step's deadline: what is left of the call, and at least a
    /// quarter of the store timeout (a grant's charges are not dropped for
    /// want of time), so a call on a cluster ends within 1.25 times the
    /// store timeout.
    private func settleDeadline(_ call: RedisClock.Call) -> Instant {
        max(call.deadline, Poller.boottime().advanced(by: Span(nanoseconds: options.timeout.nanoseconds / 4)))
    }

    private static func unknown(_ error: TickgateError) -> TickgateError {
        TickgateError(.storeUnknown,
            "\(error.message); a reservation may hold on a budget key until it expires (docs/redis.md, \"Redis Cluster\")",
            store: error.storeFailure)
    }

    /// Commits or releases `member` on each budget key, answering which
    /// ones are done; one that cannot be reached keeps its reservation
    /// until it expires (the decision stands).
    @discardableResult
    private func settle(_ rows: [BudgetRow], _ member: [UInt8], commit: Bool, by deadline: Instant) -> [Bool] {
        runAll(rows.map { row in
            ("settle", [keys.budget(row.key), keys.reservations(row.key)],
             [Array((commit ? "commit" : "release").utf8), member])
        }, by: deadline).map { result in
            if case let .success(reply) = result, case let .array(parts) = reply, parts.first?.text == "ok" { return true }
            return false
        }
    }

    /// Runs scripts whose keys are in different slots at once: each
    /// primary's share pipelined on one of its connections, every primary
    /// sent to before any reply is read, so one round trip for all. A
    /// script that got no plain answer this way (a redirect, `NOSCRIPT`, a
    /// lost connection, `replicas=N`) runs again alone by `run`, which
    /// handles each: the scripts given here count once however often they
    /// run (a reservation, a commit, a release).
    func runAll(_ calls: [(script: String, keys: [[UInt8]], arguments: [[UInt8]])],
                by deadline: Instant) -> [Result<RedisReply, TickgateError>] {
        var replies = [RedisReply?](repeating: nil, count: calls.count)
        if let cluster, calls.count > 1, url.replicas == 0 {
            var groups: [(pool: RedisPool, indexes: [Int], commands: [[[UInt8]]])] = []
            for (index, call) in calls.enumerated() {
                guard let sha = shas[call.script], let first = call.keys.first,
                      let pool = try? cluster.pool(for: RedisSlot.of(first), by: deadline) else { continue }
                let command = [Array("EVALSHA".utf8), sha, Array(String(call.keys.count + 1).utf8)] + call.keys
                    + [keys.clock(for: first)] + call.arguments
                if let group = groups.firstIndex(where: { $0.pool === pool }) {
                    groups[group].indexes.append(index)
                    groups[group].commands.append(command)
                } else {
                    groups.append((pool, [index], [command]))
                }
            }
            var sent: [(pool: RedisPool, connection: RedisConnection, indexes: [Int])] = []
            for group in groups {
                // Never waits for a busy pool while holding another's
                // connection: a group whose pool is busy runs alone after.
                guard let connection = group.pool.tryCheckOut(by: deadline) else { continue }
                do throws(TickgateError) {
                    try connection.limit(to: deadline)
                    try connection.sendAll(group.commands)
                    sent.append((group.pool, connection, group.indexes))
                } catch {
                    group.pool.checkIn(connection)
                }
            }
            for (pool, connection, indexes) in sent {
                if let got = try? connection.receive(indexes.count) {
                    for (index, reply) in zip(indexes, got) { replies[index] = reply }
                }
                pool.checkIn(connection)
            }
        }
        return calls.indices.map { (index) -> Result<RedisReply, TickgateError> in
            if let reply = replies[index] {
                switch reply {
                case let .error(text):
                    if Self.redirect(reply) == nil, !text.hasPrefix("NOSCRIPT") {
                        return .failure(RedisConnection.refused(text, address))
                    }
                default:
                    return .success(reply)
                }
            }
            do throws(TickgateError) {
                return .success(try run(calls[index].script, keys: calls[index].keys, arguments: calls[index].arguments,
                                        by: deadline))
            } catch {
                return .failure(error)
            }
        }
    }

    // MARK: Scope-wide cancel, on every primary

    /// Every key hash of the scope (of every scope: nil), found by SCAN on
    /// each primary and cancelled in batches of one slot each.
    func cancelAllOnCluster(scope: KeyName?) throws(TickgateError) {
        guard let cluster else { return }
        let pattern = keys.hashPattern(scope: scope)
        let primaries = cluster.primaries
        guard !primaries.isEmpty else {
            throw TickgateError(.storeIO, "the Redis Cluster \(url.description) serves no slot (cluster down)",
                                store: .unreachable)
        }
        for pool in primaries {
            var cursor = "0"
            repeat {
                let call = clock.begin()
                let reply = try pool.call(by: call.deadline, changes: false) { (connection) throws(TickgateError) in
                    try connection.command([Array("SCAN".utf8), Array(cursor.utf8), Array("MATCH".utf8), pattern,
                                            Array("COUNT".utf8), Array("1000".utf8)])
                }
                let (next, names) = try scanned(reply, pool.topology.description)
                cursor = next
                var bySlot: [Int: [[UInt8]]] = [:]
                for name in names { bySlot[RedisSlot.of(name), default: []].append(name) }
                for (_, batch) in bySlot.sorted(by: { $0.key < $1.key }) { try cancelKeys(batch) }
            } while cursor != "0"
        }
    }

    /// A SCAN reply: the next cursor and the names found.
    func scanned(_ reply: RedisReply, _ server: String) throws(TickgateError) -> (String, [[UInt8]]) {
        if case let .error(text) = reply { throw RedisConnection.refused(text, address) }
        guard case let .array(parts) = reply, parts.count == 2, let next = parts[0].text,
              next.utf8.count <= 20, next.allSatisfy({ $0.isASCII && $0.isNumber }),
              case let .array(found) = parts[1] else {
            throw TickgateError(.storeCorrupt, "the Redis server \(server) sent a bad SCAN reply", store: .corrupt)
        }
        var names: [[UInt8]] = []
        for entry in found { if case let .string(bytes) = entry { names.append(bytes) } }
        return (next, names)
    }

    /// Ends the countdowns of key hashes (all in one slot on a cluster), in
    /// batches of 100.
    func cancelKeys(_ names: [[UInt8]]) throws(TickgateError) {
        var start = 0
        while start < names.count {
            let batch = Array(names[start..<min(start + 100, names.count)])
            start += batch.count
            let call = clock.begin()
            var arguments: [[UInt8]] = [call.now, keys.keyChannel, call.notAfter]
            for name in batch { arguments.append(keys.keyNotice(hashName: name)) }
            if case .integer(-1) = try run("cancelKeys", keys: batch, arguments: arguments, by: call.deadline) {
                throw late("the cancel of \(batch.count) keys")
            }
        }
    }

    // MARK: Fail open, then reconcile, on a cluster

    /// The write-back of `merge`: the key with the scope's policy as the
    /// settings hold it, then each budget key's charges on its own slot.
    func mergeOnCluster(arguments: [[UInt8]], for key: CountdownKey, tag: [UInt8],
                        charges: [(BudgetKey, [UInt8])], call: RedisClock.Call) throws(TickgateError) {
        let settingsName = String(decoding: keys.settings, as: UTF8.self)
        let field = "p:" + key.scope.value
        var arguments = arguments
        switch try read([[Array("HGET".utf8), keys.settings, Array(field.utf8)]], on: keys.settings, by: call.deadline)[0] {
        case .null: break
        case let .string(bytes):
            _ = try RedisRows.policy(bytes) { why in
                TickgateError(.storeCorrupt, "the Redis key \(settingsName) field \"\(field.prefix(60))\" \(why)",
                              store: .corrupt)
            }
            arguments[5] = bytes
        default:
            throw TickgateError(.storeCorrupt, "the Redis key \(settingsName) sent a bad reply to HGET", store: .corrupt)
        }
        let name = keys.hash(tag: tag)
        let reply = try run("merge", keys: [name], arguments: arguments, by: call.deadline)
        let fields = try ReplyReader(reply, key: name, server: address.description)
        switch try fields.text(0) {
        case "ok": break
        case "late": throw late("the write-back of \(key.description)")
        default: throw fields.corrupt()
        }
        for (budgetKey, times) in charges {
            let budgetName = keys.budget(budgetKey)
            let reply = try run("addCharges", keys: [budgetName], arguments: [call.now, times, keys.engine],
                                by: call.deadline)
            let fields = try ReplyReader(reply, key: budgetName, server: address.description)
            guard try fields.text(0) == "ok" else { throw fields.corrupt() }
        }
    }
}
