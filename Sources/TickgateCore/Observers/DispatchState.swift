/// Delivery: the events waiting, who is delivering them, and what is being
/// delivered right now.
struct DispatchState {
    var pending = EventQueue()
    /// An empty queue to swap in when a dispatch takes `pending`.
    var spareQueue: EventQueue?
    var dispatching = false
    /// The thread that runs the dispatch, 0 if none.
    var dispatcher: UInt = 0
    var runningSubscription: SubscriptionID = 0
    /// The key of the event whose callback is running, if one is (its
    /// names are made only when a cancel has to wait for it).
    var runningEvent: (scope: KeyName, subject: EventSubject)?
    var runningKey: CountdownKey? {
        runningEvent.map { CountdownKey(scope: $0.scope, subject: $0.subject.name) }
    }
    /// Releases of subscriptions that ended inside their own callback.
    var deferredReleases: [Observer] = []
    /// Engine-thread mode: passes asked for by `advance` and passes done.
    var passesRequested: UInt64 = 0
    var passesCompleted: UInt64 = 0
    var detachThread = false
}
