/// Where the Redis store keeps what (P the prefix; a NAME written as its
/// byte length, ':', its bytes):
///
///     P format                  string: the data's format (`RedisKeys.format`, raised to
///                               `RedisKeys.newestFormat` by the call that finishes an upgrade)
///     P probe                   empty: written and deleted by the open's probe
///     P clock                   string: µs added to the server's TIME to give the store's
///                               time (set when a failover brings a primary whose clock
///                               differs: RedisClock); absent means 0
///     P clock{N}                on a Redis Cluster: the clock key of slot N's tag (never
///                               written: a cluster's primaries tell time by their own clocks)
///     P settings                hash: policies (p:SCOPE), titles (t:SCOPE), budgets (g:NAME),
///                               guards (u:SCOPE; also kept in the scope's own slot)
///     P k{SCOPE-NAME SUBJECT}   hash: a key's countdown, send ticket and send record, and
///                               each engine's last answer on it (Scripts/decide.lua)
///     P b{BUDGET-NAME KEY}      sorted set: a budget key's charges (on a cluster also its
///                               reservations, which count against the cap)
///     P r{BUDGET-NAME KEY}      on a cluster: sorted set of the reservations not yet
///                               committed, scored by when each expires (Scripts/reserve.lua)
///     P s{REALM}                string: a realm's session, expiring with it
///     P u{SCOPE-NAME}...        a guarded scope's guard and pumping signals (Scripts/guard.lua)
///     P events                  pub/sub channel of the settings' and sessions' notices
///     P events:k                pub/sub channel of the keys' notices (heard only by
///                               engines with observers: one per decision)
///     P reads:N                 pub/sub channel no one publishes on: an engine that reads
///                               format N (N >= 3) subscribes to it beside `P events`, so the
///                               server's subscriber counts tell who is live (RedisStore+Upgrade)
///
/// One key's decision touches its one hash (one Redis Cluster slot), its
/// budgets and the settings; on a cluster the budgets and the settings are
/// other slots, reached by calls of their own (RedisStore+Cluster.swift).
/// Notices are "ENGINE k{TAG}" (a key), "ENGINE g" (the settings) and
/// "ENGINE s{REALM}" (a session), ENGINE naming the engine that made the
/// change so it can skip its own ("ENGINE w" wakes the engine's own
/// listener; every other engine skips it). A decision's notices
/// (decide.lua) also say when they were sent: "ENGINE@µs ...", the store's
/// time its script read (`unstamped`; an engine that reads no stamp takes
/// "ENGINE@µs" for the name of another engine, which it is).
struct RedisKeys: Sendable {
    /// The data's format an engine writes on a store that has none (and
    /// every engine writes until an upgrade is finished): 1 had no format
    /// key and no tickets in key hashes (read as it is); 2 adds both.
    static let format = 2
    /// The newest format this release reads, and raises a store to when an
    /// upgrade is finished: 3 holds what 2 holds, and says that every
    /// engine live on the store announces the formats it reads (`reads`),
    /// which engines of 0.1.0 (format 2) do not. An engine refuses a store
    /// of a higher one.
    static let newestFormat = 3
    /// The formats an engine says it reads (`reads`): from 3, the first
    /// format whose engines say so, to the newest.
    static let announcedFormats = 3...newestFormat

    let prefix: [UInt8]
    let engine: [UInt8]
    /// On a Redis Cluster every script's keys are in one slot: each slot
    /// has a clock key of its own.
    var cluster = false

    /// The part of a key's names inside its braces.
    func tag(_ key: CountdownKey) -> [UInt8] {
        var bytes: [UInt8] = []
        Self.name(&bytes, key.scope)
        bytes.append(contentsOf: key.subject.value.utf8)
        return bytes
    }

    private static func name(_ bytes: inout [UInt8], _ part: KeyName) {
        bytes.append(contentsOf: Array(String(part.value.utf8.count).utf8))
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: part.value.utf8)
    }

    private func tagged(_ kind: Character, _ tag: [UInt8]) -> [UInt8] {
        prefix + [kind.asciiValue!, UInt8(ascii: "{")] + tag + [UInt8(ascii: "}")]
    }

    func hash(tag: [UInt8]) -> [UInt8] { tagged("k", tag) }
    func hash(_ key: CountdownKey) -> [UInt8] { hash(tag: tag(key)) }

    private func budgetTag(_ key: BudgetKey) -> [UInt8] {
        var tag: [UInt8] = []
        Self.name(&tag, key.budget)
        tag.append(contentsOf: key.key.value.utf8)
        return tag
    }

    func budget(_ key: BudgetKey) -> [UInt8] { tagged("b", budgetTag(key)) }
    /// A budget key's reservations (on a cluster).
    func reservations(_ key: BudgetKey) -> [UInt8] { tagged("r", budgetTag(key)) }

    func session(_ realm: KeyName) -> [UInt8] { tagged("s", Array(realm.value.utf8)) }

    /// The base of a guarded scope's keys ("P u{SCOPE}"): its guard and
    /// pumping signals, all in one slot (Scripts/guard.lua).
    func guardBase(_ scope: KeyName) -> [UInt8] {
        var tag: [UInt8] = []
        Self.name(&tag, scope)
        return tagged("u", tag)
    }

    var settings: [UInt8] { prefix + Array("settings".utf8) }
    var formatKey: [UInt8] { prefix + Array("format".utf8) }
    /// The store clock's correction (µs added to the server's TIME).
    var clock: [UInt8] { prefix + Array("clock".utf8) }
    /// The clock key a script on `name` takes (in `name`'s slot, named by
    /// the slot's representative tag: a name's own tag may hold braces).
    func clock(for name: [UInt8]) -> [UInt8] {
        guard cluster else { return clock }
        return clock + Array("{\(RedisSlot.representative(of: RedisSlot.of(name)))}".utf8)
    }
    func skewCommand(for name: [UInt8]) -> [[UInt8]] { [Array("GET".utf8), clock(for: name)] }
    /// The key the open's probe writes and deletes (Scripts/probe.lua); on
    /// a cluster, one per primary (in one of its slots).
    var probe: [UInt8] { prefix + Array("probe".utf8) }
    func probe(slot: Int) -> [UInt8] { probe + Array("{\(RedisSlot.representative(of: slot))}".utf8) }
    var channel: [UInt8] { prefix + Array("events".utf8) }
    var keyChannel: [UInt8] { prefix + Array("events:k".utf8) }
    /// The channel engines that read `format` subscribe to.
    func reads(_ format: Int) -> [UInt8] { prefix + Array("reads:\(format)".utf8) }
    /// The glob of every key hash (of one scope's if given).
    func hashPattern(scope: KeyName?) -> [UInt8] {
        var start = prefix + Array("k{".utf8)
        if let scope { Self.name(&start, scope) }
        var out: [UInt8] = []
        for byte in start {
            if "*?[]\\".utf8.contains(byte) { out.append(UInt8(ascii: "\\")) }
            out.append(byte)
        }
        return out + [UInt8(ascii: "*")]
    }

    // MARK: Notices

    func keyNotice(tag: some Collection<UInt8>) -> [UInt8] { engine + Array(" k{".utf8) + tag + [UInt8(ascii: "}")] }
    /// The notice of a key hash's name ("P k{TAG}").
    func keyNotice(hashName: [UInt8]) -> [UInt8] { keyNotice(tag: hashName.dropFirst(prefix.count + 2).dropLast()) }
    var settingsNotice: [UInt8] { engine + Array(" g".utf8) }
    /// Budget charges went back (decide.lua's failed send, a reset, a
    /// write-back): spent budgets known to engines may have room.
    var budgetsNotice: [UInt8] { engine + Array(" b".utf8) }
    /// A guarded code went back or was verified (Scripts/guard.lua): the
    /// country refusals known to engines may no longer hold.
    var guardCountsNotice: [UInt8] { engine + Array(" v".utf8) }
    /// Wakes this engine's own listener (to subscribe to the keys' notices);
    /// other engines skip it.
    var wakeNotice: [UInt8] { engine + Array(" w".utf8) }
    func sessionNotice(_ realm: KeyName) -> [UInt8] { engine + Array(" s{".utf8) + Array(realm.value.utf8) + [UInt8(ascii: "}")] }

    /// A notice without its stamp, and the stamp: when it was sent (the
    /// store's µs), if it says.
    func unstamped(_ payload: [UInt8]) -> (payload: [UInt8], sent: Int64?) {
        guard let space = payload.firstIndex(of: UInt8(ascii: " ")),
              let at = payload[..<space].firstIndex(of: UInt8(ascii: "@")) else { return (payload, nil) }
        let digits = payload[(at + 1)..<space]
        var sent: Int64?
        if digits.count <= 17, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            sent = Int64(String(decoding: digits, as: UTF8.self))
        }
        return (Array(payload[..<at] + payload[space...]), sent)
    }

    /// What a notice names, unless it is this engine's own or malformed.
    func notice(_ payload: [UInt8]) -> StoreNotice? {
        guard let space = payload.firstIndex(of: UInt8(ascii: " ")), Array(payload[..<space]) != engine else {
            return nil
        }
        let rest = payload[(space + 1)...]
        guard let kind = rest.first else { return nil }
        if kind == UInt8(ascii: "g") { return rest.count == 1 ? .settings : nil }
        if kind == UInt8(ascii: "b") { return rest.count == 1 ? .budgets : nil }
        if kind == UInt8(ascii: "v") { return rest.count == 1 ? .guardCounts : nil }
        guard rest.count >= 3, rest[rest.index(after: rest.startIndex)] == UInt8(ascii: "{"),
              rest.last == UInt8(ascii: "}") else { return nil }
        let inner = Array(rest.dropFirst(2).dropLast())
        switch kind {
        case UInt8(ascii: "k"):
            guard let colon = inner.prefix(4).firstIndex(of: UInt8(ascii: ":")),
                  let length = Int(String(decoding: inner[..<colon], as: UTF8.self)),
                  length > 0, inner.count - colon - 1 > length else { return nil }
            let scope = Array(inner[(colon + 1)..<(colon + 1 + length)])
            let subject = Array(inner[(colon + 1 + length)...])
            guard let scope = Self.keyName(scope, "scope"), let subject = Self.keyName(subject, "subject") else {
                return nil
            }
            return .key(CountdownKey(scope: scope, subject: subject))
        case UInt8(ascii: "s"):
            return Self.keyName(inner, "realm").map { .session($0) }
        default:
            return nil
        }
    }

    private static func keyName(_ bytes: [UInt8], _ role: String) -> KeyName? {
        bytes.withUnsafeBufferPointer { try? KeyName(bytes: $0, role: role) }
    }
}
