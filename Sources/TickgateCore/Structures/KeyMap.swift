import Glibc

/// Values found by a key's bytes (scope, subject): what the engine keeps
/// per key beside its countdowns (a key's send history). Entries sit in one
/// array, found through an open-addressing index of 8-byte buckets; each
/// entry keeps its key's bytes inline when they fit (32 bytes: a scope and
/// a phone number), else in a heap copy of their own. A lookup hashes the
/// caller's bytes once and makes no `String` and no reference count, so the
/// send path can look a key up by the caller's bytes as the countdown table
/// does.
///
/// A class: its owner keeps the one instance (no copy is ever made).
/// Not thread-safe: the engine's lock guards it.
final class KeyMap<Value> {
    private struct Entry {
        var hash: UInt64
        var scopeCount: Int32
        var subjectCount: Int32
        /// The scope's bytes, then the subject's, inline when they fit
        /// (`inlineBytes`), else the address of a heap copy (first word).
        var bytes: (UInt64, UInt64, UInt64, UInt64)
        var value: Value

        var isInline: Bool { Int(scopeCount) &+ Int(subjectCount) <= KeyMap.inlineBytes }
    }

    private static var inlineBytes: Int { 32 }

    /// Dense: a removal moves the last entry into the hole.
    private var entries: [Entry] = []
    /// 0 = empty, else (upper 32 bits of the hash) << 32 | entry index + 1.
    private var buckets = [UInt64](repeating: 0, count: 16)
    private var bucketMask = 15
    private let seed = UInt64.random(in: 1 ... .max)

    deinit {
        for index in entries.indices where !entries[index].isInline { Self.heapCopy(entries[index].bytes).deallocate() }
    }

    private static func heapCopy(_ bytes: (UInt64, UInt64, UInt64, UInt64)) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(bitPattern: UInt(truncatingIfNeeded: bytes.0)).unsafelyUnwrapped
    }

    /// Calls `body` with the key bytes of entry `index` (scope, then subject).
    @inline(__always)
    private func withKeyBytes<R>(_ index: Int, _ body: (UnsafeRawPointer) -> R) -> R {
        let bytes = entries[index].bytes
        if entries[index].isInline {
            return withUnsafeBytes(of: bytes) { body($0.baseAddress.unsafelyUnwrapped) }
        }
        return body(Self.heapCopy(bytes))
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// Every key, as names.
    var keys: [CountdownKey] {
        entries.indices.map { index in
            let scopeCount = Int(entries[index].scopeCount), subjectCount = Int(entries[index].subjectCount)
            return withKeyBytes(index) { bytes in
                CountdownKey(scope: KeyName(validated: UnsafeRawBufferPointer(start: bytes, count: scopeCount)),
                             subject: KeyName(validated: UnsafeRawBufferPointer(start: bytes + scopeCount,
                                                                                count: subjectCount)))
            }
        }
    }

    // MARK: By bytes

    /// The value of the key with these bytes.
    func value(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer) -> Value? {
        if entries.isEmpty { return nil }
        guard let index = find(scope: scope, subject: subject, hash: hash(scope, subject)) else { return nil }
        return entries[index].value
    }

    /// Calls `body` with the key's value (nil: none) to read and change;
    /// what it leaves is kept (nil: the entry goes).
    func update<R>(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer,
                   _ body: (inout Value?) -> R) -> R {
        let hash = hash(scope, subject)
        if let index = find(scope: scope, subject: subject, hash: hash) {
            var value: Value? = entries[index].value
            let result = body(&value)
            if let value { entries[index].value = value } else { remove(at: index) }
            return result
        }
        var value: Value?
        let result = body(&value)
        if let value { insert(value, scope: scope, subject: subject, hash: hash) }
        return result
    }

    // MARK: By names

    subscript(key: CountdownKey) -> Value? {
        get { entries.isEmpty ? nil : key.withBytes { scope, subject in value(scope: scope, subject: subject) } }
        set {
            if newValue == nil && entries.isEmpty { return }
            key.withBytes { scope, subject in update(scope: scope, subject: subject) { $0 = newValue } }
        }
    }

    // MARK: The index

    @inline(__always)
    private func hash(_ scope: UnsafeRawBufferPointer, _ subject: UnsafeRawBufferPointer) -> UInt64 {
        ByteHash.hash(subject, seed: ByteHash.hash(scope, seed: seed))
    }

    private func find(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer, hash: UInt64) -> Int? {
        let tag = hash >> 32
        var at = Int(truncatingIfNeeded: tag) & bucketMask
        while true {
            let bucket = buckets[at]
            if bucket == 0 { return nil }
            if bucket >> 32 == tag {
                let index = Int(truncatingIfNeeded: bucket & 0xFFFF_FFFF) &- 1
                if matches(index, scope: scope, subject: subject, hash: hash) { return index }
            }
            at = (at &+ 1) & bucketMask
        }
    }

    @inline(__always)
    private func matches(_ index: Int, scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer,
                         hash: UInt64) -> Bool {
        let scopeCount = Int(entries[index].scopeCount)
        guard entries[index].hash == hash, scopeCount == scope.count,
              Int(entries[index].subjectCount) == subject.count else { return false }
        return withKeyBytes(index) { bytes in
            if let base = scope.baseAddress, !ByteHash.equal(bytes, base, count: scopeCount) { return false }
            if let base = subject.baseAddress, !ByteHash.equal(bytes + scopeCount, base, count: subject.count) {
                return false
            }
            return true
        }
    }

    private func insert(_ value: Value, scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer,
                        hash: UInt64) {
        var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        func copy(to target: UnsafeMutableRawPointer) {
            if let base = scope.baseAddress { target.copyMemory(from: base, byteCount: scope.count) }
            if let base = subject.baseAddress { (target + scope.count).copyMemory(from: base, byteCount: subject.count) }
        }
        if scope.count + subject.count <= Self.inlineBytes {
            withUnsafeMutableBytes(of: &bytes) { copy(to: $0.baseAddress.unsafelyUnwrapped) }
        } else {
            let copied = UnsafeMutableRawPointer.allocate(byteCount: scope.count + subject.count, alignment: 8)
            copy(to: copied)
            bytes.0 = UInt64(UInt(bitPattern: copied))
        }
        // Names are at most `Limits.maximumKeyBytes` bytes: the counts fit.
        entries.append(Entry(hash: hash, scopeCount: Int32(truncatingIfNeeded: scope.count),
                             subjectCount: Int32(truncatingIfNeeded: subject.count), bytes: bytes, value: value))
        // Growing places every entry, the new one too: placing it again
        // would leave a second bucket that outlives its removal (and names
        // an index past the entries once they shrink).
        if entries.count &* 2 > bucketMask { grow() } else { place(hash: hash, index: entries.count &- 1) }
    }

    @inline(__always)
    private func place(hash: UInt64, index: Int) {
        var at = Int(truncatingIfNeeded: hash >> 32) & bucketMask
        while buckets[at] != 0 { at = (at &+ 1) & bucketMask }
        buckets[at] = (hash >> 32) << 32 | UInt64(UInt32(truncatingIfNeeded: index &+ 1))
    }

    /// The bucket that names entry `index`.
    private func bucket(of index: Int) -> Int {
        let hash = entries[index].hash
        let wanted = (hash >> 32) << 32 | UInt64(UInt32(truncatingIfNeeded: index &+ 1))
        var at = Int(truncatingIfNeeded: hash >> 32) & bucketMask
        while buckets[at] != wanted { at = (at &+ 1) & bucketMask }
        return at
    }

    private func remove(at index: Int) {
        // Close the bucket's gap (backward-shift deletion).
        var hole = bucket(of: index)
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
        if !entries[index].isInline { Self.heapCopy(entries[index].bytes).deallocate() }
        let last = entries.count &- 1
        if index != last {
            // The last entry moves into the hole: its bucket follows.
            let moved = bucket(of: last)
            buckets[moved] = (entries[last].hash >> 32) << 32 | UInt64(UInt32(truncatingIfNeeded: index &+ 1))
            entries.swapAt(index, last)
        }
        entries.removeLast()
    }

    private func grow() {
        bucketMask = (bucketMask &+ 1) &* 2 &- 1
        buckets = [UInt64](repeating: 0, count: bucketMask &+ 1)
        for index in entries.indices { place(hash: entries[index].hash, index: index) }
    }
}
