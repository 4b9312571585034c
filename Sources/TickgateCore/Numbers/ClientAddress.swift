/// A client's IP address, IPv4 (4 bytes) or IPv6 (16 bytes). An IPv4-mapped
/// IPv6 address (::ffff:192.0.2.1) is the IPv4 address it maps, so a host
/// whose sockets are dual-stack names the same client as one that is not.
public struct ClientAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6), network order.
    public let bytes: [UInt8]

    /// The longest text `parse` reads: an IPv6 address with an embedded IPv4
    /// one has at most 45 characters, a range adds "/128".
    static let maximumTextBytes = 64

    /// The address of `bytes`: 4 (IPv4) or 16 (IPv6, an IPv4-mapped one
    /// becoming its IPv4 address); nil for any other count.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = Self.unmapped(bytes)
    }

    /// Whether it is an IPv4 address.
    public var isIPv4: Bool { bytes.count == 4 }

    /// The address `text` writes: an IPv4 dotted quad ("192.0.2.1": four
    /// numbers 0-255, no leading zeros) or an IPv6 address, full, compressed
    /// with "::" or with an embedded IPv4 address ("::ffff:192.0.2.1"), in
    /// either case of hex digits; no zone id ("%eth0"), brackets or port.
    /// Throws `.invalidArgument` naming the text.
    public static func parse(_ text: String) throws(TickgateError) -> ClientAddress {
        let raw = try rawBytes(Array(text.utf8), text: text, what: "client address")
        return ClientAddress(unmapping: raw)
    }

    /// The address in canonical form: a dotted quad, or IPv6 as RFC 5952
    /// writes it (lower case, no leading zeros in a group, the longest run
    /// of two or more zero groups, the first of equal ones, as "::").
    public var description: String {
        if bytes.count == 4 {
            return bytes.map { String($0) }.joined(separator: ".")
        }
        var groups: [UInt16] = []
        groups.reserveCapacity(8)
        var index = 0
        while index + 1 < bytes.count {
            groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]))
            index += 2
        }
        // The longest run of zero groups, if it has two or more.
        var bestStart = -1
        var bestLength = 1
        var runStart = 0
        var runLength = 0
        for (position, group) in groups.enumerated() {
            if group == 0 {
                if runLength == 0 { runStart = position }
                runLength += 1
                if runLength > bestLength {
                    bestStart = runStart
                    bestLength = runLength
                }
            } else {
                runLength = 0
            }
        }
        func hex(_ slice: ArraySlice<UInt16>) -> String {
            slice.map { String($0, radix: 16) }.joined(separator: ":")
        }
        guard bestStart >= 0 else { return hex(groups[...]) }
        return hex(groups[..<bestStart]) + "::" + hex(groups[(bestStart + bestLength)...])
    }

    init(unmapping bytes: [UInt8]) {
        self.bytes = Self.unmapped(bytes)
    }

    /// 16 bytes of ::ffff:a.b.c.d as the 4 of a.b.c.d; anything else as is.
    static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else {
            return bytes
        }
        return Array(bytes[12..<16])
    }

    /// The 4 or 16 bytes `utf8` writes, an IPv4-mapped IPv6 address left 16
    /// bytes (a range needs its prefix length over them). `text` and `what`
    /// name it in the error.
    static func rawBytes(_ utf8: [UInt8], text: String, what: String) throws(TickgateError) -> [UInt8] {
        func refused(_ why: String) -> TickgateError {
            TickgateError(.invalidArgument, "\(what) \(MessageQuote.of(text)): \(why)")
        }
        guard !utf8.isEmpty else { throw refused("empty, expected an IPv4 or IPv6 address") }
        guard utf8.count <= maximumTextBytes else { throw refused("too long for an IP address") }
        if utf8.contains(UInt8(ascii: "%")) {
            throw refused("a zone id (\"%...\") is not accepted: pass the address alone")
        }
        if utf8.first == UInt8(ascii: "[") {
            throw refused("pass the address without brackets or port")
        }
        if utf8.contains(UInt8(ascii: ":")) {
            guard let bytes = ipv6(utf8[...]) else {
                throw refused("not an IPv6 address (eight groups of 1 to 4 hex digits separated by \":\", "
                              + "at most one \"::\", an IPv4 address only as the last 32 bits)")
            }
            return bytes
        }
        guard let bytes = ipv4(utf8[...]) else {
            throw refused(utf8.contains(UInt8(ascii: "."))
                          ? "not an IPv4 address (four numbers 0-255 separated by dots, no leading zeros)"
                          : "not an IPv4 or IPv6 address")
        }
        return bytes
    }

    /// The 4 bytes of a dotted quad, or nil.
    static func ipv4(_ utf8: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4)
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy(isDigit) else { return nil }
            guard part.count == 1 || part.first != UInt8(ascii: "0") else { return nil }
            var value = 0
            for digit in part { value = value * 10 + Int(digit &- UInt8(ascii: "0")) }
            guard value <= 255 else { return nil }
            bytes.append(UInt8(value))
        }
        return bytes
    }

    /// The 16 bytes of an IPv6 address (RFC 4291 section 2.2), or nil.
    static func ipv6(_ utf8: ArraySlice<UInt8>) -> [UInt8]? {
        let colon = UInt8(ascii: ":")
        // Where "::" is, if anywhere; a second one or ":::" is no address.
        var doubleColon: Int?
        var index = utf8.startIndex
        while index < utf8.endIndex {
            if utf8[index] == colon, index + 1 < utf8.endIndex, utf8[index + 1] == colon {
                guard doubleColon == nil else { return nil }
                doubleColon = index
                index += 2
                if index < utf8.endIndex, utf8[index] == colon { return nil }
            } else {
                index += 1
            }
        }
        let head: [UInt16]
        let tail: [UInt16]
        if let doubleColon {
            guard let before = groups(utf8[utf8.startIndex..<doubleColon], ipv4Last: false),
                  let after = groups(utf8[(doubleColon + 2)...], ipv4Last: true),
                  before.count + after.count <= 7 else { return nil }
            head = before
            tail = after
        } else {
            guard let all = groups(utf8, ipv4Last: true), all.count == 8 else { return nil }
            head = all
            tail = []
        }
        let all = head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for group in all {
            bytes.append(UInt8(group >> 8))
            bytes.append(UInt8(group & 0xFF))
        }
        return bytes
    }

    /// The groups of `part` (groups separated by single colons; empty: none),
    /// an IPv4 address as the last piece counting as two when `ipv4Last`.
    private static func groups(_ part: ArraySlice<UInt8>, ipv4Last: Bool) -> [UInt16]? {
        guard !part.isEmpty else { return [] }
        let pieces = part.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard pieces.count <= 8 else { return nil }
        var groups: [UInt16] = []
        for (position, piece) in pieces.enumerated() {
            if piece.contains(UInt8(ascii: ".")) {
                guard ipv4Last, position == pieces.count - 1, let quad = ipv4(piece) else { return nil }
                groups.append(UInt16(quad[0]) << 8 | UInt16(quad[1]))
                groups.append(UInt16(quad[2]) << 8 | UInt16(quad[3]))
                continue
            }
            guard (1...4).contains(piece.count) else { return nil }
            var value: UInt16 = 0
            for byte in piece {
                guard let nibble = hexValue(byte) else { return nil }
                value = value << 4 | UInt16(nibble)
            }
            groups.append(value)
        }
        return groups
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }
}
