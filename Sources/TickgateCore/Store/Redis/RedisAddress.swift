/// Where a Redis store lives, parsed from its URL:
///
///     redis://[[user]:password@]host[:port][/db]
///     redis+unix://[[user]:password@]/path/to/redis.sock[?db=N]
///
/// A host may be a name, an IPv4 address or a bracketed IPv6 address;
/// user and password may be percent-encoded. `description` names the
/// server in messages, without the password.
struct RedisAddress: Equatable, Sendable {
    enum Endpoint: Equatable, Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    var endpoint: Endpoint
    var user: String?
    var password: String?
    var database: Int

    /// The server as messages name it ("redis://10.0.0.5:6379/2").
    var description: String {
        let login = user.map { "\($0)@" } ?? ""
        switch endpoint {
        case let .tcp(host, port):
            let shown = host.contains(":") ? "[\(host)]" : host
            return "redis://\(login)\(shown):\(port)/\(database)"
        case let .unix(path):
            return "redis+unix://\(login)\(path)" + (database == 0 ? "" : "?db=\(database)")
        }
    }

    static let maximumURLBytes = 4_096

    init(endpoint: Endpoint, user: String? = nil, password: String? = nil, database: Int = 0) {
        self.endpoint = endpoint
        self.user = user
        self.password = password
        self.database = database
    }

    init(parsing url: String) throws(TickgateError) {
        func bad(_ why: String) -> TickgateError {
            TickgateError(.invalidArgument,
                "options.store_url is not a Redis URL (\(why)): use redis://[user:password@]host[:port][/db] or redis+unix:///path/to/redis.sock")
        }
        guard url.utf8.count <= Self.maximumURLBytes else { throw bad("longer than \(Self.maximumURLBytes) bytes") }
        guard !url.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) else {
            throw bad("it holds a blank or a control character")
        }
        var rest: Substring
        let isUnix: Bool
        if url.hasPrefix("redis://") {
            rest = url.dropFirst("redis://".count)
            isUnix = false
        } else if url.hasPrefix("redis+unix://") {
            rest = url.dropFirst("redis+unix://".count)
            isUnix = true
        } else {
            throw bad("it starts with neither redis:// nor redis+unix://")
        }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let login = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = login.firstIndex(of: ":") {
                let name = login[..<colon]
                user = name.isEmpty ? nil : try Self.decoded(name, bad)
                password = try Self.decoded(login[login.index(after: colon)...], bad)
            } else {
                user = try Self.decoded(login, bad)
            }
        }
        var database = 0
        if isUnix {
            var path = rest
            if let question = rest.firstIndex(of: "?") {
                path = rest[..<question]
                let query = rest[rest.index(after: question)...]
                guard query.hasPrefix("db=") else { throw bad("the only query it takes is ?db=N") }
                database = try Self.number(query.dropFirst(3), upTo: Int(Int32.max), "database", bad)
            }
            guard path.hasPrefix("/"), path.count > 1 else { throw bad("the socket path is not absolute") }
            guard path.utf8.count < 108 else { throw bad("the socket path is longer than 107 bytes") }
            self.init(endpoint: .unix(path: String(path)), user: user, password: password, database: database)
            return
        }
        var hostPort = rest
        if let slash = rest.firstIndex(of: "/") {
            hostPort = rest[..<slash]
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty { database = try Self.number(db, upTo: Int(Int32.max), "database", bad) }
        }
        var host: Substring
        var port = 6379
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw bad("an IPv6 address lacks its ]") }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("text follows the IPv6 address") }
                port = try Self.number(after.dropFirst(), upTo: 65_535, "port", bad)
            }
        } else if let colon = hostPort.firstIndex(of: ":") {
            host = hostPort[..<colon]
            port = try Self.number(hostPort[hostPort.index(after: colon)...], upTo: 65_535, "port", bad)
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw bad("no host") }
        guard port > 0 else { throw bad("port 0") }
        guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:_".contains($0)) }) else {
            throw bad("the host holds a character a host name cannot")
        }
        self.init(endpoint: .tcp(host: String(host), port: port), user: user, password: password,
                  database: database)
    }

    private static func number(_ text: Substring, upTo limit: Int, _ what: String,
                               _ bad: (String) -> TickgateError) throws(TickgateError) -> Int {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }),
              let value = Int(text), value <= limit else {
            throw bad("the \(what) is not a number from 0 to \(limit)")
        }
        return value
    }

    /// Percent-decodes a user or password.
    private static func decoded(_ text: Substring, _ bad: (String) -> TickgateError) throws(TickgateError) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else {
                throw bad("a % is not followed by two hex digits")
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self), !decoded.contains("\0") else {
            throw bad("the user or password is not valid UTF-8")
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
