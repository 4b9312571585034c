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
    /// Refuse again, without a round trip, what the server refused or set
    /// in place while its notices say nothing changed (`LocalRefusals`).
    public var localRefusals = true

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
/// deadlines, retries) and `RedisPipeline` (calls of several threads on one
/// connection), `RedisClock` (the server's time), `RedisScripts`
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
    /// The connections to the one primary (nil on a cluster).
    let pool: RedisPool?
    /// A Redis Cluster's slot map and a pool per primary (nil otherwise).
    let cluster: RedisCluster?
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
        var named = RedisKeys(prefix: prefix, engine: Array(engineName.utf8))
        named.cluster = !url.cluster.isEmpty
        let keys = named
        let clock = RedisClock(engineClock, source: options.time, timeout: options.timeout)
        self.keys = keys
        self.clock = clock
        let topology = RedisTopology(url: url, timeout: options.timeout) { (connection) throws(TickgateError) in
            try Self.align(connection, clock: clock, keys: keys)
        }
        self.topology = topology
        let call = clock.begin()
        guard keys.cluster else {
            // One connection now: a bad address, login or database fails
            // the open, naming the server.
            let first = try topology.connect(by: call.deadline)
            let opened = try Self.prepare(first, keys: keys, probe: keys.probe, replicas: url.replicas, format: true,
                                          by: call.deadline)
            _ = clock.moment(call, real: opened.real)
            shas = opened.shas
            warning = opened.warning
            let pool = RedisPool(topology: topology, timeout: options.timeout, capacity: options.connections, first: first)
            self.pool = pool
            cluster = nil
            if url.sentinels.isEmpty {
                sentinelWatcher = nil
            } else {
                let sentinels = SentinelWatcher(topology: topology, timeout: options.timeout) { pool.retireAll() }
                sentinelWatcher = sentinels.start() ? sentinels : nil
            }
            return
        }
        // A cluster: its slot map, then every primary prepared as one
        // server is (each loads the scripts and runs the probe on a key of
        // its own slots), then the data's format on its slot.
        let cluster = RedisCluster(topology: topology, timeout: options.timeout, capacity: options.connections)
        try cluster.refresh(by: call.deadline, force: true)
        let primaries = cluster.primaries
        guard !primaries.isEmpty else {
            throw TickgateError(.storeIO, "the Redis Cluster \(url.description) serves no slot (cluster down)",
                                store: .unreachable)
        }
        var shas: [String: [UInt8]] = [:]
        var warnings: [String] = []
        var real: Int64?
        for (index, pool) in primaries.enumerated() {
            // The probe runs on a key of one of this primary's slots.
            guard let slot = cluster.slot(of: pool) else { continue }
            let probe = keys.probe(slot: slot)
            let (connection, _) = try pool.checkOut(by: call.deadline)
            defer { pool.checkIn(connection) }
            let opened = try Self.prepare(connection, keys: keys, probe: probe, replicas: url.replicas, format: false,
                                          by: call.deadline)
            if index == 0 { real = opened.real }
            shas = opened.shas
            if let warning = opened.warning { warnings.append(warning) }
        }
        self.shas = shas
        warning = warnings.first
        if let real { _ = clock.moment(call, real: real) }
        self.cluster = cluster
        pool = nil
        sentinelWatcher = nil
        let set = [Array("SET".utf8), keys.formatKey, Array(String(RedisKeys.format).utf8), Array("NX".utf8),
                   Array("GET".utf8)]
        let replies = try exchange(on: keys.formatKey, by: call.deadline, changes: true) {
            (connection, asking) throws(TickgateError) in try connection.pipeline(asking + [set])
        }
        try Self.checkFormat(replies[0], keys: keys, options: options, address: address)
    }

    /// What the open learnt from one server.
    struct Prepared {
        var shas: [String: [UInt8]]
        var real: Int64
        var warning: String?
    }

    /// Readies one server (a primary) in one round trip: loads the scripts,
    /// runs the probe (every command the scripts use: a user without the
    /// right to one fails here, not at its first decision), reads the
    /// server's clock (so even the first decision carries its deadline),
    /// the data's format (`format`), the eviction policy and whether it is
    /// a cluster node.
    static func prepare(_ first: RedisConnection, keys: RedisKeys, probe: [UInt8], replicas: Int, format: Bool,
                        by deadline: Instant) throws(TickgateError) -> Prepared {
        let address = first.address
        try first.limit(to: deadline)
        // A small command alone first: a server that wants a login closes a
        // connection that sends it more than 16 KiB unauthenticated (the
        // scripts), which would hide its NOAUTH.
        if case let .error(text) = try first.command([Array("PING".utf8)]) {
            throw RedisConnection.refused(text, address)
        }
        var commands: [[[UInt8]]] = RedisScripts.all.map { [Array("SCRIPT".utf8), Array("LOAD".utf8), Array($0.source.utf8)] }
        let count = RedisScripts.all.count
        commands.append([Array("INFO".utf8), Array("cluster".utf8)])
        commands.append([Array("EVALSHA".utf8), Array(RedisScripts.probeSHA.utf8), Array("2".utf8), probe,
                         keys.clock(for: probe), keys.channel, keys.wakeNotice])
        commands.append([Array("TIME".utf8)])
        commands.append(keys.skewCommand(for: probe))
        commands.append([Array("INFO".utf8), Array("memory".utf8)])
        // With replicas=N every change is followed by WAIT: a user without
        // the right to it fails here, not after its first change.
        if replicas > 0 { commands.append([Array("WAIT".utf8), Array("0".utf8), Array("0".utf8)]) }
        if format {
            commands.append([Array("SET".utf8), keys.formatKey, Array(String(RedisKeys.format).utf8), Array("NX".utf8),
                             Array("GET".utf8)])
        }
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
        // A cluster node named with redis://: its keys are spread over
        // other nodes, which this URL cannot reach.
        if format, replies[count].infoField("cluster_enabled") == "1" {
            throw TickgateError(.storeIO,
                "the Redis server \(address.description) is a Redis Cluster node: name the cluster's nodes with redis+cluster://host:port[,host:port...]",
                store: .unsupported)
        }
        let probeReply = replies[count + 1]
        if case let .array(parts) = probeReply, parts.count == 3, parts[0].text == "denied",
           let command = parts[1].text?.prefix(40) {
            if parts[2].text?.hasPrefix("READONLY") == true {
                throw TickgateError(.storeIO,
                    "the Redis server \(address.description) is a read-only replica: name its primary, or its Sentinels with redis+sentinel://",
                    store: .readOnly)
            }
            throw TickgateError(.storeIO,
                "the Redis server \(address.description) does not let this user run \(command), which Tickgate's scripts need: \((parts[2].text ?? "").prefix(200)) (docs/redis.md, \"ACL: the user tickgate\", gives the rule)",
                store: .auth)
        }
        if case let .error(text) = replies[count + 2] {
            throw RedisConnection.refused(text, address,
                "the Redis server \(address.description) refused TIME, which Tickgate needs (docs/redis.md, \"ACL: the user tickgate\"): \(text.prefix(300))")
        }
        if case let .error(text) = probeReply {
            if text.hasPrefix("READONLY") {
                throw RedisConnection.refused(text, address,
                    "the Redis server \(address.description) is a read-only replica: name its primary, or its Sentinels with redis+sentinel://")
            }
            throw RedisConnection.refused(text, address,
                "the Redis server \(address.description) refused a command Tickgate needs (docs/redis.md, \"ACL: the user tickgate\"): \(text.prefix(300))")
        }
        let real = try RedisClock.storeTime(replies[count + 2], replies[count + 3], address.description)
        var next = count + 5
        if replicas > 0 {
            if case let .error(text) = replies[next] {
                throw RedisConnection.refused(text, address,
                    "the Redis server \(address.description) refused WAIT, which replicas=\(replicas) needs: \(text.prefix(200))")
            }
            next += 1
        }
        if format { try checkFormat(replies[next], keys: keys, options: nil, address: address) }
        return Prepared(shas: shas, real: real, warning: evictionWarning(replies[count + 4], address))
    }

    /// The reply of `SET format NX GET`: the data's format, which this
    /// engine must be able to read.
    static func checkFormat(_ reply: RedisReply, keys: RedisKeys, options: RedisOptions?,
                            address: RedisAddress) throws(TickgateError) {
        switch reply {
        case .null:
            break
        case let .string(bytes):
            let format = try storedFormat(bytes, keys: keys)
            if format > RedisKeys.newestFormat {
                let prefix = String(decoding: keys.prefix, as: UTF8.self)
                throw TickgateError(.storeVersion,
                    "the Redis store \(address.description) (prefix \(prefix)) holds data of format \(format), written by a newer Tickgate; this one reads formats up to \(RedisKeys.newestFormat): upgrade it",
                    store: .unsupported)
            }
        case let .error(text):
            throw RedisConnection.refused(text, address)
        default:
            throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a bad reply to SET", store: .corrupt)
        }
    }

    /// The format a format key holds.
    static func storedFormat(_ bytes: [UInt8], keys: RedisKeys) throws(TickgateError) -> Int {
        let text = String(decoding: bytes.prefix(20), as: UTF8.self)
        guard let format = Int(text), format >= 1 else {
            throw TickgateError(.storeCorrupt,
                "the Redis key \(String(decoding: keys.formatKey, as: UTF8.self)) holds \"\(text)\", not a format",
                store: .corrupt)
        }
        return format
    }

    /// A warning if the server may evict keys that have not expired:
    /// under any maxmemory-policy but noeviction a full server drops live
    /// cooldowns and charges (every one of Tickgate's keys has an expiry,
    /// so volatile-* policies evict them too).
    private static func evictionWarning(_ reply: RedisReply, _ address: RedisAddress) -> String? {
        guard let policy = reply.infoField("maxmemory_policy"), policy != "noeviction" else { return nil }
        return "the Redis server \(address.description) has maxmemory-policy \(policy.prefix(40)): when its memory is full it evicts keys that still decide (live cooldowns, budget charges, sessions); set maxmemory-policy noeviction (docs/redis.md, \"maxmemory-policy: noeviction\")"
    }

    /// Runs one script (`EVALSHA`, loaded again on `NOSCRIPT`) by the
    /// call's deadline, on the primary of its keys (all in one slot); a
    /// reply Redis refused is thrown with its kind. The clock key of the
    /// keys' slot is added as the last key. With `replicas=N` in the URL, a
    /// call that may change the store is followed, in the same round trip,
    /// by `WAIT N`: it is acknowledged only once N replicas hold it.
    func run(_ script: String, keys names: [[UInt8]], arguments: [[UInt8]], by deadline: Instant,
             changes: Bool = true) throws(TickgateError) -> RedisReply {
        guard let sha = shas[script], let source = RedisScripts.all.first(where: { $0.name == script })?.source,
              let first = names.first else {
            throw TickgateError(.system, "no script \(script)")
        }
        // Every script's last key is the clock's (Scripts/prelude.lua).
        let command = [Array("EVALSHA".utf8), sha, Array(String(names.count + 1).utf8)] + names
            + [keys.clock(for: first)] + arguments
        let replicas = changes ? url.replicas : 0
        func body<C: RedisRequests>(_ connection: C, _ asking: [[[UInt8]]]) throws(TickgateError) -> [RedisReply] {
            // The script, and WAIT after it in the same round trip.
            func send() throws(TickgateError) -> (RedisReply, RedisReply) {
                let sent = asking + [command] + (replicas > 0 ? [waitCommand(replicas, by: deadline)] : [])
                let replies = try connection.pipeline(sent)
                return (replies[asking.count], replicas > 0 ? replies[asking.count + 1] : .integer(0))
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
            return [reply]
        }
        // WAIT holds its connection until the replicas answer: it is not
        // shared (the requests pipelined behind it would wait as long).
        let replies = replicas > 0
            ? try exchange(on: first, by: deadline, changes: changes) { (connection, asking) throws(TickgateError) in
                try body(connection, asking)
            }
            : try exchange(sharing: first, by: deadline, changes: changes) { (share, asking) throws(TickgateError) in
                try body(share, asking)
            }
        if case let .error(text) = replies[0] { throw RedisConnection.refused(text, address) }
        return replies[0]
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

    /// Plain reads of `name` (and keys in its slot) on the store's clock:
    /// TIME, `commands` and the clock's correction pipelined (one round
    /// trip); the store's time (µs) and the replies of `commands`.
    func timedRead(_ commands: [[[UInt8]]], on name: [UInt8], by deadline: Instant)
        throws(TickgateError) -> (Int64, [RedisReply]) {
        let replies = try read([[Array("TIME".utf8)]] + commands + [keys.skewCommand(for: name)], on: name, by: deadline)
        let real = try RedisClock.storeTime(replies[0], replies[replies.count - 1], address.description)
        return (real, Array(replies[1..<(replies.count - 1)]))
    }

    /// Plain commands on keys of `name`'s slot (nil: none), pipelined (one
    /// round trip), that change nothing.
    func read(_ commands: [[[UInt8]]], on name: [UInt8]?, by deadline: Instant) throws(TickgateError) -> [RedisReply] {
        let replies = try exchange(sharing: name, by: deadline, changes: false) { (share, asking) throws(TickgateError) in
            Array(try share.pipeline(asking + commands).dropFirst(asking.count))
        }
        for reply in replies {
            if case let .error(text) = reply { throw RedisConnection.refused(text, address) }
        }
        return replies
    }

    /// Runs `send` on a connection to the primary that holds `name`'s slot
    /// (nil: any primary; without a cluster, the one primary). `send` puts
    /// the commands it is given first (`ASKING`, when a slot on its way to
    /// another node sent the call there) before its own, and answers its
    /// own replies. On a cluster a `MOVED` reply moves the slot and sends
    /// again, `ASK` sends once to the node named, `TRYAGAIN` (a slot half
    /// moved) waits a little and sends again, and a primary that cannot be
    /// reached has the slot map read again: if the slot has a new primary
    /// (its replica took over) the call goes there. Never past `deadline`.
    func exchange(on name: [UInt8]?, by deadline: Instant, changes: Bool,
                  _ send: (RedisConnection, [[[UInt8]]]) throws(TickgateError) -> [RedisReply])
        throws(TickgateError) -> [RedisReply] {
        try route(on: name, by: deadline) { (pool, asking) throws(TickgateError) in
            try pool.call(by: deadline, changes: changes) { (connection) throws(TickgateError) in
                try send(connection, asking)
            }
        }
    }

    /// `exchange` for plain requests (no WAIT, MULTI or SUBSCRIBE), which
    /// calls of other threads pipeline on the same connection at the same
    /// time (`RedisPool.share`): `send` gets its share of one.
    func exchange(sharing name: [UInt8]?, by deadline: Instant, changes: Bool,
                  _ send: (RedisShare, [[[UInt8]]]) throws(TickgateError) -> [RedisReply])
        throws(TickgateError) -> [RedisReply] {
        try route(on: name, by: deadline) { (pool, asking) throws(TickgateError) in
            try pool.share(by: deadline, changes: changes) { (share) throws(TickgateError) in
                try send(share, asking)
            }
        }
    }

    /// The routing of `exchange`: `call` runs the call on a pool, with the
    /// commands to put first.
    private func route(on name: [UInt8]?, by deadline: Instant,
                       _ call: (RedisPool, [[[UInt8]]]) throws(TickgateError) -> [RedisReply])
        throws(TickgateError) -> [RedisReply] {
        guard let cluster else {
            guard let pool else { throw TickgateError(.closed, "the store \(url.description) is closed") }
            return try call(pool, [])
        }
        let slot = RedisSlot.of(name ?? keys.settings)
        var askAt: RedisAddress?
        var redirects = 0
        while true {
            let target: RedisPool
            if let askAt { target = cluster.pool(at: askAt) } else { target = try cluster.pool(for: slot, by: deadline) }
            let asking: [[[UInt8]]] = askAt == nil ? [] : [[Array("ASKING".utf8)]]
            let replies: [RedisReply]
            do throws(TickgateError) {
                replies = try call(target, asking)
            } catch {
                // Not sent, or sent and refused: a node that could not be
                // reached may have been replaced by its replica.
                guard error.status == .storeIO, error.storeFailure == .unreachable || error.storeFailure == .timeout,
                      redirects < Self.maximumRedirects else { throw error }
                redirects += 1
                let before = cluster.owner(of: slot)
                askAt = nil
                if (try? cluster.refresh(by: deadline, force: true)) == nil || cluster.owner(of: slot) == before {
                    throw error
                }
                continue
            }
            guard let redirect = replies.lazy.compactMap({ Self.redirect($0) }).first else { return replies }
            redirects += 1
            guard redirects <= Self.maximumRedirects, deadline.since(Poller.boottime()).nanoseconds > 0 else {
                throw TickgateError(.storeIO,
                    "the Redis Cluster \(url.description) kept sending a call on slot \(slot) elsewhere (\(redirect.text.prefix(80)))",
                    store: .busy)
            }
            switch redirect.kind {
            case .moved:
                // The map read again first: the redirect is newer than it.
                try? cluster.refresh(by: deadline)
                cluster.moved(redirect.slot, to: url.server.at(Self.endpoint(redirect.endpoint, from: target)))
                askAt = nil
            case .ask:
                askAt = url.server.at(Self.endpoint(redirect.endpoint, from: target))
            case .tryAgain:
                askAt = nil
                Poller.sleep(min(Span.milliseconds(20), deadline.since(Poller.boottime())))
            }
        }
    }

    static let maximumRedirects = 8

    /// A redirect's endpoint; an empty host ("MOVED 3999 :6380", a cluster
    /// that announces no endpoint) is the host of the node that answered.
    private static func endpoint(_ endpoint: RedisAddress.Endpoint, from pool: RedisPool) -> RedisAddress.Endpoint {
        guard case let .tcp(host, port) = endpoint, host.isEmpty,
              case let .tcp(known, _) = pool.topology.url.server.endpoint else { return endpoint }
        return .tcp(host: known, port: port)
    }

    /// A cluster's redirection in a reply: "MOVED 3999 127.0.0.1:6381",
    /// "ASK 3999 127.0.0.1:6381" or "TRYAGAIN ...".
    static func redirect(_ reply: RedisReply) -> (kind: RedirectKind, slot: Int, endpoint: RedisAddress.Endpoint,
                                                 text: String)? {
        guard case let .error(text) = reply else { return nil }
        if text.hasPrefix("TRYAGAIN") { return (.tryAgain, 0, .tcp(host: "", port: 0), text) }
        let parts = text.split(separator: " ")
        guard parts.count == 3, parts[0] == "MOVED" || parts[0] == "ASK", let slot = Int(parts[1]),
              (0..<RedisSlot.count).contains(slot), let colon = parts[2].lastIndex(of: ":"),
              let port = Int(parts[2][parts[2].index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        var host = parts[2][..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard host.utf8.count < 256 else { return nil }
        return (parts[0] == "MOVED" ? .moved : .ask, slot, .tcp(host: String(host), port: port), text)
    }

    enum RedirectKind { case moved, ask, tryAgain }

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
        pool?.close()
        cluster?.close()
        let current = watcher.withLock { (watcher: inout RedisWatcher?) -> RedisWatcher? in
            defer { watcher = nil }
            return watcher
        }
        current?.stop()
    }

    // MARK: Notices

    var readsThrough: Bool { true }
    var holdsRules: Bool { true }
    var refusesLocally: Bool { options.localRefusals }
    /// On a cluster a reservation that goes back (Scripts/settle.lua) frees
    /// room unannounced: spent budgets are asked for every time.
    var keepsBudgetRefusals: Bool { cluster == nil }
    var hearsKeys: Bool { watcher.withLock { $0 }?.hearsKeys ?? false }

    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void) {
        watch(changed, lag: { _ in })
    }

    func watch(_ changed: @escaping @Sendable (StoreNotice) -> Void, lag: @escaping @Sendable (Span) -> Void) {
        let started = watcher.withLock { (watcher: inout RedisWatcher?) -> RedisWatcher? in
            if watcher != nil { return nil }
            let pool = self.pool
            let cluster = self.cluster
            let new = RedisWatcher(topology: topology, timeout: options.timeout, keys: keys, clock: clock,
                                   lag: lag) { notice in
                // A lost link may have taken the pool's idle connections
                // with it: they are replaced rather than tried one by one.
                if notice == .lost || notice == .back {
                    pool?.retireAll()
                    cluster?.retireAll()
                }
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
            return (try? read([[Array("PUBLISH".utf8), keys.channel, keys.wakeNotice]], on: nil, by: call.deadline)) != nil
        }
    }
}
