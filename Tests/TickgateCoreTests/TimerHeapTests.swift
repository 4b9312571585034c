import Testing
@testable import TickgateCore

@Suite struct TimerHeapTests {
    /// A small deterministic generator, so failures reproduce.
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    @Test func popsInTimeOrderUnderRandomScheduleAndRemove() {
        let heap = TimerHeap()
        var reference: [Int32: Int64] = [:]
        var random = Generator(state: 42)
        for _ in 0..<5_000 {
            let slot = Int32(random.next(300))
            switch random.next(3) {
            case 0, 1:
                let time = Int64(random.next(1_000))
                heap.schedule(slot, at: Instant(nanoseconds: time))
                reference[slot] = time
            default:
                heap.remove(slot)
                reference.removeValue(forKey: slot)
            }
            #expect(heap.count == reference.count)
            #expect(heap.first?.time.nanoseconds == reference.values.min())
        }
        var last = Int64.min
        while let first = heap.first {
            #expect(first.time.nanoseconds >= last)
            #expect(reference[first.slot] == first.time.nanoseconds)
            last = first.time.nanoseconds
            heap.remove(first.slot)
            reference.removeValue(forKey: first.slot)
        }
        #expect(reference.isEmpty)
    }

    @Test func equalTimesFireInScheduleOrder() {
        let heap = TimerHeap()
        for slot in [Int32(5), 3, 9, 1] { heap.schedule(slot, at: Instant(nanoseconds: 7)) }
        var order: [Int32] = []
        while let first = heap.first {
            order.append(first.slot)
            heap.remove(first.slot)
        }
        #expect(order == [5, 3, 9, 1])
    }

    @Test func rescheduleMovesBothWays() {
        let heap = TimerHeap()
        heap.schedule(0, at: Instant(nanoseconds: 10))
        heap.schedule(1, at: Instant(nanoseconds: 20))
        heap.schedule(1, at: Instant(nanoseconds: 5))
        #expect(heap.first?.slot == 1)
        heap.schedule(1, at: Instant(nanoseconds: 50))
        #expect(heap.first?.slot == 0)
        #expect(heap.time(of: 1)?.nanoseconds == 50)
        #expect(heap.time(of: 7) == nil)
    }
}
