import CTickgateShim

/// What a countdown's time means for the key's button.
enum Phase {
    /// A send ticket is open until the deadline (then it expires).
    case sending
    /// The cooldown after a send (or a bare `start`).
    case cooling
    /// The window's cap is reached until the deadline.
    case locked

    var buttonState: ButtonState {
        switch self {
        case .sending: .sending
        case .cooling: .cooling
        case .locked: .locked
        }
    }
}

/// How a ticket that is no longer open ended, kept for clear errors.
enum TicketEnd {
    case ended, expired, cancelled
}

/// A running countdown in its slot.
struct Countdown {
    var key: CountdownKey
    var phase: Phase = .cooling
    /// The open ticket (phase `.sending`), else 0.
    var ticket: UInt64 = 0
    /// Distinguishes this run of the key from earlier and later runs.
    var instance: UInt64
    var deadline: Instant
    var duration: Span
    var tickInterval: Span
}

/// Something waiting for delivery: an event for one subscription, or a gate
/// request's action or cancel. Countdown events of a run (`instance` != 0)
/// are dropped if that run was cancelled meanwhile.
struct PendingEvent {
    enum Payload {
        case event(Event)
        case gate(GateEvent)
        case run(UInt64)
        case cancel(UInt64, CancelReason)
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

struct Subscription {
    var target: SubscriptionTarget
    var observer: Observer
}

/// Everything an engine knows, guarded by the engine's lock.
final class EngineState {
    var closed = false
    /// The manual clock's reading; nil for the system clock.
    var manualNow: Instant?
    /// The manual clock's wall reading (ns since the epoch).
    var manualWall: Int64 = 0
    /// This boot's id (the manual clock's own, or the system's).
    var bootID = ""
    /// Group commit: when the open store transaction must be committed.
    var flushDeadline: Instant?

    // Countdowns: slots indexed by key, and one timer heap over the slots.
    var slots: [Countdown?] = []
    var freeSlots: [Int32] = []
    var index: [CountdownKey: Int32] = [:]
    var heap = TimerHeap()
    var nextInstance: UInt64 = 0
    /// The time the OS timer is armed for (system clock only).
    var armed: Instant?

    // The resend flow.
    var records: [CountdownKey: SendRecord] = [:]
    var policies: [KeyName: SendPolicy] = [:]
    var titles: [KeyName: TitleSet] = [:]
    var tickets: [UInt64: CountdownKey] = [:]
    var nextTicket: UInt64 = 0
    /// How recent tickets ended, the oldest evicted first.
    var endedTickets: [UInt64: TicketEnd] = [:]
    var endedOrder: [UInt64] = []
    static let endedTicketsKept = 4096

    // Login gates: one per realm, their requests and their timers.
    var gates: [KeyName: Gate] = [:]
    var requests: [UInt64: GateRequest] = [:]
    var nextRequest: UInt64 = 0
    var gateHeap = TimerHeap()
    var gateTimers: [GateTimer?] = []
    var freeGateTimers: [Int32] = []
    var runningRequest: UInt64 = 0

    // Observers.
    var subscriptions: [SubscriptionID: Subscription] = [:]
    var keyObservers: [CountdownKey: [SubscriptionID]] = [:]
    var scopeObservers: [KeyName: [SubscriptionID]] = [:]
    var realmObservers: [KeyName: [SubscriptionID]] = [:]
    var nextSubscription: SubscriptionID = 0
    var pending: [PendingEvent] = []

    // Dispatch: who delivers, and what it is delivering right now.
    var dispatching = false
    var dispatcher: UInt = 0
    var runningSubscription: SubscriptionID = 0
    /// The key whose event callback is running, if one is.
    var runningKey: CountdownKey?
    /// Releases of subscriptions that ended inside their own callback.
    var deferredReleases: [Observer] = []
    /// Engine-thread mode: passes asked for by `advance` and passes done.
    var passesRequested: UInt64 = 0
    var passesCompleted: UInt64 = 0
    var detachThread = false

    func now() -> Instant { manualNow ?? Poller.boottime() }

    /// The wall clock, in nanoseconds since the epoch.
    func wallNow() -> Int64 { manualNow == nil ? tgshim_walltime_ns() : manualWall }

    func isObserved(_ key: CountdownKey) -> Bool {
        // Most engines of a backend have no observers at all: skip hashing.
        if keyObservers.isEmpty && scopeObservers.isEmpty { return false }
        return keyObservers[key] != nil || scopeObservers[key.scope] != nil
    }

    /// The running countdown of a key (any phase), if it has time left.
    func running(_ key: CountdownKey, at now: Instant) -> Countdown? {
        guard let slot = index[key] else { return nil }
        return running(slot: slot, at: now)
    }

    /// The countdown in a slot, if it has time left at `now`.
    func running(slot: Int32, at now: Instant) -> Countdown? {
        guard let countdown = slots[Int(slot)], countdown.deadline > now else { return nil }
        return countdown
    }

    /// The key's cooldown or lock, if one is running (not a send ticket).
    func counting(_ key: CountdownKey, at now: Instant) -> Countdown? {
        guard let countdown = running(key, at: now), countdown.phase != .sending else { return nil }
        return countdown
    }

    func policy(of scope: KeyName) -> SendPolicy { policies[scope] ?? SendPolicy() }

    /// The state of a key with nothing running.
    func restingState(_ key: CountdownKey) -> ButtonState {
        records[key]?.hasSent == true ? .readyAgain : .idle
    }

    /// The key's button now, with its title.
    func button(_ key: CountdownKey, at now: Instant) -> Button {
        let running = running(key, at: now)
        let state = running?.phase.buttonState ?? restingState(key)
        let remaining = running.map { $0.phase == .sending ? .zero : $0.deadline.since(now) } ?? .zero
        return Button(state: state, remaining: remaining,
                      title: (titles[key.scope] ?? .english).render(state, remaining))
    }

    func recordEnd(of ticket: UInt64, _ end: TicketEnd) {
        tickets.removeValue(forKey: ticket)
        endedTickets[ticket] = end
        endedOrder.append(ticket)
        if endedOrder.count > Self.endedTicketsKept * 2 {
            for old in endedOrder.prefix(endedOrder.count - Self.endedTicketsKept) {
                endedTickets.removeValue(forKey: old)
            }
            endedOrder.removeFirst(endedOrder.count - Self.endedTicketsKept)
        }
    }

    /// When the countdown next needs the timer: its next tick boundary if
    /// observed (the deadline minus a whole number of intervals, so ticks
    /// never drift), else its deadline.
    static func nextFireTime(of countdown: Countdown, at now: Instant, observed: Bool) -> Instant {
        let remaining = countdown.deadline.since(now).nanoseconds
        guard observed, remaining > 0, countdown.phase != .sending else { return countdown.deadline }
        let interval = countdown.tickInterval.nanoseconds
        let boundary = ((remaining - 1) / interval) * interval
        return boundary == 0 ? countdown.deadline
            : countdown.deadline.advanced(by: Span(nanoseconds: -boundary))
    }

    // MARK: Countdown slots

    /// Puts a countdown in its key's slot; `known` is the key's slot if
    /// the caller looked it up already (saves hashing the key again).
    func insert(_ countdown: Countdown, at now: Instant, known: Int32?? = .none) {
        let slot: Int32
        if let existing = known ?? index[countdown.key] {
            slot = existing
            slots[Int(slot)] = countdown
        } else {
            if let free = freeSlots.popLast() {
                slot = free
                slots[Int(slot)] = countdown
            } else {
                slot = Int32(truncatingIfNeeded: slots.count)
                slots.append(countdown)
            }
            index[countdown.key] = slot
        }
        heap.schedule(slot, at: Self.nextFireTime(of: countdown, at: now,
                                                  observed: isObserved(countdown.key)))
    }

    @discardableResult
    func remove(slot: Int32) -> Countdown? {
        guard let countdown = slots[Int(slot)] else { return nil }
        heap.remove(slot)
        index.removeValue(forKey: countdown.key)
        slots[Int(slot)] = nil
        freeSlots.append(slot)
        return countdown
    }

    /// Cancels the key's run if it still has time left at `now` (a run
    /// whose deadline passed has finished, announced or not); returns its
    /// instance and duration.
    func cancel(_ key: CountdownKey, at now: Instant) -> (instance: UInt64, duration: Span)? {
        guard let slot = index[key] else { return nil }
        return cancel(slot: slot, at: now)
    }

    func cancel(slot: Int32, at now: Instant) -> (instance: UInt64, duration: Span)? {
        guard running(slot: slot, at: now) != nil, let countdown = remove(slot: slot) else { return nil }
        if countdown.phase == .sending { recordEnd(of: countdown.ticket, .cancelled) }
        return (countdown.instance, countdown.duration)
    }

    /// Moves a countdown's timer to its next tick if it was waiting for the
    /// deadline only (it just gained an observer).
    func rescheduleForTicks(_ key: CountdownKey, at now: Instant) {
        guard let slot = index[key], let countdown = slots[Int(slot)],
              let current = heap.time(of: slot) else { return }
        let next = Self.nextFireTime(of: countdown, at: now, observed: true)
        if next < current { heap.schedule(slot, at: next) }
    }

    // MARK: Events

    /// Queues an event for every observer of the key, with the button
    /// state `state` and its title; returns whether the queue went from
    /// empty to non-empty (the caller wakes the dispatcher).
    func emit(_ kind: EventKind, _ key: CountdownKey, instance: UInt64,
                       remaining: Span, duration: Span, state: ButtonState) -> Bool {
        if keyObservers.isEmpty && scopeObservers.isEmpty { return false }
        let keyIDs = keyObservers[key]
        let scopeIDs = scopeObservers[key.scope]
        guard keyIDs != nil || scopeIDs != nil else { return false }
        let wasEmpty = pending.isEmpty
        let title = (titles[key.scope] ?? .english).render(state, remaining)
        var event = Event(kind: kind, key: key, remaining: remaining, duration: duration,
                          subscription: 0, state: state, title: title)
        for ids in [keyIDs, scopeIDs] {
            for id in ids ?? [] {
                event.subscription = id
                pending.append(PendingEvent(instance: instance, event: event))
            }
        }
        return wasEmpty && !pending.isEmpty
    }

    /// The current state of a key as one event for one new subscription.
    func queueState(of key: CountdownKey, for id: SubscriptionID, at now: Instant) {
        let button = button(key, at: now)
        let duration = running(key, at: now).map { $0.phase == .sending ? .zero : $0.duration } ?? .zero
        pending.append(PendingEvent(instance: 0, event: Event(
            kind: .state, key: key, remaining: button.remaining, duration: duration,
            subscription: id, state: button.state, title: button.title)))
    }

    /// Whether a queued countdown event may still be delivered: a tick of
    /// a run that was cancelled or replaced meanwhile is dropped (every
    /// other event reports something that did happen).
    func isDeliverable(_ event: Event, instance: UInt64) -> Bool {
        guard subscriptions[event.subscription] != nil else { return false }
        guard event.kind == .tick else { return true }
        guard let slot = index[event.key] else { return false }
        return slots[Int(slot)]?.instance == instance
    }

    /// The earliest time any timer (countdown or gate) is due.
    var nextTimerTime: Instant? {
        [heap.first?.time, gateHeap.first?.time, flushDeadline].compactMap { $0 }.min()
    }

    /// Fires every timer due at `now`: one tick (with the true remaining
    /// time, so a late wake-up gives one catch-up tick), the finish of a
    /// cooldown or lock, or the expiry of a send ticket.
    func fireDueTimers(at now: Instant) {
        while let entry = heap.first, entry.time <= now {
            guard let countdown = slots[Int(entry.slot)] else {
                heap.remove(entry.slot)
                continue
            }
            let key = countdown.key
            let observed = isObserved(key)
            if countdown.deadline <= now {
                remove(slot: entry.slot)
                let kind: EventKind
                if countdown.phase == .sending {
                    recordEnd(of: countdown.ticket, .expired)
                    kind = .sendFailed
                } else {
                    kind = .finished
                }
                if observed {
                    _ = emit(kind, key, instance: countdown.instance, remaining: .zero,
                             duration: countdown.duration, state: restingState(key))
                }
            } else {
                if observed && countdown.phase != .sending {
                    _ = emit(.tick, key, instance: countdown.instance,
                             remaining: countdown.deadline.since(now),
                             duration: countdown.duration, state: countdown.phase.buttonState)
                }
                heap.schedule(entry.slot, at: Self.nextFireTime(of: countdown, at: now,
                                                                observed: observed))
            }
        }
        fireGateTimers(at: now)
    }

    /// Ends a subscription's registration; returns it.
    func unregister(_ id: SubscriptionID) -> Subscription? {
        guard let subscription = subscriptions.removeValue(forKey: id) else { return nil }
        switch subscription.target {
        case .key(let key):
            keyObservers[key]?.removeAll { $0 == id }
            if keyObservers[key]?.isEmpty == true { keyObservers.removeValue(forKey: key) }
        case .scope(let scope):
            scopeObservers[scope]?.removeAll { $0 == id }
            if scopeObservers[scope]?.isEmpty == true {
                scopeObservers.removeValue(forKey: scope)
            }
        case .realm(let realm):
            realmObservers[realm]?.removeAll { $0 == id }
            if realmObservers[realm]?.isEmpty == true {
                realmObservers.removeValue(forKey: realm)
            }
        }
        return subscription
    }
}
