/// Something waiting for delivery: an event for one subscription, or a gate
/// request's action or cancel. Countdown events of a run (`instance` != 0)
/// are dropped if that run was cancelled meanwhile.
struct PendingEvent {
    enum Payload {
        case event(Event)
        case gate(GateEvent)
        case run(UInt64)
        case cancel(UInt64, CancelReason)
        /// A guarded send's decision record, for one records subscription.
        case record(GuardRecord, SubscriptionID)
    }

    var instance: UInt64
    var payload: Payload

    init(instance: UInt64, event: Event) {
        self.instance = instance
        self.payload = .event(event)
    }

    init(_ payload: Payload) {
        self.instance = 0
        self.payload = payload
    }
}
