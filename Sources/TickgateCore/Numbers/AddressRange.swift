/// A range of client addresses in CIDR notation ("10.0.0.0/8",
/// "2001:db8::/32"), or one address (/32 or /128).
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The first address of the range: its bits after the prefix are zero.
    public let address: ClientAddress
    /// How many leading bits the range fixes: 0...32 for IPv4, 0...128 for
    /// IPv6.
    public let prefixLength: Int

    /// The range `text` writes: an address (as `ClientAddress.parse` reads
    /// it), then optionally "/" and the prefix length in decimal (0-32 for
    /// IPv4, 0-128 for IPv6; without it, the one address). The bits after
    /// the prefix must be zero, as Python's ipaddress checks strictly:
    /// "10.0.0.1/8" is refused, naming 10.0.0.0/8. A range of IPv4-mapped
    /// IPv6 addresses (::ffff:10.0.0.0/104) is the IPv4 range (10.0.0.0/8).
    /// Throws `.invalidArgument` naming the text.
    public static func parse(_ text: String) throws(TickgateError) -> AddressRange {
        func refused(_ why: String) -> TickgateError {
            TickgateError(.invalidArgument, "address range \(MessageQuote.of(text)): \(why)")
        }
        let utf8 = Array(text.utf8)
        guard utf8.count <= ClientAddress.maximumTextBytes else { throw refused("too long for an address range") }
        let parts = utf8.split(separator: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false)
        guard let addressPart = parts.first else { throw refused("empty, expected an address or address/length") }
        var bytes = try ClientAddress.rawBytes(Array(addressPart), text: text, what: "address range")
        let bits = bytes.count * 8
        var length = bits
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...3).contains(digits.count),
                  digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  digits.count == 1 || digits.first != UInt8(ascii: "0") else {
                throw refused("the prefix length after \"/\" is a number 0 to \(bits)")
            }
            length = 0
            for digit in digits { length = length * 10 + Int(digit &- UInt8(ascii: "0")) }
            guard length <= bits else {
                throw refused("the prefix length is \(length); an \(bits == 32 ? "IPv4" : "IPv6") range has 0 to \(bits)")
            }
        }
        let network = masked(bytes, to: length)
        guard network == bytes else {
            let suggestion = AddressRange(unmapping: network, length: length)
            throw refused("has bits set after the prefix of \(length) bits; the range is \(suggestion)")
        }
        bytes = network
        return AddressRange(unmapping: bytes, length: length)
    }

    /// Whether `address` is in the range; an IPv4 range never contains an
    /// IPv6 address, nor an IPv6 range an IPv4 one (IPv4-mapped addresses
    /// are IPv4 addresses).
    public func contains(_ address: ClientAddress) -> Bool {
        guard address.bytes.count == self.address.bytes.count else { return false }
        return Self.masked(address.bytes, to: prefixLength) == self.address.bytes
    }

    /// "10.0.0.0/8", "2001:db8::/32", "192.0.2.1/32": the address in its
    /// canonical form, always with the prefix length.
    public var description: String { "\(address)/\(prefixLength)" }

    /// The range of `bytes` (whose host bits are zero) and `length`, an
    /// IPv4-mapped one (a /96 or longer of ::ffff:0:0/96) as its IPv4 range.
    private init(unmapping bytes: [UInt8], length: Int) {
        let address = ClientAddress(unmapping: bytes)
        self.address = address
        self.prefixLength = address.bytes.count == bytes.count ? length : max(0, length - 96)
    }

    /// `bytes` with every bit after the first `length` cleared.
    private static func masked(_ bytes: [UInt8], to length: Int) -> [UInt8] {
        var result = bytes
        for index in result.indices {
            let kept = length - index * 8
            if kept >= 8 { continue }
            result[index] = kept <= 0 ? 0 : result[index] & ~(0xFF >> UInt8(kept))
        }
        return result
    }
}
