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

/// A countdown row, checked.
struct StoredCountdown {
    var key: CountdownKey
    var phase: Phase
    var duration: Span
    var tickInterval: Span
    var deadline: Stamp
}

/// A send-history row, checked.
struct StoredRecord {
    var key: CountdownKey
    var consecutive: Int
    var hasSent: Bool
    var lastSend: Stamp?
    var sends: [Stamp]
    var wrongCodes: Int
    var codeDead: Bool
}

/// A budget charge row, checked.
struct StoredCharge {
    var rowid: Int64
    var at: Stamp
}

/// A live session's row, checked.
struct StoredSession {
    var realm: KeyName
    var expiry: Stamp?
    /// The session's length, which caps it across a reboot (zero: unknown).
    var ttl: Span
}

/// The SQLite file behind `SQLiteStore`: one connection, WAL mode, shared
/// safely by several processes; its rows and transactions. Used by one
/// thread at a time (the store's lock).
final class SQLiteFile {
    static let schemaVersion: Int64 = 4
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
        // 3: budgets and their charges; wrong codes per key, their cap per
        // policy, and the title of a dead code.
        [
            "CREATE TABLE budgets(name TEXT PRIMARY KEY NOT NULL, windows TEXT NOT NULL) WITHOUT ROWID",
            """
            CREATE TABLE budget_charges(budget TEXT NOT NULL, key TEXT NOT NULL, boot_id TEXT NOT NULL,
                boot_ns INTEGER NOT NULL, wall_ns INTEGER NOT NULL)
            """,
            "CREATE INDEX budget_charges_by_key ON budget_charges(budget, key, boot_id, boot_ns)",
            "ALTER TABLE send_records ADD COLUMN wrong_codes INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE send_records ADD COLUMN code_dead INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE policies ADD COLUMN max_wrong_codes INTEGER NOT NULL DEFAULT 5",
            "ALTER TABLE titles ADD COLUMN code_dead TEXT NOT NULL DEFAULT 'Too many attempts: get a new code'",
        ],
        // 4: guards against SMS pumping, their codes and verifications
        // (times in wall-clock ns).
        [
            "CREATE TABLE guards(scope TEXT PRIMARY KEY NOT NULL, rules TEXT NOT NULL) WITHOUT ROWID",
            """
            CREATE TABLE guard_codes(scope TEXT NOT NULL, id TEXT NOT NULL, subject TEXT NOT NULL,
                country TEXT NOT NULL, address TEXT, sent_ns INTEGER NOT NULL, verified_ns INTEGER,
                PRIMARY KEY(scope, id)) WITHOUT ROWID
            """,
            "CREATE INDEX guard_codes_by_country ON guard_codes(scope, country, sent_ns)",
            "CREATE INDEX guard_codes_by_address ON guard_codes(scope, address, sent_ns)",
            "CREATE INDEX guard_codes_by_subject ON guard_codes(scope, subject, sent_ns)",
            """
            CREATE TABLE guard_verifications(scope TEXT NOT NULL, country TEXT NOT NULL, address TEXT,
                at_ns INTEGER NOT NULL)
            """,
            "CREATE INDEX guard_verifications_by_country ON guard_verifications(scope, country, at_ns)",
            "CREATE INDEX guard_verifications_by_address ON guard_verifications(scope, address, at_ns)",
        ],
    ]

    private let db: OpaquePointer
    let path: String
    /// The longest one operation waits for another connection's lock.
    let timeout: Span
    /// The current operation's deadline, read by the busy handler.
    private let wait = BusyWait()
    private var statements: [String: OpaquePointer] = [:]
    private(set) var inTransaction = false
    /// The tables of `createExtensionTables` exist.
    private var extensionTablesSeen = false
    /// guard_outside_country was seen (or made) on this file.
    private var outsideCountrySeen = false
    private var outcomeTableSeen = false

    /// Opens the store at `path`; a corrupt one is moved aside and replaced
    /// by a new one if `startFreshIfCorrupt`, else refused.
    static func open(path: String, startFreshIfCorrupt: Bool, fullSync: Bool,
                     timeout: Span = Limits.defaultStoreTimeout) throws(TickgateError) -> SQLiteFile {
        do {
            return try SQLiteFile(path: path, fullSync: fullSync, timeout: timeout)
        } catch {
            guard error.status == .storeCorrupt, startFreshIfCorrupt else { throw error }
            _ = try moveAside(path)
            return try SQLiteFile(path: path, fullSync: fullSync, timeout: timeout)
        }
    }

    /// Opens (creating it 0600 if missing), checks and migrates the store.
    private init(path: String, fullSync: Bool, timeout: Span) throws(TickgateError) {
        self.path = path
        self.timeout = timeout
        wait.deadline = Poller.boottime().advanced(by: timeout)
        let link = path.withCString { tgshim_is_symlink($0) }
        if link == 1 {
            throw TickgateError(.storeIO, "the store path \(path) is a symbolic link; refusing to follow it")
        }
        let created = path.withCString { tgshim_create_private_file($0) }
        if created != 0 && created != EEXIST {
            throw TickgateError(.storeIO, "cannot create the store \(path): \(SQLiteFile.describe(errno: created))")
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
        // Waits for another connection's lock end at the operation's
        // deadline (the busy handler reads it), never later.
        sqlite3_busy_handler(db, { context, count in
            guard let context else { return 0 }
            let wait = Unmanaged<BusyWait>.fromOpaque(context).takeUnretainedValue()
            let left = wait.deadline.since(Poller.boottime()).nanoseconds
            guard left > 0 else { return 0 }
            // 1, 2, 4 ... 16 ms between tries, never past the deadline.
            let step = Int64(1_000_000) << Int64(min(max(count, 0), 4))
            usleep(useconds_t(min(step, left) / 1_000 + 1))
            return 1
        }, Unmanaged.passUnretained(wait).toOpaque())
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
        if version > SQLiteFile.schemaVersion {
            throw TickgateError(.storeVersion,
                "the store \(path) has schema version \(version); this library knows up to \(SQLiteFile.schemaVersion)")
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
        if version > SQLiteFile.schemaVersion {
            throw TickgateError(.storeVersion,
                "the store \(path) has schema version \(version); this library knows up to \(SQLiteFile.schemaVersion)")
        }
        if version < 0 {
            throw TickgateError(.storeCorrupt, "the store \(path) has schema version \(version)")
        }
        guard version < SQLiteFile.schemaVersion else { return }
        try execute("BEGIN IMMEDIATE")
        do {
            // Another process may have migrated while we waited for the lock.
            var current = try scalarInt("PRAGMA user_version") ?? 0
            while current < SQLiteFile.schemaVersion {
                for sql in SQLiteFile.migrations[Int(current)] { try execute(sql) }
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

    /// Begins a transaction; its waits for another connection's lock end
    /// within the timeout, or by `deadline` if that comes sooner (a
    /// decision's, which may have spent some of its timeout already).
    func begin(by deadline: Instant? = nil) throws(TickgateError) {
        guard !inTransaction else { return }
        wait.deadline = Poller.boottime().advanced(by: timeout)
        if let deadline, deadline < wait.deadline { wait.deadline = deadline }
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

    /// A phase as the countdowns table keeps it.
    static func code(_ phase: Phase) -> Int64 {
        switch phase {
        case .sending: 0
        case .cooling: 1
        case .locked: 2
        }
    }

    func save(_ row: StoredCountdown) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO countdowns(scope, subject, phase, duration_ns, tick_ns,
                boot_id, boot_deadline_ns, wall_deadline_ns) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(row.key.scope.value), .text(row.key.subject.value), .int(SQLiteFile.code(row.phase)),
                  .int(row.duration.nanoseconds), .int(row.tickInterval.nanoseconds),
                  .text(row.deadline.bootID), .int(row.deadline.boot), .int(row.deadline.wall)])
    }

    func deleteCountdown(_ key: CountdownKey) throws(TickgateError) {
        try run("DELETE FROM countdowns WHERE scope = ? AND subject = ?",
                [.text(key.scope.value), .text(key.subject.value)])
    }

    func deleteCountdowns(scope: KeyName?) throws(TickgateError) {
        if let scope {
            try run("DELETE FROM countdowns WHERE scope = ?", [.text(scope.value)])
        } else {
            try run("DELETE FROM countdowns", [])
        }
    }

    func countdown(_ key: CountdownKey) throws(TickgateError) -> StoredCountdown? {
        try countdowns(where: "WHERE scope = ? AND subject = ?",
                       [.text(key.scope.value), .text(key.subject.value)]).first
    }

    func countdowns(where clause: String = "", _ values: [Value] = []) throws(TickgateError) -> [StoredCountdown] {
        var rows: [StoredCountdown] = []
        try query("""
            SELECT scope, subject, phase, duration_ns, tick_ns, boot_id, boot_deadline_ns,
                wall_deadline_ns FROM countdowns \(clause)
            """, values, table: "countdowns") { (row) throws(TickgateError) in
            let key = try SQLiteFile.key(&row)
            let phase: Phase
            switch try row.integer(2, "phase", 0...2) {
            case 0: phase = .sending
            case 1: phase = .cooling
            default: phase = .locked
            }
            let duration = try row.nanoseconds(3, "duration_ns", Span(nanoseconds: 1)...Limits.maximumDuration)
            let tick = try row.nanoseconds(4, "tick_ns", Limits.minimumTickInterval...Limits.maximumTickInterval)
            let deadline = try row.stamp(
                bootID: try row.text(5, "boot_id", maximumBytes: Limits.maximumKeyBytes),
                boot: try row.integer(6, "boot_deadline_ns", 0...Int64.max),
                wall: try row.integer(7, "wall_deadline_ns", 0...Int64.max), "boot_id")
            rows.append(StoredCountdown(key: key, phase: phase, duration: duration, tickInterval: tick,
                                        deadline: deadline))
        }
        return rows
    }

    /// Reads the scope and subject of a row (columns 0 and 1) and names the
    /// row by them.
    private static func key(_ row: inout StoreRow) throws(TickgateError) -> CountdownKey {
        let scope = try row.keyName(0, "scope")
        let subject = try row.keyName(1, "subject")
        row.name = "row (\(scope.value), \(subject.value))"
        return CountdownKey(scope: scope, subject: subject)
    }

    // MARK: Send records

    func save(_ record: StoredRecord) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO send_records(scope, subject, consecutive, has_sent, last_send, sends,
                wrong_codes, code_dead) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(record.key.scope.value), .text(record.key.subject.value),
                  .int(Int64(record.consecutive)), .int(record.hasSent ? 1 : 0),
                  record.lastSend.map { .text(SQLiteFile.encode($0)) } ?? .null,
                  .text(record.sends.map(SQLiteFile.encode).joined(separator: "\n")),
                  .int(Int64(record.wrongCodes)), .int(record.codeDead ? 1 : 0)])
    }

    func deleteRecord(_ key: CountdownKey) throws(TickgateError) {
        try run("DELETE FROM send_records WHERE scope = ? AND subject = ?",
                [.text(key.scope.value), .text(key.subject.value)])
    }

    func record(_ key: CountdownKey) throws(TickgateError) -> StoredRecord? {
        try records(where: "WHERE scope = ? AND subject = ?",
                    [.text(key.scope.value), .text(key.subject.value)]).first
    }

    func records(where clause: String = "", _ values: [Value] = []) throws(TickgateError) -> [StoredRecord] {
        var rows: [StoredRecord] = []
        try query("""
            SELECT scope, subject, consecutive, has_sent, last_send, sends, wrong_codes, code_dead
            FROM send_records \(clause)
            """,
                  values, table: "send_records") { (row) throws(TickgateError) in
            let key = try SQLiteFile.key(&row)
            let consecutive = try row.integer(2, "consecutive", 0...Int64(Limits.maximumConsecutiveSends))
            let hasSent = try row.flag(3, "has_sent")
            let lastSend = try row.optionalStamp(4, "last_send")
            let list = try row.text(5, "sends",
                                    maximumBytes: Limits.maximumWindowSends * (StoreRow.maximumStampBytes + 1))
            var sends: [Stamp] = []
            for line in list.split(separator: "\n", omittingEmptySubsequences: false) where !list.isEmpty {
                sends.append(try row.stamp(line, "sends"))
                guard sends.count <= Limits.maximumWindowSends else {
                    throw row.corrupt("sends", "more than \(Limits.maximumWindowSends) sends")
                }
            }
            let wrongCodes = try row.integer(6, "wrong_codes", 0...Int64(SendPolicy.maximumWrongCodesLimit + 1))
            let codeDead = try row.flag(7, "code_dead")
            rows.append(StoredRecord(key: key, consecutive: Int(consecutive), hasSent: hasSent,
                                     lastSend: lastSend, sends: sends, wrongCodes: Int(wrongCodes),
                                     codeDead: codeDead))
        }
        return rows
    }

    // MARK: Policies, titles, sessions

    func save(policy: SendPolicy, scope: KeyName) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO policies(scope, cooldowns_ms, window_max_sends, window_ms,
                quiet_reset_ms, ticket_timeout_ms, max_wrong_codes) VALUES(?, ?, ?, ?, ?, ?, ?)
            """, [.text(scope.value),
                  .text(policy.cooldowns.map { String($0.millisecondsRoundedUp) }.joined(separator: ",")),
                  .int(Int64(policy.windowMaximumSends)), .int(policy.window.millisecondsRoundedUp),
                  .int(policy.quietReset.millisecondsRoundedUp),
                  .int(policy.ticketTimeout.millisecondsRoundedUp), .int(Int64(policy.maximumWrongCodes))])
    }

    /// Every policy, or the one of `scope` (a decision reads its own).
    func policies(scope: KeyName? = nil) throws(TickgateError) -> [(KeyName, SendPolicy)] {
        var rows: [(KeyName, SendPolicy)] = []
        try query("""
            SELECT scope, cooldowns_ms, window_max_sends, window_ms, quiet_reset_ms, ticket_timeout_ms,
                max_wrong_codes FROM policies
            """ + (scope == nil ? "" : " WHERE scope = ?"), scope.map { [.text($0.value)] } ?? [],
                  table: "policies") { (row) throws(TickgateError) in
            let scope = try row.keyName(0, "scope")
            row.name = "row (\(scope.value))"
            let list = try row.text(1, "cooldowns_ms", maximumBytes: 256)
            let one = Span(nanoseconds: Span.nanosecondsPerMillisecond)
            let maximumMs = Limits.maximumDuration.nanoseconds / Span.nanosecondsPerMillisecond
            var steps: [Span] = []
            for part in list.split(separator: ",", omittingEmptySubsequences: false) {
                guard let ms = Int64(part), ms >= 1, ms <= maximumMs else {
                    throw row.corrupt("cooldowns_ms", "step \"\(part.prefix(30))\" is not 1 ... \(maximumMs) ms")
                }
                steps.append(.milliseconds(ms))
            }
            guard (1...SendPolicy.maximumSteps).contains(steps.count) else {
                throw row.corrupt("cooldowns_ms", "\(steps.count) steps; a policy has 1 to \(SendPolicy.maximumSteps)")
            }
            let cap = try row.integer(2, "window_max_sends", 0...Int64(Limits.maximumWindowSends))
            let window = try row.milliseconds(3, "window_ms", (cap > 0 ? one : .zero)...Limits.maximumDuration)
            let quiet = try row.milliseconds(4, "quiet_reset_ms", .zero...Limits.maximumDuration)
            let timeout = try row.milliseconds(5, "ticket_timeout_ms", one...Limits.maximumDuration)
            let wrongCodes = try row.integer(6, "max_wrong_codes", 0...Int64(SendPolicy.maximumWrongCodesLimit))
            let policy = SendPolicy(cooldowns: steps, windowMaximumSends: Int(cap), window: window,
                                    quietReset: quiet, ticketTimeout: timeout, maximumWrongCodes: Int(wrongCodes))
            do throws(TickgateError) {
                rows.append((scope, try policy.validated()))
            } catch {
                throw row.corrupt("cooldowns_ms", error.message)
            }
        }
        return rows
    }

    func save(titles: TitleSet, scope: KeyName) throws(TickgateError) {
        try run("""
            INSERT OR REPLACE INTO titles(scope, idle, sending, cooling, ready_again, locked, code_dead)
            VALUES(?, ?, ?, ?, ?, ?, ?)
            """, [.text(scope.value), .text(titles.idle.source), .text(titles.sending.source),
                  .text(titles.cooling.source), .text(titles.readyAgain.source), .text(titles.locked.source),
                  .text(titles.codeDead.source)])
    }

    func titles() throws(TickgateError) -> [(KeyName, TitleSet)] {
        var rows: [(KeyName, TitleSet)] = []
        try query("SELECT scope, idle, sending, cooling, ready_again, locked, code_dead FROM titles", [],
                  table: "titles") { (row) throws(TickgateError) in
            let scope = try row.keyName(0, "scope")
            row.name = "row (\(scope.value))"
            func template(_ index: Int32, _ column: String) throws(TickgateError) -> TitleTemplate {
                let text = try row.text(index, column, maximumBytes: TitleTemplate.maximumBytes)
                do throws(TickgateError) {
                    return try TitleTemplate(text, role: column)
                } catch {
                    throw row.corrupt(column, error.message)
                }
            }
            rows.append((scope, TitleSet(idle: try template(1, "idle"), sending: try template(2, "sending"),
                                         cooling: try template(3, "cooling"),
                                         readyAgain: try template(4, "ready_again"),
                                         locked: try template(5, "locked"),
                                         codeDead: try template(6, "code_dead"))))
        }
        return rows
    }

    // MARK: Budgets

    func save(budget: Budget, name: KeyName) throws(TickgateError) {
        try run("INSERT OR REPLACE INTO budgets(name, windows) VALUES(?, ?)", [
            .text(name.value),
            .text(budget.windows.map { "\($0.maximumSends)/\($0.length.millisecondsRoundedUp)" }
                .joined(separator: ",")),
        ])
    }

    /// Every budget, or the one named `name` (a decision reads its own).
    func budgets(name: KeyName? = nil) throws(TickgateError) -> [(KeyName, Budget)] {
        var rows: [(KeyName, Budget)] = []
        try query("SELECT name, windows FROM budgets" + (name == nil ? "" : " WHERE name = ?"),
                  name.map { [.text($0.value)] } ?? [], table: "budgets") { (row) throws(TickgateError) in
            let name = try row.keyName(0, "name")
            row.name = "row (\(name.value))"
            let list = try row.text(1, "windows", maximumBytes: 256)
            let maximumMs = Limits.maximumDuration.nanoseconds / Span.nanosecondsPerMillisecond
            var windows: [Budget.Window] = []
            for part in list.split(separator: ",", omittingEmptySubsequences: false) {
                let fields = part.split(separator: "/", omittingEmptySubsequences: false)
                guard fields.count == 2, let sends = Int(fields[0]), let ms = Int64(fields[1]),
                      ms >= 1, ms <= maximumMs else {
                    throw row.corrupt("windows", "window \"\(part.prefix(30))\" is not SENDS/MS")
                }
                windows.append(Budget.Window(maximumSends: sends, length: .milliseconds(ms)))
                guard windows.count <= Budget.maximumWindows else { break }
            }
            do throws(TickgateError) {
                rows.append((name, try Budget(windows: windows).validated()))
            } catch {
                throw row.corrupt("windows", error.message)
            }
        }
        return rows
    }

    /// A budget key's charges, in no order: of boot `bootID` only those
    /// after `after` (older ones no window counts); of other boots (before
    /// a reboot) all.
    func charges(of key: BudgetKey, bootID: String, after: Int64) throws(TickgateError) -> [StoredCharge] {
        var rows: [StoredCharge] = []
        let most = Budget.maximumSends * Budget.maximumWindows
        try query("""
            SELECT rowid, boot_ns, wall_ns FROM budget_charges
            WHERE budget = ? AND key = ? AND boot_id = ? AND boot_ns > ?
            """, [.text(key.budget.value), .text(key.key.value), .text(bootID), .int(after)],
                  table: "budget_charges") { (row) throws(TickgateError) in
            let rowid = try row.integer(0, "rowid", Int64.min...Int64.max)
            row.name = "row (\(key.budget.value), \(key.key.value), rowid \(rowid))"
            let boot = try row.integer(1, "boot_ns", 0...Int64.max)
            let wall = try row.integer(2, "wall_ns", 0...Int64.max)
            rows.append(StoredCharge(rowid: rowid, at: Stamp(bootID: bootID, boot: boot, wall: wall)))
        }
        try query("""
            SELECT rowid, boot_id, boot_ns, wall_ns FROM budget_charges
            WHERE budget = ? AND key = ? AND boot_id != ?
            """, [.text(key.budget.value), .text(key.key.value), .text(bootID)],
                  table: "budget_charges") { (row) throws(TickgateError) in
            let rowid = try row.integer(0, "rowid", Int64.min...Int64.max)
            row.name = "row (\(key.budget.value), \(key.key.value), rowid \(rowid))"
            let at = try row.stamp(
                bootID: try row.text(1, "boot_id", maximumBytes: Limits.maximumKeyBytes),
                boot: try row.integer(2, "boot_ns", 0...Int64.max),
                wall: try row.integer(3, "wall_ns", 0...Int64.max), "boot_id")
            guard rows.count < most else { throw row.corrupt("budget", "more than \(most) charges for one key") }
            rows.append(StoredCharge(rowid: rowid, at: at))
        }
        return rows
    }

    /// Whether the key holds charges of another boot than `bootID`.
    func hasCharges(of key: BudgetKey, otherThan bootID: String) throws(TickgateError) -> Bool {
        var found = false
        try query("SELECT 1 FROM budget_charges WHERE budget = ? AND key = ? AND boot_id != ? LIMIT 1",
                  [.text(key.budget.value), .text(key.key.value), .text(bootID)],
                  table: "budget_charges") { (_) throws(TickgateError) in found = true }
        return found
    }

    /// The boot clock reading of the charge `count` back from the newest
    /// of boot `bootID`, if it holds that many (one index walk).
    func charge(of key: BudgetKey, bootID: String, back count: Int) throws(TickgateError) -> Int64? {
        var boot: Int64?
        try query("""
            SELECT boot_ns FROM budget_charges WHERE budget = ? AND key = ? AND boot_id = ?
            ORDER BY boot_ns DESC LIMIT 1 OFFSET ?
            """, [.text(key.budget.value), .text(key.key.value), .text(bootID), .int(Int64(count - 1))],
                  table: "budget_charges") { (row) throws(TickgateError) in
            row.name = "row (\(key.budget.value), \(key.key.value))"
            boot = try row.integer(0, "boot_ns", 0...Int64.max)
        }
        return boot
    }

    /// Deletes one charge of boot `bootID` made at `boot`.
    func deleteCharge(of key: BudgetKey, bootID: String, boot: Int64) throws(TickgateError) {
        try run("""
            DELETE FROM budget_charges WHERE rowid = (SELECT rowid FROM budget_charges
                WHERE budget = ? AND key = ? AND boot_id = ? AND boot_ns = ? LIMIT 1)
            """, [.text(key.budget.value), .text(key.key.value), .text(bootID), .int(boot)])
    }

    func insertCharge(_ key: BudgetKey, at stamp: Stamp) throws(TickgateError) {
        try run("INSERT INTO budget_charges(budget, key, boot_id, boot_ns, wall_ns) VALUES(?, ?, ?, ?, ?)",
                [.text(key.budget.value), .text(key.key.value), .text(stamp.bootID), .int(stamp.boot),
                 .int(stamp.wall)])
    }

    func deleteCharge(rowid: Int64) throws(TickgateError) {
        try run("DELETE FROM budget_charges WHERE rowid = ?", [.int(rowid)])
    }

    func deleteCharges(_ key: BudgetKey) throws(TickgateError) {
        try run("DELETE FROM budget_charges WHERE budget = ? AND key = ?",
                [.text(key.budget.value), .text(key.key.value)])
    }

    /// Drops the charges of boot `bootID` at or before `before`.
    func deleteCharges(_ key: BudgetKey, bootID: String, before: Int64) throws(TickgateError) {
        try run("DELETE FROM budget_charges WHERE budget = ? AND key = ? AND boot_id = ? AND boot_ns <= ?",
                [.text(key.budget.value), .text(key.key.value), .text(bootID), .int(before)])
    }

    func save(_ session: StoredSession?, realm: KeyName) throws(TickgateError) {
        try run("INSERT OR REPLACE INTO sessions(realm, logged_in, expiry, ttl_ns) VALUES(?, ?, ?, ?)",
                [.text(realm.value), .int(session == nil ? 0 : 1),
                 session?.expiry.map { .text(SQLiteFile.encode($0)) } ?? .null,
                 .int(session?.ttl.nanoseconds ?? 0)])
    }

    /// The live sessions (every row is checked, logged in or not).
    func sessions() throws(TickgateError) -> [StoredSession] {
        var rows: [StoredSession] = []
        try query("SELECT realm, logged_in, expiry, ttl_ns FROM sessions", [],
                  table: "sessions") { (row) throws(TickgateError) in
            let realm = try row.keyName(0, "realm")
            row.name = "row (\(realm.value))"
            let loggedIn = try row.flag(1, "logged_in")
            let expiry = try row.optionalStamp(2, "expiry")
            let ttl = try row.nanoseconds(3, "ttl_ns", .zero...Limits.maximumDuration)
            if loggedIn { rows.append(StoredSession(realm: realm, expiry: expiry, ttl: ttl)) }
        }
        return rows
    }

    // MARK: Stamps as text

    // "BOOT/WALL/BOOT_ID": the id goes last, whatever it holds; a list of
    // stamps is one stamp per line (boot ids have no line breaks).
    static func encode(_ stamp: Stamp) -> String { "\(stamp.boot)/\(stamp.wall)/\(stamp.bootID)" }

    // MARK: SQL

    // MARK: Guards (Pumping/)

    func save(guard rules: Guard?, scope: KeyName) throws(TickgateError) {
        if let rules {
            try run("INSERT OR REPLACE INTO guards(scope, rules) VALUES(?, ?)", [.text(scope.value), .text(rules.encoded)])
        } else {
            try run("DELETE FROM guards WHERE scope = ?", [.text(scope.value)])
        }
        // The settings 0.1.0 does not read, beside its row (see
        // `createExtensionTables`): kept with the text they extend, so a guard
        // set by 0.1.0 since has none.
        if let rules, !rules.extensionText.isEmpty {
            try createExtensionTables()
            try run("INSERT OR REPLACE INTO guard_extensions(scope, rules, extension) VALUES(?, ?, ?)",
                    [.text(scope.value), .text(rules.encoded), .text(rules.extensionText)])
        } else if try extensionTablesExist() {
            try run("DELETE FROM guard_extensions WHERE scope = ?", [.text(scope.value)])
        }
    }

    /// The tables of the settings and state 0.1.0 does not know (range
    /// signals, challenges), made when a guard first has them:
    /// schema 4 holds none, and a file without them is one 0.1.0 wrote or
    /// reads as it always did (the schema version is not raised, so 0.1.0
    /// keeps opening the file; it never reads these tables).
    private func createExtensionTables() throws(TickgateError) {
        guard !(try extensionTablesExist()) else { return }
        try execute("""
            CREATE TABLE IF NOT EXISTS guard_extensions(scope TEXT PRIMARY KEY NOT NULL, rules TEXT NOT NULL,
                extension TEXT NOT NULL) WITHOUT ROWID
            """)
        try execute("""
            CREATE TABLE IF NOT EXISTS guard_range_verifications(scope TEXT NOT NULL, range TEXT NOT NULL,
                at_ns INTEGER NOT NULL)
            """)
        try execute("CREATE INDEX IF NOT EXISTS guard_range_verifications_by_range ON guard_range_verifications(scope, range, at_ns)")
        try execute("""
            CREATE TABLE IF NOT EXISTS guard_challenges(scope TEXT NOT NULL, subject TEXT NOT NULL, address TEXT NOT NULL,
                until_ns INTEGER NOT NULL, PRIMARY KEY(scope, subject, address)) WITHOUT ROWID
            """)
        extensionTablesSeen = true
    }

    /// The codes its country's count leaves out (`GuardRules.countsInCountry`):
    /// a table 0.1.0 never reads, made by the first such code.
    private func outsideCountryExists(making: Bool = false) throws(TickgateError) -> Bool {
        if outsideCountrySeen { return true }
        if making {
            try execute("""
                CREATE TABLE IF NOT EXISTS guard_outside_country(scope TEXT NOT NULL, id TEXT NOT NULL,
                    sent_ns INTEGER NOT NULL, PRIMARY KEY(scope, id)) WITHOUT ROWID
                """)
            outsideCountrySeen = true
            return true
        }
        try query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'guard_outside_country'", [],
                  table: "sqlite_master") { _ throws(TickgateError) in outsideCountrySeen = true }
        return outsideCountrySeen
    }

    private func extensionTablesExist() throws(TickgateError) -> Bool {
        if extensionTablesSeen { return true }
        var found = false
        try query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'guard_extensions'", [],
                  table: "sqlite_master") { _ throws(TickgateError) in found = true }
        extensionTablesSeen = found
        return found
    }

    /// Every guard, or the scope's.
    func guards(scope: KeyName? = nil) throws(TickgateError) -> [(KeyName, Guard)] {
        var rows: [(KeyName, Guard)] = []
        try query("SELECT scope, rules FROM guards" + (scope == nil ? "" : " WHERE scope = ?"),
                  scope.map { [.text($0.value)] } ?? [], table: "guards") { (row) throws(TickgateError) in
            let name = try row.keyName(0, "scope")
            row.name = "row (\(name.value))"
            let text = try row.text(1, "rules", maximumBytes: 1 << 20)
            let snapshot = row
            rows.append((name, try Guard.decode(text) { snapshot.corrupt("rules", $0) }))
        }
        guard try extensionTablesExist(), !rows.isEmpty else { return rows }
        var extensions: [String: (rules: String, text: String)] = [:]
        try query("SELECT scope, rules, extension FROM guard_extensions" + (scope == nil ? "" : " WHERE scope = ?"),
                  scope.map { [.text($0.value)] } ?? [], table: "guard_extensions") { (row) throws(TickgateError) in
            extensions[try row.text(0, "scope", maximumBytes: 1 << 16)] =
                (try row.text(1, "rules", maximumBytes: 1 << 20), try row.text(2, "extension", maximumBytes: 1 << 10))
        }
        for index in rows.indices {
            // An extension of another text: the guard was set since by a
            // release that keeps none.
            guard let found = extensions[rows[index].0.value], found.rules == rows[index].1.encoded else { continue }
            func bad(_ why: String) -> TickgateError {
                TickgateError(.storeCorrupt, "the store \(path) table guard_extensions \(why)", store: .corrupt)
            }
            try rows[index].1.extend(found.text, bad)
            do { rows[index].1 = try rows[index].1.validated() } catch { throw bad("holds a bad guard: \(error.message)") }
        }
        return rows
    }

    private func count(_ sql: String, _ values: [Value]) throws(TickgateError) -> Int {
        var result = 0
        try query(sql, values, table: "guard_codes") { (row) throws(TickgateError) in
            result = Int(try row.integer(0, "count", 0...Int64.max))
        }
        return result
    }

    /// The signals' counts of a send to `subject` in `country` from
    /// `address` at wall time `now` (ns), codes counted unverified from
    /// `unverifiedAfter` past their send. A range's counts leave out the
    /// subject's own codes (`GuardRules.ranges(ofSubject:)`).
    func guardCounts(scope: KeyName, subject: KeyName, country: String, ranges: [String] = [], address: String?,
                     unverifiedAfter: Span, now: Int64) throws(TickgateError) -> (counts: GuardCounts, days: [Int64: Int], rangeDays: [[Int64: Int]]) {
        let day: Int64 = 86_400_000_000_000
        let s = Value.text(scope.value), c = Value.text(country)
        let w = GuardRules.windows(at: Instant(nanoseconds: now), unverifiedAfter: unverifiedAfter)
        let due = w.unverifiedUntil.nanoseconds
        let (sentDayAgo, sentHourAgo) = (w.unverifiedSinceDay.nanoseconds, w.unverifiedSinceHour.nanoseconds)
        var counts = GuardCounts()
        // The country's codes, but for those it leaves out.
        let outside = try outsideCountryExists()
        let unverified = "SELECT COUNT(*) FROM guard_codes WHERE scope = ? AND country = ? AND sent_ns > ? AND sent_ns <= ? AND verified_ns IS NULL"
            + (outside ? " AND id NOT IN (SELECT id FROM guard_outside_country WHERE scope = ?)" : "")
        let left: [Value] = outside ? [s] : []
        counts.countryUnverifiedDay = try count(unverified, [s, c, .int(sentDayAgo), .int(due)] + left)
        counts.countryUnverifiedHour = try count(unverified, [s, c, .int(sentHourAgo), .int(due)] + left)
        let verified = "SELECT COUNT(*) FROM guard_verifications WHERE scope = ? AND country = ? AND at_ns > ?"
        counts.countryVerifiedDay = try count(verified, [s, c, .int(w.verifiedSinceDay.nanoseconds)])
        counts.countryVerifiedHour = try count(verified, [s, c, .int(w.verifiedSinceHour.nanoseconds)])
        var days: [Int64: Int] = [:]
        try query("""
            SELECT at_ns / \(day), COUNT(*) FROM guard_verifications WHERE scope = ? AND country = ? AND at_ns > ?
            GROUP BY at_ns / \(day)
            """, [s, c, .int(now - Int64(GuardThresholds.maximumHistoryDays + 1) * day)],
                  table: "guard_verifications") { (row) throws(TickgateError) in
            days[try row.integer(0, "day", Int64.min...Int64.max)] = Int(try row.integer(1, "count", 0...Int64.max))
        }
        // A range's codes are its country's whose subject starts with it,
        // but for the subject's own.
        var rangeDays: [[Int64: Int]] = []
        var rangeTables = false
        if !ranges.isEmpty { rangeTables = try extensionTablesExist() }
        for name in ranges {
            var range = RangeCounts(range: name)
            let r = Value.text(name), length = Value.int(Int64(name.utf8.count))
            let byRange = "SELECT COUNT(*) FROM guard_codes WHERE scope = ? AND country = ? AND sent_ns > ? AND sent_ns <= ? AND verified_ns IS NULL AND substr(subject, 1, ?) = ? AND subject <> ?"
            let own = Value.text(subject.value)
            range.unverifiedDay = try count(byRange, [s, c, .int(sentDayAgo), .int(due), length, r, own])
            range.unverifiedHour = try count(byRange, [s, c, .int(sentHourAgo), .int(due), length, r, own])
            var history: [Int64: Int] = [:]
            if rangeTables {
                let verifiedInRange = "SELECT COUNT(*) FROM guard_range_verifications WHERE scope = ? AND range = ? AND at_ns > ?"
                range.verifiedDay = try count(verifiedInRange, [s, r, .int(w.verifiedSinceDay.nanoseconds)])
                range.verifiedHour = try count(verifiedInRange, [s, r, .int(w.verifiedSinceHour.nanoseconds)])
                try query("""
                    SELECT at_ns / \(day), COUNT(*) FROM guard_range_verifications WHERE scope = ? AND range = ? AND at_ns > ?
                    GROUP BY at_ns / \(day)
                    """, [s, r, .int(now - Int64(GuardThresholds.maximumHistoryDays + 1) * day)],
                          table: "guard_range_verifications") { (row) throws(TickgateError) in
                    history[try row.integer(0, "day", Int64.min...Int64.max)] = Int(try row.integer(1, "count", 0...Int64.max))
                }
            }
            counts.ranges.append(range)
            rangeDays.append(history)
        }
        if let address {
            let a = Value.text(address)
            counts.hasAddress = true
            let byAddress = "SELECT COUNT(*) FROM guard_codes WHERE scope = ? AND address = ? AND sent_ns > ? AND sent_ns <= ? AND verified_ns IS NULL"
            counts.addressUnverifiedDay = try count(byAddress, [s, a, .int(sentDayAgo), .int(due)])
            counts.addressUnverifiedHour = try count(byAddress, [s, a, .int(sentHourAgo), .int(due)])
            counts.addressVerifiedDay = try count(
                "SELECT COUNT(*) FROM guard_verifications WHERE scope = ? AND address = ? AND at_ns > ?", [s, a, .int(w.verifiedSinceDay.nanoseconds)])
            var asked: Set<String> = [country]
            try query("SELECT DISTINCT country FROM guard_codes WHERE scope = ? AND address = ? AND sent_ns > ?",
                      [s, a, .int(w.verifiedSinceDay.nanoseconds)], table: "guard_codes") { (row) throws(TickgateError) in
                asked.insert(try row.text(0, "country", maximumBytes: 16))
            }
            try query("SELECT DISTINCT country FROM guard_verifications WHERE scope = ? AND address = ? AND at_ns > ?",
                      [s, a, .int(w.verifiedSinceDay.nanoseconds)], table: "guard_verifications") { (row) throws(TickgateError) in
                asked.remove(try row.text(0, "country", maximumBytes: 16))
            }
            counts.addressCountriesDay = asked.count
        }
        return (counts, days, rangeDays)
    }

    /// A code counted, among its country's unverified codes too if
    /// `inCountry`.
    func guardSent(scope: KeyName, subject: KeyName, code: String, country: String, address: String?,
                   inCountry: Bool = true, now: Int64) throws(TickgateError) {
        // Kept a day past the longest unverified_after_seconds.
        let kept = now - 86_400_000_000_000 - GuardThresholds.longestUnverifiedAfter.nanoseconds
        try run("DELETE FROM guard_codes WHERE scope = ? AND sent_ns < ?", [.text(scope.value), .int(kept)])
        if try outsideCountryExists(making: !inCountry) {
            try run("DELETE FROM guard_outside_country WHERE scope = ? AND (sent_ns < ? OR id = ?)",
                    [.text(scope.value), .int(kept), .text(code)])
            if !inCountry {
                try run("INSERT INTO guard_outside_country(scope, id, sent_ns) VALUES(?, ?, ?)",
                        [.text(scope.value), .text(code), .int(now)])
            }
        }
        try run("INSERT OR REPLACE INTO guard_codes(scope, id, subject, country, address, sent_ns) VALUES(?, ?, ?, ?, ?, ?)",
                [.text(scope.value), .text(code), .text(subject.value), .text(country),
                 address.map { .text($0) } ?? .null, .int(now)])
    }

    /// A passed challenge for `subject` from `address` ("" none), until
    /// `until` (wall ns); the scope's expired passes go.
    func keepChallengePass(scope: KeyName, subject: KeyName, address: String?, now: Int64,
                           until: Int64) throws(TickgateError) {
        try createExtensionTables()
        try run("DELETE FROM guard_challenges WHERE scope = ? AND until_ns <= ?", [.text(scope.value), .int(now)])
        try run("INSERT OR REPLACE INTO guard_challenges(scope, subject, address, until_ns) VALUES(?, ?, ?, ?)",
                [.text(scope.value), .text(subject.value), .text(address ?? ""), .int(until)])
    }

    /// Uses up the pass of `subject` from `address`, if one waits: true.
    func takeChallengePass(scope: KeyName, subject: KeyName, address: String?, now: Int64) throws(TickgateError) -> Bool {
        guard try extensionTablesExist() else { return false }
        let values: [Value] = [.text(scope.value), .text(subject.value), .text(address ?? ""), .int(now)]
        let held = try count("SELECT COUNT(*) FROM guard_challenges WHERE scope = ? AND subject = ? AND address = ? AND until_ns > ?",
                             values)
        guard held > 0 else { return false }
        try run("DELETE FROM guard_challenges WHERE scope = ? AND subject = ? AND address = ?", Array(values.prefix(3)))
        return true
    }

    /// The table of the codes followed for their outcome
    /// (Pumping/CodeOutcomes.swift), which 0.1.0 does not know: made when
    /// a code is first followed (the schema stays 4).
    private func createOutcomeTable() throws(TickgateError) {
        guard !outcomeTableSeen else { return }
        try execute("""
            CREATE TABLE IF NOT EXISTS guard_due(scope TEXT NOT NULL, id TEXT NOT NULL, subject TEXT NOT NULL,
                country TEXT NOT NULL, address TEXT, sent_ns INTEGER NOT NULL, PRIMARY KEY(scope, id)) WITHOUT ROWID
            """)
        try execute("CREATE INDEX IF NOT EXISTS guard_due_by_time ON guard_due(scope, sent_ns)")
        try execute("CREATE INDEX IF NOT EXISTS guard_due_by_subject ON guard_due(scope, subject)")
        outcomeTableSeen = true
    }

    /// `event` for `subject`, then the sweep (codes sent at or before
    /// `due`, at most `limit`; 0: none): the codes it decided, taken off.
    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, due: Int64, limit: Int,
                       now: Int64) throws(TickgateError) -> [DecidedCode] {
        // Only a send follows a code: with no table, nothing is followed.
        if case .sent = event {} else if !outcomeTableSeen {
            var found = false
            try query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'guard_due'", [],
                      table: "sqlite_master") { _ throws(TickgateError) in found = true }
            guard found else { return [] }
            outcomeTableSeen = true
        }
        try createOutcomeTable()
        var decided: [DecidedCode] = []
        func take(_ sql: String, _ values: [Value], outcome: (String) -> CodeOutcome) throws(TickgateError) {
            var rows: [DecidedCode] = []
            try query(sql, values, table: "guard_due") { (row) throws(TickgateError) in
                let id = try row.text(0, "id", maximumBytes: 64)
                rows.append(DecidedCode(code: id, subject: try row.text(1, "subject", maximumBytes: 64),
                                        country: try row.text(2, "country", maximumBytes: 8),
                                        address: row.isNull(3) ? "" : try row.text(3, "address", maximumBytes: 64),
                                        age: Span(nanoseconds: max(0, now - (try row.integer(4, "sent_ns", 0...Int64.max)))),
                                        outcome: outcome(id)))
            }
            for row in rows {
                try run("DELETE FROM guard_due WHERE scope = ? AND id = ?", [.text(scope.value), .text(row.code)])
            }
            decided += rows
        }
        let columns = "SELECT id, subject, country, address, sent_ns FROM guard_due"
        if let outcome = event.outcome {
            // The number's last code: a followed code that is not it was
            // replaced (by a code sent while no one listened).
            var latest: String?
            try query("SELECT id FROM guard_codes WHERE scope = ? AND subject = ? ORDER BY sent_ns DESC LIMIT 1",
                      [.text(scope.value), .text(subject.value)], table: "guard_codes") { (row) throws(TickgateError) in
                latest = try row.text(0, "id", maximumBytes: 64)
            }
            var keep = ""
            if case let .sent(code) = event { keep = code }
            try take(columns + " WHERE scope = ? AND subject = ? AND id != ?",
                     [.text(scope.value), .text(subject.value), .text(keep)]) { id in
                latest != nil && latest != id ? .replaced : outcome
            }
        }
        if case let .sent(code) = event {
            try run("""
                INSERT OR IGNORE INTO guard_due(scope, id, subject, country, address, sent_ns)
                SELECT scope, id, subject, country, address, sent_ns FROM guard_codes WHERE scope = ? AND id = ?
                """, [.text(scope.value), .text(code)])
        }
        if limit > 0 {
            try take(columns + " WHERE scope = ? AND sent_ns <= ? ORDER BY sent_ns LIMIT ?",
                     [.text(scope.value), .int(due), .int(Int64(limit))]) { _ in .neverVerified }
        }
        return decided
    }

    func guardReturned(scope: KeyName, code: String) throws(TickgateError) {
        try run("DELETE FROM guard_codes WHERE scope = ? AND id = ? AND verified_ns IS NULL", [.text(scope.value), .text(code)])
    }

    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String],
                       now: Int64) throws(TickgateError) {
        var latest: (id: String, verified: Bool, address: String?)?
        try query("""
            SELECT id, verified_ns IS NOT NULL, address FROM guard_codes WHERE scope = ? AND subject = ?
            ORDER BY sent_ns DESC LIMIT 1
            """, [.text(scope.value), .text(subject.value)], table: "guard_codes") { (row) throws(TickgateError) in
            latest = (try row.text(0, "id", maximumBytes: 64), try row.integer(1, "verified", 0...1) == 1,
                      row.isNull(2) ? nil : try row.text(2, "address", maximumBytes: 64))
        }
        // Only a code sent (and not verified yet) counts: a verification
        // with no code would raise the thresholds for nothing.
        guard let latest, !latest.verified else { return }
        try run("UPDATE guard_codes SET verified_ns = ? WHERE scope = ? AND id = ?",
                [.int(now), .text(scope.value), .text(latest.id)])
        let address = latest.address
        try run("DELETE FROM guard_verifications WHERE scope = ? AND at_ns < ?",
                [.text(scope.value), .int(now - Int64(GuardThresholds.maximumHistoryDays + 1) * 86_400_000_000_000)])
        try run("INSERT INTO guard_verifications(scope, country, address, at_ns) VALUES(?, ?, ?, ?)",
                [.text(scope.value), .text(country), address.map { .text($0) } ?? .null, .int(now)])
        guard !ranges.isEmpty else { return }
        try createExtensionTables()
        try run("DELETE FROM guard_range_verifications WHERE scope = ? AND at_ns < ?",
                [.text(scope.value), .int(now - Int64(GuardThresholds.maximumHistoryDays + 1) * 86_400_000_000_000)])
        for range in ranges {
            try run("INSERT INTO guard_range_verifications(scope, range, at_ns) VALUES(?, ?, ?)",
                    [.text(scope.value), .text(range), .int(now)])
        }
    }

    enum Value {
        case int(Int64)
        case text(String)
        case null
    }

    private func error(_ rc: Int32, _ what: String) -> TickgateError {
        let message = String(cString: sqlite3_errmsg(db))
        let primary = rc & 0xFF
        if primary == SQLITE_BUSY || primary == SQLITE_LOCKED {
            return TickgateError(.storeIO,
                "store busy for \(timeout.millisecondsRoundedUp) ms: another connection holds the lock of \(path) (\(what): \(message))")
        }
        let status: Status = primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB ? .storeCorrupt : .storeIO
        return TickgateError(status, "store \(path): \(what): \(message) (SQLite code \(rc))")
    }

    private func execute(_ sql: String) throws(TickgateError) {
        var rc = sqlite3_exec(db, sql, nil, nil, nil)
        // Some statements (switching the journal mode while another process
        // creates the store) report BUSY without consulting the busy
        // handler: retry them until the same deadline.
        while rc & 0xFF == SQLITE_BUSY && Poller.boottime() < wait.deadline {
            usleep(10_000)
            rc = sqlite3_exec(db, sql, nil, nil, nil)
        }
        guard rc == SQLITE_OK else { throw error(rc, sql.split(separator: " ").first.map(String.init) ?? sql) }
    }

    private func prepared(_ sql: String) throws(TickgateError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            // Our own fixed SQL fails to prepare only if the tables are not
            // the ones this schema version has.
            let failure = error(rc, "prepare")
            if rc & 0xFF == SQLITE_ERROR {
                throw TickgateError(.storeCorrupt, "the store \(path) is corrupt: its tables do not match schema version \(SQLiteFile.schemaVersion): \(failure.message)")
            }
            throw failure
        }
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

    /// Runs a query and hands each row to `each`, checked by the row's
    /// own readers; `table` names the rows in messages.
    private func query(_ sql: String, _ values: [Value], table: String,
                       _ each: (inout StoreRow) throws(TickgateError) -> Void) throws(TickgateError) {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        try bind(statement, values)
        var position = 0
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw error(rc, "read") }
            position += 1
            var row = StoreRow(statement: statement, path: path, table: table, position: position)
            try each(&row)
        }
    }

    /// Changes with every commit another connection (another engine or
    /// process) made to the file since the last reading; not with this
    /// connection's own.
    func dataVersion() throws(TickgateError) -> Int64 {
        try scalarInt("PRAGMA data_version") ?? 0
    }

    private func scalarInt(_ sql: String) throws(TickgateError) -> Int64? {
        var result: Int64?
        try query(sql, [], table: "pragma") { (row) throws(TickgateError) in
            result = try row.integer(0, sql, Int64.min...Int64.max)
        }
        return result
    }

    private func scalarText(_ sql: String) throws(TickgateError) -> String? {
        var result: String?
        try query(sql, [], table: "pragma") { (row) throws(TickgateError) in
            result = try row.text(0, sql, maximumBytes: 1 << 20)
        }
        return result
    }
}

/// The deadline of the store operation under way, shared with SQLite's busy
/// handler (which gets it as its context pointer; the store owns it).
private final class BusyWait {
    var deadline = Instant(nanoseconds: 0)
}
