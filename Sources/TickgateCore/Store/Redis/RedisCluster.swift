/// A Redis Cluster (`redis+cluster://`): which primary holds each of the
/// 16384 slots, read with `CLUSTER SLOTS` from any node that answers, and a
/// pool of connections per primary. A `MOVED` answer moves its slot at once
/// and has the map read again; a primary that cannot be reached has it read
/// again too (its replica may have been promoted). `RedisStore.exchange`
/// sends each call to the primary of its keys' slot and follows `MOVED`
/// and `ASK`.
final class RedisCluster: @unchecked Sendable {
    let topology: RedisTopology
    let timeout: Span
    /// Connections per primary.
    let capacity: Int

    // Guarded by `lock`.
    private let lock = ConditionLock()
    /// Each slot's primary (an index into `nodes`), or -1 if none serves it.
    private var owner = [Int32](repeating: -1, count: RedisSlot.count)
    /// Every node a map or a redirect named, with its pool (never removed:
    /// a former primary answers MOVED, and is cheap to keep).
    private var nodes: [RedisAddress] = []
    private var pools: [RedisPool] = []
    /// The primaries of the last map (indexes into `nodes`).
    private var primaryIndexes: [Int] = []
    private var refreshed: Instant?

    init(topology: RedisTopology, timeout: Span, capacity: Int) {
        self.topology = topology
        self.timeout = timeout
        self.capacity = capacity
    }

    var description: String { topology.description }

    /// Reads the slot map from any node, unless it was read in the last
    /// 100 ms (`force`: whatever the time). Throws if no node answers, or
    /// the server is not a cluster node.
    func refresh(by deadline: Instant, force: Bool = false) throws(TickgateError) {
        let now = Poller.boottime()
        if !force, let refreshed = lock.withLock({ self.refreshed }), now.since(refreshed) < .milliseconds(100) { return }
        let connection = try topology.connect(by: deadline)
        try connection.limit(to: deadline)
        let reply = try connection.command([Array("CLUSTER".utf8), Array("SLOTS".utf8)])
        let map = try Self.slots(reply, from: connection.address)
        lock.withLock {
            owner = [Int32](repeating: -1, count: RedisSlot.count)
            var primaries: [Int] = []
            for (range, address) in map {
                let index = indexLocked(address)
                if !primaries.contains(index) { primaries.append(index) }
                for slot in range { owner[slot] = Int32(index) }
            }
            primaryIndexes = primaries
            refreshed = Poller.boottime()
        }
        topology.learn(lock.withLock { primaryIndexes.map { nodes[$0] } })
    }

    /// The slot ranges of a `CLUSTER SLOTS` reply and each one's primary.
    private static func slots(_ reply: RedisReply, from address: RedisAddress) throws(TickgateError)
        -> [(ClosedRange<Int>, RedisAddress)] {
        if case let .error(text) = reply {
            if text.contains("cluster support disabled") {
                throw TickgateError(.storeIO,
                    "the Redis server \(address.description) is not a Redis Cluster node: name it with redis://, or name a cluster's nodes with redis+cluster://",
                    store: .unsupported)
            }
            throw RedisConnection.refused(text, address,
                "the Redis server \(address.description) did not give its cluster's slot map (CLUSTER SLOTS): \(text.prefix(200))")
        }
        func bad() -> TickgateError {
            TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a bad CLUSTER SLOTS reply",
                          store: .corrupt)
        }
        guard case let .array(ranges) = reply else { throw bad() }
        var map: [(ClosedRange<Int>, RedisAddress)] = []
        for range in ranges {
            guard case let .array(parts) = range, parts.count >= 3,
                  case let .integer(first) = parts[0], case let .integer(last) = parts[1],
                  first >= 0, first <= last, last < Int64(RedisSlot.count),
                  case let .array(node) = parts[2], node.count >= 2, case let .integer(port) = node[1],
                  (1...65_535).contains(port), let host = node[0].text, host.utf8.count < 256 else { throw bad() }
            // An empty host is the node that answered ("cluster-preferred-endpoint-type unknown-endpoint").
            var endpoint = RedisAddress.Endpoint.tcp(host: host, port: Int(port))
            if host.isEmpty || host == "?" {
                guard case let .tcp(known, _) = address.endpoint else { throw bad() }
                endpoint = .tcp(host: known, port: Int(port))
            }
            map.append((Int(first)...Int(last), address.at(endpoint)))
        }
        return map
    }

    /// The index of `address` in `nodes`, added (with a pool) if new.
    private func indexLocked(_ address: RedisAddress) -> Int {
        if let index = nodes.firstIndex(of: address) { return index }
        nodes.append(address)
        pools.append(RedisPool(topology: RedisTopology(url: RedisURL(server: address), timeout: timeout),
                               timeout: timeout, capacity: capacity, first: nil))
        return nodes.count - 1
    }

    /// The pool of the primary that serves `slot`; the map is read again
    /// if none is known.
    func pool(for slot: Int, by deadline: Instant) throws(TickgateError) -> RedisPool {
        if let pool = lock.withLock({ owner[slot] >= 0 ? pools[Int(owner[slot])] : nil }) { return pool }
        try refresh(by: deadline)
        guard let pool = lock.withLock({ owner[slot] >= 0 ? pools[Int(owner[slot])] : nil }) else {
            throw TickgateError(.storeIO, "no primary of the Redis Cluster \(description) serves slot \(slot) (cluster down)",
                                store: .unreachable)
        }
        return pool
    }

    /// The primary of `slot` as last known (-1: none).
    func owner(of slot: Int) -> Int { lock.withLock { Int(owner[slot]) } }

    /// A slot the last map gives to `pool`'s node, if any.
    func slot(of pool: RedisPool) -> Int? {
        lock.withLock {
            guard let index = pools.firstIndex(where: { $0 === pool }) else { return nil }
            return owner.firstIndex(of: Int32(index))
        }
    }

    /// The pool of a node a redirect named.
    func pool(at address: RedisAddress) -> RedisPool { lock.withLock { pools[indexLocked(address)] } }

    /// `MOVED`: `slot` is served by `address` from now on.
    func moved(_ slot: Int, to address: RedisAddress) {
        lock.withLock { owner[slot] = Int32(indexLocked(address)) }
    }

    /// The pools of the primaries of the last map.
    var primaries: [RedisPool] { lock.withLock { primaryIndexes.map { pools[$0] } } }

    /// Every pool's connections are closed when they come back.
    func retireAll() {
        for pool in lock.withLock({ pools }) { pool.retireAll() }
    }

    func close() {
        for pool in lock.withLock({ pools }) { pool.close() }
    }
}
