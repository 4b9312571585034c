/// An entry of a list of destinations allowed or refused: a region of the
/// country table, or a prefix of the digits.
public enum Destination: Sendable, Hashable, CustomStringConvertible {
    /// Every number of a region of the country table ("CN", "JM", "GG").
    case region(String)
    /// Every number whose digits start with these ("86" for +86, "8613"
    /// for +8613).
    case prefix(String)

    /// The destination `text` names: a region ("CN": two upper-case
    /// letters, one the country table knows) or a prefix ("+8613": "+" and 1
    /// to 15 digits, the first 1-9; no spaces). Throws `.invalidArgument`
    /// naming the entry.
    public static func parse(_ text: String) throws(TickgateError) -> Destination {
        let utf8 = text.utf8
        if utf8.first == UInt8(ascii: "+") {
            let digits = utf8.dropFirst()
            guard !digits.isEmpty, digits.count <= PhoneNumber.maximumDigits,
                  digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw refused(text, "a prefix is \"+\" and 1 to \(PhoneNumber.maximumDigits) digits, nothing else, e.g. +8613")
            }
            guard digits.first != UInt8(ascii: "0") else {
                throw refused(text, "no number starts with 0 after \"+\"")
            }
            return .prefix(String(decoding: digits, as: UTF8.self))
        }
        guard utf8.count == 2, utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
            let lower = utf8.count == 2 && utf8.allSatisfy { ($0 | 0x20) >= UInt8(ascii: "a") && ($0 | 0x20) <= UInt8(ascii: "z") }
            throw refused(text, lower ? "a region is written in upper case, e.g. CN"
                                      : "expected a region (two upper-case letters, e.g. CN) or a prefix (\"+\" and digits, e.g. +8613)")
        }
        guard CountryTable.isRegion(text) else {
            throw refused(text, "not a region of the country table (ISO 3166-1 alpha-2 codes of the regions "
                          + "with a calling code or range of their own)")
        }
        return .region(text)
    }

    /// Whether `number` is one of this destination's.
    public func matches(_ number: PhoneNumber) -> Bool {
        switch self {
        case .region(let code): !code.isEmpty && number.region == code
        case .prefix(let digits): !digits.isEmpty && number.hasPrefix(digits)
        }
    }

    /// "CN" or "+8613", as `parse` reads it.
    public var description: String {
        switch self {
        case .region(let code): code
        case .prefix(let digits): "+" + digits
        }
    }

    private static func refused(_ text: String, _ why: String) -> TickgateError {
        TickgateError(.invalidArgument, "destination \(MessageQuote.of(text)): \(why)")
    }
}
