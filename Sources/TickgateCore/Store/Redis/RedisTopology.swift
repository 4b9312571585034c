/// Which server is the store's primary: the URL's server, or (for
/// `redis+sentinel://`) the one the Sentinels name, checked to be a primary
/// with `ROLE`; for `redis+cluster://`, any node that answers (the notice
/// link's: a cluster carries every PUBLISH to every node), the nodes the
/// slot map named first, then the URL's (`RedisCluster` routes each key). A connection that failed or was answered `READONLY` makes
/// the engine forget the primary, so the next connection asks the
/// Sentinels again: the engine follows a failover by itself.
final class RedisTopology: @unchecked Sendable {
    let url: RedisURL
    let timeout: Span
    /// Run on each new connection to a primary the Sentinels named, before
    /// it is used (the store's clock is kept running across a failover).
    private let onPrimary: @Sendable (RedisConnection) throws(TickgateError) -> Void

    // Guarded by `lock`.
    private let lock = ConditionLock()
    private var primary: RedisAddress?
    /// The Sentinel that answered last (asked first next time).
    private var sentinelIndex = 0
    /// A cluster's primaries, as its slot map last named them.
    private var clusterNodes: [RedisAddress] = []

    init(url: RedisURL, timeout: Span,
         onPrimary: @escaping @Sendable (RedisConnection) throws(TickgateError) -> Void = { _ in }) {
        self.url = url
        self.timeout = timeout
        self.onPrimary = onPrimary
        if url.sentinels.isEmpty { primary = url.server }
    }

    /// The store as messages name it.
    var description: String { url.description }

    /// The primary last known (for messages), or the URL's server.
    var current: RedisAddress { lock.withLock { primary } ?? url.server }

    /// A connection to the primary, made by `deadline` (a boot-clock
    /// instant): with Sentinels, asked for the primary, then checked to be
    /// one (a replica that Sentinel has not promoted yet is not used).
    func connect(by deadline: Instant) throws(TickgateError) -> RedisConnection {
        if !url.cluster.isEmpty { return try anyNode(by: deadline) }
        let known = lock.withLock { primary }
        guard !url.sentinels.isEmpty else {
            return try RedisConnection(url.server, timeout: left(deadline))
        }
        let address: RedisAddress
        if let known { address = known } else { address = try ask(by: deadline) }
        let connection: RedisConnection
        do throws(TickgateError) {
            connection = try RedisConnection(address, timeout: left(deadline))
            try connection.limit(to: deadline)
            let role = try connection.command([Array("ROLE".utf8)])
            if case let .error(text) = role { throw RedisConnection.refused(text, address) }
            guard case let .array(parts) = role, let first = parts.first?.text else {
                throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a bad ROLE reply",
                                    store: .corrupt)
            }
            guard first == "master" else {
                throw TickgateError(.storeIO,
                    "the Redis server \(address.description), named by the Sentinels of \(url.service), is a \(first.prefix(20)), not a primary (a failover is under way, or the Sentinels watch the wrong server)",
                    store: .readOnly)
            }
            try onPrimary(connection)
        } catch {
            forget(address)
            throw error
        }
        return connection
    }

    /// Forgets `address` as the primary (it failed, or answered that it is
    /// read-only): the next connection asks the Sentinels.
    func forget(_ address: RedisAddress) {
        guard !url.sentinels.isEmpty else { return }
        lock.withLock { if primary == address { primary = nil } }
    }

    /// Forgets whichever primary is known (a Sentinel announced a switch).
    func forgetPrimary() {
        guard !url.sentinels.isEmpty else { return }
        lock.withLock { primary = nil }
    }

    /// A cluster's primaries, learnt from its slot map.
    func learn(_ nodes: [RedisAddress]) {
        lock.withLock { clusterNodes = nodes }
    }

    /// A connection to any node of the cluster: the primaries the slot map
    /// named, then the URL's nodes; each gets an equal share of the time.
    private func anyNode(by deadline: Instant) throws(TickgateError) -> RedisConnection {
        var candidates = lock.withLock { clusterNodes }
        for seed in url.cluster where !candidates.contains(seed) { candidates.append(seed) }
        var reasons: [String] = []
        for (step, address) in candidates.enumerated() {
            let share = Span(nanoseconds: max(deadline.since(Poller.boottime()).nanoseconds / Int64(candidates.count - step),
                                              1_000_000))
            do throws(TickgateError) {
                return try RedisConnection(address, timeout: min(timeout, share))
            } catch {
                if error.storeFailure == .auth { throw error }
                reasons.append(error.message)
            }
        }
        throw TickgateError(.storeIO, "no node of \(description) could be reached: " + reasons.joined(separator: "; "),
                            store: .unreachable)
    }

    private func left(_ deadline: Instant) -> Span {
        min(timeout, max(deadline.since(Poller.boottime()), .milliseconds(1)))
    }

    /// Asks the Sentinels, one after another, for the service's primary.
    private func ask(by deadline: Instant) throws(TickgateError) -> RedisAddress {
        let start = lock.withLock { sentinelIndex }
        var reasons: [String] = []
        var refusedLogin = 0
        let count = url.sentinels.count
        for step in 0..<count {
            let index = (start + step) % count
            let sentinel = url.sentinels[index]
            // Each Sentinel gets an equal share of what is left, so one
            // that hangs does not use up the call.
            let share = Span(nanoseconds: max(deadline.since(Poller.boottime()).nanoseconds / Int64(count - step), 1_000_000))
            do throws(TickgateError) {
                let connection = try RedisConnection(sentinel, timeout: min(timeout, share))
                try connection.limit(to: min(deadline, Poller.boottime().advanced(by: share)))
                let reply = try connection.command([Array("SENTINEL".utf8), Array("get-master-addr-by-name".utf8),
                                                    Array(url.service.utf8)])
                switch reply {
                case let .array(parts) where parts.count == 2:
                    guard let host = parts[0].text, let port = parts[1].text.flatMap({ Int($0) }),
                          (1...65_535).contains(port), !host.isEmpty, host.utf8.count < 256 else {
                        throw TickgateError(.storeCorrupt, "the Sentinel \(sentinel.endpoint.description) sent a bad address",
                                            store: .corrupt)
                    }
                    let address = url.server.at(.tcp(host: host, port: port))
                    lock.withLock {
                        primary = address
                        sentinelIndex = index
                    }
                    return address
                case .null:
                    reasons.append("\(sentinel.endpoint.description) knows no service \(url.service)")
                case let .error(text):
                    if text.hasPrefix("NOAUTH") || text.hasPrefix("WRONGPASS") || text.hasPrefix("NOPERM") {
                        refusedLogin += 1
                        reasons.append("\(sentinel.endpoint.description) refused the login (sentinel_user, sentinel_password): \(text.prefix(120))")
                    } else {
                        reasons.append("\(sentinel.endpoint.description): \(text.prefix(120))")
                    }
                default:
                    reasons.append("\(sentinel.endpoint.description) sent a bad reply")
                }
            } catch {
                if error.storeFailure == .auth { refusedLogin += 1 }
                reasons.append(error.message)
            }
        }
        // One Sentinel that refuses does not stop the others being asked;
        // if every one refused the login (or its certificate), it is that.
        throw TickgateError(.storeIO,
            "no Sentinel of \(description) named the primary of \(url.service): " + reasons.joined(separator: "; "),
            store: refusedLogin == count ? .auth : .unreachable)
    }
}
