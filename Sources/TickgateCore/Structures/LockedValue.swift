/// A value and the pthread mutex that guards it (swift-nio's
/// `NIOLockedValueBox`), for state that is a struct: reachable only inside
/// `withLock`. A pthread mutex rather than `Synchronization.Mutex`, whose
/// futex ThreadSanitizer cannot see, so `make sanitize` checks what it
/// guards.
final class LockedValue<Value>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// `withLock` if no one holds the lock, else nil (never waits).
    func withLockIfAvailable<R>(_ body: (inout Value) -> R) -> R? {
        guard lock.tryLock() else { return nil }
        defer { lock.unlock() }
        return body(&value)
    }
}
