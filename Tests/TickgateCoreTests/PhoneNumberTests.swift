#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import TickgateCore

/// Phone numbers: E.164 parsing, the country table, destinations and
/// always-allowed number patterns.
@Suite struct PhoneNumberTests {
    /// The status `body` throws, nil when it does not throw.
    static func status(_ body: () throws(TickgateError) -> Void) -> Status? {
        do {
            try body()
            return nil
        } catch {
            return error.status
        }
    }

    /// A small deterministic generator (xorshift).
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }
    }

    @Test(arguments: [
        ("+8613800000000", "86", "CN"),
        ("+14155550100", "1", "US"),
        ("+18005550100", "1", "US"),      // toll free: every NANP member's, the table says US
        ("+12045550100", "1", "CA"),
        ("+16135550100", "1", "CA"),
        ("+18765550100", "1", "JM"),
        ("+16585550100", "1", "JM"),
        ("+18095550100", "1", "DO"),
        ("+18295550100", "1", "DO"),
        ("+18495550100", "1", "DO"),
        ("+17875550100", "1", "PR"),
        ("+12425550100", "1", "BS"),
        ("+16715550100", "1", "GU"),
        ("+17215550100", "1", "SX"),
        ("+447400123456", "44", "GB"),
        ("+442079460000", "44", "GB"),
        ("+441481123456", "44", "GG"),
        ("+441534123456", "44", "JE"),
        ("+441624123456", "44", "IM"),
        // Guernsey's mobile range 07911 1 (Sure): the Crown dependencies'
        // mobile ranges are rows of the table (countries.tsv says why).
        ("+447911123456", "44", "GG"),
        ("+447911223456", "44", "GB"),
        ("+447797123456", "44", "JE"),
        ("+447624123456", "44", "IM"),
        ("+77012345678", "7", "KZ"),
        ("+77172123456", "7", "KZ"),
        ("+79123456789", "7", "RU"),
        ("+74951234567", "7", "RU"),
        ("+35818123456", "358", "AX"),
        ("+358401234567", "358", "FI"),
        ("+59991234567", "599", "CW"),
        ("+59971234567", "599", "BQ"),
        ("+4779123456", "47", "SJ"),
        ("+4791234567", "47", "NO"),
        ("+61891621234", "61", "CC"),
        ("+61891641234", "61", "CX"),
        ("+61412345678", "61", "AU"),
        ("+262269123456", "262", "YT"),
        ("+262639123456", "262", "YT"),
        ("+262262123456", "262", "RE"),
        ("+2908123", "290", "TA"),
        ("+2906123", "290", "SH"),
        ("+3906698123456", "39", "VA"),
        ("+390612345678", "39", "IT"),
        ("+590590123456", "590", "GP"),
        ("+24761234", "247", "AC"),
        ("+38344123456", "383", "XK"),
        ("+212612345678", "212", "MA"),
        ("+819012345678", "81", "JP"),
        ("+2348012345678", "234", "NG"),
        ("+4915112345678", "49", "DE"),
        ("+5511912345678", "55", "BR"),
        ("+6834001", "683", "NU"),        // Niue: 4 national digits, the fewest
        ("+8008001234", "800", ""),
        ("+80812345678", "808", ""),
        ("+870773111632", "870", ""),
        ("+882123456789", "882", ""),
        ("+979123456789", "979", ""),
        ("+861380000000012", "86", "CN"), // 15 digits, the most
    ])
    func aValidNumberHasItsCallingCodeAndRegion(text: String, callingCode: String, region: String) throws {
        let number = try PhoneNumber.parse(text)
        #expect(number.callingCode == callingCode)
        #expect(number.region == region)
        #expect(number.digits == String(text.dropFirst()))
        #expect(number.description == text)
        #expect(number.hasPrefix(callingCode))
        #expect(try PhoneNumber.parse(number.description) == number)
    }

    @Test(arguments: [
        "",
        "+",
        "8613800000000",                 // no plus
        "008613800000000",               // an international prefix, not E.164
        " +8613800000000",
        "+8613800000000 ",
        "+8613800000000\n",
        "+86 138 0000 0000",
        "+86-138-0000-0000",
        "+1 (415) 555-0100",
        "+1.415.555.0100",
        "+86138abc0000",
        "+86138O0000000",                // a letter O
        "++8613800000000",
        "+86+13800000000",
        "+08613800000000",               // leading 0 after +
        "+0",
        "+1234567890123456",             // 16 digits
        "+8613800000000000",
        "+2801234567",                   // +280: spare
        "+2101234567",                   // +210: spare
        "+3841234567",                   // +384: spare
        "+8011234567",                   // +801: spare
        "+9991234567",                   // +999: spare
        "+3791234567",                   // +379: reserved for VA, not in use
        "+86123",                        // 3 national digits
        "+1415",
        "+68340",
        "+8",
        "+\u{0668}\u{0666}\u{0661}\u{0663}\u{0668}\u{0660}\u{0660}\u{0660}\u{0660}\u{0660}\u{0660}\u{0660}\u{0660}", // Arabic-Indic
        "+\u{FF18}\u{FF16}\u{FF11}\u{FF13}\u{FF18}\u{FF10}\u{FF10}\u{FF10}\u{FF10}\u{FF10}\u{FF10}\u{FF10}\u{FF10}", // full-width
        "\u{FF0B}8613800000000",         // full-width plus
        "+86138\u{0}0000000",            // a NUL byte
        "+8613800000000\u{0}",
        "\u{0}",
        "+\u{0301}8613800000000",        // a combining mark on the plus
        "+86\u{200B}13800000000",        // a zero-width space
        "+" + String(repeating: "1", count: 10_000),
        String(repeating: "+", count: 10_000),
    ])
    func aMalformedNumberIsRefused(text: String) {
        let status = Self.status { () throws(TickgateError) in _ = try PhoneNumber.parse(text) }
        #expect(status == .invalidNumber)
    }

    @Test func theMessageSaysWhyAndGivesAnExampleButNotTheNumber() {
        for (text, why) in [("", "empty"), ("8613800000000", "no \"+\""), ("+86 138", "space"),
                            ("+1234567890123456", "16 digits"), ("+2801234567", "no assigned country calling code"),
                            ("+86123", "3 digits after"), ("+86١٣٨", "non-ASCII"), ("+86\u{0}1", "control character"),
                            ("+0123", "starts with 0")] {
            do {
                _ = try PhoneNumber.parse(text)
                Issue.record("\(text.debugDescription) was accepted")
            } catch {
                #expect(error.status == .invalidNumber)
                #expect(error.message.contains(why), "\(error.message)")
                #expect(error.message.contains("e.g. +"))
                #expect(!error.message.contains("\u{0}"))
                if text.utf8.count > 6 { #expect(!error.message.contains(String(text.dropFirst()))) }
            }
        }
    }

    @Test func hasPrefixComparesDigits() throws {
        let number = try PhoneNumber.parse("+8613800000000")
        #expect(number.hasPrefix(""))
        #expect(number.hasPrefix("86"))
        #expect(number.hasPrefix("8613"))
        #expect(number.hasPrefix("8613800000000"))
        #expect(!number.hasPrefix("86138000000001"))
        #expect(!number.hasPrefix("+86"))
        #expect(!number.hasPrefix("87"))
    }

    /// Random bytes, mostly "+" and digits, never trap; what parses is E.164
    /// and prints back to itself.
    @Test func randomTextNeverTraps() throws {
        var random = Generator(state: 0x2545_F491_4F6C_DD1D)
        let alphabet: [UInt8] = Array("+0123456789".utf8) + [0, 0x20, 0x2D, 0x28, 0xC2, 0xA0, 0xD9, 0xA8, 0xFF, 0x80]
        var accepted = 0
        for round in 0..<20_000 {
            // by turns: "+" and digits only, "+" and mostly digits, mostly
            // digits, any bytes
            var bytes: [UInt8] = round % 4 < 2 ? [UInt8(ascii: "+")] : []
            for _ in 0..<random.next(20) {
                switch round % 4 {
                case 0: bytes.append(UInt8(ascii: "0") + UInt8(random.next(10)))
                case 3: bytes.append(UInt8(truncatingIfNeeded: random.next(256)))
                default:
                    bytes.append(random.next(8) == 0 ? UInt8(truncatingIfNeeded: random.next(256))
                                                     : alphabet[random.next(alphabet.count)])
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            guard let number = try? PhoneNumber.parse(text) else { continue }
            accepted += 1
            #expect(number.description == text)
            #expect((5...15).contains(number.digits.utf8.count))
            #expect(number.digits.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 })
            #expect(number.hasPrefix(number.callingCode))
        }
        // both outcomes are exercised
        #expect(accepted > 1_000 && accepted < 10_000)
    }

    /// The table's lookup agrees with every row of countries.tsv: a row's
    /// digits followed by more digits match that row (or a longer row), and
    /// a row's region is a region.
    @Test func everyRowOfTheTableMatches() throws {
        let rows = try Self.tableRows()
        #expect(rows.count > 300)
        #expect(CountryTable.keys.count == rows.count)
        #expect(CountryTable.keys == CountryTable.keys.sorted())
        let digitsOfRows = Set(rows.map(\.digits))
        for row in rows {
            let match = CountryTable.match(row.digits + "00000000")
            let longer = digitsOfRows.contains { $0.count > row.digits.count && (row.digits + "00000000").hasPrefix($0) }
            if !longer {
                #expect(match?.region == row.region, "\(row.digits)")
            }
            #expect(match?.callingCode == row.callingCode, "\(row.digits)")
            if !row.region.isEmpty { #expect(CountryTable.isRegion(row.region)) }
        }
    }

    @Test func theTableMatchesTheLongestPrefix() {
        #expect(CountryTable.match("1876")?.region == "JM")
        #expect(CountryTable.match("187")?.region == "US")
        #expect(CountryTable.match("1")?.region == "US")
        #expect(CountryTable.match("44791112")?.region == "GG")
        #expect(CountryTable.match("44791122")?.region == "GB")
        #expect(CountryTable.match("3906698")?.region == "VA")
        #expect(CountryTable.match("390669")?.region == "IT")
        #expect(CountryTable.match("8")?.region == nil)
        #expect(CountryTable.match("") == nil)
        #expect(CountryTable.match("0") == nil)
        #expect(CountryTable.match("x86") == nil)
        // reading stops at a non-digit
        #expect(CountryTable.match("1x876")?.region == "US")
        #expect(CountryTable.match("86")?.callingCode == "86")
        #expect(CountryTable.match("8613800000000"[...])?.callingCode == "86")
    }

    @Test func isRegionKnowsTheTablesRegions() {
        for code in ["CN", "US", "JM", "GG", "AX", "KZ", "VA", "XK", "TA"] { #expect(CountryTable.isRegion(code)) }
        for code in ["", "cn", "Cn", "ZZ", "EU", "UK", "BL", "001", "CHN", "C", "-"] { #expect(!CountryTable.isRegion(code)) }
    }

    /// One row of countries.tsv, read by the test itself.
    struct Row {
        var digits: String
        var region: String
        var callingCode: String
    }

    static func tableRows() throws -> [Row] {
        let path = String(#filePath.split(separator: "/").dropLast(3).joined(separator: "/"))
        let file = "/" + path + "/Sources/TickgateCore/Numbers/countries.tsv"
        guard let handle = fopen(file, "r") else {
            Issue.record("cannot open \(file)")
            return []
        }
        defer { fclose(handle) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, handle)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        var pairs: [(String, String)] = []
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: "\t")
            guard fields.count == 2 else { continue }
            pairs.append((String(fields[0]), fields[1] == "-" ? "" : String(fields[1])))
        }
        let all = Set(pairs.map(\.0))
        return pairs.map { digits, region in
            let code = (1...digits.count).lazy.map { String(digits.prefix($0)) }.first { all.contains($0) } ?? digits
            return Row(digits: digits, region: region, callingCode: code)
        }
    }

    // MARK: Destinations

    @Suite struct Destinations {
        @Test func aRegionOrAPrefixParses() throws {
            #expect(try Destination.parse("CN") == .region("CN"))
            #expect(try Destination.parse("JM") == .region("JM"))
            #expect(try Destination.parse("+86") == .prefix("86"))
            #expect(try Destination.parse("+8613") == .prefix("8613"))
            #expect(try Destination.parse("+1876") == .prefix("1876"))
            #expect(try Destination.parse("+123456789012345") == .prefix("123456789012345"))
            for text in ["CN", "+8613", "GG", "+1"] {
                #expect(try Destination.parse(text).description == text)
            }
        }

        @Test(arguments: ["", "+", "cn", "Cn", "ZZ", "UK", "EU", "C", "CHN", " CN", "CN ", "+1 876", "+1-876",
                          "+0", "+012", "+1234567890123456", "86", "+86a", "++86", "+\u{FF18}\u{FF16}", "C\u{0}",
                          "+" + String(repeating: "9", count: 10_000)])
        func anythingElseIsRefusedNamingTheEntry(text: String) {
            do {
                _ = try Destination.parse(text)
                Issue.record("\(text.debugDescription) was accepted")
            } catch {
                #expect(error.status == .invalidArgument)
                #expect(error.message.hasPrefix("destination \""), "\(error.message)")
                #expect(error.message.count < 400)
            }
        }

        @Test func aDestinationMatchesItsNumbers() throws {
            let beijing = try PhoneNumber.parse("+8613800000000")
            let kingston = try PhoneNumber.parse("+18765550100")
            let sanFrancisco = try PhoneNumber.parse("+14155550100")
            let freephone = try PhoneNumber.parse("+8008001234")
            #expect(try Destination.parse("CN").matches(beijing))
            #expect(try !Destination.parse("CN").matches(kingston))
            #expect(try Destination.parse("JM").matches(kingston))
            #expect(try !Destination.parse("US").matches(kingston))
            #expect(try Destination.parse("US").matches(sanFrancisco))
            #expect(try Destination.parse("+1").matches(kingston))
            #expect(try Destination.parse("+1876").matches(kingston))
            #expect(try !Destination.parse("+1876").matches(sanFrancisco))
            #expect(try Destination.parse("+8613").matches(beijing))
            #expect(try !Destination.parse("+8614").matches(beijing))
            #expect(try !Destination.parse("+86138000000001").matches(beijing))
            #expect(try Destination.parse("+800").matches(freephone))
            // a region never matches a non-geographic number, even one made by hand
            #expect(!Destination.region("").matches(freephone))
            #expect(!Destination.prefix("").matches(freephone))
        }
    }

    // MARK: Number patterns

    @Suite struct NumberPatterns {
        @Test func exactNumbersAndPatternsParse() throws {
            for text in ["+15550100", "+1555010?", "+1555*", "+1??????????", "+8613800000000", "+4479111?????*"] {
                #expect(try NumberPattern.parse(text).description == text)
            }
        }

        @Test(arguments: ["", "+", "+*", "15550100", "+?555", "+0555", "+1555 0100", "+1555-0100", "+15*5",
                          "+1555**", "*", "+1555*0", "+1234567890123456", "+123456789012345?*0", "+1555x",
                          "+1555\u{0}", "+\u{FF11}555", "+" + String(repeating: "?", count: 10_000)])
        func anythingElseIsRefusedNamingTheText(text: String) {
            do {
                _ = try NumberPattern.parse(text)
                Issue.record("\(text.debugDescription) was accepted")
            } catch {
                #expect(error.status == .invalidArgument)
                #expect(error.message.hasPrefix("number pattern \""), "\(error.message)")
            }
        }

        @Test func aPatternMatchesDigitByDigit() throws {
            func matches(_ pattern: String, _ number: String) throws -> Bool {
                try NumberPattern.parse(pattern).matches(PhoneNumber.parse(number))
            }
            #expect(try matches("+15550100", "+15550100"))
            #expect(try !matches("+15550100", "+15550101"))
            #expect(try !matches("+15550100", "+155501000"))
            #expect(try matches("+1555010?", "+15550107"))
            #expect(try !matches("+1555010?", "+155501070"))
            #expect(try !matches("+1555010?", "+15550117"))
            #expect(try matches("+1555*", "+15550100"))
            #expect(try matches("+1555*", "+15559999999"))
            #expect(try !matches("+1555*", "+14155550100"))
            #expect(try matches("+1??????????", "+14155550100"))
            #expect(try !matches("+1??????????", "+1415555010"))
            #expect(try matches("+4479111?????*", "+447911123456"))
            #expect(try matches("+8613800000000*", "+8613800000000"))
        }
    }
}
