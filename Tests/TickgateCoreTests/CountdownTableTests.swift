import Testing
@testable import TickgateCore

@Suite struct CountdownTableTests {
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// Scopes and subjects of every length class: short, inline (23 bytes),
    /// one past inline, long, multi-byte UTF-8.
    static func subject(_ n: Int) -> String {
        switch n % 5 {
        case 0: "+8613800\(n)"
        case 1: String(repeating: "a", count: 23 - String(n).count) + String(n)
        case 2: String(repeating: "b", count: 24 - String(n).count) + String(n)
        case 3: "user\(n)@" + String(repeating: "example", count: 6) + ".com"
        default: "用户\(n)"
        }
    }

    static let scopes = ["login", "register", "reset-password", "验证"]

    func insert(_ table: CountdownTable, _ key: CountdownKey, instance: UInt64) -> Int32 {
        table.insert(key, deadline: Instant(nanoseconds: Int64(instance)), duration: .milliseconds(1),
                     tickInterval: .milliseconds(1000), phase: .cooling, instance: instance, ticket: 0)
    }

    func key(_ scope: Int, _ subject: Int) throws -> CountdownKey {
        CountdownKey(scope: try KeyName(Self.scopes[scope]), subject: try KeyName(Self.subject(subject)))
    }

    @Test func recordLayout() {
        // The inline subject is found by a folded constant, not offset(of:).
        #expect(CountdownTable.subjectOffset == MemoryLayout<CountdownTable.Record>.offset(of: \.subject))
        #expect(MemoryLayout<CountdownTable.Record>.stride == 80)
    }

    @Test func agreesWithADictionaryUnderRandomInsertAndRemove() throws {
        let table = CountdownTable()
        var reference: [CountdownKey: (slot: Int32, instance: UInt64)] = [:]
        var random = Generator(state: 7)
        var instance: UInt64 = 0
        for _ in 0..<40_000 {
            let key = try key(random.next(Self.scopes.count), random.next(3_000))
            if let (slot, expected) = reference[key] {
                #expect(table.find(key) == slot)
                #expect(table.record(slot).instance == expected)
                #expect(table.key(slot) == key)
                if random.next(2) == 0 {
                    table.remove(slot)
                    reference.removeValue(forKey: key)
                    #expect(table.find(key) == nil)
                }
            } else {
                #expect(table.find(key) == nil)
                instance += 1
                reference[key] = (insert(table, key, instance: instance), instance)
            }
            #expect(table.count == reference.count)
        }
        // Every key is still found by its bytes, and gives its bytes back.
        for (key, entry) in reference {
            let found = key.withBytes { scope, subject in table.find(scope: scope, subject: subject) }
            #expect(found == entry.slot)
            let subject = table.subjectBytes(entry.slot)
            #expect(String(decoding: subject, as: UTF8.self) == key.subject.value)
            #expect(subject.baseAddress?.load(fromByteOffset: subject.count, as: UInt8.self) == 0)
        }
        #expect(Set(table.liveSlots()) == Set(reference.values.map(\.slot)))
        table.removeAll()
        #expect(table.count == 0)
        #expect(table.liveSlots().isEmpty)
        for key in reference.keys { #expect(table.find(key) == nil) }
    }

    @Test func keysCompareAsBytes() throws {
        let table = CountdownTable()
        let composed = CountdownKey(scope: try KeyName("login"), subject: try KeyName("caf\u{E9}"))
        let decomposed = CountdownKey(scope: try KeyName("login"), subject: try KeyName("cafe\u{301}"))
        let slot = insert(table, composed, instance: 1)
        #expect(table.find(composed) == slot)
        #expect(table.find(decomposed) == nil)
        let other = insert(table, decomposed, instance: 2)
        #expect(other != slot)
        #expect(table.count == 2)
    }

    @Test func aScopeIsForgottenWithItsLastCountdown() throws {
        let table = CountdownTable()
        let a = try key(0, 1), b = try key(0, 2), c = try key(1, 1)
        let slotA = insert(table, a, instance: 1)
        let slotB = insert(table, b, instance: 2)
        let slotC = insert(table, c, instance: 3)
        table.remove(slotA)
        #expect(table.find(b) == slotB)
        table.remove(slotB)
        #expect(table.find(b) == nil)
        #expect(table.find(c) == slotC)
        // The freed scope comes back with a new countdown.
        let again = insert(table, a, instance: 4)
        #expect(table.find(a) == again)
        #expect(table.key(again) == a)
    }
}
