import Testing
@testable import TickgateCore

/// Redis Cluster routing that needs no server: slots, URLs, redirects and
/// the keys a cluster's scripts take.
@Suite struct RedisClusterTests {
    func slot(_ name: String) -> Int { RedisSlot.of(Array(name.utf8)) }

    @Test func crc16IsTheClusterSpecificationsXmodem() {
        // The Cluster specification's reference value.
        #expect(RedisSlot.crc16(Array("123456789".utf8)[...]) == 0x31C3)
        // Values redis-cli's CLUSTER KEYSLOT gives.
        #expect(slot("foo") == 12_182)
        #expect(slot("bar") == 5_061)
        #expect(slot("") == 0)
    }

    @Test func hashTagsFollowTheSpecification() {
        #expect(slot("{user1000}.following") == slot("{user1000}.followers"))
        #expect(slot("{user1000}.following") == slot("user1000"))
        // An empty tag: the whole name.
        #expect(String(decoding: RedisSlot.hashTag(Array("foo{}{bar}".utf8)), as: UTF8.self) == "foo{}{bar}")
        // The first "{" and the first "}" after it.
        #expect(String(decoding: RedisSlot.hashTag(Array("foo{{bar}}zap".utf8)), as: UTF8.self) == "{bar")
        #expect(String(decoding: RedisSlot.hashTag(Array("foo{bar}{zap}".utf8)), as: UTF8.self) == "bar")
        #expect(String(decoding: RedisSlot.hashTag(Array("no close {".utf8)), as: UTF8.self) == "no close {")
    }

    @Test func everyScriptKeyIsInTheSlotOfItsClock() throws {
        var keys = RedisKeys(prefix: Array("tg:".utf8), engine: Array("e1".utf8))
        keys.cluster = true
        let key = CountdownKey(scope: try KeyName("login"), subject: try KeyName("+8613800000000"))
        let budget = BudgetKey(budget: try KeyName("ip"), key: try KeyName("203.0.113.7"))
        // Names whose own braces would break a tag built from them (a realm "}x").
        for name in [keys.hash(key), keys.budget(budget), keys.reservations(budget), keys.settings, keys.formatKey,
                     keys.session(try KeyName("app")), keys.session(try KeyName("}x")), keys.session(try KeyName("{a}b")),
                     keys.probe(slot: 7)] {
            #expect(RedisSlot.of(keys.clock(for: name)) == RedisSlot.of(name))
        }
        #expect(RedisSlot.of(keys.probe(slot: 7)) == 7)
        // Every slot has its tag.
        for slot in [0, 1, 5_460, 5_461, 16_383] {
            #expect(RedisSlot.of(Array("{\(RedisSlot.representative(of: slot))}".utf8)) == slot)
        }
        #expect(RedisSlot.of(keys.budget(budget)) == RedisSlot.of(keys.reservations(budget)))
        // One server: one clock key.
        keys.cluster = false
        #expect(keys.clock(for: keys.hash(key)) == keys.clock)
    }

    @Test func clusterURLs() throws {
        let url = try RedisURL(parsing: "redis+cluster://app:secret@10.0.0.1:7000,[::1]:7001,node3")
        #expect(url.cluster.map(\.endpoint) == [.tcp(host: "10.0.0.1", port: 7000), .tcp(host: "::1", port: 7001),
                                                 .tcp(host: "node3", port: 6379)])
        #expect(url.cluster.allSatisfy { $0.user == "app" && $0.password == "secret" && $0.tls == nil })
        #expect(url.description == "redis+cluster://app@10.0.0.1:7000,[::1]:7001,node3:6379")
        let tls = try RedisURL(parsing: "rediss+cluster://10.0.0.1:7000?tls_ca_cert_file=/ca.pem")
        #expect(tls.cluster[0].tls?.caFile == "/ca.pem")
        for bad in ["redis+cluster://h:1/0", "redis+cluster://", "redis+cluster://h:1,,h:2",
                    "redis+cluster://h:1?sentinel_user=x", "redis+cluster://h:1?tls_ca_cert_file=/x",
                    "redis://h:1?tls_cert_file=/x"] {
            #expect(throws: TickgateError.self, "\(bad)") { try RedisURL(parsing: bad) }
        }
    }

    @Test func redirectsAreRead() {
        let moved = RedisStore.redirect(.error("MOVED 3999 127.0.0.1:6381"))
        #expect(moved?.kind == .moved && moved?.slot == 3_999 && moved?.endpoint == .tcp(host: "127.0.0.1", port: 6_381))
        let ask = RedisStore.redirect(.error("ASK 12182 [::1]:7002"))
        #expect(ask?.kind == .ask && ask?.endpoint == .tcp(host: "::1", port: 7_002))
        #expect(RedisStore.redirect(.error("TRYAGAIN Multiple keys request during rehashing of slot"))?.kind == .tryAgain)
        // No host: the node that answered (cluster-preferred-endpoint-type unknown-endpoint).
        #expect(RedisStore.redirect(.error("MOVED 1 :6380"))?.endpoint == .tcp(host: "", port: 6_380))
        for text in ["MOVED 16384 h:1", "MOVED x h:1", "MOVED 1 h", "ERR MOVED 1 h:1", "ASK 1 h:0"] {
            #expect(RedisStore.redirect(.error(text)) == nil, "\(text)")
        }
        #expect(RedisStore.redirect(.string(Array("MOVED 1 h:1".utf8))) == nil)
    }
}
