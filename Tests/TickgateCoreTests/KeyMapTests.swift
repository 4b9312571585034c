import Testing
@testable import TickgateCore

@Suite struct KeyMapTests {
    /// Keys of several scopes and subject lengths (short, long, multi-byte).
    static func key(_ n: Int) throws -> CountdownKey {
        let scopes = ["login", "register", "验证"]
        let subject: String
        switch n % 3 {
        case 0: subject = "+86138\(n)"
        case 1: subject = "user\(n)@" + String(repeating: "example", count: 5) + ".com"
        default: subject = "用户\(n)"
        }
        return CountdownKey(scope: try KeyName(scopes[n % scopes.count]), subject: try KeyName(subject))
    }

    @Test func agreesWithADictionaryUnderRandomSetsAndRemovals() throws {
        let map = KeyMap<Int>()
        var reference: [CountdownKey: Int] = [:]
        var state: UInt64 = 11
        func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
        for step in 0..<30_000 {
            let key = try Self.key(next(2_000))
            #expect(map[key] == reference[key])
            if next(3) == 0 {
                map[key] = nil
                reference[key] = nil
            } else {
                map[key] = step
                reference[key] = step
            }
            #expect(map.count == reference.count)
        }
        for (key, value) in reference { #expect(map[key] == value) }
        #expect(Set(map.keys) == Set(reference.keys))
    }

    /// Every size at which the index grows: each key inserted there, then
    /// removed, is found nowhere (a key placed twice when the index grew
    /// left a bucket behind that named an entry past the end: a trap).
    @Test func keysInsertedAsTheIndexGrowsLeaveNoBucketBehind() throws {
        for size in [8, 16, 32, 64, 128] {
            let map = KeyMap<Int>()
            let keys = try (0..<size + 1).map { try Self.key($0) }
            for (value, key) in keys.enumerated() { map[key] = value }
            // All but the first go (an empty map answers nil unlooked).
            for key in keys.dropFirst().reversed() { map[key] = nil }
            #expect(map.count == 1)
            for key in keys.dropFirst() { #expect(map[key] == nil) }
            #expect(map[keys[0]] == 0)
            for (value, key) in keys.enumerated() { map[key] = value }
            for (value, key) in keys.enumerated() { #expect(map[key] == value) }
        }
    }

    @Test func updateByBytesChangesInPlaceAndRemovesOnNil() throws {
        let map = KeyMap<Int>()
        let key = try Self.key(1)
        let made = key.withBytes { scope, subject in
            map.update(scope: scope, subject: subject) { (value: inout Int?) -> Bool in
                let was = value == nil
                value = 5
                return was
            }
        }
        #expect(made)
        #expect(map[key] == 5)
        key.withBytes { scope, subject in
            map.update(scope: scope, subject: subject) { $0 = $0.map { $0 + 1 } }
            #expect(map.value(scope: scope, subject: subject) == 6)
            map.update(scope: scope, subject: subject) { $0 = nil }
        }
        #expect(map[key] == nil)
        #expect(map.isEmpty)
    }
}
