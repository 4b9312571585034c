import CTickgateShim
import Glibc

/// A moment as the store keeps it: the boot it happened in, the boot clock
/// (CLOCK_BOOTTIME) and the wall clock, all in nanoseconds. Within one boot
/// the boot clock is the truth; across a reboot only the wall clock is
/// left, and the engine never trusts it for more than a countdown's length.
struct Stamp: Equatable {
    var bootID: String
    var boot: Int64
    var wall: Int64
}

/// A countdown row.
struct StoredCountdown {
    var scope: String
    var subject: String
    var phase: Int64          // 0 sending, 1 cooling, 2 locked
    var duration: Int64
    var tickInterval: Int64
    var deadline: Stamp
}

/// A send-history row.
struct StoredRecord {
    var scope: String
    var subject: String
    var consecutive: Int64
    var hasSent: Bool
    var lastSend: Stamp?
    var sends: [Stamp]
}

struct StoredSession {
    var realm: String
    var expiry: Stamp?
    /// The session's length, which caps it across a reboot.
    var ttl: Int64
}

/// The engine's SQLite store: one file, WAL mode, shared safely by several
/// processes. Used only under the engine's lock.
final class Store {
    static let schemaVersion: Int64 = 2
    /// Schema steps: entry i takes a store from version i to i + 1.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE countdowns(scope TEXT NOT NULL, subject TEXT NOT NULL,
                phase INTEGER NOT NULL, duration_ns INTEGER NOT NULL, tick_ns INTEGER NOT NULL,
                boot_id TEXT NOT NULL, boot_deadline_ns INTEGER NOT NULL,
                wall_deadline_ns INTEGER NOT NULL, PRIMARY KEY(scope, subject)) WITHOUT ROWID
            """,
            """
            CREATE TABLE send_records(scope TEXT NOT NULL, subject TEXT NOT NULL,
                consecutive INTEGER NOT NULL, has_sent INTEGER NOT NULL,
                last_send TEXT, sends TEXT NOT NULL, PRIMARY KEY(scope, subject)) WITHOUT ROWID
            """,
            """
            CREATE TABLE policies(scope TEXT PRIMARY KEY NOT NULL, cooldowns_ms TEXT NOT NULL,
                window_max_sends INTEGER NOT NULL, window_ms INTEGER NOT NULL,
                quiet_reset_ms INTEGER NOT NULL, ticket_timeout_ms INTEGER NOT NULL) WITHOUT ROWID
            """,
            """
            CREATE TABLE titles(scope TEXT PRIMARY KEY NOT NULL, idle TEXT NOT NULL,
                sending TEXT NOT NULL, cooling TEXT NOT NULL, ready_again TEXT NOT NULL,
                locked TEXT NOT NULL) WITHOUT ROWID
            """,
            """
            CREATE TABLE sessions(realm TEXT PRIMARY KEY NOT NULL, logged_in INTEGER NOT NULL,
                expiry TEXT) WITHOUT ROWID
            """,
        ],
        // 2: a session's TTL, which caps it across a reboot (0: unknown).
        [
            "ALTER TABLE sessions ADD COLUMN ttl_ns INTEGER NOT NULL DEFAULT 0",
        ],
    ]

    private let db: OpaquePointer
    let path: String
    private var statements: [String: OpaquePointer] = [:]
    private(set) var inTransaction = false

    /// Opens the store at `path`; a corrupt one is moved aside and replaced
    /// by a new one if `startFreshIfCorrupt`, else refused.
    static func open(path: String, startFreshIfCorrupt: Bool,
                     fullSync: Bool) throws(TickgateError) -> Store {
        do {
            return try Store(path: path, fullSync: fullSync)
        } catch {
            guard error.status == .storeCorrupt, startFreshIfCorrupt else { throw error }
            _ = try moveAside(path)
            return try Store(path: path, fullSync: fullSync)
        }
    }

    /// Opens (creating it 0600 if missing), checks and migrates the store.
    private init(path: String, fullSync: Bool) throws(TickgateError) {
        self.path = path
        let link = path.withCString { tgshim_is_symlink($0) }
        if link == 1 {
            throw TickgateError(.storeIO, "the store path \(path) is a symbolic link; refusing to follow it")
        }
        let created = path.withCString { tgshim_create_private_file($0) }
        if created != 0 && created != EEXIST {
            throw TickgateError(.storeIO, "cannot create the store \(path): \(Store.describe(errno: created))")
        }
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_FULLMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw TickgateError(.storeIO, "cannot open the store \(path): \(message)")
        }
        db = handle
        sqlite3_busy_timeout(db, 5_000)
        // On a throw from here on, deinit closes the database.
        try configure(fullSync: fullSync)
        try migrate()
    }

    deinit {
        let moved = hasMoved
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(db)
        if moved {
            // Our WAL and shared-memory files still sit next to whatever is
            // at the path now; left there, the next open would replay our
            // pages over that file.
            unlink(path + "-wal")
            unlink(path + "-shm")
        }
    }

    /// Moves a corrupt store (and its WAL and SHM files) aside under a
    /// timestamped name; returns the new name.
    static func moveAside(_ path: String) throws(TickgateError) -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let stamp = "\(Int(parts.tm_year) + 1900)" + two(parts.tm_mon + 1) + two(parts.tm_mday)
            + "-" + two(parts.tm_hour) + two(parts.tm_min) + two(parts.tm_sec)
        var target = "\(path).corrupt-\(stamp)"
        var attempt = 1
        while access(target, F_OK) == 0 {
            attempt += 1
            target = "\(path).corrupt-\(stamp)-\(attempt)"
        }
        guard rename(path, target) == 0 else {
            throw TickgateError(.storeIO, "cannot move the corrupt store \(path) aside: \(describe(errno: errno))")
        }
        for suffix in ["-wal", "-shm"] { _ = rename(path + suffix, target + suffix) }
        return target
    }

    private static func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }

    static func describe(errno code: Int32) -> String {
        String(cString: strerror(code)) + " (errno \(code))"
    }

    private func configure(fullSync: Bool) throws(TickgateError) {
        // Refuse a newer store before changing anything in it (even its
        // journal mode).
        let version = try scalarInt("PRAGMA user_version") ?? 0
        if version > Store.schemaVersion {
            throw TickgateError(.storeVersion,
                "the store \(path) has schema version \(version); this library knows up to \(Store.schemaVersion)")
        }
        try execute("PRAGMA journal_mode=WAL")
        try execute(fullSync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
        let check = try scalarText("PRAGMA quick_check")
        guard check == "ok" else {
            throw TickgateError(.storeCorrupt, "the store \(path) is corrupt: \(check ?? "no answer")")
        }
    }

    private func migrate() throws(TickgateError) {
        let version = try scalarInt("PRAGMA user_version") ?? 0
        if version > Store.schemaVersion {
            throw TickgateError(.storeVersion,
                "the store \(path) has schema version \(version); this library knows up to \(Store.schemaVersion)")
        }
        if version < 0 {
            throw TickgateError(.storeCorrupt, "the store \(path) has schema version \(version)")
        }
        guard version < Store.schemaVersion else { return }
        try execute("BEGIN IMMEDIATE")
        do {
            // Another process may have migrated while we waited for the lock.
            var current = try scalarInt("PRAGMA user_version") ?? 0
            while current < Store.schemaVersion {
                for sql in Store.migrations[Int(current)] { try execute(sql) }
                current += 1
                try execute("PRAGMA user_version=\(current)")
            }
            try execute("COMMIT")
        } catch {
            _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    // MARK: Transactions

    func begin() throws(TickgateError) {
        guard !inTransaction else { return }
        if hasMoved {
            throw TickgateError(.storeIO,
                "the store file \(path) was deleted or replaced while open; nothing more is written to it")
        }
        try execute("BEGIN IMMEDIATE")
        inTransaction = true
    }

    /// Whether the file at `path` is no longer the one this connection has
    /// open (deleted, or replaced by a rename).
    var hasMoved: Bool {
        var moved: Int32 = 0
        let rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved)
        return rc == SQLITE_OK && moved != 0
    }

    func commit() throws(TickgateError) {
        guard inTransaction else { return }
        do {
            try execute("COMMIT")
            inTransaction = false
        } catch {
            _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            inTransaction = false
            throw error
        }
    }

    func savepoint() throws(TickgateError) { try execute("SAVEPOINT operation") }
    func release() throws(TickgateError) { try execute("RELEASE operation") }

    func rollbackToSavepoint() {
        _ = sqlite3_exec(db, "ROLLBACK TO operation", nil, nil, nil)
        _ = sqlite3_exec(db, "RELEASE operation", nil, nil, nil)
    }

    func rollback() {
        guard inTransaction else { return }
        _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
        inTransaction = false
    }

    // MARK: Countdowns

    func save(_ row: StoredCountdown) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO countdowns(scope, subject, phase, duration_ns, tick_ns,
                boot_id, boot_deadline_ns, wall_deadline_ns) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(row.scope), .text(row.subject), .int(row.phase), .int(row.duration),
                  .int(row.tickInterval), .text(row.deadline.bootID), .int(row.deadline.boot),
                  .int(row.deadline.wall)])
    }

    func deleteCountdown(scope: String, subject: String) throws(TickgateError) {
        try run("DELETE FROM countdowns WHERE scope = ? AND subject = ?", [.text(scope), .text(subject)])
    }

    func deleteCountdowns(scope: String?) throws(TickgateError) {
        if let scope {
            try run("DELETE FROM countdowns WHERE scope = ?", [.text(scope)])
        } else {
            try run("DELETE FROM countdowns", [])
        }
    }

    func countdown(scope: String, subject: String) throws(TickgateError) -> StoredCountdown? {
        try countdowns(where: "WHERE scope = ? AND subject = ?", [.text(scope), .text(subject)]).first
    }

    func countdowns(where clause: String = "", _ values: [Value] = []) throws(TickgateError) -> [StoredCountdown] {
        var rows: [StoredCountdown] = []
        try query("""
            SELECT scope, subject, phase, duration_ns, tick_ns, boot_id, boot_deadline_ns,
                wall_deadline_ns FROM countdowns \(clause)
            """, values) { row in
            rows.append(StoredCountdown(
                scope: row.text(0), subject: row.text(1), phase: row.int(2), duration: row.int(3),
                tickInterval: row.int(4),
                deadline: Stamp(bootID: row.text(5), boot: row.int(6), wall: row.int(7))))
        }
        return rows
    }

    // MARK: Send records

    func save(_ record: StoredRecord) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO send_records(scope, subject, consecutive, has_sent, last_send, sends)
            VALUES(?, ?, ?, ?, ?, ?)
            """, [.text(record.scope), .text(record.subject), .int(record.consecutive),
                  .int(record.hasSent ? 1 : 0), record.lastSend.map { .text(Store.encode($0)) } ?? .null,
                  .text(record.sends.map(Store.encode).joined(separator: "\n"))])
    }

    func deleteRecord(scope: String, subject: String) throws(TickgateError) {
        try run("DELETE FROM send_records WHERE scope = ? AND subject = ?", [.text(scope), .text(subject)])
    }

    func record(scope: String, subject: String) throws(TickgateError) -> StoredRecord? {
        try records(where: "WHERE scope = ? AND subject = ?", [.text(scope), .text(subject)]).first
    }

    func records(where clause: String = "", _ values: [Value] = []) throws(TickgateError) -> [StoredRecord] {
        var rows: [StoredRecord] = []
        try query("SELECT scope, subject, consecutive, has_sent, last_send, sends FROM send_records \(clause)",
                  values) { row in
            rows.append(StoredRecord(
                scope: row.text(0), subject: row.text(1), consecutive: row.int(2),
                hasSent: row.int(3) != 0, lastSend: row.isNull(4) ? nil : Store.decode(row.text(4)),
                sends: row.text(5).split(separator: "\n").compactMap { Store.decode(String($0)) }))
        }
        return rows
    }

    // MARK: Policies, titles, sessions

    func save(policy: SendPolicy, scope: String) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO policies(scope, cooldowns_ms, window_max_sends, window_ms,
                quiet_reset_ms, ticket_timeout_ms) VALUES(?, ?, ?, ?, ?, ?)
            """, [.text(scope),
                  .text(policy.cooldowns.map { String($0.millisecondsRoundedUp) }.joined(separator: ",")),
                  .int(Int64(policy.windowMaximumSends)), .int(policy.window.millisecondsRoundedUp),
                  .int(policy.quietReset.millisecondsRoundedUp),
                  .int(policy.ticketTimeout.millisecondsRoundedUp)])
    }

    func policies() throws(TickgateError) -> [(String, SendPolicy)] {
        var rows: [(String, SendPolicy)] = []
        try query("""
            SELECT scope, cooldowns_ms, window_max_sends, window_ms, quiet_reset_ms, ticket_timeout_ms
            FROM policies
            """, []) { row in
            let steps = row.text(1).split(separator: ",").compactMap { Int64($0) }.map(Span.milliseconds)
            let policy = SendPolicy(cooldowns: steps, windowMaximumSends: Int(clamping: row.int(2)),
                                    window: .milliseconds(row.int(3)), quietReset: .milliseconds(row.int(4)),
                                    ticketTimeout: .milliseconds(row.int(5)))
            // A row another version wrote badly is skipped, not trusted.
            if let valid = try? policy.validated() { rows.append((row.text(0), valid)) }
        }
        return rows
    }

    func save(titles: TitleSet, scope: String) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO titles(scope, idle, sending, cooling, ready_again, locked)
            VALUES(?, ?, ?, ?, ?, ?)
            """, [.text(scope), .text(titles.idle.source), .text(titles.sending.source),
                  .text(titles.cooling.source), .text(titles.readyAgain.source), .text(titles.locked.source)])
    }

    func titles() throws(TickgateError) -> [(String, TitleSet)] {
        var rows: [(String, TitleSet)] = []
        try query("SELECT scope, idle, sending, cooling, ready_again, locked FROM titles", []) { row in
            if let idle = try? TitleTemplate(row.text(1), role: "idle"),
               let sending = try? TitleTemplate(row.text(2), role: "sending"),
               let cooling = try? TitleTemplate(row.text(3), role: "cooling"),
               let ready = try? TitleTemplate(row.text(4), role: "ready_again"),
               let locked = try? TitleTemplate(row.text(5), role: "locked") {
                rows.append((row.text(0), TitleSet(idle: idle, sending: sending, cooling: cooling,
                                                   readyAgain: ready, locked: locked)))
            }
        }
        return rows
    }

    func save(_ session: StoredSession?, realm: String) throws(TickgateError) {
        try run("INSERT OR REPLACE INTO sessions(realm, logged_in, expiry, ttl_ns) VALUES(?, ?, ?, ?)",
                [.text(realm), .int(session == nil ? 0 : 1),
                 session?.expiry.map { .text(Store.encode($0)) } ?? .null, .int(session?.ttl ?? 0)])
    }

    func sessions() throws(TickgateError) -> [StoredSession] {
        var rows: [StoredSession] = []
        try query("SELECT realm, expiry, ttl_ns FROM sessions WHERE logged_in = 1", []) { row in
            rows.append(StoredSession(realm: row.text(0),
                                      expiry: row.isNull(1) ? nil : Store.decode(row.text(1)),
                                      ttl: row.int(2)))
        }
        return rows
    }

    // MARK: Stamps as text

    // "BOOT/WALL/BOOT_ID": the id goes last, whatever it holds; a list of
    // stamps is one stamp per line (boot ids have no line breaks).
    static func encode(_ stamp: Stamp) -> String { "\(stamp.boot)/\(stamp.wall)/\(stamp.bootID)" }

    static func decode(_ text: String) -> Stamp? {
        let parts = text.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let boot = Int64(parts[0]), let wall = Int64(parts[1]) else { return nil }
        return Stamp(bootID: String(parts[2]), boot: boot, wall: wall)
    }

    // MARK: SQL

    enum Value {
        case int(Int64)
        case text(String)
        case null
    }

    struct Row {
        let statement: OpaquePointer
        func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
        func text(_ column: Int32) -> String {
            guard let bytes = sqlite3_column_text(statement, column) else { return "" }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }
    }

    private func error(_ rc: Int32, _ what: String) -> TickgateError {
        let message = String(cString: sqlite3_errmsg(db))
        let primary = rc & 0xFF
        let status: Status = primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB ? .storeCorrupt : .storeIO
        return TickgateError(status, "store \(path): \(what): \(message) (SQLite code \(rc))")
    }

    private func execute(_ sql: String) throws(TickgateError) {
        var rc = sqlite3_exec(db, sql, nil, nil, nil)
        // Some statements (switching the journal mode while another process
        // creates the store) report BUSY without consulting the busy
        // handler: wait for them the same 5 s.
        var waited = 0
        while rc & 0xFF == SQLITE_BUSY && waited < 5_000 {
            usleep(10_000)
            waited += 10
            rc = sqlite3_exec(db, sql, nil, nil, nil)
        }
        guard rc == SQLITE_OK else { throw error(rc, sql.split(separator: " ").first.map(String.init) ?? sql) }
    }

    private func prepared(_ sql: String) throws(TickgateError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw error(rc, "prepare") }
        statements[sql] = statement
        return statement
    }

    private func bind(_ statement: OpaquePointer, _ values: [Value]) throws(TickgateError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .int(let number): rc = sqlite3_bind_int64(statement, index, number)
            case .null: rc = sqlite3_bind_null(statement, index)
            case .text(let text):
                rc = text.withCString { tgshim_sqlite_bind_text(statement, index, $0, -1) }
            }
            guard rc == SQLITE_OK else { throw error(rc, "bind") }
        }
    }

    private func run(_ sql: String, _ values: [Value]) throws(TickgateError) {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        try bind(statement, values)
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_DONE else { throw error(rc, "write") }
    }

    private func query(_ sql: String, _ values: [Value], _ each: (Row) -> Void) throws(TickgateError) {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        try bind(statement, values)
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw error(rc, "read") }
            each(Row(statement: statement))
        }
    }

    private func scalarInt(_ sql: String) throws(TickgateError) -> Int64? {
        var result: Int64?
        try query(sql, []) { result = $0.int(0) }
        return result
    }

    private func scalarText(_ sql: String) throws(TickgateError) -> String? {
        var result: String?
        try query(sql, []) { result = $0.text(0) }
        return result
    }
}

