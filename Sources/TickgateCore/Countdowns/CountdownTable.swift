import Glibc
import CTickgateShim

/// The running countdowns of an engine, built for a million keys: fixed-size
/// records in one slab, found by key through an open-addressing index of
/// 8-byte buckets. Keys are kept as bytes (scopes interned once, subjects of
/// up to 23 bytes inline in the record), so finding a key hashes the
/// caller's bytes once and makes no `String`.
///
/// A record is addressed by its slot (an `Int32`), which stays the same
/// while the countdown runs; the timing wheel names slots.
/// Not thread-safe: the engine's lock guards it.
final class CountdownTable {
    /// One countdown (80 bytes).
    struct Record {
        /// Hash of (scope, subject) under the table's seed.
        var hash: UInt64
        var deadline: Instant
        var duration: Span
        /// Distinguishes this run of the key from earlier and later runs.
        var instance: UInt64
        /// The open ticket (phase `.sending`), else 0.
        var ticket: UInt64
        /// The interned scope's id.
        var scope: Int32
        var tickMilliseconds: Int32
        /// Bytes of the subject; 0 marks a free record.
        var subjectCount: UInt16
        var phase: Phase
        /// The subject's bytes and a NUL, inline when they fit, else a
        /// pointer (first word) to a heap copy.
        var subject: (UInt64, UInt64, UInt64)
    }

    /// An interned scope: its bytes (NUL-terminated), hash and name.
    struct Scope {
        var bytes: UnsafeMutablePointer<UInt8>
        var count: Int
        var hash: UInt64
        var name: KeyName
        /// The next scope id with the same hash bucket in `scopeIndex`.
        var next: Int32
    }

    static let inlineSubjectBytes = 23

    private var recordBuffer = PageBuffer<Record>(capacity: 64)
    /// The slab (moves when it grows: hold no pointer across an insert).
    private var records: UnsafeMutablePointer<Record> { recordBuffer.base }
    /// Slots ever used (live or free); records past it are uninitialised.
    private var used: Int32 = 0
    private var freeSlots: [Int32] = []
    private(set) var count = 0

    /// Buckets: 0 = empty, else (upper 32 bits of the hash) << 32 | slot + 1.
    /// A key's home bucket comes from those upper bits too, so moving and
    /// rehashing buckets never reads a record.
    private var bucketBuffer: PageBuffer<UInt64>
    private var buckets: UnsafeMutablePointer<UInt64>
    private var bucketMask: Int

    private var scopes: [Scope?] = []
    /// Records that use each scope; at 0 the scope is forgotten.
    private var scopeUsers: [Int] = []
    private var freeScopes: [Int32] = []
    private var scopeIndex: [UInt64: Int32] = [:]
    /// The scope found last: most calls name the same scope as the one
    /// before, and comparing with it touches no refcounted value.
    private var lastScope: Int32 = -1
    private var lastScopeBytes: UnsafeMutablePointer<UInt8>?
    private var lastScopeCount = 0
    private var lastScopeHash: UInt64 = 0

    let seed: UInt64

    init() {
        seed = UInt64.random(in: 1 ... .max)
        bucketMask = 127
        bucketBuffer = PageBuffer(capacity: bucketMask + 1)
        buckets = bucketBuffer.base
        buckets.initialize(repeating: 0, count: bucketMask + 1)
    }

    deinit {
        removeAll()
    }

    // MARK: Keys

    /// A scope's id if it is interned (some countdown uses it).
    func scopeID(_ bytes: UnsafeRawBufferPointer) -> (id: Int32, hash: UInt64)? {
        if let last = lastScopeBytes, lastScopeCount == bytes.count, let base = bytes.baseAddress,
           ByteHash.equal(last, base, count: lastScopeCount) {
            return (lastScope, lastScopeHash)
        }
        let hash = ByteHash.hash(bytes, seed: seed)
        var id = scopeIndex[hash] ?? -1
        while id >= 0 {
            guard let scope = scopes[Int(id)] else { break }
            if Self.equal(scope, bytes) {
                remember(id, scope)
                return (id, hash)
            }
            id = scope.next
        }
        return nil
    }

    private func remember(_ id: Int32, _ scope: Scope) {
        lastScope = id
        lastScopeBytes = scope.bytes
        lastScopeCount = scope.count
        lastScopeHash = scope.hash
    }

    private func forgetLastScope() {
        lastScope = -1
        lastScopeBytes = nil
        lastScopeCount = 0
    }

    private static func equal(_ scope: Scope, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard scope.count == bytes.count, let base = bytes.baseAddress else { return false }
        return ByteHash.equal(scope.bytes, base, count: scope.count)
    }

    /// Interns a scope (adding a user); returns its id and hash.
    private func internScope(_ bytes: UnsafeRawBufferPointer, name: KeyName?,
                             known: (id: Int32, hash: UInt64)?? = .none) -> (id: Int32, hash: UInt64) {
        if let found = known ?? scopeID(bytes) {
            scopeUsers[Int(found.id)] += 1
            return found
        }
        let hash = ByteHash.hash(bytes, seed: seed)
        let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count + 1)
        if let base = bytes.baseAddress { memcpy(copy, base, bytes.count) }
        copy[bytes.count] = 0
        let scope = Scope(bytes: copy, count: bytes.count, hash: hash,
                          name: name ?? KeyName(validated: bytes),
                          next: scopeIndex[hash] ?? -1)
        let id: Int32
        if let free = freeScopes.popLast() {
            id = free
            scopes[Int(id)] = scope
            scopeUsers[Int(id)] = 1
        } else {
            id = Int32(truncatingIfNeeded: scopes.count)
            scopes.append(scope)
            scopeUsers.append(1)
        }
        scopeIndex[hash] = id
        remember(id, scope)
        return (id, hash)
    }

    private func releaseScope(_ id: Int32) {
        scopeUsers[Int(id)] -= 1
        guard scopeUsers[Int(id)] <= 0, let scope = scopes[Int(id)] else { return }
        // Unlink from its hash chain.
        if scopeIndex[scope.hash] == id {
            scopeIndex[scope.hash] = scope.next >= 0 ? scope.next : nil
        } else {
            var previous = scopeIndex[scope.hash] ?? -1
            while previous >= 0, let entry = scopes[Int(previous)] {
                if entry.next == id {
                    scopes[Int(previous)]?.next = scope.next
                    break
                }
                previous = entry.next
            }
        }
        scope.bytes.deallocate()
        scopes[Int(id)] = nil
        freeScopes.append(id)
        if lastScope == id { forgetLastScope() }
    }

    func scopeName(_ id: Int32) -> KeyName? { scopes[Int(id)]?.name }

    /// A scope's bytes, NUL-terminated (the NUL is not counted).
    func scopeBytes(_ id: Int32) -> UnsafeRawBufferPointer {
        guard let scope = scopes[Int(id)] else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: scope.bytes, count: scope.count)
    }

    /// A record's subject bytes, NUL-terminated (the NUL is not counted).
    func subjectBytes(_ slot: Int32) -> UnsafeRawBufferPointer {
        let record = records + Int(slot)
        let count = Int(record.pointee.subjectCount)
        if count > Self.inlineSubjectBytes {
            let bits = UInt(truncatingIfNeeded: record.pointee.subject.0)
            return UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: bits), count: count)
        }
        return UnsafeRawBufferPointer(start: UnsafeRawPointer(Self.inlineSubject(record)), count: count)
    }

    @inline(__always)
    private static func inlineSubject(_ record: UnsafeMutablePointer<Record>) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(record) + subjectOffset
    }

    /// `subject` is the record's last field (a constant the compiler folds,
    /// unlike `MemoryLayout.offset(of:)`, which needs a lazy global).
    static var subjectOffset: Int {
        MemoryLayout<Record>.size - MemoryLayout<(UInt64, UInt64, UInt64)>.size
    }

    /// The key of a live record, as names (copies the subject's bytes).
    func key(_ slot: Int32) -> CountdownKey {
        let scope = scopeName(records[Int(slot)].scope) ?? KeyName(validated: scopeBytes(records[Int(slot)].scope))
        return CountdownKey(scope: scope, subject: KeyName(validated: subjectBytes(slot)))
    }

    // MARK: Finding

    /// The slot of the key, if it has a record.
    @inline(__always)
    func find(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer) -> Int32? {
        guard let (id, scopeHash) = scopeID(scope) else { return nil }
        return find(scope: id, subject: subject, hash: ByteHash.hash(subject, seed: scopeHash))
    }

    /// What a search that found nothing learnt, so that an `insert` of the
    /// same key does not look the scope up or hash the subject again.
    struct Miss {
        /// The scope's id and hash, if the scope is interned.
        var scope: (id: Int32, hash: UInt64)?
        /// The subject's hash (valid when `scope` is set).
        var hash: UInt64?
    }

    enum Lookup {
        case found(Int32)
        case missing(Miss)
    }

    /// `find`, or on a miss what it learnt.
    @inline(__always)
    func lookup(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer) -> Lookup {
        guard let (id, scopeHash) = scopeID(scope) else { return .missing(Miss(scope: nil, hash: nil)) }
        let hash = ByteHash.hash(subject, seed: scopeHash)
        if let slot = find(scope: id, subject: subject, hash: hash) { return .found(slot) }
        return .missing(Miss(scope: (id, scopeHash), hash: hash))
    }

    func find(_ key: CountdownKey) -> Int32? {
        key.withBytes { scope, subject in find(scope: scope, subject: subject) }
    }

    @inline(__always)
    private func find(scope: Int32, subject: UnsafeRawBufferPointer, hash: UInt64) -> Int32? {
        let tag = hash >> 32
        var index = Int(truncatingIfNeeded: tag) & bucketMask
        while true {
            let bucket = buckets[index]
            if bucket == 0 { return nil }
            if bucket >> 32 == tag {
                let slot = Int32(truncatingIfNeeded: bucket & 0xFFFF_FFFF) &- 1
                if matches(slot, scope: scope, subject: subject, hash: hash) { return slot }
            }
            index = (index &+ 1) & bucketMask
        }
    }

    @inline(__always)
    private func matches(_ slot: Int32, scope: Int32, subject: UnsafeRawBufferPointer,
                         hash: UInt64) -> Bool {
        let record = records + Int(slot)
        guard record.pointee.hash == hash, record.pointee.scope == scope,
              Int(record.pointee.subjectCount) == subject.count else { return false }
        let stored = subjectBytes(slot)
        guard let a = stored.baseAddress, let b = subject.baseAddress else { return false }
        return ByteHash.equal(a, b, count: subject.count)
    }

    // MARK: Adding and removing

    /// Adds a record for a key that has none; returns its slot.
    func insert(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer, scopeName: KeyName? = nil,
                deadline: Instant, duration: Span, tickInterval: Span, phase: Phase,
                instance: UInt64, ticket: UInt64, after miss: Miss? = nil) -> Int32 {
        let (scopeID, scopeHash) = internScope(scope, name: scopeName, known: miss.map { $0.scope })
        let hash = miss?.hash ?? ByteHash.hash(subject, seed: scopeHash)
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            if Int(used) == recordBuffer.capacity {
                recordBuffer.grow(to: recordBuffer.capacity * 2, keeping: Int(used))
            }
            slot = used
            used &+= 1
        }
        let record = records + Int(slot)
        record.initialize(to: Record(
            hash: hash, deadline: deadline, duration: duration, instance: instance, ticket: ticket,
            scope: scopeID,
            tickMilliseconds: Int32(truncatingIfNeeded: tickInterval.nanoseconds / 1_000_000),
            subjectCount: UInt16(truncatingIfNeeded: subject.count), phase: phase, subject: (0, 0, 0)))
        if subject.count > Self.inlineSubjectBytes {
            let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: subject.count + 1)
            if let base = subject.baseAddress { memcpy(copy, base, subject.count) }
            copy[subject.count] = 0
            record.pointee.subject.0 = UInt64(UInt(bitPattern: copy))
        } else if let base = subject.baseAddress {
            memcpy(Self.inlineSubject(record), base, subject.count)
        }
        count += 1
        if count &* 2 > bucketMask { growBuckets() }
        place(hash: hash, slot: slot)
        return slot
    }

    /// The record in a slot, as a value.
    @inline(__always)
    func record(_ slot: Int32) -> Record { records[Int(slot)] }

    /// Gives a live slot's key a new run.
    @inline(__always)
    func update(_ slot: Int32, deadline: Instant, duration: Span, tickInterval: Span, phase: Phase,
                instance: UInt64, ticket: UInt64) {
        let record = records + Int(slot)
        record.pointee.phase = phase
        record.pointee.ticket = ticket
        record.pointee.instance = instance
        record.pointee.deadline = deadline
        record.pointee.duration = duration
        record.pointee.tickMilliseconds = Int32(truncatingIfNeeded: tickInterval.nanoseconds / 1_000_000)
    }

    func insert(_ key: CountdownKey, deadline: Instant, duration: Span, tickInterval: Span,
                phase: Phase, instance: UInt64, ticket: UInt64) -> Int32 {
        key.withBytes { scope, subject in
            insert(scope: scope, subject: subject, scopeName: key.scope, deadline: deadline,
                   duration: duration, tickInterval: tickInterval, phase: phase,
                   instance: instance, ticket: ticket)
        }
    }

    @inline(__always)
    private func place(hash: UInt64, slot: Int32) {
        var index = Int(truncatingIfNeeded: hash >> 32) & bucketMask
        while buckets[index] != 0 { index = (index &+ 1) & bucketMask }
        buckets[index] = (hash >> 32) << 32 | UInt64(UInt32(bitPattern: slot &+ 1))
    }

    /// Removes a live record; its slot may be reused by the next insert.
    func remove(_ slot: Int32) {
        let record = records + Int(slot)
        guard record.pointee.subjectCount != 0 else { return }
        let hash = record.pointee.hash
        // Find the bucket, then close the gap (backward-shift deletion).
        let wanted = (hash >> 32) << 32 | UInt64(UInt32(bitPattern: slot &+ 1))
        var index = Int(truncatingIfNeeded: hash >> 32) & bucketMask
        while buckets[index] != wanted {
            if buckets[index] == 0 { return }
            index = (index &+ 1) & bucketMask
        }
        var hole = index
        var next = (hole &+ 1) & bucketMask
        while buckets[next] != 0 {
            let bucket = buckets[next]
            let home = Int(truncatingIfNeeded: bucket >> 32) & bucketMask
            // Move it into the hole if its home is not in (hole, next].
            if (next &- home) & bucketMask >= (next &- hole) & bucketMask {
                buckets[hole] = bucket
                hole = next
            }
            next = (next &+ 1) & bucketMask
        }
        buckets[hole] = 0
        if Int(record.pointee.subjectCount) > Self.inlineSubjectBytes {
            UnsafeMutableRawPointer(bitPattern: UInt(truncatingIfNeeded: record.pointee.subject.0))?.deallocate()
        }
        releaseScope(record.pointee.scope)
        record.pointee.subjectCount = 0
        freeSlots.append(slot)
        count -= 1
    }

    /// Starts loading a slot's record into the cache (both of the lines
    /// an 80-byte record may span).
    @inline(__always)
    func prefetchRecord(_ slot: Int32) {
        let start = UnsafeRawPointer(records + Int(slot))
        tgshim_prefetch(start)
        tgshim_prefetch(start + (MemoryLayout<Record>.stride - 1))
    }

    /// Starts loading the index bucket where a live slot's search begins
    /// (its record must be loaded or loading: the hash is in it).
    @inline(__always)
    func prefetchBucket(_ slot: Int32) {
        let home = Int(truncatingIfNeeded: records[Int(slot)].hash >> 32) & bucketMask
        tgshim_prefetch(UnsafeRawPointer(buckets + home))
    }

    /// Removes many records, loading ahead: records 16 slots ahead, the
    /// index buckets 8 ahead (by then their record, which holds the hash,
    /// has arrived).
    func remove(_ slots: UnsafeBufferPointer<Int32>) {
        let near = 8, far = 16
        for index in 0..<min(far, slots.count) { prefetchRecord(slots[index]) }
        for index in 0..<min(near, slots.count) { prefetchBucket(slots[index]) }
        for index in slots.indices {
            if index + far < slots.count { prefetchRecord(slots[index + far]) }
            if index + near < slots.count { prefetchBucket(slots[index + near]) }
            remove(slots[index])
        }
    }

    /// Whether a slot holds a live record.
    @inline(__always)
    func isLive(_ slot: Int32) -> Bool {
        slot >= 0 && slot < used && records[Int(slot)].subjectCount != 0
    }

    /// Every live slot, in slot order.
    func liveSlots() -> [Int32] {
        var result: [Int32] = []
        result.reserveCapacity(count)
        var slot: Int32 = 0
        while slot < used {
            if records[Int(slot)].subjectCount != 0 { result.append(slot) }
            slot &+= 1
        }
        return result
    }

    func removeAll() {
        for slot in liveSlots() { remove(slot) }
        freeSlots.removeAll()
        used = 0
    }

    // MARK: Growing

    private func growBuckets() {
        let oldMask = bucketMask
        bucketMask = (oldMask + 1) * 2 - 1
        var oldBuffer = PageBuffer<UInt64>(capacity: bucketMask + 1)
        swap(&oldBuffer, &bucketBuffer)
        let old = oldBuffer.base
        buckets = bucketBuffer.base
        buckets.initialize(repeating: 0, count: bucketMask + 1)
        var index = 0
        while index <= oldMask {
            let bucket = old[index]
            index += 1
            if bucket == 0 { continue }
            var at = Int(truncatingIfNeeded: bucket >> 32) & bucketMask
            while buckets[at] != 0 { at = (at &+ 1) & bucketMask }
            buckets[at] = bucket
        }
        _ = consume oldBuffer
    }
}
