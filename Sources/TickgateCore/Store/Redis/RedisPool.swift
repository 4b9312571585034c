/// The Redis store's connections: at most `capacity` open at once. A call
/// that needs a connection of its own (`call`) takes an idle one, opens a
/// new one while fewer than `capacity` are open, or waits for one to come
/// back until its deadline. Calls that can share (`share`: plain requests,
/// no WAIT, MULTI or SUBSCRIBE) pipeline their requests on a connection
/// other calls use at the same time (RedisPipeline): another connection is
/// taken only while each shared one has `sharersPerConnection` calls on it.
/// A server that went away and came back is reached again by the next
/// call, without reopening the engine.
final class RedisPool: @unchecked Sendable {
    let topology: RedisTopology
    let timeout: Span
    let capacity: Int

    // Guarded by `lock` (its condition: a connection came back).
    private let lock = ConditionLock()
    private var idle: [RedisConnection] = []
    private var open = 0
    private var closed = false
    /// Bumped when every connection must go (the primary changed, or the
    /// notice link was lost): one made before is closed when it comes back.
    private var generation: UInt64 = 0
    private var bornIn: [ObjectIdentifier: UInt64] = [:]
    /// The shared connections more calls may join, and the calls on each
    /// shared connection (one no longer joinable drains, then goes idle).
    private var sharing: [RedisConnection] = []
    private var sharers: [ObjectIdentifier: Int] = [:]

    /// Calls on one shared connection before another is opened.
    static let sharersPerConnection = 16

    init(topology: RedisTopology, timeout: Span, capacity: Int, first: RedisConnection?) {
        self.topology = topology
        self.timeout = timeout
        self.capacity = capacity
        if let first {
            idle = [first]
            open = 1
            bornIn[ObjectIdentifier(first)] = 0
        }
    }

    /// A connection, by `deadline` (a boot-clock instant): an idle one, a new
    /// one (`fresh`), or the first one checked in while all are in use.
    func checkOut(by deadline: Instant) throws(TickgateError) -> (connection: RedisConnection, fresh: Bool) {
        lock.lock()
        while true {
            if closed {
                lock.unlock()
                throw TickgateError(.closed, "the store \(topology.description) is closed")
            }
            if let connection = popIdleLocked() {
                lock.unlock()
                return (connection, false)
            }
            if open < capacity {
                open += 1
                lock.unlock()
                do throws(TickgateError) {
                    let born = lock.withLock { generation }
                    let connection = try topology.connect(by: deadline)
                    lock.withLock { bornIn[ObjectIdentifier(connection)] = born }
                    return (connection, true)
                } catch {
                    lock.withLock { open -= 1 }
                    lock.broadcast()
                    throw error
                }
            }
            // All are open and some shared: one stops taking calls, so
            // that it comes back once those on it end.
            if sharing.count == sharers.count, let index = leastShared() { sharing.remove(at: index) }
            try waitForAConnection(by: deadline)
        }
    }

    /// A connection to pipeline on with other calls, by `deadline`: a
    /// shared one with fewer than `sharersPerConnection` calls, else an
    /// idle or a new one, else the least used shared one; if every
    /// connection is taken by a call of its own, the first to come back.
    /// Give it back with `leave`.
    func join(by deadline: Instant) throws(TickgateError) -> RedisConnection {
        lock.lock()
        while true {
            if closed {
                lock.unlock()
                throw TickgateError(.closed, "the store \(topology.description) is closed")
            }
            // A connection that failed, or made before all had to go, takes
            // no more calls.
            sharing.removeAll { !$0.shared.reusable || bornIn[ObjectIdentifier($0)] != generation }
            let least = leastShared()
            if let least, sharers[ObjectIdentifier(sharing[least]), default: 0] < Self.sharersPerConnection {
                return joinLocked(sharing[least])
            }
            if let connection = popIdleLocked() {
                sharing.append(connection)
                return joinLocked(connection)
            }
            if open < capacity {
                open += 1
                let born = generation
                lock.unlock()
                do throws(TickgateError) {
                    let connection = try topology.connect(by: deadline)
                    lock.lock()
                    bornIn[ObjectIdentifier(connection)] = born
                    sharing.append(connection)
                    return joinLocked(connection)
                } catch {
                    lock.withLock { open -= 1 }
                    lock.broadcast()
                    throw error
                }
            }
            if let least { return joinLocked(sharing[least]) }
            try waitForAConnection(by: deadline)
        }
    }

    /// Waits (the lock held) until a connection may be free, or throws
    /// (the lock released) once `deadline` has passed.
    private func waitForAConnection(by deadline: Instant) throws(TickgateError) {
        let left = deadline.since(Poller.boottime())
        guard left.nanoseconds > 0 else {
            lock.unlock()
            throw TickgateError(.storeIO,
                "all \(capacity) connections to \(topology.description) stayed busy for the store timeout",
                store: .timeout)
        }
        lock.wait(upTo: left)
    }

    /// One more call on `connection` (the lock held; released).
    private func joinLocked(_ connection: RedisConnection) -> RedisConnection {
        sharers[ObjectIdentifier(connection), default: 0] += 1
        lock.unlock()
        return connection
    }

    /// The index in `sharing` of the connection with the fewest calls (the
    /// lock held).
    private func leastShared() -> Int? {
        sharing.indices.min { sharers[ObjectIdentifier(sharing[$0]), default: 0]
            < sharers[ObjectIdentifier(sharing[$1]), default: 0] }
    }

    /// A call leaves a shared connection; the last one out makes it idle,
    /// or closes it if it failed or the store closed.
    func leave(_ connection: RedisConnection) {
        let id = ObjectIdentifier(connection)
        let last = lock.withLock { () -> Bool in
            let left = sharers[id, default: 1] - 1
            guard left == 0 else {
                sharers[id] = left
                return false
            }
            sharers[id] = nil
            sharing.removeAll { $0 === connection }
            if connection.shared.reusable && !closed && bornIn[id] == generation {
                idle.append(connection)
            } else {
                open -= 1
                bornIn[id] = nil
            }
            return true
        }
        if last { lock.broadcast() }
    }

    /// An idle connection, or a new one while fewer than `capacity` are
    /// open; nil (at once) when all are busy: for a caller that already
    /// holds a connection of another pool and must not wait for this one.
    func tryCheckOut(by deadline: Instant) -> RedisConnection? {
        lock.lock()
        if let connection = popIdleLocked() {
            lock.unlock()
            return connection
        }
        guard !closed, open < capacity else {
            lock.unlock()
            return nil
        }
        open += 1
        let born = generation
        lock.unlock()
        do throws(TickgateError) {
            let connection = try topology.connect(by: deadline)
            lock.withLock { bornIn[ObjectIdentifier(connection)] = born }
            return connection
        } catch {
            lock.withLock { open -= 1 }
            lock.broadcast()
            return nil
        }
    }

    /// An idle connection (the lock held); one the server closed while it
    /// sat idle (it restarted) is dropped before anything is sent on it.
    private func popIdleLocked() -> RedisConnection? {
        while let connection = idle.popLast() {
            guard connection.isStale else { return connection }
            open -= 1
            bornIn[ObjectIdentifier(connection)] = nil
        }
        return nil
    }

    /// Gives a connection back, or closes it if it broke or the store closed.
    func checkIn(_ connection: RedisConnection) {
        lock.withLock {
            let id = ObjectIdentifier(connection)
            if !connection.broken && !closed && bornIn[id] == generation {
                idle.append(connection)
            } else {
                open -= 1
                bornIn[id] = nil
            }
        }
        lock.broadcast()
    }

    /// Runs `body` on a connection of its own whose reads and writes end by
    /// `deadline`.
    ///
    /// A connection that fails (the server restarted, closed it, or a link
    /// was cut) is replaced and `body` run again while time is left: every
    /// state-changing script carries an id, and the server answers a
    /// repeated id with its first answer, so a retry never applies twice.
    /// `changes`: the call may change the store. If it may have reached the
    /// server and no answer came (a timeout, or no connection could be made
    /// again), its outcome cannot be known: `.storeUnknown`.
    func call<R>(by deadline: Instant, changes: Bool,
                 _ body: (RedisConnection) throws(TickgateError) -> R) throws(TickgateError) -> R {
        try retrying(by: deadline, changes: changes) { (attempt) throws(TickgateError) -> R in
            let connection = try checkOut(by: deadline).connection
            attempt.address = connection.address
            do throws(TickgateError) {
                try connection.limit(to: deadline)
                let result = try body(connection)
                checkIn(connection)
                return result
            } catch {
                attempt.delivered = connection.delivered
                attempt.broken = connection.broken
                checkIn(connection)
                throw error
            }
        }
    }

    /// Runs `body` on a share of a connection other calls pipeline on at the
    /// same time (see `join`); each of its requests ends by `deadline`. A
    /// call that may have run when the connection failed is told as by
    /// `call`, and one that was not sent is sent again on another.
    func share<R>(by deadline: Instant, changes: Bool,
                  _ body: (RedisShare) throws(TickgateError) -> R) throws(TickgateError) -> R {
        try retrying(by: deadline, changes: changes) { (attempt) throws(TickgateError) -> R in
            let connection = try join(by: deadline)
            attempt.address = connection.address
            let share = RedisShare(connection, by: deadline)
            do throws(TickgateError) {
                let result = try body(share)
                leave(connection)
                return result
            } catch {
                attempt.delivered = share.delivered
                attempt.broken = share.broken
                leave(connection)
                throw error
            }
        }
    }

    /// How one try of a call ended: on which server (nil: no connection was
    /// had), whether its last request was written, whether the connection
    /// broke.
    private struct Attempt {
        var address: RedisAddress?
        var delivered = false
        var broken = false
    }

    /// Runs `once` until it returns, or fails in a way a new connection does
    /// not mend, or time is out (`call` says how).
    private func retrying<R>(by deadline: Instant, changes: Bool,
                             _ once: (inout Attempt) throws(TickgateError) -> R) throws(TickgateError) -> R {
        var sent = false
        var last: TickgateError?
        var pause = Span.milliseconds(1)
        while true {
            var attempt = Attempt()
            do throws(TickgateError) {
                return try once(&attempt)
            } catch {
                guard let address = attempt.address else {
                    // No connection.
                    guard sent, changes, error.status == .storeIO else { throw error }
                    throw unknown(error, after: last)
                }
                // A read-only server ran nothing: it was a primary that
                // became a replica (a failover), and the next connection
                // asks the Sentinels for the new one.
                let readOnly = error.storeFailure == .readOnly
                sent = sent || (attempt.delivered && !readOnly)
                if attempt.broken { topology.forget(address) }
                let mayHaveRun = sent && changes && error.status == .storeIO
                // A link that went silent: the idle ones likely did too.
                if error.storeFailure == .timeout { dropIdle() }
                if error.storeFailure == .timeout || !attempt.broken || error.status != .storeIO {
                    throw mayHaveRun ? unknown(error, after: last) : error
                }
                last = error
                // A server that takes connections and drops them is not
                // hammered: a short pause, growing, before the next try.
                pause = min(Span(nanoseconds: pause.nanoseconds * 2), Span.milliseconds(50))
                let left = deadline.since(Poller.boottime())
                if left > pause { Poller.sleep(pause) }
            }
        }
    }

    private func unknown(_ error: TickgateError, after last: TickgateError?) -> TickgateError {
        TickgateError(.storeUnknown,
            "\(last?.message ?? error.message); the request may have reached the server, which refuses it once past its deadline: read the key to learn what holds",
            store: error.storeFailure)
    }

    /// Closes every idle connection (a call timed out: the link may be
    /// silent); the next calls connect.
    func dropIdle() {
        lock.withLock {
            open -= idle.count
            for connection in idle { bornIn[ObjectIdentifier(connection)] = nil }
            idle.removeAll()
        }
        lock.broadcast()
    }

    /// Closes every idle connection, and each busy one when it comes back
    /// (the notice link was lost: they may be dead without knowing it; or
    /// the Sentinels named a new primary); the next calls connect.
    func retireAll() {
        lock.withLock { generation &+= 1 }
        dropIdle()
    }

    /// Closes every idle connection; later calls fail.
    func close() {
        lock.withLock {
            closed = true
            open -= idle.count
            for connection in idle { bornIn[ObjectIdentifier(connection)] = nil }
            idle.removeAll()
        }
        lock.broadcast()
    }
}
