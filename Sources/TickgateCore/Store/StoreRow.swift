import CTickgateShim
import Glibc

/// One row of a store table as it is read. Every column is checked as
/// strictly as the C boundary checks a caller's arguments: a value out of
/// range, of the wrong SQLite type, NULL where a value belongs, or text that
/// is not UTF-8 (or holds a NUL) makes the store corrupt
/// (`TG_E_STORE_CORRUPT`, naming the table, the row and the column). A store
/// shared with another program or another version of the library can refuse
/// a call, never trap the host.
struct StoreRow {
    let statement: OpaquePointer
    let path: String
    let table: String
    /// Which row, for messages: its key once that is read, else its place
    /// in the scan.
    var name: String

    init(statement: OpaquePointer, path: String, table: String, position: Int) {
        self.statement = statement
        self.path = path
        self.table = table
        self.name = "row \(position)"
    }

    func corrupt(_ column: String, _ problem: String) -> TickgateError {
        TickgateError(.storeCorrupt, "the store \(path) is corrupt: table \(table), \(name), column \(column): \(problem)")
    }

    func isNull(_ index: Int32) -> Bool { sqlite3_column_type(statement, index) == SQLITE_NULL }

    private func kind(_ index: Int32) -> String {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: "an integer"
        case SQLITE_FLOAT: "a real number"
        case SQLITE_TEXT: "text"
        case SQLITE_BLOB: "a blob"
        default: "NULL"
        }
    }

    // MARK: Integers

    /// An integer column within `range`.
    func integer(_ index: Int32, _ column: String, _ range: ClosedRange<Int64>) throws(TickgateError) -> Int64 {
        guard sqlite3_column_type(statement, index) == SQLITE_INTEGER else {
            throw corrupt(column, "holds \(kind(index)) where an integer belongs")
        }
        let value = sqlite3_column_int64(statement, index)
        guard range.contains(value) else {
            throw corrupt(column, "\(value) is outside \(range.lowerBound) ... \(range.upperBound)")
        }
        return value
    }

    /// A span stored in nanoseconds, within `range`.
    func nanoseconds(_ index: Int32, _ column: String, _ range: ClosedRange<Span>) throws(TickgateError) -> Span {
        Span(nanoseconds: try integer(index, column, range.lowerBound.nanoseconds...range.upperBound.nanoseconds))
    }

    /// A span stored in milliseconds, within `range` (checked before it is
    /// scaled, so no value can wrap into range).
    func milliseconds(_ index: Int32, _ column: String, _ range: ClosedRange<Span>) throws(TickgateError) -> Span {
        let low = range.lowerBound.millisecondsRoundedUp
        let high = range.upperBound.nanoseconds / Span.nanosecondsPerMillisecond
        return .milliseconds(try integer(index, column, low...high))
    }

    func flag(_ index: Int32, _ column: String) throws(TickgateError) -> Bool {
        try integer(index, column, 0...1) == 1
    }

    // MARK: Text

    /// A text column of at most `maximumBytes` bytes of UTF-8 with no NUL.
    func text(_ index: Int32, _ column: String, maximumBytes: Int) throws(TickgateError) -> String {
        guard sqlite3_column_type(statement, index) == SQLITE_TEXT else {
            throw corrupt(column, "holds \(kind(index)) where text belongs")
        }
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count <= maximumBytes else {
            throw corrupt(column, "text of \(count) bytes is longer than \(maximumBytes)")
        }
        guard count > 0, let start = sqlite3_column_text(statement, index) else { return "" }
        let bytes = UnsafeBufferPointer(start: start, count: count)
        guard memchr(start, 0, count) == nil else { throw corrupt(column, "text holds a NUL byte") }
        guard UTF8Check.isValid(bytes) else { throw corrupt(column, "text is not valid UTF-8") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text`, or nil for NULL.
    func optionalText(_ index: Int32, _ column: String, maximumBytes: Int) throws(TickgateError) -> String? {
        isNull(index) ? nil : try text(index, column, maximumBytes: maximumBytes)
    }

    /// A scope, subject or realm: what the C API accepts as one.
    func keyName(_ index: Int32, _ column: String) throws(TickgateError) -> KeyName {
        let text = try text(index, column, maximumBytes: Limits.maximumKeyBytes)
        do throws(TickgateError) {
            return try KeyName(text, role: column)
        } catch {
            throw corrupt(column, error.message)
        }
    }

    // MARK: Stamps

    /// The longest stamp as text: two numbers, two slashes and a boot id.
    static let maximumStampBytes = 20 + 20 + 2 + Limits.maximumKeyBytes

    /// A stamp column ("BOOT/WALL/BOOT_ID"), or nil for NULL.
    func optionalStamp(_ index: Int32, _ column: String) throws(TickgateError) -> Stamp? {
        guard let text = try optionalText(index, column, maximumBytes: Self.maximumStampBytes) else { return nil }
        return try stamp(text, column)
    }

    /// Decodes one stamp ("BOOT/WALL/BOOT_ID").
    func stamp<S: StringProtocol>(_ text: S, _ column: String) throws(TickgateError) -> Stamp {
        let parts = text.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let boot = Int64(parts[0]), let wall = Int64(parts[1]) else {
            throw corrupt(column, "\"\(text.prefix(60))\" is not a stamp (BOOT/WALL/BOOT_ID)")
        }
        return try stamp(bootID: String(parts[2]), boot: boot, wall: wall, column)
    }

    /// A stamp's parts, checked: both clocks non-negative, the boot id 1 to
    /// 256 bytes with no line break.
    func stamp(bootID: String, boot: Int64, wall: Int64, _ column: String) throws(TickgateError) -> Stamp {
        guard boot >= 0, wall >= 0 else {
            throw corrupt(column, "a stamp has a negative clock reading (\(boot), \(wall))")
        }
        guard !bootID.isEmpty, bootID.utf8.count <= Limits.maximumKeyBytes,
              !bootID.contains(where: \.isNewline) else {
            throw corrupt(column, "a stamp's boot id is empty, longer than \(Limits.maximumKeyBytes) bytes or has a line break")
        }
        return Stamp(bootID: bootID, boot: boot, wall: wall)
    }
}
