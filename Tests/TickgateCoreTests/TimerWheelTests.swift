import Testing
@testable import TickgateCore

@Suite struct TimerWheelTests {
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// A plain model: slot -> (time, schedule order); due timers fire by
    /// time, then by the order they were scheduled.
    struct Model {
        var timers: [Int32: (time: Int64, order: Int)] = [:]
        var nextOrder = 0

        mutating func schedule(_ slot: Int32, _ time: Int64) {
            nextOrder += 1
            timers[slot] = (time, nextOrder)
        }

        mutating func collect(_ now: Int64) -> [Int32] {
            let due = timers.filter { $0.value.time <= now }
                .sorted { ($0.value.time, $0.value.order) < ($1.value.time, $1.value.order) }
            for (slot, _) in due { timers.removeValue(forKey: slot) }
            return due.map(\.key)
        }
    }

    /// Times spread over every level: sub-tick, ms, seconds, hours, years.
    static func offset(_ random: inout Generator) -> Int64 {
        switch random.next(6) {
        case 0: Int64(random.next(2_000_000))                    // within ~2 ticks
        case 1: Int64(random.next(300)) * 1_000_000              // up to 300 ms
        case 2: Int64(random.next(120_000)) * 1_000_000          // up to 2 min
        case 3: Int64(random.next(7_200)) * 1_000_000_000        // up to 2 h
        case 4: Int64(random.next(1_000)) * 86_400_000_000_000   // up to ~3 years
        default: -Int64(random.next(5_000_000))                  // already past
        }
    }

    @Test(arguments: [1, 2, 3, 4])
    func firesLikeTheModelUnderRandomScheduleRemoveAndClockJumps(seed: UInt64) {
        let wheel = TimerWheel()
        var model = Model()
        var random = Generator(state: seed)
        var now: Int64 = 5_000_000_000 + Int64(random.next(1 << 30))
        for _ in 0..<20_000 {
            let slot = Int32(random.next(500))
            switch random.next(10) {
            case 0..<5:
                let time = now + Self.offset(&random)
                wheel.schedule(slot, at: Instant(nanoseconds: time))
                model.schedule(slot, time)
            case 5, 6:
                wheel.remove(slot)
                model.timers.removeValue(forKey: slot)
            default:
                // Small steps mostly, sometimes a jump of hours or days.
                let step: Int64 = switch random.next(8) {
                case 0: Int64(random.next(100)) * 3_600_000_000_000
                case 1: Int64(random.next(3_000)) * 1_000_000_000
                default: Int64(random.next(5_000_000))
                }
                now += step
                var fired: [Int32] = []
                wheel.collectDue(at: Instant(nanoseconds: now)) { fired.append($0) }
                #expect(fired == model.collect(now))
            }
            #expect(wheel.count == model.timers.count)
            #expect(wheel.earliest?.nanoseconds == model.timers.values.map(\.time).min())
            #expect(wheel.time(of: slot)?.nanoseconds == model.timers[slot]?.time)
        }
        var fired: [Int32] = []
        wheel.collectDue(at: Instant(nanoseconds: .max)) { fired.append($0) }
        #expect(fired == model.collect(.max))
        #expect(wheel.count == 0 && wheel.earliest == nil)
    }

    @Test func equalTimesFireInScheduleOrderAndRescheduleInsideCollect() {
        let wheel = TimerWheel()
        let at = Instant(nanoseconds: 1_000_000_000)
        for slot in [Int32(7), 3, 9, 1] { wheel.schedule(slot, at: at) }
        wheel.schedule(3, at: at)   // moved: now the last of the four
        var fired: [Int32] = []
        wheel.collectDue(at: at) { slot in
            fired.append(slot)
            // A tick: the same slot again, one second later.
            wheel.schedule(slot, at: Instant(nanoseconds: 2_000_000_000))
        }
        #expect(fired == [7, 9, 1, 3])
        #expect(wheel.count == 4)
        #expect(wheel.earliest == Instant(nanoseconds: 2_000_000_000))
        fired = []
        wheel.collectDue(at: Instant(nanoseconds: 1_999_999_999)) { fired.append($0) }
        #expect(fired.isEmpty)
    }

    @Test func staleEntriesAreSweptSoMemoryFollowsLiveTimers() {
        let wheel = TimerWheel()
        // A million moves of 100 timers: without sweeping, a million entries.
        for round in 0..<10_000 {
            for slot in Int32(0)..<100 {
                wheel.schedule(slot, at: Instant(nanoseconds: Int64(round) * 1_000_000 + Int64(slot)))
            }
        }
        #expect(wheel.count == 100)
        #expect(wheel.storedEntries <= 2 * 100 + 4096 + 1)
        var fired: [Int32] = []
        wheel.collectDue(at: Instant(nanoseconds: .max)) { fired.append($0) }
        #expect(fired == Array(0..<100))
    }

    /// A mass expiry: thousands of timers due within 5 ms, scheduled in a
    /// scrambled order (a sawtooth, as starts with rounded durations give)
    /// with many equal times, all in one bucket of a higher level: the big
    /// share is sorted by time and then by schedule order, like the model.
    @Test func massExpiryInOneBucketFiresInTimeThenScheduleOrder() {
        let wheel = TimerWheel()
        var model = Model()
        var random = Generator(state: 99)
        let base: Int64 = 3_600_000_000_000
        for slot in Int32(0)..<6_000 {
            let tooth = Int64(slot % 7) * 700_000
            let time = base + tooth + Int64(random.next(40)) * 1_000
            wheel.schedule(slot, at: Instant(nanoseconds: time))
            model.schedule(slot, time)
        }
        var fired: [Int32] = []
        wheel.collectDue(at: Instant(nanoseconds: base + 2_000_000)) { fired.append($0) }
        let expected = model.collect(base + 2_000_000)
        #expect(!expected.isEmpty && fired == expected)
        fired = []
        wheel.collectDue(at: Instant(nanoseconds: base + 10_000_000)) { fired.append($0) }
        #expect(fired == model.collect(base + 10_000_000))
        #expect(wheel.count == 0)
    }
}
