/// Redis Cluster's key slots, as its specification defines them: a key's
/// slot is CRC16 (XMODEM: polynomial 0x1021, no reflection, start 0) of its
/// hash tag, modulo 16384. The hash tag is what lies between the first
/// "{" and the first "}" after it when that is not empty, else the whole
/// name.
enum RedisSlot {
    static let count = 16_384

    /// The part of `name` that decides its slot.
    static func hashTag(_ name: [UInt8]) -> ArraySlice<UInt8> {
        guard let open = name.firstIndex(of: UInt8(ascii: "{")),
              let close = name[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 else {
            return name[...]
        }
        return name[(open + 1)..<close]
    }

    static func of(_ name: [UInt8]) -> Int { Int(crc16(hashTag(name)) & 0x3fff) }

    /// A short tag of each slot: the decimal number whose CRC16 lands
    /// there first. A key `{TAG}` built from it is in that slot whatever
    /// bytes the names of the slot's other keys hold (braces included).
    static func representative(of slot: Int) -> String { String(representatives[slot & 0x3fff]) }

    private static let representatives: [UInt32] = {
        var table = [UInt32](repeating: .max, count: count)
        var filled = 0
        var number: UInt32 = 0
        while filled < count {
            let slot = Int(crc16(Array(String(number).utf8)[...]) & 0x3fff)
            if table[slot] == .max {
                table[slot] = number
                filled += 1
            }
            number += 1
        }
        return table
    }()

    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes { crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)] }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { (index: Int) -> UInt16 in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}
