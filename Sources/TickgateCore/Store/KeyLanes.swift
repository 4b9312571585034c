/// What a store decision is about, for `KeyLanes`.
enum Lane: Hashable {
    /// One countdown key: its countdown and send record.
    case key(CountdownKey)
    /// A scope's policy and titles.
    case scope(KeyName)
    /// A login realm's session.
    case realm(KeyName)
    /// A budget's limit.
    case budget(KeyName)
}

/// One decision at a time per key, and nothing else serialized: a store
/// decision holds its key's lane from the store round trip until its
/// result is applied to memory, so one key's decisions reach memory and
/// observers in the order the store made them, while decisions on other
/// keys run in parallel. A scope-wide decision (cancel a scope, or all)
/// holds every key of the scope. The engine's own lock is never held
/// while waiting here.
final class KeyLanes: @unchecked Sendable {
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var busy: Set<Lane> = []
    private var busyKeysPerScope: [KeyName: Int] = [:]
    private var busyKeys = 0
    private var wholeScopes: Set<KeyName> = []
    private var everything = false

    /// Runs `body` holding `lane`.
    func with<R, E: Error>(_ lane: Lane, _ body: () throws(E) -> R) throws(E) -> R {
        lock.lock()
        while busy.contains(lane) || blocked(lane) { lock.wait() }
        busy.insert(lane)
        if case .key(let key) = lane {
            busyKeysPerScope[key.scope, default: 0] += 1
            busyKeys += 1
        }
        lock.unlock()
        defer {
            lock.lock()
            busy.remove(lane)
            if case .key(let key) = lane {
                let left = (busyKeysPerScope[key.scope] ?? 1) - 1
                busyKeysPerScope[key.scope] = left > 0 ? left : nil
                busyKeys -= 1
            }
            lock.broadcast()
            lock.unlock()
        }
        return try body()
    }

    /// Runs `body` holding every key of `scope` (of every scope if nil).
    func withScope<R, E: Error>(_ scope: KeyName?, _ body: () throws(E) -> R) throws(E) -> R {
        lock.lock()
        if let scope {
            while everything || wholeScopes.contains(scope) || busyKeysPerScope[scope] != nil { lock.wait() }
            wholeScopes.insert(scope)
        } else {
            while everything || !wholeScopes.isEmpty || busyKeys > 0 { lock.wait() }
            everything = true
        }
        lock.unlock()
        defer {
            lock.lock()
            if let scope { wholeScopes.remove(scope) } else { everything = false }
            lock.broadcast()
            lock.unlock()
        }
        return try body()
    }

    private func blocked(_ lane: Lane) -> Bool {
        guard case .key(let key) = lane else { return false }
        return everything || wholeScopes.contains(key.scope)
    }
}
