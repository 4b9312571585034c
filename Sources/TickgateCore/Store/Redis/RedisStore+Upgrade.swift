/// Finishing a rolling upgrade on Redis (docs/upgrading.md).
///
/// Every engine writes the store's format, `P format`, which the first
/// engine set (`RedisKeys.format`); finishing raises it to the newest this
/// release reads (`RedisKeys.newestFormat`), after which an engine of an
/// older release refuses to open the store (`TG_E_STORE_VERSION`).
///
/// Who is live is read from the server's subscriber counts: every engine
/// hears the store's notices on a link of its own subscribed to `P events`
/// (every release does), and an engine of this release also to `P reads:N`
/// for every format N it reads from 3 on (`RedisKeys.announcedFormats`,
/// `RedisWatcher`). A subscription lasts as long as the engine's link: the
/// server drops it when the engine closes, dies or its link is cut (a
/// silent peer by the server's TCP keepalive).
/// So the subscribers of `P events` that are not subscribers of
/// `P reads:N`, N the new format, cannot read it: while there are any, the
/// store stays as it is.
extension RedisStore {
    func finishUpgrade() throws(TickgateError) -> Int {
        let call = clock.begin()
        let target = RedisKeys.newestFormat
        let older = try olderSubscribers(than: target, by: call.deadline)
        let formatKey = keys.formatKey
        let set = [Array("SET".utf8), formatKey, Array(String(target).utf8)]
        // WATCH, so the format is raised only if no one changed it since it
        // was read (two finishing engines, or a newer release's).
        let replies = try exchange(on: formatKey, by: call.deadline, changes: true) {
            (connection, asking) throws(TickgateError) -> [RedisReply] in
            let read = Array(try connection.pipeline(asking + [[Array("WATCH".utf8), formatKey],
                                                               [Array("GET".utf8), formatKey]])
                .dropFirst(asking.count))
            let current = try? Self.format(read[1], keys: keys)
            guard case .status = read[0], let current, current < target, older == 0 else {
                _ = try connection.command([Array("UNWATCH".utf8)])
                return read
            }
            let done = try connection.pipeline(asking + [[Array("MULTI".utf8)], set, [Array("EXEC".utf8)]])
            return read + [done[done.count - 1]]
        }
        for reply in replies {
            if case let .error(text) = reply { throw RedisConnection.refused(text, address) }
        }
        let current = try Self.format(replies[1], keys: keys)
        if current >= target { return current }
        if older > 0 {
            let prefix = String(decoding: keys.prefix, as: UTF8.self)
            throw TickgateError(.olderEnginesLive,
                "the Redis store \(address.description) (prefix \(prefix)) stays at format \(current): \(older) engine\(older == 1 ? "" : "s") that cannot read format \(target) \(older == 1 ? "is" : "are") live on it (subscribed to \(prefix)events but not to \(prefix)reads:\(target): an older release, or another subscriber); stop or upgrade \(older == 1 ? "it" : "them") and call again")
        }
        if replies.count == 3, case let .array(results) = replies[2], results.count == 1,
           case let .error(text) = results[0] {
            throw RedisConnection.refused(text, address)
        }
        guard replies.count == 3, case let .array(results) = replies[2], results.count == 1,
              case .status = results[0] else {
            throw TickgateError(.storeIO,
                "the Redis store \(address.description) changed its format while the upgrade was being finished: call again",
                store: .busy)
        }
        return target
    }

    /// A format key's value: absent is format 1 (written before the key
    /// existed).
    private static func format(_ reply: RedisReply, keys: RedisKeys) throws(TickgateError) -> Int {
        switch reply {
        case .null:
            return 1
        case let .string(bytes):
            return try storedFormat(bytes, keys: keys)
        default:
            throw TickgateError(.storeCorrupt,
                "the Redis key \(String(decoding: keys.formatKey, as: UTF8.self)) holds no string", store: .corrupt)
        }
    }

    /// How many subscribers of the notices cannot read `format`: those of
    /// `P events` less those of `P reads:format`. On a cluster, summed over
    /// the primaries (an engine's link is to one node, which counts it
    /// alone).
    private func olderSubscribers(than format: Int, by deadline: Instant) throws(TickgateError) -> Int {
        let command = [Array("PUBSUB".utf8), Array("NUMSUB".utf8), keys.channel, keys.reads(format)]
        var replies: [RedisReply] = []
        if let cluster {
            for pool in cluster.primaries {
                replies += try pool.share(by: deadline, changes: false) { (share) throws(TickgateError) in
                    try share.pipeline([command])
                }
            }
        } else {
            replies = try read([command], on: nil, by: deadline)
        }
        var older: Int64 = 0
        for reply in replies {
            if case let .error(text) = reply { throw RedisConnection.refused(text, address) }
            guard case let .array(parts) = reply, parts.count == 4,
                  case let .integer(all) = parts[1], case let .integer(readers) = parts[3] else {
                throw TickgateError(.storeCorrupt,
                    "the Redis server \(address.description) sent a bad reply to PUBSUB NUMSUB", store: .corrupt)
            }
            older += max(0, all - readers)
        }
        return Int(clamping: older)
    }
}
