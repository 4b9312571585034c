/// State and the lock that guards it, together, as swift-nio's
/// `NIOLockedValueBox`: the state is reachable only inside `withLock`, so
/// "the lock is held" is checked by the compiler, not by comments. A body
/// that must wait for another thread (a callback that is running to end)
/// gets a `Held`, whose `wait()` releases the lock until a `broadcast()`.
/// No I/O belongs inside: other calls wait for the lock.
final class Guarded<State: AnyObject>: @unchecked Sendable {
    private let lock = ConditionLock()
    private let state: State

    init(_ state: State) { self.state = state }

    @inline(__always)
    func withLock<R, E: Error>(_ body: (State) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(state)
    }

    /// `withLock` for a body that waits.
    @inline(__always)
    func withLockWaiting<R, E: Error>(_ body: (State, Held) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(state, Held(lock: lock))
    }

    /// The lock, held: lets a body wait for, and announce, a change.
    struct Held {
        /// Unowned: a `Held` lives only inside `withLockWaiting`, while
        /// the box keeps its lock.
        fileprivate unowned(unsafe) let lock: ConditionLock

        /// Releases the lock until `broadcast()`, then holds it again.
        func wait() { lock.wait() }
        func broadcast() { lock.broadcast() }
    }
}
