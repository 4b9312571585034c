import Glibc

/// With `redis+sentinel://`: a thread subscribed to the Sentinels'
/// `+switch-master` notices (on one Sentinel at a time, the next one if it
/// fails), so that when they promote a new primary the engine forgets the
/// old one at once: its idle connections are closed and the next call asks
/// the Sentinels, rather than finding out from a failed call. A lost or
/// failed call still makes it ask (RedisTopology): the notice only makes it
/// sooner. The link is watched as the notice link is (a `PING` when silent
/// for half the timeout).
final class SentinelWatcher: @unchecked Sendable {
    private let topology: RedisTopology
    private let timeout: Span
    private let switched: @Sendable () -> Void

    private struct State {
        var closed = false
        var descriptor: Int32?
    }

    private let state = LockedValue(State())
    private var thread: UInt = 0

    init(topology: RedisTopology, timeout: Span, switched: @escaping @Sendable () -> Void) {
        self.topology = topology
        // Its waits are short whatever the store's timeout: stop() cannot
        // interrupt a connection being made.
        self.timeout = min(timeout, .milliseconds(2_000))
        self.switched = switched
    }

    /// Starts the thread (it connects by itself); false if it could not.
    func start() -> Bool {
        guard let id = StoreThread.start({ self.run() }) else { return false }
        thread = id
        return true
    }

    func stop() {
        state.withLock { state in
            state.closed = true
            if let descriptor = state.descriptor { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        StoreThread.join(thread)
    }

    private var closed: Bool { state.withLock { $0.closed } }

    private func run() {
        var index = 0
        let sentinels = topology.url.sentinels
        while !closed && !sentinels.isEmpty {
            let sentinel = sentinels[index % sentinels.count]
            index += 1
            guard let connection = try? RedisConnection(sentinel, timeout: timeout),
                  case let .array(parts)? = try? connection.command([Array("SUBSCRIBE".utf8),
                                                                     Array("+switch-master".utf8)]),
                  parts.first?.text == "subscribe" else {
                pause()
                continue
            }
            let registered = state.withLock { state -> Bool in
                if state.closed { return false }
                state.descriptor = connection.descriptor
                return true
            }
            guard registered else { break }
            listen(connection)
            state.withLock { $0.descriptor = nil }
        }
    }

    /// Reads notices until the link fails or goes silent.
    private func listen(_ connection: RedisConnection) {
        connection.listen(timeout: timeout, keepGoing: { !closed }) { parts in
            // "SERVICE OLD-IP OLD-PORT NEW-IP NEW-PORT"
            if parts[0].text == "message", parts.count == 3, let text = parts[2].text,
               text.split(separator: " ").first.map(String.init) == topology.url.service {
                topology.forgetPrimary()
                switched()
            }
        }
    }

    private func pause() {
        var delay = timespec(tv_sec: 0, tv_nsec: 100_000_000)
        _ = nanosleep(&delay, nil)
    }
}
