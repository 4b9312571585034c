import CTickgateShim
import Glibc

/// The change notices of a Redis store: a thread of its own, subscribed to
/// the prefix's channel on a connection of its own, tells the engine of
/// every key another engine changed (each decision script publishes the
/// key it wrote). When the connection drops it connects again, subscribes
/// again and reports nil: the engine re-reads every key it observes, so no
/// change is missed.
final class RedisWatcher: @unchecked Sendable {
    private let address: RedisAddress
    private let timeout: Span
    private let channel: [UInt8]
    private let publisher: [UInt8]
    private let changed: @Sendable (CountdownKey?) -> Void

    private struct State {
        var closed = false
        /// The subscribed connection's socket while the thread reads it.
        var descriptor: Int32?
        /// Subscriptions made (the first one ends `start`'s wait).
        var subscriptions = 0
    }

    private let state = LockedValue(State())
    private var thread: UInt = 0

    init(address: RedisAddress, timeout: Span, channel: [UInt8], publisher: String,
         changed: @escaping @Sendable (CountdownKey?) -> Void) {
        self.address = address
        self.timeout = timeout
        self.channel = channel
        self.publisher = Array(publisher.utf8)
        self.changed = changed
    }

    /// Starts the thread and waits (at most the store's timeout) until it
    /// has subscribed, so no change after `start` returns is missed;
    /// false if the thread could not start.
    func start() -> Bool {
        guard let id = StoreThread.start({ self.run() }) else { return false }
        thread = id
        let deadline = Poller.boottime().advanced(by: timeout)
        while state.withLock({ $0.subscriptions == 0 && !$0.closed }) && Poller.boottime() < deadline {
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

    private func run() {
        while !closed {
            guard let connection = try? RedisConnection(address, timeout: timeout) else {
                pause()
                continue
            }
            guard case let .array(parts)? = try? connection.command([Array("SUBSCRIBE".utf8), channel]),
                  parts.first?.text == "subscribe" else {
                pause()
                continue
            }
            connection.waitForever()
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
            if earlier > 0 { changed(nil) }
            while let reply = try? connection.read() {
                if let key = key(of: reply) { changed(key) }
            }
            state.withLock { $0.descriptor = nil }
        }
    }

    /// Waits a tenth of a second before connecting again.
    private func pause() {
        var delay = timespec(tv_sec: 0, tv_nsec: 100_000_000)
        _ = nanosleep(&delay, nil)
    }

    /// The key a message names ("PUBLISHER kLEN:SCOPESUBJECT"), unless it
    /// is this engine's own or not a well-formed key.
    private func key(of reply: RedisReply) -> CountdownKey? {
        guard case let .array(parts) = reply, parts.count == 3, parts[0].text == "message",
              case let .string(payload) = parts[2],
              let space = payload.firstIndex(of: UInt8(ascii: " ")),
              Array(payload[..<space]) != publisher else { return nil }
        var rest = payload[(space + 1)...]
        guard rest.first == UInt8(ascii: "k") else { return nil }
        rest = rest.dropFirst()
        guard let colon = rest.prefix(4).firstIndex(of: UInt8(ascii: ":")),
              let length = Int(String(decoding: rest[rest.startIndex..<colon], as: UTF8.self)),
              length > 0, rest.distance(from: colon, to: rest.endIndex) > length else { return nil }
        let start = rest.index(after: colon)
        let middle = rest.index(start, offsetBy: length)
        let scope = Array(rest[start..<middle])
        let subject = Array(rest[middle...])
        return scope.withUnsafeBufferPointer { scopeBytes in
            subject.withUnsafeBufferPointer { subjectBytes in
                guard let scope = try? KeyName(bytes: scopeBytes, role: "scope"),
                      let subject = try? KeyName(bytes: subjectBytes, role: "subject") else { return nil }
                return CountdownKey(scope: scope, subject: subject)
            }
        }
    }
}
