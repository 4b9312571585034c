import CTickgateShim

/// Options of a Redis store (`tg_engine_options.store_url`).
public struct RedisOptions: Sendable {
    /// How the store tells time.
    public enum TimeSource: Sendable {
        /// The Redis server's clock (`TIME` in every script): one clock for
        /// every engine, whatever their own clocks say.
        case server
        /// The engine's own clock: for tests on a manual clock, where every
        /// engine sharing the store moves the same manual time.
        case engine
    }

    public var url: String
    /// Put before every key, so that several applications share a server.
    public var prefix: String
    public var timeout: Span
    public var time: TimeSource
    /// Connections the store may hold open (decisions on different keys
    /// run in parallel, one per connection).
    public var connections: Int
    /// While the server cannot be reached, grant sends by the engine's
    /// memory alone (marked local-only) instead of refusing them.
    public var failOpen = false

    public static let defaultPrefix = "tickgate:"
    public static let maximumPrefixBytes = 64
    public static var maximumURLBytes: Int { RedisAddress.maximumURLBytes }
    public static let defaultConnections = 16

    public init(url: String, prefix: String = RedisOptions.defaultPrefix,
                timeout: Span = Limits.defaultStoreTimeout, time: TimeSource = .server,
                connections: Int = RedisOptions.defaultConnections) {
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.time = time
        self.connections = connections
    }

    /// Throws unless the prefix is 1 to 64 printable ASCII bytes without
    /// braces (which would break the keys' hash tags).
    func validatedPrefix() throws(TickgateError) -> String {
        guard !prefix.isEmpty, prefix.utf8.count <= Self.maximumPrefixBytes,
              prefix.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "{") && $0 != UInt8(ascii: "}") })
        else {
            throw TickgateError(.invalidArgument,
                "options.store_prefix must be 1 to \(Self.maximumPrefixBytes) printable ASCII characters without blanks or braces")
        }
        return prefix
    }
}

/// The Redis store: one truth shared by every engine on every server. Each
/// decision is one Lua script run on the server (`RedisScripts.decide`),
/// atomic there and one round trip; times are the server's (`TIME`),
/// mapped onto the engine's clock by `ServerClock`.
///
/// Keys (P the prefix; NAME written as its byte length, ':', the bytes):
///
///     P k{SCOPE-NAME SUBJECT}   hash: the key's countdown and send record
///     P b{BUDGET-NAME KEY}      sorted set: a budget key's charges
///     P settings                hash: policies, titles, budgets
///     P sessions                hash: gate sessions
///     P events                  pub/sub channel of change notices
///
/// A pool of connections, each used by one call at a time; a call takes an
/// idle one or connects a new one, so a server that went away and came back
/// is reached again without reopening the engine.
final class RedisStore: Store {
    let options: RedisOptions
    let address: RedisAddress
    let prefix: [UInt8]
    let clock: Clock
    /// Names this engine in its change notices (so it skips its own).
    let publisher: String

    private struct Pool {
        var idle: [RedisConnection] = []
        var closed = false
        /// Script SHA1s as the server reported them (loaded at open).
        var shas: [String: String] = [:]
        var engineTime = ServerClock()
        var realTime = ServerClock()
        var watcher: RedisWatcher?
    }

    private let pool: LockedValue<Pool>

    init(options: RedisOptions, clock: Clock) throws(TickgateError) {
        self.options = options
        self.clock = clock
        address = try RedisAddress(parsing: options.url)
        prefix = Array(try options.validatedPrefix().utf8)
        guard options.timeout.nanoseconds > 0, options.timeout <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "store timeout is outside 1 ms ... 365 days")
        }
        publisher = String(UInt64.random(in: 1...UInt64.max), radix: 36)
        pool = LockedValue(Pool())
        // Open one connection now: a bad address, login or database fails
        // the open, naming the server.
        let first = try RedisConnection(address, timeout: options.timeout)
        for (name, source) in Self.scripts {
            let reply = try first.command([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(source.utf8)])
            guard case let .string(bytes) = reply, bytes.count == 40 else {
                throw TickgateError(.storeIO, "the Redis server \(address.description) did not load Tickgate's scripts: \(reply)")
            }
            pool.withLock { $0.shas[name] = String(decoding: bytes, as: UTF8.self) }
        }
        pool.withLock { $0.idle.append(first) }
    }

    static let scripts: [(String, String)] = [
        ("decide", RedisScripts.decide), ("cancelKeys", RedisScripts.cancelKeys), ("put", RedisScripts.put),
    ]

    // MARK: Keys

    private func name(_ bytes: inout [UInt8], _ part: KeyName) {
        bytes.append(contentsOf: Array(String(part.value.utf8.count).utf8))
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: part.value.utf8)
    }

    /// The part of a key's hash name inside its braces.
    private func tag(_ key: CountdownKey) -> [UInt8] {
        var bytes: [UInt8] = []
        name(&bytes, key.scope)
        bytes.append(contentsOf: key.subject.value.utf8)
        return bytes
    }

    func hashName(_ key: CountdownKey) -> [UInt8] { hashName(tag: tag(key)) }

    private func hashName(tag: [UInt8]) -> [UInt8] {
        prefix + Array("k{".utf8) + tag + [UInt8(ascii: "}")]
    }

    func budgetName(_ key: BudgetKey) -> [UInt8] {
        var bytes = prefix + Array("b{".utf8)
        name(&bytes, key.budget)
        bytes.append(contentsOf: key.key.value.utf8)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    var settingsName: [UInt8] { prefix + Array("settings".utf8) }
    var sessionsName: [UInt8] { prefix + Array("sessions".utf8) }
    var channelName: [UInt8] { prefix + Array("events".utf8) }

    /// A change notice: who made it and which key ("k" + the tag).
    private func notice(tag: some Collection<UInt8>) -> [UInt8] {
        Array(publisher.utf8) + Array(" k".utf8) + tag
    }

    // MARK: Calls

    private static func micros(_ span: Span) -> [UInt8] { Array(String(span.nanoseconds / 1_000).utf8) }

    /// Runs `body` on a pooled connection. A connection found dead (the
    /// server restarted or closed it while it sat idle) is replaced and
    /// `body` run once more: a dead socket delivered nothing. A timeout is
    /// never retried: a script carries its own deadline and refuses to run
    /// after it.
    private func withConnection<R>(_ body: (RedisConnection) throws(TickgateError) -> R) throws(TickgateError) -> R {
        var (current, fresh) = try checkOut()
        while true {
            do throws(TickgateError) {
                let result = try body(current)
                checkIn(current)
                return result
            } catch {
                checkIn(current)
                let timedOut = error.message.contains("did not answer")
                guard !fresh, !timedOut, error.status == .storeIO, current.broken else { throw error }
                current = try connect()
                fresh = true
            }
        }
    }

    /// Runs one script (`EVALSHA`, loaded again on `NOSCRIPT`).
    private func run(_ script: String, keys: [[UInt8]], arguments: [[UInt8]]) throws(TickgateError) -> RedisReply {
        let sha = try pool.withLock { (pool) throws(TickgateError) -> String in
            guard let sha = pool.shas[script] else { throw TickgateError(.system, "no script \(script)") }
            return sha
        }
        let command = [Array("EVALSHA".utf8), Array(sha.utf8), Array(String(keys.count).utf8)] + keys + arguments
        let reply = try withConnection { (connection) throws(TickgateError) -> RedisReply in
            let reply = try connection.command(command)
            if case let .error(text) = reply, text.hasPrefix("NOSCRIPT") {
                // The server restarted (or its scripts were flushed).
                let source = Self.scripts.first { $0.0 == script }!.1
                _ = try connection.command([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(source.utf8)])
                return try connection.command(command)
            }
            return reply
        }
        if case let .error(text) = reply {
            throw TickgateError(.storeIO, "the Redis server \(address.description) failed a call: \(text)")
        }
        return reply
    }

    /// An idle connection (false), or a new one (true).
    private func checkOut() throws(TickgateError) -> (RedisConnection, Bool) {
        let idle = try pool.withLock { (pool) throws(TickgateError) -> RedisConnection? in
            if pool.closed { throw TickgateError(.closed, "the store \(address.description) is closed") }
            return pool.idle.popLast()
        }
        if let idle { return (idle, false) }
        return (try connect(), true)
    }

    private func connect() throws(TickgateError) -> RedisConnection {
        try RedisConnection(address, timeout: options.timeout)
    }

    /// Returns a connection to the pool, or closes it if it broke, the
    /// store closed or the pool is full.
    private func checkIn(_ connection: RedisConnection) {
        pool.withLock { pool in
            if !connection.broken && !pool.closed && pool.idle.count < options.connections {
                pool.idle.append(connection)
            }
        }
    }

    // MARK: Time

    /// The decision's clock arguments: the engine's time for `.engine`,
    /// and the moment past which the script must not run (the call's
    /// timeout on the server's clock), with the readings the reply maps.
    private struct Call {
        var engineStart: Instant
        var realStart: Instant
        var now: [UInt8]
        var notAfter: [UInt8]
    }

    private func begin() -> Call {
        let engineStart = clock.now()
        let realStart = Poller.boottime()
        var now: [UInt8] = []
        if options.time == .engine { now = Array(String(engineStart.nanoseconds / 1_000).utf8) }
        let notAfter = pool.withLock { $0.realTime.server(of: realStart.advanced(by: options.timeout)) }
        return Call(engineStart: engineStart, realStart: realStart, now: now,
                    notAfter: notAfter.map { Array(String($0).utf8) } ?? [])
    }

    /// Learns from a reply's clock readings; returns the offset that maps
    /// the reply's server times onto the engine's clock.
    private func finish(_ call: Call, now: Int64, real: Int64) -> Int64 {
        let engineEnd = clock.now()
        let realEnd = Poller.boottime()
        return pool.withLock { pool in
            pool.realTime.observe(start: call.realStart, end: realEnd, server: real)
            if options.time == .engine { return 0 }
            if clock.isManual {
                pool.engineTime.observe(start: call.engineStart, end: engineEnd, server: now)
            } else {
                pool.engineTime = pool.realTime
            }
            return pool.engineTime.offset ?? 0
        }
    }

    /// The engine-clock instant of server time `micros` under `offset`.
    private static func instant(_ micros: Int64, _ offset: Int64) -> Instant {
        Instant(nanoseconds: micros &* 1_000 &+ offset)
    }

    // MARK: Decisions

    func decide(_ decision: KeyDecision, budgets named: [BudgetRow], for key: CountdownKey)
        throws(TickgateError) -> DecisionResult {
        if case .read = decision { return try read(key) }
        let call = begin()
        var op = "read"
        var tick = Span.zero
        var policy: SendPolicy?
        var a: [UInt8] = [], b: [UInt8] = [], c: [UInt8] = []
        switch decision {
        case .read:
            op = "read"
        case let .start(duration, tickInterval, restart):
            op = "start"
            tick = tickInterval
            a = Self.micros(duration)
            b = restart ? [UInt8(ascii: "1")] : [UInt8(ascii: "0")]
        case .cancel:
            op = "cancel"
        case let .sendBegin(sendPolicy, tickInterval):
            op = "begin"
            tick = tickInterval
            policy = sendPolicy
        case let .sendEnd(deadline, outcome, retry, sendPolicy, tickInterval, _):
            op = "end"
            tick = tickInterval
            policy = sendPolicy
            a = Array((outcome == .succeeded ? "ok" : "fail").utf8)
            b = Self.micros(retry)
            c = Array(pool.withLock { $0.engineTime.candidates(deadline, engine: options.time == .engine) }
                .map(String.init).joined(separator: ",").utf8)
        case let .verified(sendPolicy):
            op = "verified"
            policy = sendPolicy
        case let .verifyFailed(sendPolicy):
            op = "failed"
            policy = sendPolicy
        }
        let tag = tag(key)
        var arguments: [[UInt8]] = [
            Array(op.utf8), call.now, call.notAfter, Array(String(slackMilliseconds).utf8),
            channelName, notice(tag: tag), Self.micros(tick), policy.map(Self.encode) ?? [], a, b, c,
        ]
        var keys = [hashName(tag: tag)]
        for row in named {
            keys.append(budgetName(row.key))
            arguments.append(Array(row.budget.windows.map { "\($0.maximumSends):\($0.length.nanoseconds / 1_000)" }
                .joined(separator: ",").utf8))
        }
        let reply = try run("decide", keys: keys, arguments: arguments)
        let fields = try ReplyReader(reply, key: keys[0], server: address.description)
        let code = try fields.text(0)
        if code == "corrupt" { throw fields.corrupt() }
        let now = try fields.integer(1, 0...Int64(1) << 53)
        let real = try fields.integer(2, 0...Int64(1) << 53)
        let offset = finish(call, now: now, real: real)
        if code == "late" {
            throw TickgateError(.storeIO,
                "the Redis server \(address.description) did not answer within the store timeout (the decision on \(key.description) was not made)")
        }
        guard code == "ok" || code == "refused" else { throw fields.corrupt("code \(code)") }
        let moment = Self.instant(now, offset)
        let before = try RedisRows.keyRows(try fields.element(3), for: key, name: keys[0], now: now, offset: offset)
        var budgets = named
        if case let .array(backs) = try fields.element(4), !backs.isEmpty {
            guard backs.count == budgets.count else { throw fields.corrupt("budget count") }
            for index in budgets.indices {
                guard case let .array(values) = backs[index],
                      values.count == budgets[index].budget.windows.count else { throw fields.corrupt("budget windows") }
                var back: [Int: Instant] = [:]
                for (window, value) in zip(budgets[index].budget.windows, values) {
                    guard case let .integer(micros) = value, micros >= -1, micros <= Int64(1) << 53 else {
                        throw fields.corrupt("budget charge")
                    }
                    if micros >= 0, back[window.maximumSends] == nil {
                        back[window.maximumSends] = Self.instant(micros, offset)
                    }
                }
                budgets[index].back = back
            }
        } else {
            for index in budgets.indices { budgets[index].back = [:] }
        }
        // The same decision in Swift, on the state the script read: it
        // gives the result (and the refusal's message), and must agree.
        var made = decision
        if case let .sendEnd(_, outcome, retry, policy, tickInterval, chargedAt) = decision, code == "ok",
           let sending = before.countdown {
            made = .sendEnd(ticketDeadline: sending.deadline, outcome: outcome, serverRetryAfter: retry,
                            policy: policy, tickInterval: tickInterval, chargedAt: chargedAt)
        }
        var after = before
        var refusal: TickgateError?
        do throws(TickgateError) {
            _ = try made.apply(to: &after, budgets: &budgets, key: key, at: moment)
        } catch {
            refusal = error
            after = before
        }
        guard (refusal == nil) == (code == "ok") else {
            throw TickgateError(.storeCorrupt,
                "the Redis script and the engine disagree on \(key.description) (the script: \(code), the engine: \(refusal?.message ?? "ok"))")
        }
        return DecisionResult(before: before, after: after, now: moment, refusal: refusal)
    }

    /// A query: TIME and HGETALL pipelined (one round trip, no script:
    /// a read needs no atomic write), checked as the script checks them.
    private func read(_ key: CountdownKey) throws(TickgateError) -> DecisionResult {
        let call = begin()
        let name = hashName(key)
        let replies = try withConnection { (connection) throws(TickgateError) in
            try connection.pipeline([[Array("TIME".utf8)], [Array("HGETALL".utf8), name]])
        }
        let (now, offset) = try moment(call, time: replies[0])
        let rows = try RedisRows.keyRows(replies[1], for: key, name: name, now: now, offset: offset)
        let moment = Self.instant(now, offset)
        return DecisionResult(before: rows, after: rows, now: moment, refusal: nil)
    }

    /// The decision time (µs) a call's TIME reply gives (the engine's own
    /// for `.engine`), and the offset that maps it onto the engine's clock.
    private func moment(_ call: Call, time reply: RedisReply) throws(TickgateError) -> (now: Int64, offset: Int64) {
        let real = try serverTime(reply)
        let now = options.time == .engine ? call.engineStart.nanoseconds / 1_000 : real
        return (now, finish(call, now: now, real: real))
    }

    /// The server's time (µs) of a TIME reply.
    private func serverTime(_ reply: RedisReply) throws(TickgateError) -> Int64 {
        guard case let .array(parts) = reply, parts.count == 2, let seconds = parts[0].text.flatMap({ Int64($0) }),
              let micros = parts[1].text.flatMap({ Int64($0) }), seconds >= 0, seconds < Int64(1) << 33,
              (0..<1_000_000).contains(micros) else {
            throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a bad TIME reply")
        }
        return seconds * 1_000_000 + micros
    }

    /// How long a key outlives what it still decides (engine time moves
    /// by itself in tests, so it gets more).
    private var slackMilliseconds: Int64 { options.time == .engine ? 600_000 : 1_000 }

    static func encode(_ policy: SendPolicy) -> [UInt8] {
        let steps = policy.cooldowns.map { String($0.nanoseconds / 1_000) }.joined(separator: ",")
        let rest = [Int64(policy.windowMaximumSends), policy.window.nanoseconds / 1_000,
                    policy.quietReset.nanoseconds / 1_000, policy.ticketTimeout.nanoseconds / 1_000,
                    Int64(policy.maximumWrongCodes)].map(String.init)
        return Array(([steps] + rest).joined(separator: "|").utf8)
    }

    // MARK: Other writes

    func cancelAll(scope: KeyName?) throws(TickgateError) {
        var pattern = prefix + Array("k{".utf8)
        if let scope {
            name(&pattern, scope)
            pattern = Self.globEscaped(pattern)
        } else {
            pattern = Self.globEscaped(pattern)
        }
        pattern.append(UInt8(ascii: "*"))
        var cursor = "0"
        repeat {
            let reply = try plain([Array("SCAN".utf8), Array(cursor.utf8), Array("MATCH".utf8), pattern,
                                   Array("COUNT".utf8), Array("1000".utf8)])
            guard case let .array(parts) = reply, parts.count == 2, let next = parts[0].text,
                  case let .array(found) = parts[1] else {
                throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a bad SCAN reply")
            }
            cursor = next
            var keys: [[UInt8]] = []
            for entry in found { if case let .string(bytes) = entry { keys.append(bytes) } }
            var start = 0
            while start < keys.count {
                let batch = Array(keys[start..<min(start + 100, keys.count)])
                start += batch.count
                let call = begin()
                var arguments: [[UInt8]] = [call.now, channelName]
                // "P k{TAG}" -> its TAG, as the decisions' notices name keys.
                for key in batch { arguments.append(notice(tag: key.dropFirst(prefix.count + 2).dropLast())) }
                _ = try run("cancelKeys", keys: batch, arguments: arguments)
            }
        } while cursor != "0"
    }

    private static func globEscaped(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for byte in bytes {
            if "*?[]\\".utf8.contains(byte) { out.append(UInt8(ascii: "\\")) }
            out.append(byte)
        }
        return out
    }

    /// A plain command on a pooled connection (SCAN, HGETALL, ZRANGE).
    private func plain(_ arguments: [[UInt8]]) throws(TickgateError) -> RedisReply {
        let reply = try withConnection { (connection) throws(TickgateError) in try connection.command(arguments) }
        if case let .error(text) = reply {
            if text.hasPrefix("WRONGTYPE") {
                throw TickgateError(.storeCorrupt,
                    "the Redis key \(String(decoding: arguments.count > 1 ? arguments[1] : [], as: UTF8.self)) holds the wrong type: \(text)")
            }
            throw TickgateError(.storeIO, "the Redis server \(address.description) failed a call: \(text)")
        }
        return reply
    }

    private static let year: Int64 = 365 * 86_400_000

    private func put(_ hash: [UInt8], field: String, value: [UInt8]) throws(TickgateError) {
        let reply = try run("put", keys: [hash], arguments: [
            Array(field.utf8), value, Array(String(Self.year).utf8), [], [],
        ])
        if case let .array(parts) = reply, parts.first?.text == "corrupt" {
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: hash, as: UTF8.self)) holds the wrong type")
        }
    }

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        try put(settingsName, field: "p:" + scope.value, value: Self.encode(policy))
    }

    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {
        let sources = [titles.idle, titles.sending, titles.cooling, titles.readyAgain, titles.locked, titles.codeDead]
            .map(\.source)
        var value: [UInt8] = []
        for source in sources {
            value.append(contentsOf: Array("\(source.utf8.count):".utf8))
            value.append(contentsOf: source.utf8)
        }
        try put(settingsName, field: "t:" + scope.value, value: value)
    }

    func save(budget: Budget, name: KeyName) throws(TickgateError) {
        try put(settingsName, field: "g:" + name.value, value: Array(budget.windows
            .map { "\($0.maximumSends)/\($0.length.millisecondsRoundedUp)" }.joined(separator: ",").utf8))
    }

    func saveSession(realm: KeyName, loggedIn: Bool, expiry: Instant?, ttl: Span?) throws(TickgateError) {
        guard loggedIn else {
            try put(sessionsName, field: realm.value, value: [])
            return
        }
        // The end on the server's clock, from the latest mapping; an engine
        // that has not read the server's clock yet reads it first (without a
        // mapping the end would be written on the engine's own clock, which
        // every other engine reads as long past).
        var end = "-1"
        if let expiry {
            let offset: Int64
            if let known = pool.withLock({ options.time == .engine ? 0 : $0.engineTime.offset }) {
                offset = known
            } else {
                offset = try moment(begin(), time: try plain([Array("TIME".utf8)])).offset
            }
            end = String((expiry.nanoseconds - offset) / 1_000)
        }
        try put(sessionsName, field: realm.value,
                value: Array("\(end)|\((ttl ?? .zero).nanoseconds / 1_000)".utf8))
    }

    func charges(of key: BudgetKey) throws(TickgateError) -> [Instant] {
        // A read of TIME first maps the charges onto the engine's clock.
        let call = begin()
        let (serverNow, offset) = try moment(call, time: try plain([Array("TIME".utf8)]))
        let name = budgetName(key)
        let reply = try plain([Array("ZRANGE".utf8), name, Array("0".utf8), Array("-1".utf8),
                               Array("WITHSCORES".utf8)])
        guard case let .array(entries) = reply, entries.count % 2 == 0 else {
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) sent a bad reply")
        }
        var charges: [Instant] = []
        var index = 1
        while index < entries.count {
            guard let text = entries[index].text, let score = Int64(text), score >= 0, score <= serverNow + 1 else {
                throw TickgateError(.storeCorrupt,
                    "the Redis key \(String(decoding: name, as: UTF8.self)) holds a charge whose score is not a time")
            }
            charges.append(Self.instant(score, offset))
            index += 2
        }
        return charges.sorted()
    }

    func resetBudget(_ key: BudgetKey) throws(TickgateError) {
        _ = try plain([Array("DEL".utf8), budgetName(key)])
    }

    func load() throws(TickgateError) -> StoreSnapshot {
        var snapshot = StoreSnapshot()
        let settingsKey = String(decoding: settingsName, as: UTF8.self)
        for (field, value) in try hash(settingsName) {
            func bad(_ why: String) -> TickgateError {
                TickgateError(.storeCorrupt, "the Redis key \(settingsKey) field \"\(field.prefix(60))\" \(why)")
            }
            let kind = field.prefix(2)
            guard kind == "p:" || kind == "t:" || kind == "g:" else { throw bad("is not a setting") }
            let name = try RedisRows.name(String(field.dropFirst(2)), bad)
            switch kind {
            case "p:": snapshot.policies.append((name, try RedisRows.policy(value, bad)))
            case "t:": snapshot.titles.append((name, try RedisRows.titles(value, bad)))
            default: snapshot.budgets.append((name, try RedisRows.budget(value, bad)))
            }
        }
        let sessions = try hash(sessionsName)
        if !sessions.isEmpty {
            let call = begin()
            let (serverNow, offset) = try moment(call, time: try plain([Array("TIME".utf8)]))
            let key = String(decoding: sessionsName, as: UTF8.self)
            for (field, value) in sessions {
                func bad(_ why: String) -> TickgateError {
                    TickgateError(.storeCorrupt, "the Redis key \(key) field \"\(field.prefix(60))\" \(why)")
                }
                let realm = try RedisRows.name(field, bad)
                let (end, _) = try RedisRows.session(value, bad)
                guard let end else {
                    snapshot.sessions.append((realm, nil))
                    continue
                }
                if end > serverNow { snapshot.sessions.append((realm, Self.instant(end, offset))) }
            }
        }
        return snapshot
    }

    private func hash(_ name: [UInt8]) throws(TickgateError) -> [(String, [UInt8])] {
        let reply = try plain([Array("HGETALL".utf8), name])
        guard case let .array(entries) = reply, entries.count % 2 == 0 else {
            throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) sent a bad reply")
        }
        var pairs: [(String, [UInt8])] = []
        var index = 0
        while index < entries.count {
            guard case let .string(field) = entries[index], case let .string(value) = entries[index + 1] else {
                throw TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self)) sent a bad reply")
            }
            pairs.append((String(decoding: field, as: UTF8.self), value))
            index += 2
        }
        return pairs
    }

    // MARK: No group commit

    func flush() throws(TickgateError) {
        try pool.withLock { (pool) throws(TickgateError) in
            if pool.closed { throw TickgateError(.closed, "the store \(address.description) is closed") }
        }
    }

    func flushIfDue(at now: Instant) -> Instant? { nil }
    var flushDue: Instant? { nil }

    func close() {
        let watcher = pool.withLock { pool -> RedisWatcher? in
            pool.closed = true
            pool.idle.removeAll()
            defer { pool.watcher = nil }
            return pool.watcher
        }
        watcher?.stop()
    }

    // MARK: Notices

    var readsThrough: Bool { true }

    func watch(_ changed: @escaping @Sendable (CountdownKey?) -> Void) {
        if pool.withLock({ $0.closed || $0.watcher != nil }) { return }
        let watcher = RedisWatcher(address: address, timeout: options.timeout, channel: channelName,
                                   publisher: publisher, changed: changed)
        let started = pool.withLock { pool -> Bool in
            if pool.closed || pool.watcher != nil { return false }
            pool.watcher = watcher
            return true
        }
        if started && !watcher.start() { pool.withLock { $0.watcher = nil } }
    }
}

/// Maps the server's clock onto one of the engine's: `offset` is added to
/// a server time (in ns) to give the engine's instant. Each call that reads
/// the server's time between the engine's readings `start` and `end` says
/// the true offset lies in [start - server, end - server]; the offset kept
/// is the smallest upper end seen, so a deadline is never mapped earlier
/// than it is (a countdown never finishes early) and never later than by
/// one round trip. It moves only by 1 ms or more, or when a reading proves
/// it too small (the server's clock was set back), so that the same server
/// time keeps mapping to the same instant.
struct ServerClock {
    var offset: Int64?
    /// Offsets used before, newest last: a ticket's deadline mapped under
    /// one of them is still recognised.
    var earlier: [Int64] = []

    mutating func observe(start: Instant, end: Instant, server micros: Int64) {
        let server = micros &* 1_000
        let high = end.nanoseconds &- server
        let low = start.nanoseconds &- server
        guard let current = offset else {
            offset = high
            return
        }
        if high < current &- 1_000_000 || low > current {
            earlier.append(current)
            if earlier.count > 4 { earlier.removeFirst() }
            offset = high
        }
    }

    /// The server's time (µs) at the engine's `instant`, if known: never
    /// later than it is.
    func server(of instant: Instant) -> Int64? {
        offset.map { (instant.nanoseconds &- $0) / 1_000 }
    }

    /// The server times (µs) that the engine's `deadline` may stand for:
    /// under the current offset (rounded down, so comparisons with the
    /// server's time agree with the engine's), then under each earlier one
    /// that maps exactly.
    func candidates(_ deadline: Instant, engine: Bool) -> [Int64] {
        guard !engine, let offset else { return [Self.floorDiv(deadline.nanoseconds, 1_000)] }
        var list = [Self.floorDiv(deadline.nanoseconds &- offset, 1_000)]
        for old in earlier.reversed() where (deadline.nanoseconds &- old) % 1_000 == 0 {
            list.append((deadline.nanoseconds &- old) / 1_000)
        }
        return list
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }
}
