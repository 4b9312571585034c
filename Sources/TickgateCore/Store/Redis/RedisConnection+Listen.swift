/// A subscribed connection's loop, shared by the notice link
/// (`RedisWatcher`) and the Sentinels' (`SentinelWatcher`).
extension RedisConnection {
    /// Reads pushed messages until the link fails, `keepGoing` says stop,
    /// or the link goes silent: no message for half of `timeout`, then no
    /// answer to a `PING` in the other half (TCP keepalive alone cannot see
    /// a proxy that stops forwarding: its own kernel answers the probes).
    /// `beforeRead` runs before each read and may send on the link (false:
    /// stop); `each` gets every message's parts but a `PING`'s answer.
    func listen(timeout: Span, keepGoing: () -> Bool, beforeRead: () -> Bool = { true },
                each: ([RedisReply]) -> Void) {
        let half = Span(nanoseconds: max(timeout.nanoseconds / 2, 1_000_000))
        var awaitingPong = false
        while keepGoing() {
            guard beforeRead() else { return }
            let reply: RedisReply?
            do throws(TickgateError) {
                reply = try read(within: half)
            } catch {
                return
            }
            guard let reply else {
                if awaitingPong { return }
                do throws(TickgateError) {
                    try send([Array("PING".utf8)])
                } catch {
                    return
                }
                awaitingPong = true
                continue
            }
            guard case let .array(parts) = reply, let kind = parts.first?.text else { continue }
            if kind == "pong" {
                awaitingPong = false
            } else {
                each(parts)
            }
        }
    }
}
