// The Redis store's settings (policies, titles, budgets), budget charges and
// sessions. Settings are one hash that every decision reads; a change is
// announced to every engine, which refreshes its copies for local reads.

extension RedisStore {
    // MARK: Settings

    private func put(field: String, value: [UInt8]) throws(TickgateError) {
        let call = clock.begin()
        // Setting a field twice is the same as once: a retry is harmless.
        let reply = try run("put", keys: [keys.settings],
                            arguments: [Array(field.utf8), value, keys.channel, keys.settingsNotice, call.notAfter],
                            by: call.deadline)
        if case let .array(parts) = reply, parts.first?.text == "late" { throw late("the setting \(field)") }
        if case let .array(parts) = reply, parts.first?.text == "corrupt" {
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: keys.settings, as: UTF8.self)) is not a hash",
                                store: .corrupt)
        }
    }

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        try put(field: "p:" + scope.value, value: Self.encode(policy))
    }

    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {
        let sources = [titles.idle, titles.sending, titles.cooling, titles.readyAgain, titles.locked, titles.codeDead]
            .map(\.source)
        var value: [UInt8] = []
        for source in sources {
            value.append(contentsOf: Array("\(source.utf8.count):".utf8))
            value.append(contentsOf: source.utf8)
        }
        try put(field: "t:" + scope.value, value: value)
    }

    func save(budget: Budget, name: KeyName) throws(TickgateError) {
        try put(field: "g:" + name.value, value: Array(budget.windows
            .map { "\($0.maximumSends)/\($0.length.millisecondsRoundedUp)" }.joined(separator: ",").utf8))
    }

    func save(guard rules: Guard?, scope: KeyName) throws(TickgateError) {
        // The scope's slot first (what its sends are judged by), then the
        // settings (what engines copy, with the notice).
        let text = Array((rules?.encoded ?? "").utf8)
        try runGuard("set", scope: scope, country: "", address: nil,
                     extra: [text, Array((rules?.extensionText ?? "").utf8)])
        try put(field: "u:" + scope.value, value: text)
    }

    /// The settings hash, read and checked: policies, titles and budgets.
    func readSettings() throws(TickgateError) -> StoreSnapshot {
        var snapshot = StoreSnapshot()
        let call = clock.begin()
        let reply = try read([[Array("HGETALL".utf8), keys.settings]], on: keys.settings, by: call.deadline)[0]
        let settingsKey = String(decoding: keys.settings, as: UTF8.self)
        for (field, value) in try pairs(reply, keys.settings) {
            func bad(_ why: String) -> TickgateError {
                TickgateError(.storeCorrupt, "the Redis key \(settingsKey) field \"\(field.prefix(60))\" \(why)",
                              store: .corrupt)
            }
            let kind = field.prefix(2)
            guard kind == "p:" || kind == "t:" || kind == "g:" || kind == "u:" else { throw bad("is not a setting") }
            let name = try RedisRows.name(String(field.dropFirst(2)), bad)
            switch kind {
            case "p:": snapshot.policies.append((name, try RedisRows.policy(value, bad)))
            case "t:": snapshot.titles.append((name, try RedisRows.titles(value, bad)))
            case "u:":
                if !value.isEmpty {
                    snapshot.guards.append((name, try Guard.decode(String(decoding: value, as: UTF8.self), bad)))
                }
            default: snapshot.budgets.append((name, try RedisRows.budget(value, bad)))
            }
        }
        return snapshot
    }

    /// At open: the settings. Keys are read when they are asked for, and
    /// sessions when a realm is (so opening costs the same whatever the
    /// store holds).
    func load() throws(TickgateError) -> StoreSnapshot { try readSettings() }

    private func pairs(_ reply: RedisReply, _ name: [UInt8]) throws(TickgateError) -> [(String, [UInt8])] {
        guard case let .array(entries) = reply, entries.count % 2 == 0 else {
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) sent a bad reply",
                                store: .corrupt)
        }
        var pairs: [(String, [UInt8])] = []
        var index = 0
        while index < entries.count {
            guard case let .string(field) = entries[index], case let .string(value) = entries[index + 1] else {
                throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) sent a bad reply",
                                    store: .corrupt)
            }
            pairs.append((String(decoding: field, as: UTF8.self), value))
            index += 2
        }
        return pairs
    }

    // MARK: Budget charges

    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant] {
        let call = clock.begin()
        let name = keys.budget(key)
        // On a cluster the set holds reservations too: they are not charges.
        var commands = [[Array("ZRANGE".utf8), name, Array("0".utf8), Array("-1".utf8), Array("WITHSCORES".utf8)]]
        if cluster != nil {
            commands.append([Array("ZRANGE".utf8), keys.reservations(key), Array("0".utf8), Array("-1".utf8)])
        }
        let (real, replies) = try timedRead(commands, on: name, by: call.deadline)
        var pending = Set<[UInt8]>()
        if cluster != nil, case let .array(members) = replies[1] {
            for member in members { if case let .string(bytes) = member { pending.insert(bytes) } }
        }
        let (serverNow, offset) = clock.moment(call, real: real)
        guard case let .array(entries) = replies[0], entries.count % 2 == 0 else {
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) sent a bad reply",
                                store: .corrupt)
        }
        var charges: [Instant] = []
        var index = 1
        while index < entries.count {
            // A reservation (on a cluster) is no charge, and may be newer
            // than the TIME read beside it.
            if case let .string(member) = entries[index - 1], pending.contains(member) {
                index += 2
                continue
            }
            // As the decide script: a charge is a whole time not after now.
            guard let text = entries[index].text, text.utf8.count <= 17, let score = Int64(text), score >= 0,
                  score <= serverNow else {
                throw TickgateError(.storeCorrupt,
                    "the Redis key \(String(decoding: name, as: UTF8.self)) is corrupt: a charge has the score \(entries[index].text?.prefix(40) ?? "?")",
                    store: .corrupt)
            }
            charges.append(RedisClock.instant(score, offset))
            index += 2
        }
        return charges.sorted()
    }

    func resetBudget(_ key: BudgetKey) throws(TickgateError) {
        let call = clock.begin()
        let names = cluster == nil ? [keys.budget(key)] : [keys.budget(key), keys.reservations(key)]
        let reply = try run("resetBudget", keys: names, arguments: [call.notAfter, keys.keyChannel, keys.budgetsNotice],
                            by: call.deadline)
        if case let .array(parts) = reply, parts.first?.text == "late" { throw late("the reset of \(key.description)") }
    }

    // MARK: Sessions

    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?)
        throws(TickgateError) -> Instant? {
        let call = clock.begin()
        // Logging in or out twice is the same as once: a retry is harmless.
        let reply = try run("session", keys: [keys.session(realm)], arguments: [
            Array((loggedIn ? "in" : "out").utf8), call.now, RedisClock.micros(ttl ?? .zero), keys.channel,
            keys.sessionNotice(realm), call.notAfter,
        ], by: call.deadline)
        let fields = try ReplyReader(reply, key: keys.session(realm), server: address.description)
        let code = try fields.text(0)
        if code == "late" { throw late("the session of \(realm.value)") }
        if code == "corrupt" { throw fields.corrupt() }
        let now = try fields.integer(1, 0...Int64(1) << 53)
        let real = try fields.integer(2, 0...Int64(1) << 53)
        let end = try fields.integer(3, -1...Int64(1) << 53)
        let offset = clock.finish(call, now: now, real: real)
        return end >= 0 ? RedisClock.instant(end, offset) : nil
    }

    func session(realm: KeyName) throws(TickgateError) -> SessionState? {
        let call = clock.begin()
        let name = keys.session(realm)
        let (real, replies) = try timedRead([[Array("GET".utf8), name]], on: name, by: call.deadline)
        let (now, offset) = clock.moment(call, real: real)
        guard case let .string(value) = replies[0] else {
            if case .null = replies[0] { return SessionState(loggedIn: false, expiry: nil) }
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) is not a session",
                                store: .corrupt)
        }
        let (end, _) = try RedisRows.session(value) { why in
            TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) \(why)", store: .corrupt)
        }
        guard let end else { return SessionState(loggedIn: true, expiry: nil) }
        if end <= now { return SessionState(loggedIn: false, expiry: nil) }
        return SessionState(loggedIn: true, expiry: RedisClock.instant(end, offset))
    }
}
