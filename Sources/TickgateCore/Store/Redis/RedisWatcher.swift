import CTickgateShim
import Glibc

/// The change notices of a Redis store: a thread of its own, subscribed to
/// the prefix's channels on a connection of its own, tells the engine what
/// other engines changed (every script that writes publishes a notice).
/// The settings' and sessions' channel is heard from the start, with the
/// channel that says which formats the engine reads (`RedisKeys.reads`:
/// the subscription is how a finishing upgrade knows the engine is live and
/// what it reads, for as long as its link lasts); the keys'
/// channel, one notice per decision, only once the engine has an observer
/// (`watchKeys`): an engine that observes nothing is not woken by every
/// decision of every server.
///
/// The link is watched: when no message came for half the timeout it sends
/// a `PING`, and if the answer does not come within the other half the
/// link is taken as dead (TCP keepalive alone cannot see a proxy that stops
/// forwarding: its own kernel answers the probes). A dead or dropped link
/// is reported (`.lost`), replaced, and reported again when subscribed
/// (`.back`): the engine then re-reads what it observes, so no change is
/// missed for good.
final class RedisWatcher: @unchecked Sendable {
    private let topology: RedisTopology
    private let timeout: Span
    private let keys: RedisKeys
    private let changed: @Sendable (StoreNotice) -> Void
    /// Told how long each notice that says when it was sent took to
    /// arrive, by `clock`'s mapping of the store's time (never later than
    /// it is: a lag is never overstated).
    private let lag: @Sendable (Span) -> Void
    private let clock: RedisClock?

    private struct State {
        var closed = false
        /// The subscribed connection's socket while the thread reads it.
        var descriptor: Int32?
        /// Subscriptions made (the first one ends `start`'s wait).
        var subscriptions = 0
        /// Connection attempts that failed (the first one ends it too: a
        /// server out of reach does not hold up the engine's caller).
        var failures = 0
        /// The keys' notices are wanted, and heard on the current link.
        var wantsKeys = false
        var hearsKeys = false
        /// A caller of `watchKeys` went on before the server confirmed:
        /// what is observed is read again when it does.
        var owesReread = false
    }

    private let state = LockedValue(State())
    private var thread: UInt = 0

    init(topology: RedisTopology, timeout: Span, keys: RedisKeys, clock: RedisClock? = nil,
         lag: @escaping @Sendable (Span) -> Void = { _ in },
         changed: @escaping @Sendable (StoreNotice) -> Void) {
        self.topology = topology
        self.timeout = timeout
        self.keys = keys
        self.clock = clock
        self.lag = lag
        self.changed = changed
    }

    /// Starts the thread and waits (at most the store's timeout) until it
    /// has subscribed, so no change after `start` returns is missed;
    /// false if the thread could not start.
    func start() -> Bool {
        guard let id = StoreThread.start({ self.run() }) else { return false }
        thread = id
        let deadline = Poller.boottime().advanced(by: timeout)
        while state.withLock({ $0.subscriptions == 0 && $0.failures == 0 && !$0.closed })
            && Poller.boottime() < deadline {
            var delay = timespec(tv_sec: 0, tv_nsec: 1_000_000)
            _ = nanosleep(&delay, nil)
        }
        return true
    }

    /// Stops the thread and waits for it.
    func stop() {
        state.withLock { state in
            state.closed = true
            if let descriptor = state.descriptor { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        StoreThread.join(thread)
    }

    private var closed: Bool { state.withLock { $0.closed } }

    /// True while the keys' notices are heard on a live link.
    var hearsKeys: Bool { state.withLock { $0.hearsKeys && $0.descriptor != nil } }

    /// Subscribes to the keys' notices too, and waits (at most the timeout)
    /// until the server confirms it, so no key change after this returns
    /// goes unheard. `wake` makes the listening thread look (it publishes
    /// this engine's wake notice). With the link down, or the wake not
    /// sent, it returns at once; whenever it returns unconfirmed, the
    /// confirmation, when it comes, makes the engine re-read what it
    /// observes (`.anything`), so a change made meanwhile is not missed for
    /// good.
    func watchKeys(wake: () -> Bool) {
        let waiting = state.withLock { state -> Bool in
            state.wantsKeys = true
            return state.descriptor != nil && !state.hearsKeys && !state.closed
        }
        if waiting && wake() {
            let deadline = Poller.boottime().advanced(by: timeout)
            while state.withLock({ $0.descriptor != nil && !$0.hearsKeys && !$0.closed })
                && Poller.boottime() < deadline {
                var delay = timespec(tv_sec: 0, tv_nsec: 200_000)
                _ = nanosleep(&delay, nil)
            }
        }
        state.withLock { state in
            if !state.hearsKeys { state.owesReread = true }
        }
    }

    private func run() {
        var lost = false
        while !closed {
            let withKeys = state.withLock { $0.wantsKeys }
            // With Sentinels, the primary they name (a failover moves the
            // notices to the new primary with everything else).
            guard let connection = try? topology.connect(by: Poller.boottime().advanced(by: timeout)),
                  case let .array(parts)? = try? connection.command(
                      [Array("SUBSCRIBE".utf8), keys.channel] + RedisKeys.announcedFormats.map { keys.reads($0) }
                          + (withKeys ? [keys.keyChannel] : [])),
                  parts.first?.text == "subscribe" else {
                state.withLock { $0.failures += 1 }
                if !lost && state.withLock({ $0.subscriptions > 0 }) {
                    lost = true
                    changed(.lost)
                }
                pause()
                continue
            }
            let earlier = state.withLock { state -> Int? in
                if state.closed { return nil }
                state.descriptor = connection.descriptor
                state.subscriptions += 1
                return state.subscriptions - 1
            }
            guard let earlier else { break }
            // Changes made while no connection listened are found by
            // re-reading what is observed (the first subscription is made
            // before the first observer's key is read).
            if earlier > 0 {
                lost = false
                changed(.back)
            }
            listen(connection, keysAsked: withKeys)
            topology.forget(connection.address)
            state.withLock { state in
                state.descriptor = nil
                state.hearsKeys = false
            }
            if !closed && !lost {
                lost = true
                changed(.lost)
            }
        }
    }

    /// Reads notices until the link fails or goes silent.
    private func listen(_ connection: RedisConnection, keysAsked: Bool) {
        var keysAsked = keysAsked
        connection.listen(timeout: timeout, keepGoing: { !closed }, beforeRead: { () -> Bool in
            if !keysAsked && state.withLock({ $0.wantsKeys }) {
                do throws(TickgateError) {
                    try connection.send([Array("SUBSCRIBE".utf8), keys.keyChannel])
                } catch {
                    return false
                }
                keysAsked = true
            }
            return true
        }) { parts in
            let kind = parts[0].text
            if kind == "subscribe", parts.count == 3, case let .string(channel) = parts[1],
               channel == keys.keyChannel {
                let owed = state.withLock { state -> Bool in
                    state.hearsKeys = true
                    defer { state.owesReread = false }
                    return state.owesReread
                }
                // A caller went on unconfirmed (the link was being made,
                // or the wait ran out): a key changed meanwhile went
                // unheard, so what is observed is read again.
                if owed { changed(.anything) }
            } else if kind == "message", parts.count == 3, case let .string(stamped) = parts[2] {
                let (payload, sent) = keys.unstamped(stamped)
                guard let notice = keys.notice(payload) else { return }
                if let sent, let now = clock?.storeMicros(atBoot: Poller.boottime()) {
                    lag(Span(nanoseconds: max(now &- sent, 0) &* 1_000))
                }
                changed(notice)
            }
        }
    }

    /// Waits a tenth of a second before connecting again.
    private func pause() {
        var delay = timespec(tv_sec: 0, tv_nsec: 100_000_000)
        _ = nanosleep(&delay, nil)
    }
}
