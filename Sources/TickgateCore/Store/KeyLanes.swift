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

    /// The lane as an error message names it.
    var description: String {
        switch self {
        case let .key(key): key.description
        case let .scope(scope): "the scope \(scope.value)"
        case let .realm(realm): "the realm \(realm.value)"
        case let .budget(budget): "the budget \(budget.value)"
        }
    }
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
        take(lane)
        lock.unlock()
        defer { give(lane) }
        return try body()
    }

    /// Runs `body` holding `lane`, waiting for it until `deadline` (a
    /// boot-clock instant: the call's, so that the wait and the store's
    /// round trip share one store timeout). A lane still busy then (another
    /// call on it waits for the store) throws a timeout: nothing was done.
    func with<R>(_ lane: Lane, by deadline: Instant,
                 _ body: () throws(TickgateError) -> R) throws(TickgateError) -> R {
        lock.lock()
        while busy.contains(lane) || blocked(lane) {
            let left = deadline.since(Poller.boottime())
            guard left.nanoseconds > 0 else {
                lock.unlock()
                throw TickgateError(.storeIO,
                    "another call on \(lane.description) held it for the store timeout (waiting for the store); nothing was done",
                    store: .timeout)
            }
            lock.wait(upTo: left)
        }
        take(lane)
        lock.unlock()
        defer { give(lane) }
        return try body()
    }

    /// Marks `lane` busy (the lock held).
    private func take(_ lane: Lane) {
        busy.insert(lane)
        if case .key(let key) = lane {
            busyKeysPerScope[key.scope, default: 0] += 1
            busyKeys += 1
        }
    }

    /// Frees `lane` and wakes its waiters.
    private func give(_ lane: Lane) {
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
