// The store's clock across a failover. Every script decides on the store's
// time: the server's TIME plus a correction kept in the store (the clock
// key, "RUNID:VALUE": the primary it was set for, and µs; Scripts/prelude.lua).
// Deadlines are written in that time, so a new primary whose clock differs
// from the old one's would make every remaining time jump (and a clock
// ahead would end cooldowns early).
//
// So each engine checks every new connection to a primary the Sentinels
// name. If the primary is the one its mapping of the store's time was
// learned on, or the clock key was already set for this primary, there is
// nothing to do: one value per primary, set once, and later engines (or
// ones whose mapping has drifted) never rewrite it. Otherwise (a failover
// this engine saw) it compares the store's time there with what its own
// steady clock expects and sets the key for this primary: the value that
// keeps the store's time running on, or the one held if it is right within
// the tolerance (Scripts/set_clock.lua: the first engine's write wins). An
// engine that has not seen the store's time yet writes nothing.

extension RedisStore {
    /// How far the store's time on a new primary may differ from what the
    /// engine expects before the engine corrects it (beyond the round trip
    /// of the check itself).
    static let clockTolerance: Int64 = 100_000

    /// Checks, and if needed corrects, the store's time on `connection`
    /// (a new primary's), before it is used.
    static func align(_ connection: RedisConnection, clock: RedisClock, keys: RedisKeys) throws(TickgateError) {
        let server = connection.address.description
        for _ in 0..<3 {
            let start = Poller.boottime()
            let replies = try connection.pipeline([[Array("TIME".utf8)], keys.skewCommand(for: keys.clock),
                                                   [Array("INFO".utf8), Array("server".utf8)]])
            let end = Poller.boottime()
            if case let .error(text) = replies[2] { throw RedisConnection.refused(text, connection.address) }
            guard let field = replies[2].infoField("run_id"), case let runID = String(field), !runID.isEmpty,
                  runID.utf8.count <= 64,
                  runID.allSatisfy({ $0.isHexDigit }) else {
                throw TickgateError(.storeCorrupt, "the Redis server \(server) sent no run_id in INFO server",
                                    store: .corrupt)
            }
            let time = try RedisClock.serverTime(replies[0], server)
            let correction = try RedisClock.correction(replies[1], server)
            var held: [UInt8] = []
            if case let .string(bytes) = replies[1] { held = bytes }
            let heldFor = String(decoding: held.prefix { $0 != UInt8(ascii: ":") }, as: UTF8.self)
            let expected = clock.expected(start: start, end: end)
            let before = clock.rest(on: runID)
            // Set for this primary already, or the primary the mapping was
            // learned on, or no mapping yet: nothing to write.
            if (held.contains(UInt8(ascii: ":")) && heldFor == runID) || before == runID || before == nil { return }
            guard let (low, high) = expected else { return }
            let store = time + correction
            let tolerance = clockTolerance + (high - low)
            var wanted = correction
            if store < low - tolerance || store > high + tolerance { wanted = correction + (low + high) / 2 - store }
            guard abs(wanted) <= RedisClock.maximumCorrection else {
                throw TickgateError(.storeIO,
                    "the Redis server \(server) keeps a time more than a day from the store's: set its clock (NTP)",
                    store: .corrupt)
            }
            let command = [Array("EVALSHA".utf8), Array(RedisScripts.setClockSHA.utf8), Array("1".utf8), keys.clock,
                           held, Array("\(runID):\(wanted)".utf8)]
            var reply = try connection.command(command)
            if case let .error(text) = reply, text.hasPrefix("NOSCRIPT") {
                _ = try connection.command([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(RedisScripts.setClock.utf8)])
                reply = try connection.command(command)
            }
            if case let .error(text) = reply { throw RedisConnection.refused(text, connection.address) }
            // Then read again: the value set (this engine's, or another's
            // for this primary) is the one used.
            _ = clock.rest(on: before ?? runID)
        }
        throw TickgateError(.storeIO,
            "the Redis server \(server) keeps a time that differs from the store's, and the engines could not agree on its correction",
            store: .busy)
    }
}
