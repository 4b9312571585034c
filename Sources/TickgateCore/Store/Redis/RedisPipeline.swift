import Glibc

/// Several threads' calls on one connection, pipelined: a call queues its
/// commands, and one of the callers at a time (the driver) writes every
/// queued request in one go and reads the replies in order (Redis answers
/// a connection's requests in the order they came), handing each caller
/// exactly its own. Between two replies (or after a millisecond without
/// one) it writes what was queued meanwhile, so requests go out while
/// replies come back. A driver
/// whose own replies came hands the link to the caller whose replies come
/// next. Only the driver touches the connection, so the link (hiredis, TLS)
/// is used by one thread at a time.
///
/// A failure of the link poisons it, as no later reply can be matched to
/// its request with certainty: every request written gets the error (it may
/// have run: the pool tells UNKNOWN), every request not written yet gets
/// "broken" (it ran nothing: the pool sends it on another connection). The
/// driver reads by the earliest deadline of the requests in flight, so a
/// call ends by its own deadline: when it passes, the link is poisoned.
final class RedisPipeline: @unchecked Sendable {
    /// One call's commands, and what came back for them.
    private final class Request {
        let commands: [[[UInt8]]]
        let deadline: Instant
        let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        // Guarded by the pipeline's mutex.
        var written = false
        var done = false
        var drives = false
        var replies: [RedisReply] = []
        var error: TickgateError?
        var delivered = false
        /// It ended because the connection failed.
        var poisoned = false

        init(_ commands: [[[UInt8]]], by deadline: Instant) {
            self.commands = commands
            self.deadline = deadline
            replies.reserveCapacity(commands.count)
            // Its timed wait (for a turn to write) is on the monotonic clock.
            ConditionLock.initialize(condition)
        }

        deinit {
            pthread_cond_destroy(condition)
            condition.deallocate()
        }

        func finish(_ error: TickgateError, delivered: Bool, poisoned: Bool = false) {
            self.error = error
            self.delivered = delivered
            self.poisoned = poisoned
            done = true
        }
    }

    /// The longest the driver waits for a reply before it writes what was
    /// queued meanwhile.
    static let slice = Span.milliseconds(1)

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var queued: [Request] = []
    private var written: [Request] = []
    private var driving = false
    private var failure: TickgateError?
    private var retired = false

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Whether the pool may give the connection to more calls: not after a
    /// failure, nor once a call discarded it (its server turned read-only).
    var reusable: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return failure == nil && !retired
    }

    /// No more calls are given the connection; those on it go on.
    func retire() {
        pthread_mutex_lock(mutex)
        retired = true
        pthread_mutex_unlock(mutex)
    }

    /// Sends `commands` on `connection` (the one this pipeline belongs to)
    /// with the requests of other threads, and answers their replies, by
    /// `deadline`. `delivered`: the request was written whole; `broken`:
    /// the connection failed (now or before).
    func submit(_ commands: [[[UInt8]]], on connection: RedisConnection, by deadline: Instant,
                delivered: inout Bool, broken: inout Bool) throws(TickgateError) -> [RedisReply] {
        delivered = false
        guard !commands.isEmpty else { return [] }
        let request = Request(commands, by: deadline)
        pthread_mutex_lock(mutex)
        if failure != nil {
            pthread_mutex_unlock(mutex)
            broken = true
            throw Self.brokenError(connection)
        }
        queued.append(request)
        if !driving {
            driving = true
            request.drives = true
        }
        while !request.done {
            if request.drives {
                pthread_mutex_unlock(mutex)
                drive(request, on: connection)
                pthread_mutex_lock(mutex)
                continue
            }
            if request.written {
                // The driver ends it by its deadline.
                pthread_cond_wait(request.condition, mutex)
                continue
            }
            let left = deadline.since(Poller.boottime())
            if left.nanoseconds <= 0 {
                // Never written: it ran nothing.
                queued.removeAll { $0 === request }
                request.finish(Self.lateError(connection), delivered: false)
                break
            }
            ConditionLock.wait(request.condition, mutex, upTo: left)
        }
        pthread_mutex_unlock(mutex)
        delivered = request.delivered
        if let error = request.error {
            broken = request.poisoned
            throw error
        }
        return request.replies
    }

    /// Writes the queued requests and reads replies until `me` has its own,
    /// then hands the link on (called without the mutex held).
    private func drive(_ me: Request, on connection: RedisConnection) {
        while true {
            pthread_mutex_lock(mutex)
            if me.done {
                me.drives = false
                let next = written.first ?? queued.first
                next?.drives = true
                if next == nil { driving = false }
                pthread_mutex_unlock(mutex)
                // Signalled after the unlock, so that it does not wake only
                // to wait for the mutex.
                if let next { pthread_cond_signal(next.condition) }
                return
            }
            // Requests past their deadline before they were written end
            // now, having changed nothing; the rest go in one write.
            let now = Poller.boottime()
            var batch: [Request] = []
            for request in queued {
                if request.deadline.since(now).nanoseconds > 0 {
                    request.written = true
                    batch.append(request)
                } else {
                    request.finish(Self.lateError(connection), delivered: false)
                    if request !== me { pthread_cond_signal(request.condition) }
                }
            }
            queued.removeAll(keepingCapacity: true)
            written.append(contentsOf: batch)
            guard let limit = written.lazy.map(\.deadline).min() else {
                pthread_mutex_unlock(mutex)
                continue
            }
            pthread_mutex_unlock(mutex)
            if !batch.isEmpty {
                do throws(TickgateError) {
                    try connection.limit(to: limit)
                    try connection.sendAll(batch.count == 1 ? batch[0].commands : batch.flatMap(\.commands))
                } catch {
                    // One request cut short ran nothing; of several, the
                    // first may have gone out whole and run.
                    fail(error, unsent: batch.count == 1 ? batch : [], on: connection, driver: me)
                    continue
                }
            }
            // A reply that does not begin within a slice lets the requests
            // queued meanwhile be written (a slow script holds no one back).
            let reply: RedisReply?
            do throws(TickgateError) {
                try connection.limit(to: limit)
                reply = try connection.receive(beginningWithin: min(Self.slice, limit.since(Poller.boottime())))
            } catch {
                fail(error, unsent: [], on: connection, driver: me)
                continue
            }
            guard let reply else { continue }
            pthread_mutex_lock(mutex)
            let head = written[0]
            head.replies.append(reply)
            let complete = head.replies.count == head.commands.count
            if complete {
                written.removeFirst()
                head.delivered = true
                head.done = true
            }
            pthread_mutex_unlock(mutex)
            if complete && head !== me { pthread_cond_signal(head.condition) }
        }
    }

    /// Poisons the link: the requests written get `error` (they may have
    /// run), those not written (`unsent`, and the queued) get "broken". A
    /// reply past the limits is the error of the request it answered; the
    /// others written after it get "broken" (they may have run too).
    private func fail(_ error: TickgateError, unsent: [Request], on connection: RedisConnection, driver: Request) {
        connection.discard()
        pthread_mutex_lock(mutex)
        if failure == nil { failure = error }
        let after = error.status == .storeIO ? error : Self.brokenError(connection, error)
        for (index, request) in written.enumerated() {
            let sent = !unsent.contains { $0 === request }
            request.finish(sent ? (index == 0 ? error : after) : Self.brokenError(connection, error), delivered: sent,
                           poisoned: true)
            if request !== driver { pthread_cond_signal(request.condition) }
        }
        for request in queued {
            request.finish(Self.brokenError(connection, error), delivered: false, poisoned: true)
            if request !== driver { pthread_cond_signal(request.condition) }
        }
        written.removeAll()
        queued.removeAll()
        pthread_mutex_unlock(mutex)
    }

    private static func brokenError(_ connection: RedisConnection, _ cause: TickgateError? = nil) -> TickgateError {
        let why = cause.map { ": \($0.message)" } ?? ""
        return TickgateError(.storeIO, "the connection to \(connection.address.description) is broken\(why)",
                             store: .unreachable)
    }

    private static func lateError(_ connection: RedisConnection) -> TickgateError {
        TickgateError(.storeIO,
            "the Redis server \(connection.address.description) did not answer within the store timeout",
            store: .timeout)
    }
}

/// What a call sends its commands through: a connection of its own, or
/// its share of a connection other calls pipeline on at the same time.
protocol RedisRequests: AnyObject {
    var address: RedisAddress { get }
    func command(_ arguments: [[UInt8]]) throws(TickgateError) -> RedisReply
    func pipeline(_ commands: [[[UInt8]]]) throws(TickgateError) -> [RedisReply]
    /// The connection is not given to later calls (its server turned
    /// read-only).
    func discard()
}

extension RedisConnection: RedisRequests {}

/// One call's share of a pipelined connection (used by that call's thread
/// alone): whether its last request was written, and whether the
/// connection failed under it.
final class RedisShare: RedisRequests {
    let connection: RedisConnection
    let deadline: Instant
    private(set) var delivered = false
    private(set) var broken = false

    init(_ connection: RedisConnection, by deadline: Instant) {
        self.connection = connection
        self.deadline = deadline
    }

    var address: RedisAddress { connection.address }

    func pipeline(_ commands: [[[UInt8]]]) throws(TickgateError) -> [RedisReply] {
        try connection.shared.submit(commands, on: connection, by: deadline, delivered: &delivered, broken: &broken)
    }

    func command(_ arguments: [[UInt8]]) throws(TickgateError) -> RedisReply {
        try pipeline([arguments])[0]
    }

    /// The connection's server turned read-only: the call goes to another
    /// connection (as a broken one), and the pool closes this one.
    func discard() {
        broken = true
        connection.shared.retire()
    }
}
