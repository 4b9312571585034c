/// A fast seeded hash of byte strings, for the countdown index. Eight bytes
/// are mixed per step (a 64x64->128-bit multiply folded to 64 bits, as
/// wyhash does), so a 16-byte subject costs three multiplies. Each engine
/// draws its own seed, so a host cannot pick keys that collide on purpose
/// without knowing it.
enum ByteHash {
    private static let p0: UInt64 = 0xa076_1d64_78bd_642f
    private static let p1: UInt64 = 0xe703_7ed1_a0b4_28db
    private static let p2: UInt64 = 0x8ebc_6af0_9c88_c6e3

    @inline(__always)
    static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let product = a.multipliedFullWidth(by: b)
        return product.high ^ product.low
    }

    /// Whether `count` bytes at `a` and at `b` are equal: words compared in
    /// place (the last word overlapping), never reading past `count`; a key
    /// of a few words costs a few compares instead of memcmp through the
    /// PLT. Not inlined: inlined, it made the start path's table closure too
    /// big to inline (more instructions per start under callgrind).
    @inline(never)
    static func equal(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
        if count >= 8 {
            var offset = 0
            while offset &+ 8 < count {
                if a.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                    != b.loadUnaligned(fromByteOffset: offset, as: UInt64.self) { return false }
                offset &+= 8
            }
            return a.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
                == b.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
        }
        if count >= 4 {
            return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
                && a.loadUnaligned(fromByteOffset: count &- 4, as: UInt32.self)
                    == b.loadUnaligned(fromByteOffset: count &- 4, as: UInt32.self)
        }
        var offset = 0
        while offset < count {
            if a.load(fromByteOffset: offset, as: UInt8.self) != b.load(fromByteOffset: offset, as: UInt8.self) {
                return false
            }
            offset &+= 1
        }
        return true
    }

    /// The hash of `bytes` under `seed`.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        let count = bytes.count
        var h = seed ^ mix(UInt64(truncatingIfNeeded: count) ^ p0, p1)
        guard let base = bytes.baseAddress else { return mix(h, p2) }
        var offset = 0
        while count - offset >= 8 {
            let word = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            h = mix(h ^ word, p1 ^ UInt64(truncatingIfNeeded: offset))
            offset &+= 8
        }
        if offset < count {
            var word: UInt64 = 0
            var shift: UInt64 = 0
            while offset < count {
                word |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self)) << shift
                shift &+= 8
                offset &+= 1
            }
            h = mix(h ^ word, p0 ^ UInt64(truncatingIfNeeded: count))
        }
        return mix(h, p2)
    }
}
