import Testing
@testable import TickgateCore

@Suite struct KeyNameTests {
    func name(_ bytes: [UInt8]) -> TickgateError? {
        bytes.withUnsafeBufferPointer { buffer -> TickgateError? in
            do throws(TickgateError) {
                _ = try KeyName(bytes: buffer, role: "subject")
                return nil
            } catch {
                return error
            }
        }
    }

    @Test func acceptsUTF8UpToTheLimit() {
        #expect(name(Array("+8613800000000".utf8)) == nil)
        #expect(name(Array("登录".utf8)) == nil)
        #expect(name([UInt8](repeating: 0x61, count: Limits.maximumKeyBytes)) == nil)
    }

    @Test(arguments: [
        [UInt8](),                                          // empty
        [UInt8](repeating: 0x61, count: Limits.maximumKeyBytes + 1),
        [0xFF], [0xE4, 0xB8], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
    ])
    func rejectsBadNames(_ bytes: [UInt8]) {
        #expect(name(bytes)?.status == .invalidKey)
    }

    /// The boundary's fast check: every length 1 to 32, a high byte at each
    /// position (and none) gives the byte-by-byte answer.
    @Test func shortASCIICheckSeesEveryByte() {
        for count in 1...32 {
            for high in -1..<count {
                var bytes = [UInt8](repeating: 0x61, count: count)
                if high >= 0 { bytes[high] = 0xC3 }
                // Bytes past the end must not count: put a high byte there.
                bytes.append(0xFF)
                let result = bytes.withUnsafeBufferPointer {
                    UTF8Check.isShortASCII(UnsafeBufferPointer(rebasing: $0[..<count]))
                }
                #expect(result == (high < 0), "count \(count), high byte at \(high)")
            }
        }
    }

    @Test func byteCompareSeesEveryByteAndNoMore() {
        for count in 0...40 {
            for differing in -1..<count {
                let a = [UInt8]((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }) + [0x00]
                var b = Array(a.prefix(count)) + [0xFF]
                if differing >= 0 { b[differing] ^= 0x20 }
                let equal = a.withUnsafeBytes { ra in
                    b.withUnsafeBytes { rb in ByteHash.equal(ra.baseAddress!, rb.baseAddress!, count: count) }
                }
                #expect(equal == (differing < 0), "count \(count), differing at \(differing)")
            }
        }
    }
}
