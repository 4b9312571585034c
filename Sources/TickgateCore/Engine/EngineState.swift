import CTickgateShim

/// Everything an engine knows, guarded by the engine's lock: the countdowns
/// (table and wheel) and the parts that own the rest (sends, gates,
/// subscriptions, delivery). Its methods are the changes that span parts:
/// a countdown's event to its observers, a timer's firing.
final class EngineState {
    var closed = false
    /// The engine's clock (shared with the store, which reads it without
    /// this state's lock).
    let clock: Clock

    /// The engine's one OS timer and wake-up.
    let poller: Poller
    /// Tick interval of countdowns started without one.
    let defaultTickInterval: Span
    /// Group commit: when the store's open transaction is due.
    var flushDeadline: Instant?

    init(clock: Clock, poller: Poller, defaultTickInterval: Span) {
        self.clock = clock
        self.poller = poller
        self.defaultTickInterval = defaultTickInterval
    }

    /// Throws `.closed` if the engine was closed.
    func checkOpen() throws(TickgateError) {
        if closed { throw TickgateError(.closed, "the engine is closed") }
    }

    /// Re-arms the OS timer if the earliest timer moved earlier; call after
    /// scheduling. O(1): it compares with a bound of the earliest time,
    /// never searches for it (removing timers only makes the earliest
    /// later, and then the armed timer fires early at worst, and the pass
    /// re-arms it exactly).
    func armIfEarlier() {
        guard !clock.isManual, let first = nextTimerBound else { return }
        if let armed, armed <= first { return }
        armed = first
        poller.arm(at: first)
    }

    // Countdowns: records found by key, and one timing wheel over their slots.
    let table = CountdownTable()
    let wheel = TimerWheel()
    var nextInstance: UInt64 = 0
    /// The time the OS timer is armed for (system clock only).
    var armed: Instant?

    // The parts: the resend flow, the login gates, the subscriptions, and
    // delivery.
    var sends = SendBook()
    var budgets = BudgetBook()
    var gates = GateBook()
    /// On a shared store: refusals made again without asking it.
    var refusals = LocalRefusals()
    /// The scopes' guards against SMS pumping (Pumping/).
    var guards = GuardBook()
    /// Changed through `register` and `unregister` (the scope cache
    /// follows them).
    private(set) var observers = ObserverBook()
    var dispatch = DispatchState()

    /// The scope `emit` looked up last, with its observers, titles and last
    /// rendered title: a burst of events (mass expiry, ticks) mostly names
    /// one scope, and this saves hashing it and rendering again. Cleared
    /// whenever scope observers or titles change.
    private var cachedScope: KeyName?
    private var cachedObservers: [SubscriptionID]?
    private var cachedTitles = TitleSet.english
    private var cachedTitle: (state: ButtonState, seconds: Int64, text: String)?

    @inline(__always)
    func now() -> Instant { clock.now() }

    // The parts' fields are read in place here: calling a method of a part
    // (a struct stored in this class) copies the whole part first.

    func isObserved(_ key: CountdownKey) -> Bool {
        // Most engines of a backend have no observers at all: skip hashing.
        if observers.keyObservers.isEmpty && observers.scopeObservers.isEmpty { return false }
        return observers.keyObservers[key] != nil || observers.scopeObservers[key.scope] != nil
    }

    /// Whether any subscription watches countdown keys or scopes.
    var hasCountdownObservers: Bool { !observers.keyObservers.isEmpty || !observers.scopeObservers.isEmpty }

    /// Runs `body` on `table` with no retain and release around it (the
    /// state owns the table for its whole life): the fast paths' calls.
    @inline(__always)
    func withTable<R, E: Error>(_ body: (CountdownTable) throws(E) -> R) throws(E) -> R {
        try Unmanaged.passUnretained(table)._withUnsafeGuaranteedRef { table in
            Result { () throws(E) -> R in try body(table) }
        }.get()
    }

    /// `withTable` for `wheel`.
    @inline(__always)
    func withWheel<R>(_ body: (TimerWheel) -> R) -> R {
        Unmanaged.passUnretained(wheel)._withUnsafeGuaranteedRef(body)
    }

    /// Makes `scope` the cached one.
    @inline(__always)
    private func cache(_ scope: KeyName) {
        if let cached = cachedScope, cached == scope { return }
        cachedScope = scope
        cachedObservers = observers.scopeObservers[scope]
        cachedTitles = sends.titles[scope] ?? .english
        cachedTitle = nil
    }

    /// The subscriptions to a scope.
    func observers(of scope: KeyName) -> [SubscriptionID]? {
        cache(scope)
        return cachedObservers
    }

    /// The title of `scope`'s button in `state` with `remaining` time.
    func title(_ scope: KeyName, _ state: ButtonState, _ remaining: Span) -> String {
        cache(scope)
        let seconds = remaining.displaySeconds
        if let last = cachedTitle, last.state == state, last.seconds == seconds { return last.text }
        let text = cachedTitles.render(state, remaining)
        cachedTitle = (state, seconds, text)
        return text
    }

    /// The countdown in a live slot, as a value (makes its key's names).
    func countdown(_ slot: Int32, key known: CountdownKey? = nil) -> Countdown? {
        guard table.isLive(slot) else { return nil }
        let record = table.record(slot)
        // (No `??`: its autoclosure would capture, and copy, the key.)
        let key: CountdownKey
        if let known { key = known } else { key = table.key(slot) }
        return Countdown(key: key, phase: record.phase, ticket: record.ticket,
                         instance: record.instance, deadline: record.deadline,
                         duration: record.duration,
                         tickInterval: .milliseconds(Int64(record.tickMilliseconds)))
    }

    /// Whether the slot holds a run with time left at `now`.
    @inline(__always)
    func isRunning(_ slot: Int32, at now: Instant) -> Bool {
        table.isLive(slot) && table.record(slot).deadline > now
    }

    /// The running countdown of a key (any phase), if it has time left.
    func running(_ key: CountdownKey, at now: Instant) -> Countdown? {
        guard let slot = table.find(key), isRunning(slot, at: now) else { return nil }
        return countdown(slot, key: key)
    }

    /// The countdown in a slot, if it has time left at `now`.
    func running(slot: Int32, at now: Instant) -> Countdown? {
        isRunning(slot, at: now) ? countdown(slot) : nil
    }

    /// The key's cooldown or lock, if one is running (not a send ticket).
    func counting(_ key: CountdownKey, at now: Instant) -> Countdown? {
        guard let countdown = running(key, at: now), countdown.phase != .sending else { return nil }
        return countdown
    }

    /// The key as memory holds it, for a decision made in memory.
    func keyRows(_ key: CountdownKey, at now: Instant) -> (rows: KeyRows, slot: Int32?) {
        let slot = table.find(key)
        var running: Countdown?
        if let slot, isRunning(slot, at: now) { running = countdown(slot, key: key) }
        return (KeyRows(countdown: running, record: sends.records.isEmpty ? nil : sends.records[key]), slot)
    }

    func policy(of scope: KeyName) -> SendPolicy {
        // Most scopes keep the default: no lookup, and no new array.
        if sends.policies.isEmpty { return SendPolicy.standard }
        return sends.policies[scope] ?? SendPolicy.standard
    }

    /// `policy(of:)` for a scope given as bytes.
    func policy(scopeBytes: UnsafeRawBufferPointer) -> SendPolicy {
        if sends.policies.isEmpty { return SendPolicy.standard }
        return sends.policies[KeyName(validated: scopeBytes)] ?? SendPolicy.standard
    }

    /// Whether the scope with these bytes has a guard (its sends go
    /// through it).
    func isGuarded(scopeBytes: UnsafeRawBufferPointer) -> Bool {
        if guards.rules.isEmpty { return false }
        return guards.rules[KeyName(validated: scopeBytes)] != nil
    }

    /// Where a granted run is, for its ticket.
    func place(of slot: Int32) -> TicketPlace { TicketPlace(slot: slot, hash: table.record(slot).hash) }

    /// The slot that holds the open ticket's run, if one does.
    func slot(ofTicket ticket: UInt64) -> Int32? {
        guard let place = sends.tickets[ticket], table.isLive(place.slot) else { return nil }
        let record = table.record(place.slot)
        return record.ticket == ticket && record.hash == place.hash ? place.slot : nil
    }

    /// The state of a key with nothing running.
    func restingState(_ key: CountdownKey) -> ButtonState {
        if sends.records.isEmpty { return .idle }
        guard let record = sends.records[key] else { return .idle }
        return record.codeDead ? .codeDead : record.hasSent ? .readyAgain : .idle
    }

    /// The key's button now, with its title.
    func button(_ key: CountdownKey, at now: Instant) -> Button {
        let running = running(key, at: now)
        let state = running?.phase.buttonState ?? restingState(key)
        let remaining = running.map { $0.phase == .sending ? .zero : $0.deadline.since(now) } ?? .zero
        return Button(state: state, remaining: remaining, title: title(key.scope, state, remaining))
    }

    /// When the countdown next needs the timer: its next tick boundary if
    /// observed (the deadline minus a whole number of intervals, so ticks
    /// never drift), else its deadline.
    static func nextFireTime(of countdown: Countdown, at now: Instant, observed: Bool) -> Instant {
        nextFireTime(deadline: countdown.deadline, interval: countdown.tickInterval,
                     phase: countdown.phase, at: now, observed: observed)
    }

    @inline(__always)
    static func nextFireTime(deadline: Instant, interval: Span, phase: Phase, at now: Instant,
                             observed: Bool) -> Instant {
        let remaining = deadline.since(now).nanoseconds
        guard observed, remaining > 0, phase != .sending else { return deadline }
        let interval = max(interval.nanoseconds, 1)
        let boundary = ((remaining - 1) / interval) * interval
        return boundary == 0 ? deadline : deadline.advanced(by: Span(nanoseconds: -boundary))
    }

    // MARK: Countdown slots

    /// Puts a countdown in its key's slot; `known` is the key's slot if
    /// the caller looked it up already (saves hashing the key again).
    /// Returns the slot.
    @discardableResult
    func insert(_ countdown: Countdown, at now: Instant, known: SlotLookup = .notLookedUp) -> Int32 {
        // A plain switch, no `??`: an autoclosure capturing `countdown`
        // copied it (two names, a retain each) at every use.
        let existing: Int32?
        switch known {
        case .notLookedUp: existing = table.find(countdown.key)
        case .absent: existing = nil
        case let .found(slot): existing = slot
        }
        let slot: Int32
        if let existing {
            slot = existing
            table.update(slot, deadline: countdown.deadline, duration: countdown.duration,
                         tickInterval: countdown.tickInterval, phase: countdown.phase,
                         instance: countdown.instance, ticket: countdown.ticket)
        } else {
            slot = table.insert(countdown.key, deadline: countdown.deadline, duration: countdown.duration,
                                tickInterval: countdown.tickInterval, phase: countdown.phase,
                                instance: countdown.instance, ticket: countdown.ticket)
        }
        let observed = hasCountdownObservers && isObserved(countdown.key)
        wheel.schedule(slot, at: Self.nextFireTime(deadline: countdown.deadline, interval: countdown.tickInterval,
                                                  phase: countdown.phase, at: now, observed: observed))
        return slot
    }

    /// Ends the record in a slot and its timer.
    func remove(slot: Int32) {
        guard table.isLive(slot) else { return }
        wheel.remove(slot)
        table.remove(slot)
    }

    /// Cancels the key's run if it still has time left at `now` (a run
    /// whose deadline passed has finished, announced or not); returns its
    /// instance and duration.
    func cancel(_ key: CountdownKey, at now: Instant) -> (instance: UInt64, duration: Span)? {
        guard let slot = table.find(key) else { return nil }
        return cancel(slot: slot, at: now)
    }

    func cancel(slot: Int32, at now: Instant) -> (instance: UInt64, duration: Span)? {
        guard isRunning(slot, at: now) else { return nil }
        let record = table.record(slot)
        remove(slot: slot)
        if record.phase == .sending { sends.recordEnd(of: record.ticket, .cancelled) }
        return (record.instance, record.duration)
    }

    /// Moves a countdown's timer to its next tick if it was waiting for the
    /// deadline only (it just gained an observer).
    func rescheduleForTicks(_ key: CountdownKey, at now: Instant) {
        guard let slot = table.find(key), let current = wheel.time(of: slot) else { return }
        let record = table.record(slot)
        let next = Self.nextFireTime(deadline: record.deadline,
                                     interval: .milliseconds(Int64(record.tickMilliseconds)),
                                     phase: record.phase, at: now, observed: true)
        if next < current { wheel.schedule(slot, at: next) }
    }

    // MARK: Events

    /// Queues an event for every observer of the key, with the button
    /// state `state` and its title; returns whether the queue went from
    /// empty to non-empty (the caller wakes the dispatcher).
    func emit(_ kind: EventKind, _ key: CountdownKey, instance: UInt64,
                       remaining: Span, duration: Span, state: ButtonState) -> Bool {
        if observers.keyObservers.isEmpty && observers.scopeObservers.isEmpty { return false }
        return emit(kind, scope: key.scope, subject: EventSubject(key.subject), key: key,
                    instance: instance, remaining: remaining, duration: duration, state: state)
    }

    /// `emit` for a key given as its scope and subject (from a slot): the
    /// key's names are made only if a key observer needs them.
    func emit(_ kind: EventKind, scope: KeyName, subject: EventSubject, key: CountdownKey? = nil,
              instance: UInt64, remaining: Span, duration: Span, state: ButtonState) -> Bool {
        if observers.keyObservers.isEmpty && observers.scopeObservers.isEmpty { return false }
        let keyIDs = observers.keyObservers.isEmpty
            ? nil : observers.keyObservers[key ?? CountdownKey(scope: scope, subject: subject.name)]
        let scopeIDs = observers.scopeObservers.isEmpty ? nil : observers(of: scope)
        guard keyIDs != nil || scopeIDs != nil else { return false }
        return enqueue(kind, scope: scope, subject: subject, keyIDs: keyIDs, scopeIDs: scopeIDs,
                       instance: instance, remaining: remaining, duration: duration, state: state,
                       title: title(scope, state, remaining))
    }

    /// Queues the event for the key's and the scope's subscriptions, as
    /// looked up by the caller. Returns whether the queue was empty before.
    func enqueue(_ kind: EventKind, scope: KeyName, subject: EventSubject,
                 keyIDs: [SubscriptionID]?, scopeIDs: [SubscriptionID]?,
                 instance: UInt64, remaining: Span, duration: Span, state: ButtonState,
                 title: String) -> Bool {
        guard keyIDs != nil || scopeIDs != nil else { return false }
        let wasEmpty = dispatch.pending.isEmpty
        var event = Event(kind: kind, scope: scope, subject: subject, remaining: remaining,
                          duration: duration, subscription: 0, state: state, title: title)
        if let keyIDs {
            for id in keyIDs {
                event.subscription = id
                dispatch.pending.append(PendingEvent(instance: instance, event: event))
            }
        }
        if let scopeIDs {
            for id in scopeIDs {
                event.subscription = id
                dispatch.pending.append(PendingEvent(instance: instance, event: event))
            }
        }
        return wasEmpty && !dispatch.pending.isEmpty
    }

    /// The current state of a key as one event for one new subscription.
    /// Queues `kind` (store lost or back) for every key and scope
    /// subscription: a key's with its state, a scope's with no subject.
    func queueStoreEvent(_ kind: EventKind, at now: Instant) {
        for (id, subscription) in observers.subscriptions.sorted(by: { $0.key < $1.key }) {
            switch subscription.target {
            case let .key(key):
                let button = button(key, at: now)
                let duration = running(key, at: now).map { $0.phase == .sending ? .zero : $0.duration } ?? .zero
                dispatch.pending.append(PendingEvent(instance: 0, event: Event(
                    kind: kind, key: key, remaining: button.remaining, duration: duration,
                    subscription: id, state: button.state, title: button.title)))
            case let .scope(scope):
                dispatch.pending.append(PendingEvent(instance: 0, event: Event(
                    kind: kind, scope: scope, subject: EventSubject(validated: UnsafeRawBufferPointer(start: nil, count: 0)),
                    remaining: .zero, duration: .zero, subscription: id, state: .idle, title: "")))
            case .realm, .records, .outcomes:
                continue
            }
        }
    }

    func queueState(of key: CountdownKey, for id: SubscriptionID, at now: Instant) {
        let button = button(key, at: now)
        let duration = running(key, at: now).map { $0.phase == .sending ? .zero : $0.duration } ?? .zero
        dispatch.pending.append(PendingEvent(instance: 0, event: Event(
            kind: .state, key: key, remaining: button.remaining, duration: duration,
            subscription: id, state: button.state, title: button.title)))
    }

    /// Whether a queued countdown event may still be delivered (its
    /// subscription aside): a tick of a run that was cancelled or replaced
    /// meanwhile is dropped (every other event reports something that did
    /// happen).
    func isCurrent(_ event: Event, instance: UInt64) -> Bool {
        guard event.kind == .tick else { return true }
        let slot = event.scope.withBytes { scope in
            event.subject.withBytes { subject in table.find(scope: scope, subject: subject) }
        }
        guard let slot else { return false }
        return table.record(slot).instance == instance
    }

    /// The earliest time any timer (countdown or gate) is due.
    var nextTimerTime: Instant? { firstTimer(wheel.earliest) }

    /// A time at or before `nextTimerTime`, in O(1) (see
    /// `TimerWheel.earliestBound`): what a change needs to know whether the
    /// OS timer must fire sooner.
    var nextTimerBound: Instant? { firstTimer(wheel.earliestBound) }

    private func firstTimer(_ countdowns: Instant?) -> Instant? {
        var first = countdowns
        if let gate = gates.timerHeap.first?.time, first.map({ gate < $0 }) ?? true { first = gate }
        if let flush = flushDeadline, first.map({ flush < $0 }) ?? true { first = flush }
        return first
    }

    /// Fires every timer due at `now`: one tick (with the true remaining
    /// time, so a late wake-up gives one catch-up tick), the finish of a
    /// cooldown or lock, or the expiry of a send ticket.
    func fireDueTimers(at now: Instant) {
        var due: [Int32] = []
        wheel.collectDue(at: now, into: &due)
        if due.isEmpty { return fireGateTimers(at: now) }
        if hasCountdownObservers { dispatch.pending.reserveCapacity(dispatch.pending.count + due.count) }
        // Finished records leave the index together at the end, their
        // buckets loaded ahead; records are loaded a few slots ahead too.
        var finished: [Int32] = []
        finished.reserveCapacity(due.count)
        let ahead = 8
        for index in 0..<min(ahead, due.count) { table.prefetchRecord(due[index]) }
        // The scope's name, observers and resting title, looked up once per
        // run of equal scope ids (ids are stable here: records leave only
        // at the end).
        var run = ScopeRun()
        for index in due.indices {
            if index + ahead < due.count { table.prefetchRecord(due[index + ahead]) }
            let slot = due[index]
            guard table.isLive(slot) else { continue }
            let record = table.record(slot)
            if record.scope != run.id {
                let name = table.scopeName(record.scope) ?? KeyName(validated: table.scopeBytes(record.scope))
                run = ScopeRun(id: record.scope, name: name,
                               observers: observers.scopeObservers.isEmpty ? nil : observers(of: name))
            }
            let keyIDs = observers.keyObservers.isEmpty ? nil : observers.keyObservers[table.key(slot)]
            let observed = run.observers != nil || keyIDs != nil
            if record.deadline <= now {
                finished.append(slot)
                let kind: EventKind
                if record.phase == .sending {
                    sends.recordEnd(of: record.ticket, .expired)
                    kind = .sendFailed
                } else {
                    kind = .finished
                }
                if observed, let scope = run.name {
                    let subject = EventSubject(validated: table.subjectBytes(slot))
                    let state = sends.records.isEmpty
                        ? ButtonState.idle : restingState(CountdownKey(scope: scope, subject: subject.name))
                    let resting: String
                    if let cached = run.restingTitle, cached.state == state {
                        resting = cached.text
                    } else {
                        resting = title(scope, state, .zero)
                        run.restingTitle = (state, resting)
                    }
                    _ = enqueue(kind, scope: scope, subject: subject, keyIDs: keyIDs, scopeIDs: run.observers,
                                instance: record.instance, remaining: .zero, duration: record.duration,
                                state: state, title: resting)
                }
            } else {
                if observed && record.phase != .sending, let scope = run.name {
                    let remaining = record.deadline.since(now)
                    let state = record.phase.buttonState
                    _ = enqueue(.tick, scope: scope, subject: EventSubject(validated: table.subjectBytes(slot)),
                                keyIDs: keyIDs, scopeIDs: run.observers, instance: record.instance,
                                remaining: remaining, duration: record.duration, state: state,
                                title: title(scope, state, remaining))
                }
                wheel.schedule(slot, at: Self.nextFireTime(
                    deadline: record.deadline, interval: .milliseconds(Int64(record.tickMilliseconds)),
                    phase: record.phase, at: now, observed: observed))
            }
        }
        finished.withUnsafeBufferPointer { table.remove($0) }
        fireGateTimers(at: now)
    }

    /// What `fireDueTimers` keeps about the scope of a run of records.
    private struct ScopeRun {
        var id: Int32 = -1
        var name: KeyName?
        var observers: [SubscriptionID]?
        /// The title of a resting button, the same for every key of the run.
        var restingTitle: (state: ButtonState, text: String)?
    }

    // MARK: Subscriptions and titles

    /// Registers a subscription; returns its id.
    func register(_ target: SubscriptionTarget, _ observer: Observer) -> SubscriptionID {
        cachedScope = nil
        return observers.register(target, observer)
    }

    /// Ends a subscription's registration; returns it.
    func unregister(_ id: SubscriptionID) -> Subscription? {
        cachedScope = nil
        return observers.unregister(id)
    }

    /// Whether a key of the scope with these bytes may have observers: the
    /// fast paths' question (the book's field is read in place).
    @inline(__always)
    func isObserved(scopeBytes: UnsafeRawBufferPointer) -> Bool {
        if observers.observedScopes.isEmpty { return false }
        for scope in observers.observedScopes where scope.hasBytes(scopeBytes) { return true }
        return false
    }

    /// A live subscription's observer.
    func observer(of id: SubscriptionID) -> Observer? { observers.observer(of: id) }

    /// Sets a scope's titles.
    func setTitles(_ titles: TitleSet?, scope: KeyName) {
        cachedScope = nil
        sends.setTitles(titles, scope: scope)
    }
}
