/// A number that is always allowed: exact ("+15550100"), or a pattern where
/// "?" stands for any one digit and a final "*" for any digits, none too
/// ("+1555010?", "+1555*").
public struct NumberPattern: Sendable, Hashable, CustomStringConvertible {
    /// The digits and "?" after "+", ASCII, without the final "*".
    private let positions: String
    /// Whether the pattern ends with "*".
    private let open: Bool

    private init(positions: String, open: Bool) {
        self.positions = positions
        self.open = open
    }

    /// The pattern `text` writes: "+", then 1 to 15 digits or "?" (the first
    /// a digit 1-9), then at most a "*". Throws `.invalidArgument` naming
    /// the text.
    public static func parse(_ text: String) throws(TickgateError) -> NumberPattern {
        let utf8 = text.utf8
        guard utf8.first == UInt8(ascii: "+") else {
            throw refused(text, "a number pattern starts with \"+\"")
        }
        var body = utf8.dropFirst()
        let open = body.last == UInt8(ascii: "*")
        if open { body = body.dropLast() }
        guard !body.isEmpty, body.count <= PhoneNumber.maximumDigits else {
            throw refused(text, "a number pattern has 1 to \(PhoneNumber.maximumDigits) digits or \"?\" after \"+\"")
        }
        guard body.allSatisfy({ ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "?") }) else {
            throw refused(text, "only digits, \"?\" (one digit) and a final \"*\" (any digits) may follow \"+\"")
        }
        guard let first = body.first, first != UInt8(ascii: "?"), first != UInt8(ascii: "0") else {
            throw refused(text, "a number pattern starts with a country calling code: a digit 1-9 after \"+\"")
        }
        return NumberPattern(positions: String(decoding: body, as: UTF8.self), open: open)
    }

    /// Whether `number` is one this pattern allows: as many digits as the
    /// pattern has positions (or at least as many, with "*"), each equal to
    /// its position's digit or under a "?".
    public func matches(_ number: PhoneNumber) -> Bool {
        let digits = number.digits.utf8
        let count = digits.count
        let wanted = positions.utf8.count
        guard open ? count >= wanted : count == wanted else { return false }
        for (digit, position) in zip(digits, positions.utf8)
        where position != UInt8(ascii: "?") && position != digit {
            return false
        }
        return true
    }

    /// "+1555010?", "+1555*", as `parse` reads it.
    public var description: String { "+" + positions + (open ? "*" : "") }

    private static func refused(_ text: String, _ why: String) -> TickgateError {
        TickgateError(.invalidArgument, "number pattern \(MessageQuote.of(text)): \(why), e.g. +15550100, +1555010? or +1555*")
    }
}
