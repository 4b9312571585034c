/// A scope's guard against SMS pumping: which destinations may receive
/// codes, who is always allowed, and the conversion signals' thresholds.
/// A guarded scope's subjects are phone numbers in E.164 form.
///
/// Checked in this order on every send of the scope, before its cooldowns
/// and budgets: the number (E.164), the always-allow lists (a match skips
/// the destination lists and the signals, and the budgets if
/// `alwaysAllowSkipsBudgets`), the destination lists, the signals.
public struct Guard: Sendable, Equatable {
    public enum Mode: Int, Sendable {
        /// Numbers and destination lists only: no signal is counted.
        case off = 0
        /// The signals are counted and judged, and a send that crosses a
        /// threshold is recorded with its warnings, but granted.
        case recordOnly = 1
        /// A send that crosses a threshold is refused
        /// (`.pumpingSuspected`).
        case enforce = 2
    }

    public var mode: Mode
    /// Destinations that may receive codes; empty: every one.
    public var allowed: [Destination]
    /// Destinations that may not (checked after `allowed`).
    public var refused: [Destination]
    public var alwaysAllowNumbers: [NumberPattern]
    public var alwaysAllowAddresses: [AddressRange]
    /// Regions of the number (ISO 3166-1 alpha-2) always allowed.
    public var alwaysAllowCountries: [String]
    public var alwaysAllowSkipsBudgets: Bool
    public var thresholds: GuardThresholds
    /// On Redis: keep about this many decision records in the scope's
    /// stream ("P u{SCOPE}records"); 0: none.
    public var recordStreamLength = 0

    /// Most entries a record stream may keep.
    public static let maximumStreamLength = 10_000_000

    public init(mode: Mode = .recordOnly, allowed: [Destination] = [], refused: [Destination] = [],
                alwaysAllowNumbers: [NumberPattern] = [], alwaysAllowAddresses: [AddressRange] = [],
                alwaysAllowCountries: [String] = [], alwaysAllowSkipsBudgets: Bool = false,
                thresholds: GuardThresholds = GuardThresholds()) {
        self.mode = mode
        self.allowed = allowed
        self.refused = refused
        self.alwaysAllowNumbers = alwaysAllowNumbers
        self.alwaysAllowAddresses = alwaysAllowAddresses
        self.alwaysAllowCountries = alwaysAllowCountries
        self.alwaysAllowSkipsBudgets = alwaysAllowSkipsBudgets
        self.thresholds = thresholds
    }

    /// Most entries in one list.
    public static let maximumEntries = 1000

    /// Throws unless every list and threshold is in range.
    public func validated() throws(TickgateError) -> Guard {
        for (name, count) in [("allowed destinations", allowed.count), ("refused destinations", refused.count),
                              ("always-allow numbers", alwaysAllowNumbers.count),
                              ("always-allow addresses", alwaysAllowAddresses.count),
                              ("always-allow countries", alwaysAllowCountries.count)]
        where count > Self.maximumEntries {
            throw TickgateError(.invalidArgument, "\(name): \(count) entries; a list holds at most \(Self.maximumEntries)")
        }
        for region in alwaysAllowCountries where !CountryTable.isRegion(region) {
            throw TickgateError(.invalidArgument, "always-allow country \"\(region.prefix(20))\" is not a region code such as CN or US")
        }
        try thresholds.validate()
        guard (0...Self.maximumStreamLength).contains(recordStreamLength) else {
            throw TickgateError(.invalidArgument,
                "record_stream_length is \(recordStreamLength); it must be 0 ... \(Self.maximumStreamLength)")
        }
        return self
    }

    // MARK: What a send's number and address meet

    /// Why a send bypasses the signals: the always-allow entry it matched.
    func alwaysAllowed(_ number: PhoneNumber, _ address: ClientAddress?) -> String? {
        if let pattern = alwaysAllowNumbers.first(where: { $0.matches(number) }) {
            return "always-allow number \(pattern)"
        }
        if let address, let range = alwaysAllowAddresses.first(where: { $0.contains(address) }) {
            return "always-allow address \(range)"
        }
        if !number.region.isEmpty, alwaysAllowCountries.contains(number.region) {
            return "always-allow country \(number.region)"
        }
        return nil
    }

    /// The destination rule that refuses `number`, if one does.
    func refusal(of number: PhoneNumber) -> String? {
        if !allowed.isEmpty, !allowed.contains(where: { $0.matches(number) }) {
            return "\(Self.country(of: number)) is not on the allowed list"
        }
        if let rule = refused.first(where: { $0.matches(number) }) {
            return "\(rule) is on the refused list"
        }
        return nil
    }

    /// The country a signal counts a number in: its region, or its calling
    /// code for a non-geographic number ("+800").
    static func country(of number: PhoneNumber) -> String {
        number.region.isEmpty ? "+" + number.callingCode : number.region
    }

    // MARK: The store's form

    /// One line of text, as stores keep it: fields separated by ';', lists
    /// by ','. Every entry is its own canonical text, so a read-back parses.
    var encoded: String {
        func list(_ items: [some CustomStringConvertible]) -> String { items.map(\.description).joined(separator: ",") }
        return ["1", String(mode.rawValue), list(allowed), list(refused), list(alwaysAllowNumbers),
                list(alwaysAllowAddresses), alwaysAllowCountries.joined(separator: ","),
                alwaysAllowSkipsBudgets ? "1" : "0", thresholds.encoded, String(recordStreamLength)]
            .joined(separator: ";")
    }

    /// A guard read back from a store; throws `bad(why)` on anything not
    /// written by `encoded`.
    static func decode(_ text: String, _ bad: (String) -> TickgateError) throws(TickgateError) -> Guard {
        let fields = text.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 10, fields[0] == "1" else { throw bad("is not a guard of format 1") }
        guard let raw = Int(fields[1]), let mode = Mode(rawValue: raw) else { throw bad("has an unknown guard mode") }
        func entries(_ field: String) -> [String] {
            field.isEmpty ? [] : field.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        }
        do throws(TickgateError) {
            var parsed = Guard(mode: mode)
            parsed.allowed = try entries(fields[2]).map { (entry) throws(TickgateError) in try Destination.parse(entry) }
            parsed.refused = try entries(fields[3]).map { (entry) throws(TickgateError) in try Destination.parse(entry) }
            parsed.alwaysAllowNumbers = try entries(fields[4]).map { (entry) throws(TickgateError) in try NumberPattern.parse(entry) }
            parsed.alwaysAllowAddresses = try entries(fields[5]).map { (entry) throws(TickgateError) in try AddressRange.parse(entry) }
            parsed.alwaysAllowCountries = entries(fields[6])
            guard fields[7] == "0" || fields[7] == "1" else { throw bad("has a bad always-allow flag") }
            parsed.alwaysAllowSkipsBudgets = fields[7] == "1"
            parsed.thresholds = try GuardThresholds.decode(fields[8], bad)
            guard let length = Int(fields[9]) else { throw bad("has a bad record stream length") }
            parsed.recordStreamLength = length
            return try parsed.validated()
        } catch {
            throw error.status == .storeCorrupt ? error : bad("holds a bad guard: \(error.message)")
        }
    }
}
