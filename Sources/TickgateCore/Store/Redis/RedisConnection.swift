import CTickgateShim

/// One reply of Redis, copied out of hiredis and checked for size.
enum RedisReply: Equatable {
    case string([UInt8])
    case status(String)
    case integer(Int64)
    case array([RedisReply])
    case null
    case error(String)

    /// Most elements and bytes a reply may hold, and its deepest nesting:
    /// a reply past them is refused as corrupt, never followed.
    static let maximumElements = 4_000_000
    static let maximumBytes = 64 << 20
    static let maximumDepth = 4

    var text: String? {
        switch self {
        case let .string(bytes): String(decoding: bytes, as: UTF8.self)
        case let .status(text): text
        default: nil
        }
    }

    /// hiredis's reply, copied; nil if it is larger or deeper than the
    /// limits or of a type Redis 7 does not send.
    init?(_ reply: UnsafePointer<redisReply>, depth: Int = 0) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            guard r.len >= 0, r.len <= Self.maximumBytes else { return nil }
            self = .string(r.len == 0 ? [] : Array(UnsafeRawBufferPointer(start: r.str, count: Int(r.len))))
        case REDIS_REPLY_STATUS, REDIS_REPLY_ERROR:
            guard r.len >= 0, r.len <= 65_536 else { return nil }
            let bytes = r.len == 0 ? [] : Array(UnsafeRawBufferPointer(start: r.str, count: Int(r.len)))
            let text = String(decoding: bytes, as: UTF8.self)
            self = r.type == REDIS_REPLY_STATUS ? .status(text) : .error(text)
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_ARRAY:
            guard depth < Self.maximumDepth, r.elements <= Self.maximumElements else { return nil }
            var elements: [RedisReply] = []
            elements.reserveCapacity(Int(r.elements))
            for index in 0..<Int(r.elements) {
                guard let child = tgshim_redis_element(reply, index),
                      let element = RedisReply(child, depth: depth + 1) else { return nil }
                elements.append(element)
            }
            self = .array(elements)
        default:
            return nil
        }
    }
}

/// One connection to the Redis server (a hiredis context), used by one
/// thread at a time (the store's pool hands it out). Every read and write
/// waits at most the store's timeout; a connection that timed out or lost
/// its server is `broken` and is thrown away, and the next call connects
/// again.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    let address: RedisAddress
    private(set) var broken = false

    /// Connects, authenticates and selects the database; every step waits
    /// at most `timeout`.
    init(_ address: RedisAddress, timeout: Span) throws(TickgateError) {
        self.address = address
        let milliseconds = max(1, timeout.millisecondsRoundedUp)
        let opened: UnsafeMutablePointer<redisContext>?
        switch address.endpoint {
        case let .tcp(host, port): opened = tgshim_redis_connect(host, Int32(port), nil, milliseconds)
        case let .unix(path): opened = tgshim_redis_connect(nil, 0, path, milliseconds)
        }
        guard let opened else {
            throw TickgateError(.system, "out of memory connecting to \(address.description)")
        }
        // From here every throw frees the context in deinit.
        context = opened
        if opened.pointee.err != 0 {
            let why = Self.errorText(opened)
            throw TickgateError(.storeIO, "cannot connect to the Redis server \(address.description): \(why)")
        }
        if let password = address.password {
            let arguments = address.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            if case let .error(text) = try command(arguments.map { Array($0.utf8) }) {
                throw TickgateError(.storeIO, "the Redis server \(address.description) refused the login: \(text)")
            }
        }
        if address.database != 0 {
            if case let .error(text) = try command([Array("SELECT".utf8), Array(String(address.database).utf8)]) {
                throw TickgateError(.storeIO,
                    "the Redis server \(address.description) refused database \(address.database): \(text)")
            }
        }
    }

    deinit { redisFree(context) }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { raw in
            let bytes = raw.prefix { $0 != 0 }
            let text = String(decoding: bytes, as: UTF8.self)
            return text.isEmpty ? "error \(context.pointee.err)" : text
        }
    }

    /// Sends one command and reads its reply (Redis's own errors come back
    /// as `.error`). Throws `.storeIO` naming the server if the connection
    /// fails or the reply does not come within the timeout (the
    /// connection is then broken), `.storeCorrupt` for a reply past the
    /// size limits.
    func command(_ arguments: [[UInt8]]) throws(TickgateError) -> RedisReply {
        guard !broken else { throw TickgateError(.storeIO, "the connection to \(address.description) is broken") }
        let count = arguments.count
        let context = self.context
        let reply = withArrayOfPointers(arguments) { pointers, lengths in
            tgshim_redis_command(context, Int32(count), pointers, lengths)
        }
        guard let reply else { throw failure() }
        return try copy(reply)
    }

    /// Sends several commands at once and reads their replies: one round
    /// trip.
    func pipeline(_ commands: [[[UInt8]]]) throws(TickgateError) -> [RedisReply] {
        guard !broken else { throw TickgateError(.storeIO, "the connection to \(address.description) is broken") }
        let context = self.context
        for arguments in commands {
            let count = arguments.count
            let queued = withArrayOfPointers(arguments) { pointers, lengths in
                tgshim_redis_append(context, Int32(count), pointers, lengths)
            }
            guard queued == 0 else { throw failure() }
        }
        var replies: [RedisReply] = []
        for _ in commands {
            guard let reply = tgshim_redis_read(context) else { throw failure() }
            replies.append(try copy(reply))
        }
        return replies
    }

    /// The error of a failed read or write; the connection is broken.
    private func failure() -> TickgateError {
        broken = true
        let why = Self.errorText(context)
        let timedOut = why.contains("Resource temporarily unavailable") || why.contains("timed out")
        return TickgateError(.storeIO,
            timedOut ? "the Redis server \(address.description) did not answer within the store timeout"
                     : "lost the Redis server \(address.description): \(why)")
    }

    private func copy(_ reply: UnsafeMutablePointer<redisReply>) throws(TickgateError) -> RedisReply {
        defer { freeReplyObject(reply) }
        guard let copied = RedisReply(reply) else {
            broken = true
            throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a reply past Tickgate's limits")
        }
        return copied
    }

    /// Waits for replies with no timeout (a subscriber's connection).
    func waitForever() {
        _ = tgshim_redis_set_timeout(context, 0)
    }

    /// The connection's socket, for `shutdown` from another thread.
    var descriptor: Int32 { context.pointee.fd }

    /// Reads the next reply with no command sent (a subscriber's message).
    func read() throws(TickgateError) -> RedisReply {
        guard !broken else { throw TickgateError(.storeIO, "the connection to \(address.description) is broken") }
        guard let reply = tgshim_redis_read(context) else { throw failure() }
        return try copy(reply)
    }
}

/// Calls `body` with C pointers to the arguments' bytes and their lengths
/// (all arguments copied into one buffer).
private func withArrayOfPointers<R>(_ arguments: [[UInt8]],
                                    _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
    var flat: [UInt8] = []
    flat.reserveCapacity(arguments.reduce(0) { $0 + $1.count } + 1)
    var lengths: [Int] = []
    lengths.reserveCapacity(arguments.count)
    for argument in arguments {
        flat.append(contentsOf: argument)
        lengths.append(argument.count)
    }
    flat.append(0)
    return flat.withUnsafeBufferPointer { bytes -> R in
        let base = UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self)
        var pointers: [UnsafePointer<CChar>?] = []
        pointers.reserveCapacity(arguments.count)
        var offset = 0
        for length in lengths {
            pointers.append(base + offset)
            offset += length
        }
        return pointers.withUnsafeBufferPointer { list in
            lengths.withUnsafeBufferPointer { sizes in body(list.baseAddress!, sizes.baseAddress!) }
        }
    }
}
