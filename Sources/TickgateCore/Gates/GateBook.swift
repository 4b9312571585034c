/// The login gates' state: one gate per realm, the requests waiting on
/// them, and their timers (session expiries, request timeouts).
struct GateBook {
    var realms: [KeyName: Gate] = [:]
    var requests: [UInt64: GateRequest] = [:]
    var nextRequest: UInt64 = 0
    /// The request whose action or cancel is running now, 0 if none.
    var runningRequest: UInt64 = 0
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

    mutating func removeAll() {
        requests.removeAll()
        realms.removeAll()
        timerHeap.removeAll()
        timers.removeAll()
        freeTimers.removeAll()
    }
}
