/// The login gates' state: one gate per realm, the requests waiting on
/// them, and their timers (session expiries, request timeouts). Every way a
/// gate or a request changes is a method here; the engine tells observers.
struct GateBook {
    private(set) var realms: [KeyName: Gate] = [:]
    private(set) var requests: [UInt64: GateRequest] = [:]
    private(set) var nextRequest: UInt64 = 0
    /// The request whose action or cancel is running now, 0 if none.
    private(set) var runningRequest: UInt64 = 0
    let timerHeap = TimerHeap()
    private(set) var timers: [GateTimer?] = []
    private var freeTimers: [Int32] = []

    /// Schedules a timer; returns its slot.
    mutating func scheduleTimer(_ timer: GateTimer, at time: Instant) -> Int32 {
        let slot: Int32
        if let free = freeTimers.popLast() {
            slot = free
            timers[Int(slot)] = timer
        } else {
            slot = Int32(truncatingIfNeeded: timers.count)
            timers.append(timer)
        }
        timerHeap.schedule(slot, at: time)
        return slot
    }

    mutating func cancelTimer(_ slot: Int32?) {
        guard let slot, timers[Int(slot)] != nil else { return }
        timerHeap.remove(slot)
        timers[Int(slot)] = nil
        freeTimers.append(slot)
    }

    // MARK: Every change of a gate or a request, here

    /// The queued request of the realm with `coalesceKey`, if any.
    func queued(_ realm: KeyName, coalesceKey: String) -> UInt64? {
        realms[realm]?.queue.first { requests[$0]?.coalesceKey == coalesceKey }
    }

    /// A request that runs now (its action is queued for delivery).
    mutating func runNow(realm: KeyName, needsLogin: Bool, coalesceKey: String?,
                         _ handlers: GateRequestHandlers) -> UInt64 {
        nextRequest &+= 1
        requests[nextRequest] = GateRequest(realm: realm, needsLogin: needsLogin, coalesceKey: coalesceKey,
                                            handlers: handlers, phase: .ready)
        return nextRequest
    }

    /// A request queued until login or its timeout; returns its id and
    /// whether the login screen must be asked for (none was yet).
    mutating func enqueue(realm: KeyName, coalesceKey: String?, _ handlers: GateRequestHandlers,
                          at now: Instant) -> (id: UInt64, present: Bool) {
        nextRequest &+= 1
        let id = nextRequest
        var gate = realms[realm] ?? Gate()
        let timer = scheduleTimer(.request(id), at: now.advanced(by: gate.requestTimeout))
        requests[id] = GateRequest(realm: realm, needsLogin: true, coalesceKey: coalesceKey, handlers: handlers,
                                   phase: .queued, timeoutTimer: timer)
        gate.queue.append(id)
        let present = !gate.presenting
        gate.presenting = true
        realms[realm] = gate
        return (id, present)
    }

    /// Takes a request that has not run out of the book (withdrawn);
    /// returns it and whether it was queued.
    mutating func withdraw(_ id: UInt64) -> GateRequest? {
        guard let request = requests.removeValue(forKey: id) else { return nil }
        cancelTimer(request.timeoutTimer)
        if request.phase == .queued, var gate = realms[request.realm] {
            gate.queue.removeAll { $0 == id }
            realms[request.realm] = gate
        }
        return request
    }

    /// Moves every request queued on the realm to `phase` (ready to run,
    /// or cancelling) and ends the login screen; returns their ids.
    mutating func releaseQueue(_ realm: KeyName, to phase: GateRequest.Phase) -> [UInt64] {
        guard var gate = realms[realm] else { return [] }
        let queued = gate.queue
        gate.queue.removeAll()
        gate.presenting = false
        realms[realm] = gate
        for id in queued { settle(id, phase) }
        return queued
    }

    /// A request leaves the queue for `phase`: its timeout ends.
    private mutating func settle(_ id: UInt64, _ phase: GateRequest.Phase) {
        guard var request = requests[id] else { return }
        cancelTimer(request.timeoutTimer)
        request.timeoutTimer = nil
        request.phase = phase
        requests[id] = request
    }

    /// Takes a request in `phase` out of the book to run its action or
    /// cancel now (it is the running request until that returns).
    mutating func deliver(_ id: UInt64, _ phase: GateRequest.Phase) -> GateRequest? {
        guard let request = requests[id], request.phase == phase else { return nil }
        requests.removeValue(forKey: id)
        runningRequest = id
        return request
    }

    /// The running request's callback returned.
    mutating func delivered() { runningRequest = 0 }

    /// A queued request's timeout fired: it is cancelling; true if it was
    /// still queued.
    mutating func timeOut(_ id: UInt64) -> Bool {
        guard var request = requests[id], request.phase == .queued else { return false }
        request.timeoutTimer = nil
        request.phase = .cancelling
        requests[id] = request
        if var gate = realms[request.realm] {
            gate.queue.removeAll { $0 == id }
            // Nobody answered the login screen: the next request that
            // queues asks for it again.
            if gate.queue.isEmpty { gate.presenting = false }
            realms[request.realm] = gate
        }
        return true
    }

    /// The realm is logged in until `expiry` (nil: none).
    mutating func logIn(_ realm: KeyName, expiry: Instant?) {
        var gate = realms[realm] ?? Gate()
        gate.loggedIn = true
        cancelTimer(gate.expiryTimer)
        gate.expiry = expiry
        gate.expiryTimer = expiry.map { scheduleTimer(.session(realm), at: $0) }
        realms[realm] = gate
    }

    /// The realm's session ended (logout or expiry): every request that
    /// needs login and has not run is cancelling. Returns whether it was
    /// logged in, whether it had a queue, and the requests to cancel.
    mutating func logOut(_ realm: KeyName) -> (wasLoggedIn: Bool, hadQueue: Bool, doomed: [UInt64]) {
        var gate = realms[realm] ?? Gate()
        let wasLoggedIn = gate.loggedIn
        let hadQueue = !gate.queue.isEmpty
        gate.loggedIn = false
        gate.expiry = nil
        cancelTimer(gate.expiryTimer)
        gate.expiryTimer = nil
        gate.queue.removeAll()
        gate.presenting = false
        realms[realm] = gate
        let doomed = requests.filter {
            $0.value.realm == realm && $0.value.needsLogin && $0.value.phase != .cancelling
        }.keys.sorted()
        for id in doomed { settle(id, .cancelling) }
        return (wasLoggedIn, hadQueue, doomed)
    }

    /// A session timer fired: true if the realm was logged in (its timer
    /// is spent; the session ends).
    mutating func sessionTimerFired(_ realm: KeyName) -> Bool {
        guard var gate = realms[realm], gate.loggedIn else { return false }
        gate.expiryTimer = nil
        realms[realm] = gate
        return true
    }

    mutating func setRequestTimeout(_ realm: KeyName, _ timeout: Span) {
        realms[realm, default: Gate()].requestTimeout = timeout
    }

    /// Drops a realm that holds nothing (no session, nothing queued, no
    /// setting of its own), so ended sessions leave no memory behind.
    mutating func forgetIfIdle(_ realm: KeyName) {
        guard let gate = realms[realm], !gate.loggedIn, gate.queue.isEmpty, !gate.presenting,
              gate.requestTimeout == Gate().requestTimeout else { return }
        realms.removeValue(forKey: realm)
    }

    mutating func removeAll() {
        requests.removeAll()
        realms.removeAll()
        timerHeap.removeAll()
        timers.removeAll()
        freeTimers.removeAll()
    }
}
