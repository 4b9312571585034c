/// One subscription: what it observes, and who.
struct Subscription {
    var target: SubscriptionTarget
    var observer: Observer
}

/// The subscriptions: who observes which key, scope and realm.
struct ObserverBook {
    private(set) var subscriptions: [SubscriptionID: Subscription] = [:]
    private(set) var keyObservers: [CountdownKey: [SubscriptionID]] = [:]
    private(set) var scopeObservers: [KeyName: [SubscriptionID]] = [:]
    private(set) var realmObservers: [KeyName: [SubscriptionID]] = [:]
    private(set) var recordObservers: [KeyName: [SubscriptionID]] = [:]
    private(set) var outcomeObservers: [KeyName: [SubscriptionID]] = [:]
    private var nextSubscription: SubscriptionID = 0
    /// The observer found last: the events of a pass mostly go to one.
    private var lastObserver: (id: SubscriptionID, observer: Observer)?
    /// Scopes with a subscription (to the scope or to one of its keys), and
    /// how many: a change on a key of any other scope has nobody to tell,
    /// so an observer costs only its own scope.
    private var observedScopeCounts: [KeyName: Int] = [:]
    /// The keys of `observedScopeCounts`, for the fast paths to compare.
    private(set) var observedScopes: [KeyName] = []

    /// Registers a subscription; returns its id.
    mutating func register(_ target: SubscriptionTarget, _ observer: Observer) -> SubscriptionID {
        nextSubscription &+= 1
        let id = nextSubscription
        subscriptions[id] = Subscription(target: target, observer: observer)
        switch target {
        case .key(let key):
            keyObservers[key, default: []].append(id)
            countObserver(of: key.scope, 1)
        case .scope(let scope):
            scopeObservers[scope, default: []].append(id)
            countObserver(of: scope, 1)
        case .realm(let realm):
            realmObservers[realm, default: []].append(id)
        case .records(let scope):
            recordObservers[scope, default: []].append(id)
        case .outcomes(let scope):
            outcomeObservers[scope, default: []].append(id)
        }
        return id
    }

    /// Ends a subscription's registration; returns it.
    mutating func unregister(_ id: SubscriptionID) -> Subscription? {
        guard let subscription = subscriptions.removeValue(forKey: id) else { return nil }
        if lastObserver?.id == id { lastObserver = nil }
        switch subscription.target {
        case .key(let key):
            countObserver(of: key.scope, -1)
            keyObservers[key]?.removeAll { $0 == id }
            if keyObservers[key]?.isEmpty == true { keyObservers.removeValue(forKey: key) }
        case .scope(let scope):
            countObserver(of: scope, -1)
            scopeObservers[scope]?.removeAll { $0 == id }
            if scopeObservers[scope]?.isEmpty == true { scopeObservers.removeValue(forKey: scope) }
        case .realm(let realm):
            realmObservers[realm]?.removeAll { $0 == id }
            if realmObservers[realm]?.isEmpty == true { realmObservers.removeValue(forKey: realm) }
        case .records(let scope):
            recordObservers[scope]?.removeAll { $0 == id }
            if recordObservers[scope]?.isEmpty == true { recordObservers.removeValue(forKey: scope) }
        case .outcomes(let scope):
            outcomeObservers[scope]?.removeAll { $0 == id }
            if outcomeObservers[scope]?.isEmpty == true { outcomeObservers.removeValue(forKey: scope) }
        }
        return subscription
    }

    /// A live subscription's observer.
    mutating func observer(of id: SubscriptionID) -> Observer? {
        if let last = lastObserver, last.id == id { return last.observer }
        guard let observer = subscriptions[id]?.observer else { return nil }
        lastObserver = (id, observer)
        return observer
    }

    /// Counts a subscription to `scope` or to one of its keys (`delta` 1),
    /// or its end (-1).
    private mutating func countObserver(of scope: KeyName, _ delta: Int) {
        let count = (observedScopeCounts[scope] ?? 0) + delta
        if count > 0 {
            observedScopeCounts[scope] = count
        } else {
            observedScopeCounts.removeValue(forKey: scope)
        }
        observedScopes = Array(observedScopeCounts.keys)
    }
}
