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
    /// Connections the store may hold open at once (decisions on different
    /// keys run in parallel, one per connection; a call waits for a free
    /// one within the timeout). The notice subscriber has one more.
    public var connections: Int
    /// While the server cannot be reached, grant sends by the engine's
    /// memory alone (marked local-only) instead of refusing them.
    public var failOpen = false

    public static let defaultPrefix = "tickgate:"
    public static let maximumPrefixBytes = 64
    public static var maximumURLBytes: Int { RedisURL.maximumURLBytes }
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
/// decision is one Lua script run on the server (Scripts/decide.lua), which
/// reads the key, its scope's policy and its budgets from the store,
/// decides, writes and answers; the engine applies the answer. Its parts:
/// `RedisKeys` (where everything lives), `RedisPool` (connections,
/// deadlines, retries), `RedisClock` (the server's time), `RedisScripts`
/// (the scripts, from Scripts/*.lua), the decisions
/// (RedisStore+Decisions.swift), the settings and sessions
/// (RedisStore+Settings.swift) and the notices (`RedisWatcher`).
final class RedisStore: Store {
    let options: RedisOptions
    let url: RedisURL
    let topology: RedisTopology
    /// The primary last known, as messages name it.
    var address: RedisAddress { topology.current }
    let keys: RedisKeys
    let clock: RedisClock
    let pool: RedisPool
    /// Names this engine in its notices and its decisions' answers.
    let engineName: String
    /// Script SHA1s as the server reported them at open.
    let shas: [String: [UInt8]]
    /// Numbers this engine's decisions (with `engineName`, their id).
    let decisions = LockedValue<UInt64>(0)
    /// What the open saw that an operator should change (a
    /// maxmemory-policy that can evict live keys), or nil.
    let warning: String?
    private let watcher = LockedValue<RedisWatcher?>(nil)
    /// With Sentinels: hears their `+switch-master` notices.
    private let sentinelWatcher: SentinelWatcher?

    init(options: RedisOptions, clock engineClock: Clock) throws(TickgateError) {
        self.options = options
        url = try RedisURL(parsing: options.url)
        let prefix = Array(try options.validatedPrefix().utf8)
        guard options.timeout.nanoseconds > 0, options.timeout <= Limits.maximumDuration else {
            throw TickgateError(.invalidDuration, "store timeout is outside 1 ms ... 365 days")
        }
        guard (1...1_024).contains(options.connections) else {
            throw TickgateError(.invalidArgument, "the store's connections are outside 1 ... 1024")
        }
        engineName = String(UInt64.random(in: 1...UInt64.max), radix: 36)
        let keys = RedisKeys(prefix: prefix, engine: Array(engineName.utf8))
        let clock = RedisClock(engineClock, source: options.time, timeout: options.timeout)
        self.keys = keys
        self.clock = clock
        topology = RedisTopology(url: url, timeout: options.timeout) { (connection) throws(TickgateError) in
            try Self.align(connection, clock: clock, keys: keys)
        }
        // One connection now: a bad address, login or database fails the
        // open, naming the server. In one round trip it loads the scripts,
        // runs the probe (every command the scripts use: a user without the
        // right to one fails here, not at its first decision), reads the
        // server's clock (so even the first decision carries its deadline),
        // the data's format and the eviction policy.
        let call = clock.begin()
        let first = try topology.connect(by: call.deadline)
        let address = first.address
        try first.limit(to: call.deadline)
        // A small command alone first: a server that wants a login closes a
        // connection that sends it more than 16 KiB unauthenticated (the
        // scripts), which would hide its NOAUTH.
        if case let .error(text) = try first.command([Array("PING".utf8)]) {
            throw RedisConnection.refused(text, address)
        }
        var commands: [[[UInt8]]] = RedisScripts.all.map { [Array("SCRIPT".utf8), Array("LOAD".utf8), Array($0.source.utf8)] }
        commands.append([Array("EVALSHA".utf8), Array(RedisScripts.probeSHA.utf8), Array("2".utf8), keys.probe, keys.clock,
                         keys.channel, keys.wakeNotice])
        commands.append([Array("TIME".utf8)])
        commands.append([Array("SET".utf8), keys.formatKey, Array(String(RedisKeys.format).utf8), Array("NX".utf8),
                         Array("GET".utf8)])
        commands.append([Array("INFO".utf8), Array("memory".utf8)])
        commands.append(keys.skewCommand)
        // With replicas=N every change is followed by WAIT: a user without
        // the right to it fails here, not after its first change.
        if url.replicas > 0 { commands.append([Array("WAIT".utf8), Array("0".utf8), Array("0".utf8)]) }
        let replies = try first.pipeline(commands)
        var shas: [String: [UInt8]] = [:]
        for (script, reply) in zip(RedisScripts.all, replies) {
            if case let .error(text) = reply {
                throw RedisConnection.refused(text, address,
                    "the Redis server \(address.description) did not load Tickgate's scripts: \(text.prefix(300))")
            }
            guard case let .string(bytes) = reply, bytes.count == 40 else {
                throw TickgateError(.storeIO, "the Redis server \(address.description) did not load Tickgate's scripts",
                                    store: .unsupported)
            }
            shas[script.name] = bytes
        }
        self.shas = shas
        let count = RedisScripts.all.count
        if case let .array(parts) = replies[count], parts.count == 3, parts[0].text == "denied",
           let command = parts[1].text?.prefix(40) {
            if parts[2].text?.hasPrefix("READONLY") == true {
                throw TickgateError(.storeIO,
                    "the Redis server \(address.description) is a read-only replica: name its primary, or its Sentinels with redis+sentinel://",
                    store: .readOnly)
            }
            throw TickgateError(.storeIO,
                "the Redis server \(address.description) does not let this user run \(command), which Tickgate's scripts need: \((parts[2].text ?? "").prefix(200)) (README: \"ACL users\" gives the rule)",
                store: .auth)
        }
        if case let .error(text) = replies[count + 1] {
            throw RedisConnection.refused(text, address,
                "the Redis server \(address.description) refused TIME, which Tickgate needs (README: \"ACL users\"): \(text.prefix(300))")
        }
        if case let .error(text) = replies[count] {
            if text.hasPrefix("READONLY") {
                throw RedisConnection.refused(text, address,
                    "the Redis server \(address.description) is a read-only replica: name its primary, or its Sentinels with redis+sentinel://")
            }
            throw RedisConnection.refused(text, address,
                "the Redis server \(address.description) refused a command Tickgate needs (README: \"ACL users\"): \(text.prefix(300))")
        }
        _ = clock.moment(call, real: try RedisClock.storeTime(replies[count + 1], replies[count + 4], address.description))
        switch replies[count + 2] {
        case .null:
            break
        case let .string(bytes):
            let text = String(decoding: bytes.prefix(20), as: UTF8.self)
            guard let format = Int(text), format >= 1 else {
                throw TickgateError(.storeCorrupt,
                    "the Redis key \(String(decoding: keys.formatKey, as: UTF8.self)) holds \"\(text)\", not a format",
                    store: .corrupt)
            }
            if format > RedisKeys.format {
                throw TickgateError(.storeVersion,
                    "the Redis store \(address.description) (prefix \(options.prefix)) holds data of format \(format), written by a newer Tickgate; this one reads formats up to \(RedisKeys.format): upgrade it",
                    store: .unsupported)
            }
        case let .error(text):
            throw RedisConnection.refused(text, address)
        default:
            throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a bad reply to SET", store: .corrupt)
        }
        if url.replicas > 0, case let .error(text) = replies[count + 5] {
            throw RedisConnection.refused(text, address,
                "the Redis server \(address.description) refused WAIT, which replicas=\(url.replicas) needs: \(text.prefix(200))")
        }
        warning = Self.evictionWarning(replies[count + 3], address)
        let pool = RedisPool(topology: topology, timeout: options.timeout, capacity: options.connections, first: first)
        self.pool = pool
        if url.sentinels.isEmpty {
            sentinelWatcher = nil
        } else {
            let sentinels = SentinelWatcher(topology: topology, timeout: options.timeout) { pool.retireAll() }
            sentinelWatcher = sentinels.start() ? sentinels : nil
        }
    }

    /// A warning if the server may evict keys that have not expired:
    /// under any maxmemory-policy but noeviction a full server drops live
    /// cooldowns and charges (every one of Tickgate's keys has an expiry,
    /// so volatile-* policies evict them too).
    private static func evictionWarning(_ reply: RedisReply, _ address: RedisAddress) -> String? {
        guard let policy = reply.infoField("maxmemory_policy"), policy != "noeviction" else { return nil }
        return "the Redis server \(address.description) has maxmemory-policy \(policy.prefix(40)): when its memory is full it evicts keys that still decide (live cooldowns, budget charges, sessions); set maxmemory-policy noeviction (README: \"Running Redis for Tickgate\")"
    }

    /// Runs one script (`EVALSHA`, loaded again on `NOSCRIPT`) by the
    /// call's deadline; a reply Redis refused is thrown with its kind.
    /// With `replicas=N` in the URL, a call that may change the store is
    /// followed, in the same round trip, by `WAIT N`: it is acknowledged
    /// only once N replicas hold it.
    func run(_ script: String, keys names: [[UInt8]], arguments: [[UInt8]], by deadline: Instant,
             changes: Bool = true) throws(TickgateError) -> RedisReply {
        guard let sha = shas[script], let source = RedisScripts.all.first(where: { $0.name == script })?.source else {
            throw TickgateError(.system, "no script \(script)")
        }
        // Every script's last key is the clock's (Scripts/prelude.lua).
        let command = [Array("EVALSHA".utf8), sha, Array(String(names.count + 1).utf8)] + names + [keys.clock] + arguments
        let replicas = changes ? url.replicas : 0
        let reply = try pool.call(by: deadline, changes: changes) { (connection) throws(TickgateError) -> RedisReply in
            // The script, and WAIT after it in the same round trip.
            func send() throws(TickgateError) -> (RedisReply, RedisReply) {
                guard replicas > 0 else { return (try connection.command(command), .integer(0)) }
                let replies = try connection.pipeline([command, waitCommand(replicas, by: deadline)])
                return (replies[0], replies[1])
            }
            var (reply, confirmed) = try send()
            if case let .error(text) = reply, text.hasPrefix("NOSCRIPT") {
                // The server restarted (or its scripts were flushed).
                _ = try connection.command([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(source.utf8)])
                (reply, confirmed) = try send()
            }
            if case let .error(text) = reply, text.hasPrefix("READONLY") {
                // A primary turned replica: this call ran nothing; the
                // pool asks for the new primary and tries again.
                connection.discard()
                throw RedisConnection.refused(text, connection.address)
            }
            if replicas > 0, case .error = reply {} else if replicas > 0 {
                var held: Int64 = -1
                if case let .integer(count) = confirmed { held = count }
                if held < Int64(replicas) {
                    let told = held >= 0 ? "\(held) of the \(replicas)" : "none of the \(replicas)"
                    throw TickgateError(.storeUnknown,
                        "the Redis server \(connection.address.description) answered, but \(told) replicas the URL asks for confirmed in time that they hold what it holds (WAIT): a failover now could lose a change it made; read the key to learn what holds",
                        store: .notReplicated)
                }
            }
            return reply
        }
        if case let .error(text) = reply { throw RedisConnection.refused(text, address) }
        return reply
    }

    /// `WAIT n ms`: n replicas, waiting at most `replica_timeout_ms` and
    /// never past the call's deadline (0 would wait for ever).
    private func waitCommand(_ replicas: Int, by deadline: Instant) -> [[UInt8]] {
        // A tenth of what is left stays for the answer to come back, so a
        // WAIT that ran out is told as such (not as a timeout of the call).
        let left = deadline.since(Poller.boottime())
        var wait = Span(nanoseconds: left.nanoseconds - max(left.nanoseconds / 10, 2_000_000))
        if let limit = url.replicaTimeout { wait = min(wait, limit) }
        let milliseconds = max(1, wait.nanoseconds / 1_000_000)
        return [Array("WAIT".utf8), Array(String(replicas).utf8), Array(String(milliseconds).utf8)]
    }

    /// Plain reads on the store's clock: TIME, `commands` and the clock's
    /// correction pipelined (one round trip); the store's time (µs) and the
    /// replies of `commands`.
    func timedRead(_ commands: [[[UInt8]]], by deadline: Instant) throws(TickgateError) -> (Int64, [RedisReply]) {
        let replies = try read([[Array("TIME".utf8)]] + commands + [keys.skewCommand], by: deadline)
        let real = try RedisClock.storeTime(replies[0], replies[replies.count - 1], address.description)
        return (real, Array(replies[1..<(replies.count - 1)]))
    }

    /// Plain commands, pipelined (one round trip), that change nothing.
    func read(_ commands: [[[UInt8]]], by deadline: Instant) throws(TickgateError) -> [RedisReply] {
        let replies = try pool.call(by: deadline, changes: false) { (connection) throws(TickgateError) in
            try connection.pipeline(commands)
        }
        for reply in replies {
            if case let .error(text) = reply { throw RedisConnection.refused(text, address) }
        }
        return replies
    }

    /// A new decision id of this engine.
    func nextDecision() -> [UInt8] {
        Array(String(decisions.withLock { (count: inout UInt64) -> UInt64 in
            count &+= 1
            return count
        }).utf8)
    }

    // MARK: No group commit

    func flush() throws(TickgateError) {}
    func flushIfDue(at now: Instant) -> Instant? { nil }
    var flushDue: Instant? { nil }

    func close() {
        sentinelWatcher?.stop()
        pool.close()
        let current = watcher.withLock { (watcher: inout RedisWatcher?) -> RedisWatcher? in
            defer { watcher = nil }
            return watcher
        }
        current?.stop()
    }

    // MARK: Notices

    var readsThrough: Bool { true }
    var holdsRules: Bool { true }

    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void) {
        let started = watcher.withLock { (watcher: inout RedisWatcher?) -> RedisWatcher? in
            if watcher != nil { return nil }
            let pool = self.pool
            let new = RedisWatcher(topology: topology, timeout: options.timeout, keys: keys) { notice in
                // A lost link may have taken the pool's idle connections
                // with it: they are replaced rather than tried one by one.
                if notice == .lost || notice == .back { pool.retireAll() }
                changed(notice)
            }
            watcher = new
            return new
        }
        guard let started else { return }
        if !started.start() { watcher.withLock { $0 = nil } }
    }

    func watchKeys() {
        guard let current = watcher.withLock({ $0 }) else { return }
        current.watchKeys { () -> Bool in
            let call = clock.begin()
            return (try? read([[Array("PUBLISH".utf8), keys.channel, keys.wakeNotice]], by: call.deadline)) != nil
        }
    }
}
