/// The country table: a phone number's country calling code and region by
/// the longest prefix of its digits that is a row of Numbers/countries.tsv
/// (the ITU-T E.164 list of country codes and, for shared codes, the ranges
/// of each region; its header says which and of when). The rows are in
/// CountryTable+Data.swift, which Numbers/generate.py writes from the tsv.
///
/// `match` runs on every send: it reads at most `longestRow` digits, makes
/// one binary search per prefix length over a sorted array of integers, and
/// allocates nothing (its strings have at most three ASCII characters, which
/// Swift keeps inline).
enum CountryTable {
    /// The country calling code and region of the row that is the longest
    /// prefix of `digits` (ASCII digits, without "+"), or nil when no row is;
    /// the region is "" for a non-geographic code (+800, +870, +882...).
    /// Reading stops at the first byte that is not a digit.
    static func match(_ digits: Substring) -> (callingCode: String, region: String)? {
        var key: UInt32 = 1
        var found: UInt16?
        var length = 0
        for byte in digits.utf8 {
            guard length < longestRow, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
            key = key &* 10 &+ UInt32(byte &- UInt8(ascii: "0"))
            length += 1
            if let value = value(of: key) { found = value }
        }
        guard let found else { return nil }
        let codeLength = Int(found & 3)
        let regionIndex = Int(found >> 2)
        guard regionIndex < regions.count else { return nil }
        return (String(digits.prefix(codeLength)), regions[regionIndex])
    }

    /// `match` of a whole string.
    static func match(_ digits: String) -> (callingCode: String, region: String)? {
        match(digits[...])
    }

    /// Whether `code` is a region of the table ("CN", "JM", "GG"; not "", not
    /// lower case).
    static func isRegion(_ code: String) -> Bool {
        guard !code.isEmpty else { return false }
        var low = 0
        var high = regions.count
        while low < high {
            let middle = low + (high - low) / 2
            if regions[middle] < code { low = middle + 1 } else { high = middle }
        }
        return low < regions.count && regions[low] == code
    }

    /// The value of `key` in `keys`, by binary search.
    private static func value(of key: UInt32) -> UInt16? {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = low + (high - low) / 2
            if keys[middle] < key { low = middle + 1 } else { high = middle }
        }
        guard low < keys.count, low < values.count, keys[low] == key else { return nil }
        return values[low]
    }
}
