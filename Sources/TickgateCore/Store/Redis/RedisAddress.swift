/// One Redis server to connect to: where it is, how to log in, which
/// database, and whether the link is TLS. `description` names the server
/// in messages, without the password.
struct RedisAddress: Equatable, Sendable {
    enum Endpoint: Equatable, Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)

        /// "host:port" ("[::1]:6379"), or the socket's path.
        var description: String {
            switch self {
            case let .tcp(host, port): (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
            case let .unix(path): path
            }
        }
    }

    /// TLS settings (`rediss://`): the certificates that vouch for the
    /// server (a CA file, a folder of hashed CA certificates, or neither:
    /// the system's), the client's own certificate and key if the server
    /// asks for one, and the name the server's certificate must carry (by
    /// default the host of the URL). The server is always verified.
    struct TLS: Equatable, Sendable {
        var caFile: String?
        var caDirectory: String?
        var certificateFile: String?
        var keyFile: String?
        var serverName: String?
    }

    var endpoint: Endpoint
    var user: String?
    var password: String?
    var database: Int
    var tls: TLS?

    /// The server as messages name it ("redis://10.0.0.5:6379/2").
    var description: String {
        let login = user.map { "\($0)@" } ?? ""
        switch endpoint {
        case .tcp:
            return (tls == nil ? "redis://" : "rediss://") + login + endpoint.description + "/\(database)"
        case let .unix(path):
            return "redis+unix://\(login)\(path)" + (database == 0 ? "" : "?db=\(database)")
        }
    }

    init(endpoint: Endpoint, user: String? = nil, password: String? = nil, database: Int = 0, tls: TLS? = nil) {
        self.endpoint = endpoint
        self.user = user
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// The same login, database and TLS settings at another server (a
    /// primary that Sentinel named).
    func at(_ endpoint: Endpoint) -> RedisAddress {
        var moved = self
        moved.endpoint = endpoint
        return moved
    }
}

/// A Redis store's URL, parsed: one server, or the Sentinels that name a
/// service's primary, and the options every form takes.
///
///     redis://[[user]:password@]host[:port][/db][?options]
///     rediss://[[user]:password@]host[:port][/db][?options]          (TLS)
///     redis+unix://[[user]:password@]/path/to/redis.sock[?db=N&options]
///     redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?options]
///     rediss+sentinel://...                       (TLS to Sentinels and primary)
///     redis+cluster://[[user]:password@]host:port[,host:port...][?options]
///     rediss+cluster://...                        (TLS to every node)
///
/// Options: `tls_ca_cert_file`, `tls_ca_cert_dir`, `tls_cert_file`,
/// `tls_key_file`, `tls_server_name` (TLS forms only); `sentinel_user`,
/// `sentinel_password` (Sentinel forms only: the Sentinels' own login; the
/// login before `@` is the primary's); `replicas` (0 to 16: a change is
/// acknowledged only once that many replicas hold it) and
/// `replica_timeout_ms` (how long to wait for them; default: the rest of
/// the call's store timeout). A host may be a name, an IPv4 address or a
/// bracketed IPv6 address; user, password and option values may be
/// percent-encoded.
struct RedisURL: Equatable, Sendable {
    /// The server (for Sentinel: the primary's login, database and TLS;
    /// its endpoint is the first Sentinel's until one names the primary).
    var server: RedisAddress
    /// The Sentinels (empty: `server` is the store).
    var sentinels: [RedisAddress] = []
    /// The service (Sentinel's "master name").
    var service = ""
    /// A Redis Cluster's nodes to ask for its slot map first (empty: not
    /// a cluster).
    var cluster: [RedisAddress] = []
    /// Replicas that must hold every change before it is acknowledged.
    var replicas = 0
    /// How long a change waits for them (nil: the rest of the call).
    var replicaTimeout: Span?

    static let maximumURLBytes = 4_096
    static let maximumReplicas = 16
    static let maximumSentinels = 16
    static let maximumSeeds = 64

    /// The store as messages name it.
    var description: String {
        if !cluster.isEmpty {
            let login = server.user.map { "\($0)@" } ?? ""
            return (server.tls == nil ? "redis+cluster://" : "rediss+cluster://") + login
                + cluster.map(\.endpoint.description).joined(separator: ",")
        }
        guard !sentinels.isEmpty else { return server.description }
        let login = server.user.map { "\($0)@" } ?? ""
        return (server.tls == nil ? "redis+sentinel://" : "rediss+sentinel://") + login
            + sentinels.map(\.endpoint.description).joined(separator: ",") + "/\(service)/\(server.database)"
    }

    init(server: RedisAddress) { self.server = server }

    init(parsing url: String) throws(TickgateError) {
        func bad(_ why: String) -> TickgateError {
            TickgateError(.invalidArgument,
                "options.store_url is not a Redis URL (\(why)): use redis://[user:password@]host[:port][/db], rediss://... (TLS), redis+unix:///path/to/redis.sock, redis+sentinel://[user:password@]host:port[,host:port...]/service[/db] or redis+cluster://[user:password@]host:port[,host:port...]")
        }
        guard url.utf8.count <= Self.maximumURLBytes else { throw bad("longer than \(Self.maximumURLBytes) bytes") }
        guard !url.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) else {
            throw bad("it holds a blank or a control character")
        }
        enum Form { case tcp, unix, sentinel, cluster }
        let schemes: [(String, Form, Bool)] = [
            ("redis://", .tcp, false), ("rediss://", .tcp, true), ("redis+unix://", .unix, false),
            ("redis+sentinel://", .sentinel, false), ("rediss+sentinel://", .sentinel, true),
            ("redis+cluster://", .cluster, false), ("rediss+cluster://", .cluster, true),
        ]
        guard let (scheme, form, tls) = schemes.first(where: { url.hasPrefix($0.0) }) else {
            throw bad("it starts with none of redis://, rediss://, redis+unix://, redis+sentinel://, rediss+sentinel://, redis+cluster://, rediss+cluster://")
        }
        var rest = url.dropFirst(scheme.count)
        // Options, after the first "?".
        var options: [(String, String)] = []
        if let question = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false) {
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw bad("the option \"\(pair.prefix(40))\" is not name=value")
                }
                let name = String(pair[..<equals])
                guard !options.contains(where: { $0.0 == name }) else { throw bad("the option \(name.prefix(40)) is given twice") }
                options.append((name, try Self.decoded(pair[pair.index(after: equals)...], bad)))
            }
            rest = rest[..<question]
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
        var replicas = 0
        var replicaTimeout: Span?
        var tlsSettings: RedisAddress.TLS? = tls ? RedisAddress.TLS() : nil
        var sentinelUser: String?
        var sentinelPassword: String?
        for (name, value) in options {
            func file() throws(TickgateError) -> String {
                guard tls else { throw bad("\(name) needs a TLS form: rediss://, rediss+sentinel:// or rediss+cluster://") }
                guard !value.isEmpty, value.utf8.count < 4_096 else { throw bad("\(name) is empty") }
                return value
            }
            switch name {
            case "db" where form == .unix:
                database = try Self.number(Substring(value), upTo: Int(Int32.max), "database", bad)
            // (file() first: an optional chain would skip it on a plain form.)
            case "tls_ca_cert_file":
                let value = try file()
                tlsSettings?.caFile = value
            case "tls_ca_cert_dir":
                let value = try file()
                tlsSettings?.caDirectory = value
            case "tls_cert_file":
                let value = try file()
                tlsSettings?.certificateFile = value
            case "tls_key_file":
                let value = try file()
                tlsSettings?.keyFile = value
            case "tls_server_name":
                let value = try file()
                guard value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-_:".contains($0)) }) else {
                    throw bad("tls_server_name holds a character a host name cannot")
                }
                tlsSettings?.serverName = value
            case "sentinel_user", "sentinel_password":
                guard form == .sentinel else { throw bad("\(name) is for the Sentinel forms only") }
                if name == "sentinel_user" { sentinelUser = value } else { sentinelPassword = value }
            case "replicas":
                replicas = try Self.number(Substring(value), upTo: Self.maximumReplicas, "replicas", bad)
            case "replica_timeout_ms":
                let milliseconds = try Self.number(Substring(value), upTo: Int(Limits.maximumDuration.nanoseconds / 1_000_000),
                                                   "replica_timeout_ms", bad)
                guard milliseconds > 0 else { throw bad("replica_timeout_ms is 0") }
                replicaTimeout = .milliseconds(Int64(milliseconds))
            default:
                throw bad("unknown option \"\(name.prefix(40))\"")
            }
        }
        if let tlsSettings, (tlsSettings.certificateFile == nil) != (tlsSettings.keyFile == nil) {
            throw bad("tls_cert_file and tls_key_file go together")
        }
        switch form {
        case .unix:
            guard rest.hasPrefix("/"), rest.count > 1 else { throw bad("the socket path is not absolute") }
            guard rest.utf8.count < 108 else { throw bad("the socket path is longer than 107 bytes") }
            self.init(server: RedisAddress(endpoint: .unix(path: String(rest)), user: user, password: password,
                                           database: database))
        case .tcp:
            var hostPort = rest
            if let slash = rest.firstIndex(of: "/") {
                hostPort = rest[..<slash]
                let db = rest[rest.index(after: slash)...]
                if !db.isEmpty { database = try Self.number(db, upTo: Int(Int32.max), "database", bad) }
            }
            self.init(server: RedisAddress(endpoint: try Self.endpoint(hostPort, bad), user: user, password: password,
                                           database: database, tls: tlsSettings))
        case .sentinel:
            let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count >= 2, parts.count <= 3, !parts[1].isEmpty else {
                throw bad("a Sentinel URL names its service: redis+sentinel://host:port[,host:port...]/service[/db]")
            }
            guard parts[1].utf8.count <= 256,
                  parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-_".contains($0)) }) else {
                throw bad("the service name holds a character other than letters, digits, '.', '-' and '_'")
            }
            if parts.count == 3, !parts[2].isEmpty {
                database = try Self.number(parts[2], upTo: Int(Int32.max), "database", bad)
            }
            let hosts = parts[0].split(separator: ",", omittingEmptySubsequences: false)
            guard hosts.count <= Self.maximumSentinels else { throw bad("more than \(Self.maximumSentinels) Sentinels") }
            var sentinels: [RedisAddress] = []
            for host in hosts {
                let endpoint = try Self.endpoint(host, bad, defaultPort: 26_379)
                var sentinelTLS = tlsSettings
                sentinelTLS?.serverName = nil
                sentinels.append(RedisAddress(endpoint: endpoint, user: sentinelUser, password: sentinelPassword,
                                              tls: sentinelTLS))
            }
            self.init(server: RedisAddress(endpoint: sentinels[0].endpoint, user: user, password: password,
                                           database: database, tls: tlsSettings))
            self.sentinels = sentinels
            service = String(parts[1])
        case .cluster:
            // A cluster has one database (0): no /db.
            guard !rest.contains("/") else { throw bad("a cluster URL names no database: redis+cluster://host:port[,host:port...]") }
            let hosts = rest.split(separator: ",", omittingEmptySubsequences: false)
            guard hosts.count <= Self.maximumSeeds else { throw bad("more than \(Self.maximumSeeds) cluster nodes") }
            var seeds: [RedisAddress] = []
            for host in hosts {
                seeds.append(RedisAddress(endpoint: try Self.endpoint(host, bad), user: user, password: password,
                                          tls: tlsSettings))
            }
            self.init(server: seeds[0])
            cluster = seeds
        }
        self.replicas = replicas
        self.replicaTimeout = replicaTimeout
    }

    private static func endpoint(_ hostPort: Substring, _ bad: (String) -> TickgateError,
                                 defaultPort: Int = 6379) throws(TickgateError) -> RedisAddress.Endpoint {
        var host: Substring
        var port = defaultPort
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
        return .tcp(host: String(host), port: port)
    }

    private static func number(_ text: Substring, upTo limit: Int, _ what: String,
                               _ bad: (String) -> TickgateError) throws(TickgateError) -> Int {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }),
              let value = Int(text), value <= limit else {
            throw bad("the \(what) is not a number from 0 to \(limit)")
        }
        return value
    }

    /// Percent-decodes a user, password or option value.
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
            throw bad("a user, password or option is not valid UTF-8")
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
