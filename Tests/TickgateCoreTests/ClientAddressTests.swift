import Testing
@testable import TickgateCore

/// Client addresses (IPv4, IPv6, IPv4-mapped) and address ranges (CIDR).
@Suite struct ClientAddressTests {
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
        ("0.0.0.0", "0.0.0.0", 4),
        ("192.0.2.1", "192.0.2.1", 4),
        ("10.0.0.1", "10.0.0.1", 4),
        ("255.255.255.255", "255.255.255.255", 4),
        // IPv6 in RFC 5952 form (what Python's ipaddress prints too)
        ("2001:db8::1", "2001:db8::1", 16),
        ("2001:0DB8:0000:0000:0000:0000:0000:0001", "2001:db8::1", 16),
        ("::", "::", 16),
        ("0:0:0:0:0:0:0:0", "::", 16),
        ("::1", "::1", 16),
        ("1::", "1::", 16),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1", 16),
        ("2001:0:0:1:0:0:0:1", "2001:0:0:1::1", 16),
        ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1", 16),
        ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0", 16),
        ("::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8", 16),
        ("FE80::0001:0:0:0:0", "fe80:0:0:1::", 16),
        ("0:0:1:0:0:0:0:0", "0:0:1::", 16),
        ("1:0:0:2:0:0:0:0", "1:0:0:2::", 16),
        ("ABCD:EF01:2345:6789:abcd:ef01:2345:6789", "abcd:ef01:2345:6789:abcd:ef01:2345:6789", 16),
        ("::192.0.2.1", "::c000:201", 16),               // IPv4-compatible: stays IPv6
        ("64:ff9b::192.0.2.1", "64:ff9b::c000:201", 16),  // NAT64: stays IPv6
        ("::ffff:0:192.0.2.1", "::ffff:0:c000:201", 16),  // IPv4-translated: stays IPv6
        // IPv4-mapped: the IPv4 address
        ("::ffff:192.0.2.1", "192.0.2.1", 4),
        ("::FFFF:c000:0201", "192.0.2.1", 4),
        ("0:0:0:0:0:ffff:192.0.2.1", "192.0.2.1", 4),
        ("0000:0000:0000:0000:0000:ffff:0a00:0001", "10.0.0.1", 4),
    ])
    func anAddressParsesToItsCanonicalForm(text: String, canonical: String, byteCount: Int) throws {
        let address = try ClientAddress.parse(text)
        #expect(address.description == canonical)
        #expect(address.bytes.count == byteCount)
        #expect(address.isIPv4 == (byteCount == 4))
        #expect(try ClientAddress.parse(canonical) == address)
    }

    @Test func aMappedAddressIsItsIPv4Address() throws {
        let v4 = try ClientAddress.parse("192.0.2.1")
        #expect(try ClientAddress.parse("::ffff:192.0.2.1") == v4)
        #expect(try ClientAddress.parse("::ffff:c000:201") == v4)
        #expect(v4.bytes == [192, 0, 2, 1])
        #expect(ClientAddress(bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1]) == v4)
        #expect(ClientAddress(bytes: [192, 0, 2, 1]) == v4)
        #expect(ClientAddress(bytes: [1, 2, 3]) == nil)
        #expect(ClientAddress(bytes: []) == nil)
        #expect(try ClientAddress.parse("::192.0.2.1") != v4)
        #expect(Set([v4, try ClientAddress.parse("::ffff:192.0.2.1")]).count == 1)
    }

    @Test(arguments: [
        "", " ", "1.2.3", "1.2.3.4.5", "256.0.0.1", "1.2.3.256", "1.2.3.1000", "01.2.3.4", "1.2.3.04", "1.2.3.00",
        "1..3.4", "1.2.3.4.", ".1.2.3", "1.2.3.-4", "+1.2.3.4", " 1.2.3.4", "1.2.3.4 ", "1.2.3.4\n", "0x1.2.3.4",
        "1.2.3.4/32", "1.2.3.4:80", "localhost", "1234", "\u{0661}.\u{0662}.\u{0663}.\u{0664}", "\u{FF11}.2.3.4",
        "1.2.3.4\u{0}", "\u{0}",
        ":", ":::", "1:::2", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", ":1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:",
        ":1::", "::1:", "12345::", "g::1", "::ffff:1.2.3", "::ffff:1.2.3.256", "::ffff:01.2.3.4", "1.2.3.4::",
        "::1.2.3.4:5", "1.2.3.4:1::", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:1.2.3.4",
        "fe80::1%eth0", "fe80::1%1", "[::1]", "[::1]:80", "::1 ", "2001:db8::\u{0}", "2001:db8::/32",
        String(repeating: "1:", count: 5_000) + "1", String(repeating: "9", count: 10_000),
    ])
    func aMalformedAddressIsRefusedNamingIt(text: String) {
        do {
            let address = try ClientAddress.parse(text)
            Issue.record("\(text.debugDescription) was accepted as \(address)")
        } catch {
            #expect(error.status == .invalidArgument)
            #expect(error.message.hasPrefix("client address \""), "\(error.message)")
            #expect(error.message.count < 400)
            #expect(!error.message.contains("\u{0}"))
        }
    }

    @Test func aZoneIdIsRefusedWithItsOwnReason() {
        do {
            _ = try ClientAddress.parse("fe80::1%eth0")
            Issue.record("a zone id was accepted")
        } catch {
            #expect(error.message.contains("fe80::1%eth0"))
            #expect(error.message.contains("zone id"))
        }
    }

    // MARK: Ranges

    @Test(arguments: [
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("192.0.2.1", "192.0.2.1/32"),
        ("192.0.2.1/32", "192.0.2.1/32"),
        ("192.0.2.0/31", "192.0.2.0/31"),
        ("2001:db8::/32", "2001:db8::/32"),
        ("2001:DB8:0:1::/64", "2001:db8:0:1::/64"),
        ("::/0", "::/0"),
        ("2001:db8::1", "2001:db8::1/128"),
        ("2001:db8::1/128", "2001:db8::1/128"),
        ("::ffff:10.0.0.0/104", "10.0.0.0/8"),
        ("::ffff:192.0.2.1", "192.0.2.1/32"),
        ("::ffff:0.0.0.0/96", "0.0.0.0/0"),
    ])
    func aRangeParsesToItsCanonicalForm(text: String, canonical: String) throws {
        let range = try AddressRange.parse(text)
        #expect(range.description == canonical)
        #expect(try AddressRange.parse(canonical) == range)
        #expect(range.contains(range.address))
    }

    @Test func aRangeContainsItsAddressesAndNoOthers() throws {
        func contains(_ range: String, _ address: String) throws -> Bool {
            try AddressRange.parse(range).contains(ClientAddress.parse(address))
        }
        #expect(try contains("0.0.0.0/0", "0.0.0.0"))
        #expect(try contains("0.0.0.0/0", "255.255.255.255"))
        #expect(try contains("0.0.0.0/0", "::ffff:203.0.113.7"))
        #expect(try !contains("0.0.0.0/0", "::"))
        #expect(try !contains("0.0.0.0/0", "2001:db8::1"))
        #expect(try contains("10.0.0.0/8", "10.0.0.0"))
        #expect(try contains("10.0.0.0/8", "10.255.255.255"))
        #expect(try !contains("10.0.0.0/8", "11.0.0.0"))
        #expect(try !contains("10.0.0.0/8", "9.255.255.255"))
        #expect(try contains("192.0.2.1/32", "192.0.2.1"))
        #expect(try contains("192.0.2.1", "::ffff:192.0.2.1"))
        #expect(try !contains("192.0.2.1/32", "192.0.2.2"))
        #expect(try !contains("192.0.2.1/32", "192.0.2.0"))
        #expect(try contains("192.0.2.0/31", "192.0.2.1"))
        #expect(try !contains("192.0.2.0/31", "192.0.2.2"))
        #expect(try contains("10.128.0.0/9", "10.200.1.1"))
        #expect(try !contains("10.128.0.0/9", "10.127.1.1"))
        #expect(try contains("::/0", "::"))
        #expect(try contains("::/0", "2001:db8::1"))
        #expect(try !contains("::/0", "192.0.2.1"))
        #expect(try !contains("::/0", "::ffff:192.0.2.1"))   // a mapped address is IPv4
        #expect(try contains("2001:db8::/32", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"))
        #expect(try !contains("2001:db8::/32", "2001:db9::"))
        #expect(try contains("2001:db8:0:1::/64", "2001:db8:0:1:ffff:ffff:ffff:ffff"))
        #expect(try !contains("2001:db8:0:1::/64", "2001:db8:0:2::"))
        #expect(try contains("2001:db8::1/128", "2001:db8:0:0:0:0:0:1"))
        #expect(try !contains("2001:db8::1/128", "2001:db8::2"))
        #expect(try contains("2001:db8::/33", "2001:db8:7fff::"))
        #expect(try !contains("2001:db8::/33", "2001:db8:8000::"))
        #expect(try contains("::ffff:10.0.0.0/104", "10.1.2.3"))
    }

    @Test(arguments: [
        ("10.0.0.1/8", "10.0.0.0/8"),
        ("192.0.2.1/31", "192.0.2.0/31"),
        ("10.128.0.0/8", "10.0.0.0/8"),
        ("0.0.0.1/0", "0.0.0.0/0"),
        ("2001:db8::1/32", "2001:db8::/32"),
        ("2001:db8:0:1::1/64", "2001:db8:0:1::/64"),
        ("::1/0", "::/0"),
        ("::ffff:10.0.0.1/104", "10.0.0.0/8"),
    ])
    func hostBitsAreRefusedNamingTheRange(text: String, range: String) {
        do {
            _ = try AddressRange.parse(text)
            Issue.record("\(text) was accepted")
        } catch {
            #expect(error.status == .invalidArgument)
            #expect(error.message.contains(text), "\(error.message)")
            #expect(error.message.hasSuffix("the range is \(range)"), "\(error.message)")
        }
    }

    @Test(arguments: [
        "", "/", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/08", "10.0.0.0/8/8", "10.0.0.0/ 8",
        "10.0.0.0/8 ", "10.0.0.0/1000", "10.0.0.0/x", "10.0.0/8", "::/129", "::/", "2001:db8::/0032",
        "fe80::%eth0/64", "[2001:db8::]/32", "10.0.0.0/\u{FF18}", "10.0.0.0/8\u{0}",
        "10.0.0.0/" + String(repeating: "8", count: 10_000),
    ])
    func aMalformedRangeIsRefusedNamingIt(text: String) {
        do {
            let range = try AddressRange.parse(text)
            Issue.record("\(text.debugDescription) was accepted as \(range)")
        } catch {
            #expect(error.status == .invalidArgument)
            #expect(error.message.hasPrefix("address range \""), "\(error.message)")
            #expect(error.message.count < 400)
        }
    }

    /// Random text, mostly of the characters of addresses, never traps;
    /// what parses prints a form that parses back to it.
    @Test func randomTextNeverTraps() {
        var random = Generator(state: 0x9E37_79B9_7F4A_7C15)
        let alphabet = Array("0123456789abcdefABCDEF:::..../%[]fF0".utf8)
        var addresses = 0
        var ranges = 0
        for round in 0..<30_000 {
            var bytes: [UInt8] = []
            for _ in 0..<random.next(48) {
                bytes.append(round % 5 == 0 || random.next(16) == 0 ? UInt8(truncatingIfNeeded: random.next(256))
                                                                    : alphabet[random.next(alphabet.count)])
            }
            // half the time, build from real pieces so that many parse
            if round % 2 == 1 {
                bytes = Array(randomAddress(&random).utf8)
                if random.next(2) == 0 { bytes += Array("/\(random.next(140))".utf8) }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if let address = try? ClientAddress.parse(text) {
                addresses += 1
                #expect(address.bytes.count == 4 || address.bytes.count == 16)
                #expect((try? ClientAddress.parse(address.description)) == address, "\(text)")
            }
            if let range = try? AddressRange.parse(text) {
                ranges += 1
                #expect((try? AddressRange.parse(range.description)) == range, "\(text)")
                #expect(range.contains(range.address))
            }
        }
        #expect(addresses > 1_000)
        #expect(ranges > 1_000)
    }

    /// An address in one of its text forms, now and then subtly wrong.
    func randomAddress(_ random: inout Generator) -> String {
        switch random.next(4) {
        case 0:
            return (0..<4).map { _ in String(random.next(random.next(8) == 0 ? 300 : 256)) }.joined(separator: ".")
        case 1:
            var groups = (0..<8).map { _ in random.next(3) == 0 ? "0" : String(random.next(0x10000), radix: 16) }
            let start = random.next(8)
            let length = random.next(8 - start + 1)
            if length > 0 {
                groups.replaceSubrange(start..<(start + length), with: [""])
                if start == 0 { groups.insert("", at: 0) }
                if start + 1 == groups.count { groups.append("") }
            }
            return groups.joined(separator: ":")
        case 2:
            return "::ffff:" + (0..<4).map { _ in String(random.next(256)) }.joined(separator: ".")
        default:
            return (0..<8).map { _ in String(random.next(0x10000), radix: 16) }.joined(separator: ":")
        }
    }
}
