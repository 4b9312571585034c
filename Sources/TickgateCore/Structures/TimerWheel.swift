import Glibc

/// The countdowns' timers: a hierarchical timing wheel over table slots,
/// with O(1) schedule and remove and no log-n work anywhere, so a million
/// pending countdowns cost what a thousand do.
///
/// Time is cut into ticks of 2^20 ns (about 1.05 ms). The wheel has six
/// levels of 256 buckets; a timer whose tick first differs from the
/// wheel's current tick `now` in byte L sits at level L, in the bucket
/// named by that byte. The buckets' time ranges are disjoint and ordered
/// (level 0 after `now`, then level 1, ...), so the earliest timer is in
/// the first occupied bucket and a bucket whose range has begun is taken
/// out whole: its due timers fire, the rest drop to lower levels (each
/// timer falls at most six times in its life). Occupancy bitmaps skip empty
/// buckets, so a clock that jumps by days costs no more than one that
/// moves by a millisecond.
///
/// A bucket entry is `slot << 32 | order`. Removing or moving a timer
/// only changes the slot's current order (0: no timer), which leaves any
/// older entry stale; stale entries are skipped when their bucket is
/// taken and swept out once they outnumber the live ones. Timers due at
/// the same time fire in the order they were scheduled, as in a heap.
/// The exact fire times are kept per slot, so a tick's width never makes
/// a timer early or late. The engine's lock guards the wheel.
final class TimerWheel {
    private static let levels = 6
    private static let bucketsPerLevel = 256
    private static let tickShift: Int64 = 20

    private struct Bucket {
        var entries: UnsafeMutablePointer<UInt64>?
        var count: Int32 = 0
        var capacity: Int32 = 0
    }

    private let buckets: UnsafeMutablePointer<Bucket>
    /// One bit per bucket: set while the bucket holds entries (live or
    /// stale). Four words per level.
    private let occupied: UnsafeMutablePointer<UInt64>
    /// The wheel's current tick: every entry's tick is at or after it
    /// (an entry for a time already past sits in the bucket of `now`).
    private var now: UInt64 = 0

    /// Per slot: its timer's exact time, and its current order (0: none).
    private var timeBuffer = PageBuffer<Int64>(capacity: 16)
    private var orderBuffer = PageBuffer<UInt32>(capacity: 16)
    private var slotCapacity = 0
    private var nextOrder: UInt32 = 0

    /// Timers scheduled, and entries in buckets (live and stale).
    private(set) var count = 0
    private(set) var storedEntries = 0

    /// The earliest time, when known; recomputed lazily after its timer
    /// goes.
    private var cachedEarliest: Int64?
    /// A time at or before every timer's: the least time scheduled since
    /// the earliest was last known. Removing a timer leaves it as it is, so
    /// keeping it costs O(1) even when the earliest timers go one by one
    /// (a backend's tickets and cooldowns end in the order they began).
    private var bound: Int64?

    /// Scratch for `collectDue`.
    private var due: [Due] = []
    private var later: [UInt64] = []

    private struct Due {
        var time: Int64
        var order: UInt32
        var slot: Int32
    }

    init() {
        let total = Self.levels * Self.bucketsPerLevel
        buckets = .allocate(capacity: total)
        buckets.initialize(repeating: Bucket(), count: total)
        occupied = .allocate(capacity: Self.levels * 4)
        occupied.initialize(repeating: 0, count: Self.levels * 4)
        slotCapacity = orderBuffer.capacity
        orderBuffer.base.initialize(repeating: 0, count: slotCapacity)
        timeBuffer.grow(to: slotCapacity, keeping: 0)
    }

    deinit {
        for index in 0..<(Self.levels * Self.bucketsPerLevel) {
            free(buckets[index].entries)
        }
        buckets.deallocate()
        occupied.deallocate()
    }

    // MARK: Queries

    /// The slot's timer, if it has one.
    func time(of slot: Int32) -> Instant? {
        guard slot >= 0, Int(slot) < slotCapacity, orderBuffer.base[Int(slot)] != 0 else { return nil }
        return Instant(nanoseconds: timeBuffer.base[Int(slot)])
    }

    /// The earliest timer's time. Finding it after the earliest timer went
    /// sweeps the first occupied bucket: call it when the OS timer fired,
    /// not on every change (use `earliestBound` there).
    var earliest: Instant? {
        guard count > 0 else { return nil }
        if let cachedEarliest { return Instant(nanoseconds: cachedEarliest) }
        var found: Int64?
        visitBuckets(through: UInt64.max) { index in
            found = sweep(index)
            return found == nil
        }
        cachedEarliest = found
        bound = found
        return found.map { Instant(nanoseconds: $0) }
    }

    /// A time at or before the earliest timer's, in O(1): the earliest when
    /// it is known, else the least time scheduled since it was. Good for
    /// "must the OS timer fire sooner?"; an OS timer armed at it may fire
    /// before anything is due, and then finds the exact earliest.
    var earliestBound: Instant? {
        guard count > 0 else { return nil }
        return (cachedEarliest ?? bound).map { Instant(nanoseconds: $0) }
    }

    // MARK: Changes

    /// Schedules the slot's timer at `time`, replacing any it had.
    func schedule(_ slot: Int32, at time: Instant) {
        guard slot >= 0 else { return }
        if Int(slot) >= slotCapacity { growSlots(to: Int(slot) + 1) }
        let orders = orderBuffer.base
        let index = Int(slot)
        let nanoseconds = time.nanoseconds
        if orders[index] != 0 {
            if cachedEarliest == timeBuffer.base[index] { cachedEarliest = nil }
        } else {
            count += 1
            if count == 1 {
                cachedEarliest = nanoseconds
                bound = nanoseconds
            }
        }
        if let cached = cachedEarliest, nanoseconds < cached { cachedEarliest = nanoseconds }
        if bound.map({ nanoseconds < $0 }) ?? true { bound = nanoseconds }
        nextOrder &+= 1
        if nextOrder == 0 {
            // Orders wrapped: no stale entry may survive to match a new one.
            compact()
            nextOrder = 1
        }
        orders[index] = nextOrder
        timeBuffer.base[index] = nanoseconds
        place(UInt64(UInt32(bitPattern: slot)) << 32 | UInt64(nextOrder), tick: Self.tick(nanoseconds))
        if storedEntries > 2 * count + 4096 { compact() }
    }

    /// Removes the slot's timer, if it has one.
    func remove(_ slot: Int32) {
        guard slot >= 0, Int(slot) < slotCapacity else { return }
        let index = Int(slot)
        guard orderBuffer.base[index] != 0 else { return }
        orderBuffer.base[index] = 0
        count -= 1
        if cachedEarliest == timeBuffer.base[index] { cachedEarliest = nil }
        if count == 0 { bound = nil }
    }

    func removeAll() {
        for index in 0..<(Self.levels * Self.bucketsPerLevel) { buckets[index].count = 0 }
        occupied.update(repeating: 0, count: Self.levels * 4)
        orderBuffer.base.update(repeating: 0, count: slotCapacity)
        count = 0
        storedEntries = 0
        cachedEarliest = nil
        bound = nil
    }

    /// Takes out every timer due at `instant` (time <= instant) and
    /// appends their slots to `slots`, earliest first (equal times in the
    /// order they were scheduled). The slots have no timer afterwards; the
    /// caller may schedule them again.
    func collectDue(at instant: Instant, into slots: inout [Int32]) {
        guard count > 0, let first = earliestBound, first <= instant else { return }
        let limit = instant.nanoseconds
        let target = max(Self.tick(limit), now)
        due.removeAll(keepingCapacity: true)
        later.removeAll(keepingCapacity: true)
        visitBuckets(through: target) { index in
            take(index, dueBy: limit)
            return true
        }
        now = target
        cachedEarliest = nil
        for entry in later {
            place(entry, tick: Self.tick(timeBuffer.base[Int(entry >> 32)]))
        }
        slots.reserveCapacity(slots.count + due.count)
        for item in due { slots.append(item.slot) }
        // Keep a small scratch; give a mass expiry's back.
        if due.capacity > 4096 { due = [] }
        if later.capacity > 4096 { later = [] }
    }

    /// `collectDue` for a caller that wants each slot in turn.
    func collectDue(at instant: Instant, _ body: (Int32) -> Void) {
        var slots: [Int32] = []
        collectDue(at: instant, into: &slots)
        for slot in slots { body(slot) }
    }

    // MARK: Inside

    @inline(__always)
    private static func tick(_ nanoseconds: Int64) -> UInt64 {
        UInt64(max(nanoseconds, 0)) >> UInt64(tickShift)
    }

    /// Puts an entry in the bucket its tick belongs to, relative to `now`.
    @inline(__always)
    private func place(_ entry: UInt64, tick: UInt64) {
        let tick = max(tick, now)
        let differing = tick ^ now
        let level = differing == 0 ? 0 : (63 - differing.leadingZeroBitCount) / 8
        let digit = Int(truncatingIfNeeded: tick >> UInt64(8 * level)) & 0xFF
        let index = level * Self.bucketsPerLevel + digit
        let bucket = buckets + index
        if bucket.pointee.count == bucket.pointee.capacity { grow(bucket) }
        if bucket.pointee.count == 0 {
            occupied[index >> 6] |= 1 << UInt64(index & 63)
        }
        bucket.pointee.entries![Int(bucket.pointee.count)] = entry
        bucket.pointee.count += 1
        storedEntries += 1
    }

    private func grow(_ bucket: UnsafeMutablePointer<Bucket>) {
        let capacity = max(Int(bucket.pointee.capacity) * 2, 8)
        let raw = realloc(bucket.pointee.entries, capacity * MemoryLayout<UInt64>.stride)
        guard let raw else { fatalError("Tickgate: out of memory growing a timer bucket") }
        bucket.pointee.entries = raw.assumingMemoryBound(to: UInt64.self)
        bucket.pointee.capacity = Int32(capacity)
    }

    /// Calls `body` with each occupied bucket whose time range begins at or
    /// before tick `through`, in time order, while it returns true.
    private func visitBuckets(through: UInt64, _ body: (Int) -> Bool) {
        for level in 0..<Self.levels {
            let shift = UInt64(8 * level)
            let digit = Int(truncatingIfNeeded: now >> shift) & 0xFF
            // Level 0 holds the current tick's bucket; higher levels only
            // buckets after the current digit.
            var next = level == 0 ? digit : digit + 1
            let blockStart = (now >> (shift + 8)) << (shift + 8)
            while next < Self.bucketsPerLevel {
                guard let found = nextOccupied(level: level, from: next) else { break }
                if blockStart | UInt64(found) << shift > through { return }
                if !body(level * Self.bucketsPerLevel + found) { return }
                next = found + 1
            }
        }
    }

    /// The first occupied digit at or after `from` on a level.
    @inline(__always)
    private func nextOccupied(level: Int, from: Int) -> Int? {
        var word = from >> 6
        var bits = occupied[level * 4 + word] & (~0 << UInt64(from & 63))
        while true {
            if bits != 0 { return word * 64 + bits.trailingZeroBitCount }
            word += 1
            if word == 4 { return nil }
            bits = occupied[level * 4 + word]
        }
    }

    /// Drops a bucket's stale entries; returns the earliest live time in
    /// it (nil if none was live, and the bucket is now empty).
    private func sweep(_ index: Int) -> Int64? {
        let bucket = buckets + index
        guard let entries = bucket.pointee.entries else { return nil }
        let orders = orderBuffer.base, times = timeBuffer.base
        var kept = 0
        var earliest: Int64?
        for position in 0..<Int(bucket.pointee.count) {
            let entry = entries[position]
            let slot = Int(entry >> 32)
            guard orders[slot] == UInt32(truncatingIfNeeded: entry) else { continue }
            entries[kept] = entry
            kept += 1
            if earliest.map({ times[slot] < $0 }) ?? true { earliest = times[slot] }
        }
        storedEntries -= Int(bucket.pointee.count) - kept
        bucket.pointee.count = Int32(kept)
        if kept == 0 { empty(index) }
        return earliest
    }

    /// Takes a bucket out: live entries due by `limit` go to `due` (their
    /// slots lose their timer), the others to `later`.
    private func take(_ index: Int, dueBy limit: Int64) {
        let bucket = buckets + index
        guard let entries = bucket.pointee.entries else { return }
        let orders = orderBuffer.base, times = timeBuffer.base
        let firstDue = due.count
        let needed = firstDue + Int(bucket.pointee.count)
        if due.capacity < needed { due.reserveCapacity(max(needed, 2 * due.capacity)) }
        for position in 0..<Int(bucket.pointee.count) {
            let entry = entries[position]
            let slot = Int(entry >> 32)
            let order = UInt32(truncatingIfNeeded: entry)
            guard orders[slot] == order else { continue }
            if times[slot] <= limit {
                due.append(Due(time: times[slot], order: order, slot: Int32(truncatingIfNeeded: slot)))
                orders[slot] = 0
                count -= 1
            } else {
                later.append(entry)
            }
        }
        storedEntries -= Int(bucket.pointee.count)
        bucket.pointee.count = 0
        empty(index)
        // Buckets' ranges are ordered, so only each bucket's own share needs
        // sorting (and it often is sorted already).
        due.withUnsafeMutableBufferPointer { all in
            var share = UnsafeMutableBufferPointer(rebasing: all[firstDue...])
            if Self.isSorted(share) { return }
            if share.count >= 256 {
                radixSort(share)
            } else {
                share.sort(by: Self.before)
            }
        }
    }

    /// Sorts a big share (a mass expiry: a million timers due within
    /// milliseconds land in one bucket) by time, least significant byte
    /// first over the span of its times, then orders equal times by
    /// schedule order: a few linear passes instead of n log n comparisons.
    private func radixSort(_ items: UnsafeMutableBufferPointer<Due>) {
        var low = Int64.max, high = Int64.min
        for item in items {
            low = min(low, item.time)
            high = max(high, item.time)
        }
        let span = UInt64(bitPattern: high &- low)
        let passes = (64 - span.leadingZeroBitCount + 7) / 8
        // Scratch of plain values: its own mapping (huge pages) when big,
        // nothing initialised that the passes do not write.
        let scratch = PageBuffer<Due>(capacity: items.count)
        var source = items.baseAddress!
        var target = scratch.base
        let count = items.count
        // One read pass counts the bytes of every pass; each pass then
        // only scatters.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: 256 * passes) { counts in
            counts.initialize(repeating: 0)
            for index in 0..<count {
                var key = UInt64(bitPattern: source[index].time &- low)
                for pass in 0..<passes {
                    counts[pass &* 256 &+ Int(key & 0xFF)] &+= 1
                    key >>= 8
                }
            }
            for pass in 0..<passes {
                let shift = UInt64(8 * pass)
                let offsets = UnsafeMutableBufferPointer(rebasing: counts[(pass * 256)..<(pass * 256 + 256)])
                var total = 0
                for index in 0..<256 {
                    let bucket = offsets[index]
                    offsets[index] = total
                    total &+= bucket
                }
                for index in 0..<count {
                    let item = source[index]
                    let key = Int(UInt64(bitPattern: item.time &- low) >> shift & 0xFF)
                    target[offsets[key]] = item
                    offsets[key] &+= 1
                }
                swap(&source, &target)
            }
        }
        if source != items.baseAddress! {
            items.baseAddress!.update(from: source, count: count)
        }
        _ = consume scratch
        // Equal times: schedule order (runs are short; usually length 1).
        var start = items.startIndex
        while start < items.endIndex {
            var end = start + 1
            while end < items.endIndex && items[end].time == items[start].time { end += 1 }
            if end - start > 1 {
                var run = UnsafeMutableBufferPointer(rebasing: items[start..<end])
                run.sort(by: Self.before)
            }
            start = end
        }
    }

    /// Marks a bucket empty and gives back a big block.
    private func empty(_ index: Int) {
        occupied[index >> 6] &= ~(1 << UInt64(index & 63))
        let bucket = buckets + index
        if bucket.pointee.capacity > 1024 {
            free(bucket.pointee.entries)
            bucket.pointee = Bucket()
        }
    }

    @inline(__always)
    private static func before(_ a: Due, _ b: Due) -> Bool {
        a.time < b.time || (a.time == b.time && a.order &- b.order > UInt32.max / 2 && a.order != b.order)
    }

    /// Whether items are in firing order already (a bucket's share usually
    /// is; else the standard sort, which merges the runs it finds).
    private static func isSorted(_ items: UnsafeMutableBufferPointer<Due>) -> Bool {
        guard items.count > 1 else { return true }
        var previous = items[items.startIndex]
        for item in items.dropFirst() {
            if before(item, previous) { return false }
            previous = item
        }
        return true
    }

    /// Drops every stale entry from every bucket.
    private func compact() {
        for index in 0..<(Self.levels * Self.bucketsPerLevel)
            where occupied[index >> 6] & (1 << UInt64(index & 63)) != 0 {
            _ = sweep(index)
        }
    }

    private func growSlots(to needed: Int) {
        var bigger = slotCapacity * 2
        while bigger < needed { bigger *= 2 }
        orderBuffer.grow(to: bigger, keeping: slotCapacity)
        let capacity = orderBuffer.capacity
        (orderBuffer.base + slotCapacity).initialize(repeating: 0, count: capacity - slotCapacity)
        timeBuffer.grow(to: capacity, keeping: slotCapacity)
        slotCapacity = capacity
    }
}
