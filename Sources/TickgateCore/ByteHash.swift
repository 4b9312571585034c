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
