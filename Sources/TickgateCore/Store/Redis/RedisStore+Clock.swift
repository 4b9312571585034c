// The store's clock across a failover. Every script decides on the store's
// time: the server's TIME plus a correction kept in the store (the clock
// key, Scripts/prelude.lua). Deadlines are written in that time, so a new
// primary whose clock differs from the old one's would make every
// remaining time jump (and a clock ahead would end cooldowns early). An
// engine that knew the old primary's time checks each new primary the
// Sentinels name before it uses it: if the store's time there is not what
// its own steady clock expects, it sets the correction so that it is
// (Scripts/set_clock.lua: one engine's value wins, the others then agree).

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
            let replies = try connection.pipeline([[Array("TIME".utf8)], keys.skewCommand])
            let end = Poller.boottime()
            let time = try RedisClock.serverTime(replies[0], server)
            let correction = try RedisClock.correction(replies[1], server)
            // An engine that has not yet seen the store's time has nothing
            // to keep running.
            guard let (low, high) = clock.expected(start: start, end: end) else { return }
            let store = time + correction
            let tolerance = clockTolerance + (high - low)
            if store >= low - tolerance && store <= high + tolerance { return }
            let wanted = correction + (low + high) / 2 - store
            var held: [UInt8] = []
            if case let .string(bytes) = replies[1] { held = bytes }
            let command = [Array("EVALSHA".utf8), Array(RedisScripts.setClockSHA.utf8), Array("1".utf8), keys.clock,
                           held, Array(String(wanted).utf8)]
            var reply = try connection.command(command)
            if case let .error(text) = reply, text.hasPrefix("NOSCRIPT") {
                _ = try connection.command([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(RedisScripts.setClock.utf8)])
                reply = try connection.command(command)
            }
            if case let .error(text) = reply { throw RedisConnection.refused(text, connection.address) }
            // Then read again: the value set (this engine's or another's)
            // must give the time this engine expects.
        }
        throw TickgateError(.storeIO,
            "the Redis server \(server) keeps a time that differs from the store's, and the engines could not agree on its correction",
            store: .busy)
    }
}
