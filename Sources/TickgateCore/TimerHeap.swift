/// An indexed binary min-heap of timers: one entry per countdown slot, keyed
/// by fire time, with O(log n) schedule, reschedule and remove by slot.
/// Entries with equal times fire in the order they were scheduled.
struct TimerHeap {
    struct Entry {
        var time: Instant
        var order: UInt64
        var slot: Int32
    }

    private var entries: [Entry] = []
    /// Heap index of each slot, or -1 when the slot has no entry.
    private var position: [Int32] = []
    private var nextOrder: UInt64 = 0

    var count: Int { entries.count }
    var first: Entry? { entries.first }

    func time(of slot: Int32) -> Instant? {
        let index = Int(slot) < position.count ? Int(position[Int(slot)]) : -1
        return index >= 0 ? entries[index].time : nil
    }

    /// Inserts the slot's entry, or moves it to a new time.
    mutating func schedule(_ slot: Int32, at time: Instant) {
        while position.count <= Int(slot) { position.append(-1) }
        nextOrder &+= 1
        let entry = Entry(time: time, order: nextOrder, slot: slot)
        let index = Int(position[Int(slot)])
        if index >= 0 {
            let wasEarlier = Self.before(entries[index], entry)
            entries[index] = entry
            if wasEarlier { siftDown(index) } else { siftUp(index) }
        } else {
            entries.append(entry)
            position[Int(slot)] = Int32(entries.count - 1)
            siftUp(entries.count - 1)
        }
    }

    mutating func remove(_ slot: Int32) {
        guard Int(slot) < position.count else { return }
        let index = Int(position[Int(slot)])
        guard index >= 0 else { return }
        position[Int(slot)] = -1
        let last = entries.removeLast()
        if index < entries.count {
            entries[index] = last
            position[Int(last.slot)] = Int32(index)
            siftDown(index)
            siftUp(index)
        }
    }

    mutating func removeAll() {
        entries.removeAll()
        position.removeAll()
    }

    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.time < b.time || (a.time == b.time && a.order < b.order)
    }

    private mutating func siftUp(_ start: Int) {
        var index = start
        let entry = entries[index]
        while index > 0 {
            let parent = (index - 1) / 2
            guard Self.before(entry, entries[parent]) else { break }
            entries[index] = entries[parent]
            position[Int(entries[index].slot)] = Int32(index)
            index = parent
        }
        entries[index] = entry
        position[Int(entry.slot)] = Int32(index)
    }

    private mutating func siftDown(_ start: Int) {
        var index = start
        let entry = entries[index]
        let count = entries.count
        while true {
            let left = 2 * index + 1
            guard left < count else { break }
            let right = left + 1
            let child = right < count && Self.before(entries[right], entries[left]) ? right : left
            guard Self.before(entries[child], entry) else { break }
            entries[index] = entries[child]
            position[Int(entries[index].slot)] = Int32(index)
            index = child
        }
        entries[index] = entry
        position[Int(entry.slot)] = Int32(index)
    }
}
