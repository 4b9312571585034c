import CTickgateShim
import Glibc

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

    /// The value of `name` in an INFO reply ("name:value" lines), if any.
    func infoField(_ name: String) -> Substring? {
        guard let text else { return nil }
        let prefix = name + ":"
        return text.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix(prefix) })?.dropFirst(prefix.count)
    }

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

/// One connection to the Redis server (a link of the C shim: plain TCP, a
/// unix socket or TLS, with hiredis for the protocol), used by one thread
/// at a time (the store's pool hands it out to one call, or to several
/// whose requests `shared` pipelines, one thread at a time on the link). Every read and write waits
/// at most until the call's deadline; a connection that timed out or lost
/// its server is `broken` and is thrown away. Failures carry their kind
/// from the link's error code (hiredis's, or a TLS peer not trusted) and
/// errno, never from message text.
final class RedisConnection {
    private let link: OpaquePointer
    let address: RedisAddress
    private(set) var broken = false
    /// Whether the last call's request was written whole (a failure before
    /// that delivered nothing the server could run).
    private(set) var delivered = false
    /// The link's timeout last set (ms), so a call sets it only if it moved.
    private var timeoutMilliseconds: Int64
    /// The calls pipelined on the connection while the pool shares it.
    let shared = RedisPipeline()

    /// Connects, authenticates and selects the database; every step waits
    /// at most `timeout`.
    init(_ address: RedisAddress, timeout: Span) throws(TickgateError) {
        self.address = address
        let milliseconds = max(1, timeout.millisecondsRoundedUp)
        timeoutMilliseconds = milliseconds
        let opened: OpaquePointer?
        switch address.endpoint {
        case let .tcp(host, port):
            if let tls = address.tls {
                opened = Self.openTLS(host, port, tls, milliseconds)
            } else {
                opened = tgshim_link_open(host, Int32(port), nil, nil, milliseconds)
            }
        case let .unix(path): opened = tgshim_link_open(nil, 0, path, nil, milliseconds)
        }
        guard let opened else {
            throw TickgateError(.system, "out of memory connecting to \(address.description)")
        }
        // From here every throw closes the link in deinit.
        link = opened
        let code = tgshim_link_error(opened)
        if code != 0 {
            let why = Self.errorText(opened)
            let kind = Self.kind(code, tgshim_link_errno(opened))
            let message = switch kind {
            case .timeout where address.tls != nil:
                "the Redis server \(address.description) did not accept a TLS link within the store timeout (\(why))"
            case .timeout: "the Redis server \(address.description) did not accept a connection within the store timeout"
            case .auth: "cannot open a TLS link to the Redis server \(address.description): \(why)"
            default: "cannot connect to the Redis server \(address.description): \(why)"
            }
            throw TickgateError(.storeIO, message, store: kind)
        }
        if let password = address.password {
            let arguments = address.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            if case let .error(text) = try command(arguments.map { Array($0.utf8) }) {
                throw TickgateError(.storeIO, "the Redis server \(address.description) refused the login: \(text)",
                                    store: .auth)
            }
        }
        if address.database != 0 {
            if case let .error(text) = try command([Array("SELECT".utf8), Array(String(address.database).utf8)]) {
                throw Self.refused(text, address,
                    "the Redis server \(address.description) refused database \(address.database): \(text)")
            }
        }
    }

    deinit { tgshim_link_close(link) }

    /// Opens a TLS link: the settings go to C as strings that live for the
    /// call.
    private static func openTLS(_ host: String, _ port: Int, _ tls: RedisAddress.TLS,
                                _ milliseconds: Int64) -> OpaquePointer? {
        withOptionalCString(tls.caFile) { caFile in
            withOptionalCString(tls.caDirectory) { caDirectory in
                withOptionalCString(tls.certificateFile) { certificateFile in
                    withOptionalCString(tls.keyFile) { keyFile in
                        withOptionalCString(tls.serverName) { serverName in
                            var settings = tgshim_tls(ca_file: caFile, ca_dir: caDirectory, cert_file: certificateFile,
                                                      key_file: keyFile, server_name: serverName)
                            return tgshim_link_open(host, Int32(port), nil, &settings, milliseconds)
                        }
                    }
                }
            }
        }
    }

    private static func errorText(_ link: OpaquePointer) -> String {
        let text = tgshim_link_error_text(link).map { String(cString: $0) } ?? ""
        return text.isEmpty ? "error \(tgshim_link_error(link))" : text
    }

    /// The kind of a link's failure: an I/O error whose errno says the
    /// timeout passed is a timeout; a protocol error is corrupt data; a TLS
    /// peer the client does not trust (or that refused the client's
    /// certificate) is a login refused; the rest (EOF, reset, refused, a
    /// TLS handshake that failed on I/O) means the server is out of reach.
    private static func kind(_ code: Int32, _ number: Int32) -> StoreFailure {
        if code == REDIS_ERR_IO, number == EAGAIN || number == EWOULDBLOCK || number == ETIMEDOUT
            || number == EINPROGRESS {
            return .timeout
        }
        if code == REDIS_ERR_PROTOCOL { return .corrupt }
        if code == TGSHIM_LINK_ERR_TRUST { return .auth }
        return .unreachable
    }

    /// The error of a reply Redis refused with (`-ERR ...`), by its code:
    /// a refused login or permission, a server busy, loading or read-only,
    /// or a command this server or topology does not take.
    static func refused(_ text: String, _ address: RedisAddress, _ message: String? = nil) -> TickgateError {
        let code = text.prefix { $0 != " " }
        let kind: StoreFailure
        switch code {
        case "NOAUTH", "WRONGPASS", "NOPERM": kind = .auth
            if code == "NOAUTH" {
                return TickgateError(.storeIO,
                    "the Redis server \(address.description) needs a login (NOAUTH): give the user and password in the URL",
                    store: .auth)
            }
        case "READONLY": kind = .readOnly
        // A Redis Cluster without a primary for some slot (one failed and
        // its replica is not promoted yet).
        case "CLUSTERDOWN": kind = .unreachable
        case "BUSY", "LOADING", "MASTERDOWN", "TRYAGAIN", "OOM", "MISCONF", "NOREPLICAS": kind = .busy
        case "WRONGTYPE": kind = .corrupt
        default: kind = .unsupported
        }
        return TickgateError(kind == .corrupt ? .storeCorrupt : .storeIO,
                             message ?? "the Redis server \(address.description) refused a call: \(text.prefix(300))",
                             store: kind)
    }

    /// Makes every read and write of the next call wait at most until
    /// `deadline` (a boot-clock instant); throws a timeout if it passed.
    func limit(to deadline: Instant) throws(TickgateError) {
        let left = deadline.since(Poller.boottime())
        guard left.nanoseconds > 0 else {
            throw TickgateError(.storeIO, "the Redis server \(address.description) did not answer within the store timeout",
                                store: .timeout)
        }
        let milliseconds = max(1, left.millisecondsRoundedUp)
        guard milliseconds != timeoutMilliseconds else { return }
        timeoutMilliseconds = milliseconds
        tgshim_link_set_timeout(link, milliseconds)
    }

    /// Sends one command and reads its reply (Redis's own errors come back
    /// as `.error`). Throws `.storeIO` naming the server if the connection
    /// fails or the reply does not come within the timeout (the
    /// connection is then broken), `.storeCorrupt` for a reply past the
    /// size limits.
    func command(_ arguments: [[UInt8]]) throws(TickgateError) -> RedisReply {
        guard !broken else { throw brokenError }
        let count = arguments.count
        let link = self.link
        var sent: Int32 = 0
        let reply = withArrayOfPointers(arguments) { pointers, lengths in
            tgshim_link_command(link, Int32(count), pointers, lengths, &sent)
        }
        delivered = sent != 0
        guard let reply else { throw failure() }
        return try copy(reply)
    }

    /// Sends several commands at once and reads their replies: one round
    /// trip.
    func pipeline(_ commands: [[[UInt8]]]) throws(TickgateError) -> [RedisReply] {
        try sendAll(commands)
        return try receive(commands.count)
    }

    /// The first half of `pipeline`: sends the commands, reads nothing (so
    /// several connections can wait for their replies at once).
    func sendAll(_ commands: [[[UInt8]]]) throws(TickgateError) {
        guard !broken else { throw brokenError }
        let link = self.link
        for arguments in commands {
            let count = arguments.count
            let queued = withArrayOfPointers(arguments) { pointers, lengths in
                tgshim_link_append(link, Int32(count), pointers, lengths)
            }
            guard queued == 0 else { throw failure() }
        }
        delivered = false
        guard tgshim_link_flush(link) == 0 else { throw failure() }
        delivered = true
    }

    /// The second half of `pipeline`: the replies of `count` commands sent.
    func receive(_ count: Int) throws(TickgateError) -> [RedisReply] {
        guard !broken else { throw brokenError }
        let link = self.link
        var replies: [RedisReply] = []
        for _ in 0..<count {
            guard let reply = tgshim_link_read(link) else { throw failure() }
            replies.append(try copy(reply))
        }
        return replies
    }

    /// The next reply of the commands sent, if it begins within `wait`
    /// (the rest of it comes by the call's deadline); nil if none began (the
    /// connection stays usable): a pipeline's driver then writes the
    /// requests queued meanwhile.
    func receive(beginningWithin wait: Span) throws(TickgateError) -> RedisReply? {
        guard !broken else { throw brokenError }
        var timedOut: Int32 = 0
        guard let reply = tgshim_link_read_within(link, max(1, wait.millisecondsRoundedUp), &timedOut) else {
            if timedOut != 0 { return nil }
            throw failure()
        }
        return try copy(reply)
    }

    private var brokenError: TickgateError {
        TickgateError(.storeIO, "the connection to \(address.description) is broken", store: .unreachable)
    }

    /// The error of a failed read or write; the connection is broken.
    private func failure() -> TickgateError {
        broken = true
        let kind = Self.kind(tgshim_link_error(link), tgshim_link_errno(link))
        switch kind {
        case .timeout:
            return TickgateError(.storeIO, "the Redis server \(address.description) did not answer within the store timeout",
                                 store: .timeout)
        case .auth:
            return TickgateError(.storeIO, "the TLS link to the Redis server \(address.description) failed: \(Self.errorText(link))",
                                 store: .auth)
        case .corrupt:
            return TickgateError(.storeCorrupt,
                "the Redis server \(address.description) sent what is not Redis's protocol: \(Self.errorText(link))",
                store: .corrupt)
        default:
            return TickgateError(.storeIO, "lost the Redis server \(address.description): \(Self.errorText(link))",
                                 store: kind)
        }
    }

    private func copy(_ reply: UnsafeMutablePointer<redisReply>) throws(TickgateError) -> RedisReply {
        defer { freeReplyObject(reply) }
        guard let copied = RedisReply(reply) else {
            broken = true
            throw TickgateError(.storeCorrupt, "the Redis server \(address.description) sent a reply past Tickgate's limits",
                                store: .corrupt)
        }
        return copied
    }

    /// Marks the connection unusable (its server turned read-only: it is
    /// closed rather than reused).
    func discard() { broken = true }

    /// True if the idle connection was closed by the server (or holds data
    /// nobody asked for): it must not be used.
    var isStale: Bool { tgshim_link_stale(link) != 0 }

    /// The connection's socket, for `shutdown` from another thread.
    var descriptor: Int32 { tgshim_link_fd(link) }

    /// Sends a command without reading its reply (a subscriber's PING).
    func send(_ arguments: [[UInt8]]) throws(TickgateError) {
        guard !broken else { throw brokenError }
        let count = arguments.count
        let link = self.link
        let queued = withArrayOfPointers(arguments) { pointers, lengths in
            tgshim_link_append(link, Int32(count), pointers, lengths)
        }
        guard queued == 0, tgshim_link_flush(link) == 0 else { throw failure() }
    }

    /// Reads the next reply with no command sent (a subscriber's message),
    /// waiting at most `wait`; nil if none came in that time (the
    /// connection stays usable).
    func read(within wait: Span) throws(TickgateError) -> RedisReply? {
        guard !broken else { throw brokenError }
        let milliseconds = max(1, wait.millisecondsRoundedUp)
        if milliseconds != timeoutMilliseconds {
            timeoutMilliseconds = milliseconds
            tgshim_link_set_timeout(link, milliseconds)
        }
        var timedOut: Int32 = 0
        guard let reply = tgshim_link_read_within(link, milliseconds, &timedOut) else {
            if timedOut != 0 { return nil }
            throw failure()
        }
        return try copy(reply)
    }
}

/// Calls `body` with a C string of `text`, or nil.
private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
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
