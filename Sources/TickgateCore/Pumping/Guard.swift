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
    /// Count and judge the number's ranges too (`GuardRules.ranges`),
    /// each by the country's formulas over its own verified history
    /// (docs/pumping.md, "Number ranges").
    public var rangeSignals = false
    /// The signals that answer with a challenge instead of a refusal in
    /// `.enforce` (`GuardRules.answer`): `.challengeRequired`, and a send
    /// after `Engine.challengePassed` goes through them, once.
    public var challengeSignals: PumpingWarnings = []
    /// How long a passed challenge waits for its send.
    public var challengePassSeconds = 600

    /// The longest `challengePassSeconds`.
    public static let maximumChallengePassSeconds = 3600

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
        guard challengeSignals.isSubset(of: PumpingWarnings.every) else {
            throw TickgateError(.invalidArgument,
                "challenge_signals is \(challengeSignals.rawValue); it holds bits that are no TG_WARNING_*")
        }
        guard (1...Self.maximumChallengePassSeconds).contains(challengePassSeconds) else {
            throw TickgateError(.invalidArgument,
                "challenge_pass_seconds is \(challengePassSeconds); it must be 1 ... \(Self.maximumChallengePassSeconds)")
        }
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
    /// The ranges a send to `subject` is counted in: none unless
    /// `rangeSignals` (`GuardRules.ranges`).
    func ranges(ofSubject subject: KeyName) -> [String] {
        rangeSignals ? GuardRules.ranges(ofSubject: subject) : []
    }

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

    /// What a release before 0.2.0 does not read, kept beside `encoded`
    /// (not in it: 0.1.0 takes a guard text of other fields for corrupt):
    /// "" when every such setting is at its default.
    var extensionText: String {
        let t = thresholds
        let fields = [("ranges", rangeSignals ? 1 : 0), ("range_daily_minimum", t.rangeDailyMinimum),
                      ("range_hourly_minimum", t.rangeHourlyMinimum), ("challenge", Int(challengeSignals.rawValue)),
                      ("challenge_pass_seconds", challengePassSeconds),
                      ("range_new_daily_minimum", t.rangeNewDailyMinimum),
                      ("range_new_hourly_minimum", t.rangeNewHourlyMinimum)]
        let defaults = Guard()
        guard self.extensionFields != defaults.extensionFields else { return "" }
        return fields.map { "\($0.0)=\($0.1)" }.joined(separator: ";")
    }

    private var extensionFields: [Int] {
        [rangeSignals ? 1 : 0, thresholds.rangeDailyMinimum, thresholds.rangeHourlyMinimum,
         Int(challengeSignals.rawValue), challengePassSeconds, thresholds.rangeNewDailyMinimum,
         thresholds.rangeNewHourlyMinimum]
    }

    /// The guard as a store compares it: `encoded`, then a line with
    /// `extensionText` if it is not empty.
    var storedText: String { extensionText.isEmpty ? encoded : encoded + "\n" + extensionText }

    /// Applies an extension read back from a store (`extensionText`).
    mutating func extend(_ text: String, _ bad: (String) -> TickgateError) throws(TickgateError) {
        for field in text.split(separator: ";") {
            let pair = field.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, let value = Int(pair[1]), (0...GuardThresholds.maximumValue).contains(value) else {
                throw bad("holds a bad guard setting \"\(field.prefix(40))\"")
            }
            switch pair[0] {
            case "ranges" where value <= 1: rangeSignals = value == 1
            case "range_daily_minimum": thresholds.rangeDailyMinimum = value
            case "range_hourly_minimum": thresholds.rangeHourlyMinimum = value
            case "range_new_daily_minimum": thresholds.rangeNewDailyMinimum = value
            case "range_new_hourly_minimum": thresholds.rangeNewHourlyMinimum = value
            case "challenge": challengeSignals = PumpingWarnings(rawValue: UInt32(value))
            case "challenge_pass_seconds": challengePassSeconds = value
            default: throw bad("holds an unknown guard setting \"\(field.prefix(40))\"")
            }
        }
    }

    /// A guard read back as `storedText` wrote it.
    static func decodeStored(_ text: String, _ bad: (String) -> TickgateError) throws(TickgateError) -> Guard {
        let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        var parsed = try decode(lines[0], bad)
        guard lines.count > 1 else { return parsed }
        try parsed.extend(lines[1], bad)
        do { return try parsed.validated() } catch { throw bad("holds a bad guard: \(error.message)") }
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
