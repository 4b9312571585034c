/// An indexed binary min-heap of timers: one entry per slot, keyed by fire
/// time, with O(log n) schedule, reschedule and remove by slot. Entries with
/// equal times fire in the order they were scheduled. The storage is two
/// plain buffers owned by the heap (no copy-on-write checks, no retains on
/// the hot path); the engine's lock guards it. The login gates' timers
/// (requests and sessions: few) live here; countdowns use `TimerWheel`.
final class TimerHeap {
    struct Entry {
        var time: Instant
        var order: UInt64
        var slot: Int32
    }

    private var entryBuffer = PageBuffer<Entry>(capacity: 16)
    private var entries: UnsafeMutablePointer<Entry> { entryBuffer.base }
    private(set) var count = 0
    /// Heap index of each slot, or -1 when the slot has no entry.
    private var positionBuffer = PageBuffer<Int32>(capacity: 16)
    private var position: UnsafeMutablePointer<Int32> { positionBuffer.base }
    private var positionCount = 0
    private var nextOrder: UInt64 = 0

    init() {
        positionCount = positionBuffer.capacity
        position.initialize(repeating: -1, count: positionCount)
    }

    var first: Entry? { count > 0 ? entries[0] : nil }

    func time(of slot: Int32) -> Instant? {
        guard slot >= 0, Int(slot) < positionCount else { return nil }
        let index = Int(position[Int(slot)])
        return index >= 0 ? entries[index].time : nil
    }

    /// Inserts the slot's entry, or moves it to a new time.
    func schedule(_ slot: Int32, at time: Instant) {
        guard slot >= 0 else { return }
        if Int(slot) >= positionCount { growPositions(to: Int(slot) + 1) }
        nextOrder &+= 1
        let entry = Entry(time: time, order: nextOrder, slot: slot)
        let index = Int(position[Int(slot)])
        if index >= 0 {
            let wasEarlier = Self.before(entries[index], entry)
            entries[index] = entry
            if wasEarlier { siftDown(index) } else { siftUp(index) }
        } else {
            if count == entryBuffer.capacity {
                entryBuffer.grow(to: count * 2, keeping: count)
            }
            (entries + count).initialize(to: entry)
            count += 1
            siftUp(count - 1)
        }
    }

    func remove(_ slot: Int32) {
        guard slot >= 0, Int(slot) < positionCount else { return }
        let index = Int(position[Int(slot)])
        guard index >= 0 else { return }
        position[Int(slot)] = -1
        count -= 1
        let last = entries[count]
        if index < count {
            entries[index] = last
            position[Int(last.slot)] = Int32(truncatingIfNeeded: index)
            siftDown(index)
            siftUp(index)
        }
    }

    func removeAll() {
        count = 0
        position.update(repeating: -1, count: positionCount)
    }

    @inline(__always)
    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.time.nanoseconds < b.time.nanoseconds
            || (a.time.nanoseconds == b.time.nanoseconds && a.order < b.order)
    }

    private func growPositions(to needed: Int) {
        var bigger = positionCount * 2
        while bigger < needed { bigger *= 2 }
        positionBuffer.grow(to: bigger, keeping: positionCount)
        let capacity = positionBuffer.capacity
        (position + positionCount).initialize(repeating: -1, count: capacity - positionCount)
        positionCount = capacity
    }

    private func siftUp(_ start: Int) {
        var index = start
        let entry = entries[index]
        while index > 0 {
            let parent = (index - 1) / 2
            guard Self.before(entry, entries[parent]) else { break }
            entries[index] = entries[parent]
            position[Int(entries[index].slot)] = Int32(truncatingIfNeeded: index)
            index = parent
        }
        entries[index] = entry
        position[Int(entry.slot)] = Int32(truncatingIfNeeded: index)
    }

    private func siftDown(_ start: Int) {
        var index = start
        let entry = entries[index]
        while true {
            let left = 2 * index + 1
            guard left < count else { break }
            let right = left + 1
            let child = right < count && Self.before(entries[right], entries[left]) ? right : left
            guard Self.before(entries[child], entry) else { break }
            entries[index] = entries[child]
            position[Int(entries[index].slot)] = Int32(truncatingIfNeeded: index)
            index = child
        }
        entries[index] = entry
        position[Int(entry.slot)] = Int32(truncatingIfNeeded: index)
    }
}
