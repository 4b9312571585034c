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
}
