/// A phone number in E.164 form, "+" and at most 15 digits, of a country
/// calling code the country table assigns, with its region.
///
/// Only `parse` makes one, so every value is valid: `digits` are ASCII
/// digits, `callingCode` is a prefix of them, `region` is the table's.
public struct PhoneNumber: Sendable, Hashable, CustomStringConvertible {
    /// The digits after "+", ASCII ("8613800000000").
    public let digits: String
    /// The country calling code, 1 to 3 digits ("86"; "1" for every NANP
    /// number, Jamaica's too).
    public let callingCode: String
    /// The number's region, an ISO 3166-1 alpha-2 code ("CN"; "JM" for
    /// +1 876...), or "" for a non-geographic code (+800, +808, +870, +878,
    /// +881, +882, +883, +888, +979). countries.tsv lists the few codes
    /// outside ISO 3166-1 that it uses (AC, TA, XK).
    public let region: String

    /// E.164 allows at most 15 digits after "+".
    public static let maximumDigits = 15
    /// The fewest digits of a national number (after the country calling
    /// code): the shortest in use are 4 digits (Niue, +683 xxxx; Saint
    /// Helena, +290 xxxx).
    public static let minimumNationalDigits = 4

    /// "+" and the digits.
    public var description: String { "+" + digits }

    private init(digits: String, callingCode: String, region: String) {
        self.digits = digits
        self.callingCode = callingCode
        self.region = region
    }

    /// The number that `text` writes in E.164: "+", then the digits only
    /// (first 1-9), a country calling code the table assigns, and at least
    /// 4 national digits, 15 digits at most in all. The host normalises
    /// national forms, spaces, dashes and parentheses before calling. Throws
    /// `.invalidNumber` saying why (its message does not repeat the number);
    /// never traps, whatever the text.
    public static func parse(_ text: String) throws(TickgateError) -> PhoneNumber {
        let utf8 = text.utf8
        guard let first = utf8.first else {
            throw refused("the number is empty")
        }
        guard first == UInt8(ascii: "+") else {
            throw refused(isDigit(first) ? "the number has no \"+\" before its country calling code"
                                         : "the number does not start with \"+\"")
        }
        var count = 0
        for (offset, byte) in utf8.dropFirst().enumerated() {
            guard isDigit(byte) else {
                throw refused(notADigit(byte, at: offset + 2))
            }
            count += 1
        }
        guard count > 0 else {
            throw refused("the number is only a \"+\"")
        }
        guard count <= maximumDigits else {
            throw refused("the number has \(count) digits; E.164 allows at most \(maximumDigits)")
        }
        let digits = String(decoding: utf8.dropFirst(), as: UTF8.self)
        guard let firstDigit = digits.utf8.first, firstDigit != UInt8(ascii: "0") else {
            throw refused("no country calling code starts with 0")
        }
        guard let (callingCode, region) = CountryTable.match(digits) else {
            throw refused("the number starts with no assigned country calling code (+\(digits.prefix(3))...)")
        }
        // The shortest national numbers in use have 4 digits (Niue, Saint
        // Helena), so fewer after the calling code is no number.
        guard count >= callingCode.utf8.count + minimumNationalDigits else {
            throw refused("the number has \(count - callingCode.utf8.count) digits after its country calling code "
                          + "+\(callingCode); the shortest numbers have \(minimumNationalDigits)")
        }
        return PhoneNumber(digits: digits, callingCode: callingCode, region: region)
    }

    /// Whether the number's digits start with `digits` (digits without "+":
    /// "8613" for +8613...). An empty prefix matches every number.
    public func hasPrefix(_ digits: String) -> Bool {
        self.digits.utf8.starts(with: digits.utf8)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// Why `byte`, the `position`th byte (1 is the "+"), is refused.
    private static func notADigit(_ byte: UInt8, at position: Int) -> String {
        switch byte {
        case UInt8(ascii: " "), UInt8(ascii: "-"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "."),
             UInt8(ascii: "\t"), UInt8(ascii: "/"):
            "the number has a space, dash, dot or parenthesis at byte \(position): pass it normalised, "
                + "\"+\" and the digits only"
        case UInt8(ascii: "+"):
            "the number has a second \"+\" at byte \(position)"
        case 0x80...:
            "the number has a non-ASCII character at byte \(position): only the digits 0-9 may follow \"+\""
        case 0..<0x20, 0x7F:
            "the number has a control character at byte \(position)"
        default:
            "the number has a character that is not a digit at byte \(position)"
        }
    }

    private static func refused(_ why: String) -> TickgateError {
        TickgateError(.invalidNumber, why + ", e.g. +14155550100 (E.164: \"+\", the country calling code, the national number)")
    }
}
