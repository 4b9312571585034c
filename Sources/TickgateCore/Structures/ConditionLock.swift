import Glibc

/// A pthread mutex with one condition variable. The engine's state lives
/// behind one of these; waits are for "the callback that is running ends".
/// Timed waits measure CLOCK_MONOTONIC, so a step of the wall clock neither
/// stretches nor cuts them.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        Self.initialize(condition)
    }

    /// Initialises `condition` for `wait(_:_:upTo:)`: its timed waits end
    /// at an instant of CLOCK_MONOTONIC.
    static func initialize(_ condition: UnsafeMutablePointer<pthread_cond_t>) {
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    /// Takes the lock if no one holds it; returns whether it did.
    func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    /// Waits for `broadcast()`; the caller holds the lock.
    func wait() { pthread_cond_wait(condition, mutex) }
    func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits for `broadcast()` at most `span`; the caller holds the lock.
    func wait(upTo span: Span) { Self.wait(condition, mutex, upTo: span) }

    /// Waits on `condition` at most `span`, `mutex` held (a condition of
    /// another owner's, as the pipelined connections' waiters have; made by
    /// `initialize`).
    static func wait(_ condition: UnsafeMutablePointer<pthread_cond_t>,
                     _ mutex: UnsafeMutablePointer<pthread_mutex_t>, upTo span: Span) {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let total = Int64(now.tv_nsec) + span.nanoseconds % 1_000_000_000
        var until = timespec(tv_sec: now.tv_sec + Int(span.nanoseconds / 1_000_000_000 + total / 1_000_000_000),
                             tv_nsec: Int(total % 1_000_000_000))
        _ = pthread_cond_timedwait(condition, mutex, &until)
    }

    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
