/// The conversion signals' thresholds. The defaults are the formulas of
/// Authgear's fraud-protection spec (docs/specs/fraud-protection.md in
/// authgear/authgear-server, read 2026-11-26); every constant is settable.
///
///   country, a day:  max(countryDailyMinimum,
///                        countryHistoryPercent % of the most codes verified in one
///                          day of the last historyDays days,
///                        countryDayPercent % of the codes verified in the last 24 h)
///   country, an hour: max(countryHourlyMinimum, the daily threshold / countryHourlyDivisor,
///                         countryHourPercent % of the codes verified in the last hour)
///   address, a day:  max(addressDailyMinimum, addressDayPercent % of the codes
///                        verified from it in the last 24 h)
///   address, an hour: max(addressHourlyMinimum, the same / addressHourlyDivisor)
///   countries per address in a day: addressCountriesMaximum (countries
///                        with a code verified from the address that day
///                        do not count)
///
/// A send is judged with itself counted: a threshold of 20 lets 20
/// unverified codes through and warns at the 21st.
///
/// A code counts as unverified once `unverifiedAfterSeconds` have passed
/// since its send with no verification (the anchor counts it from its
/// send: 0). A code in flight is not evidence yet: most users type theirs
/// within a minute or two, and counting them from the send refused
/// legitimate users at busy hours in the simulation (docs/pumping.md, "What
/// the guard does to a day's traffic"). The windows are shifted by it: the hourly count is of codes
/// sent between an hour and that long before now.
public struct GuardThresholds: Sendable, Equatable {
    public var countryDailyMinimum = 20
    public var countryHistoryPercent = 20
    public var countryDayPercent = 20
    public var countryHourlyMinimum = 3
    public var countryHourlyDivisor = 6
    public var countryHourPercent = 20
    public var addressDailyMinimum = 10
    public var addressDayPercent = 20
    public var addressHourlyMinimum = 5
    public var addressHourlyDivisor = 6
    public var addressCountriesMaximum = 3
    public var historyDays = 14
    public var unverifiedAfterSeconds = 120
    /// A number range's least thresholds (`GuardRules.rangeThresholds`),
    /// a day and an hour: of a range with a code verified in the last
    /// `historyDays` days, and of a new one (none verified). Kept beside
    /// the others (`Guard.extensionText`), not in `encoded`, which 0.1.0
    /// reads. docs/pumping.md ("Number ranges") says why these values.
    public var rangeDailyMinimum = 40
    public var rangeHourlyMinimum = 8
    public var rangeNewDailyMinimum = 5
    public var rangeNewHourlyMinimum = 1

    public init() {}

    /// Largest value any threshold constant may take.
    public static let maximumValue = 1_000_000
    /// Most days of history the country signal looks back.
    public static let maximumHistoryDays = 60
    /// Longest a code may stay uncounted (an hour: beyond it the hourly
    /// signal would count nothing of the last hour).
    public static let maximumUnverifiedAfterSeconds = Int(RuleConstants.longestUnverifiedAfterMicroseconds / 1_000_000)

    /// How long after its send a code counts as unverified.
    var unverifiedAfter: Span { Span(nanoseconds: Int64(unverifiedAfterSeconds) * 1_000_000_000) }
    /// The longest of those, for what stores keep.
    static var longestUnverifiedAfter: Span { Span(nanoseconds: Int64(maximumUnverifiedAfterSeconds) * 1_000_000_000) }

    var all: [Int] {
        [countryDailyMinimum, countryHistoryPercent, countryDayPercent, countryHourlyMinimum, countryHourlyDivisor,
         countryHourPercent, addressDailyMinimum, addressDayPercent, addressHourlyMinimum, addressHourlyDivisor,
         addressCountriesMaximum, historyDays, unverifiedAfterSeconds]
    }

    static let names = ["country_daily_minimum", "country_history_percent", "country_day_percent",
                        "country_hourly_minimum", "country_hourly_divisor", "country_hour_percent",
                        "address_daily_minimum", "address_day_percent", "address_hourly_minimum",
                        "address_hourly_divisor", "address_countries_maximum", "history_days",
                        "unverified_after_seconds"]

    func validate() throws(TickgateError) {
        for (name, value) in zip(Self.names + ["range_daily_minimum", "range_hourly_minimum",
                                               "range_new_daily_minimum", "range_new_hourly_minimum"],
                                 all + [rangeDailyMinimum, rangeHourlyMinimum, rangeNewDailyMinimum,
                                        rangeNewHourlyMinimum])
        where !(0...Self.maximumValue).contains(value) {
            throw TickgateError(.invalidArgument, "\(name) is \(value); it must be 0 ... \(Self.maximumValue)")
        }
        for (name, value) in [("country_hourly_divisor", countryHourlyDivisor),
                              ("address_hourly_divisor", addressHourlyDivisor)] where value < 1 {
            throw TickgateError(.invalidArgument, "\(name) is \(value); it must be 1 or more")
        }
        guard (1...Self.maximumHistoryDays).contains(historyDays) else {
            throw TickgateError(.invalidArgument, "history_days is \(historyDays); it must be 1 ... \(Self.maximumHistoryDays)")
        }
        guard (0...Self.maximumUnverifiedAfterSeconds).contains(unverifiedAfterSeconds) else {
            throw TickgateError(.invalidArgument,
                "unverified_after_seconds is \(unverifiedAfterSeconds); it must be 0 ... \(Self.maximumUnverifiedAfterSeconds)")
        }
    }

    var encoded: String { all.map(String.init).joined(separator: ",") }

    static func decode(_ text: String, _ bad: (String) -> TickgateError) throws(TickgateError) -> GuardThresholds {
        let parsed = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
        guard !parsed.contains(nil) else { throw bad("holds bad guard thresholds") }
        let values = parsed.compactMap { $0 }
        // Twelve values: written before unverified_after_seconds, which
        // counted every code from its send (0).
        guard values.count == names.count || values.count == names.count - 1 else {
            throw bad("holds bad guard thresholds")
        }
        var t = GuardThresholds()
        t.countryDailyMinimum = values[0]; t.countryHistoryPercent = values[1]; t.countryDayPercent = values[2]
        t.countryHourlyMinimum = values[3]; t.countryHourlyDivisor = values[4]; t.countryHourPercent = values[5]
        t.addressDailyMinimum = values[6]; t.addressDayPercent = values[7]; t.addressHourlyMinimum = values[8]
        t.addressHourlyDivisor = values[9]; t.addressCountriesMaximum = values[10]; t.historyDays = values[11]
        t.unverifiedAfterSeconds = values.count > 12 ? values[12] : 0
        do { try t.validate() } catch { throw bad("holds bad guard thresholds: \(error.message)") }
        return t
    }

    // MARK: Judging

    /// The thresholds for counts `counts`, and the warnings a send with
    /// those counts (itself not yet counted) raises (`GuardRules.judge`).
    func judge(_ counts: GuardCounts) -> GuardJudgment { GuardRules.judge(counts, by: self) }
}

/// What the store counts for one send: the codes of the number's country
/// and of the client's address in the last hour and day (the send itself
/// not counted), and the verified traffic the thresholds adapt to.
public struct GuardCounts: Sendable, Equatable {
    public var countryUnverifiedDay = 0
    public var countryUnverifiedHour = 0
    public var countryVerifiedDay = 0
    public var countryVerifiedHour = 0
    /// The most codes to the country verified in one UTC day of the last
    /// `historyDays` days (today included).
    public var countryVerifiedDailyMaximum = 0
    public var hasAddress = false
    public var addressUnverifiedDay = 0
    public var addressUnverifiedHour = 0
    public var addressVerifiedDay = 0
    /// Distinct countries the address asked codes for in the last day, this
    /// send's included, leaving out those it verified a code for that day.
    public var addressCountriesDay = 0
    /// The number's ranges, widest first (`GuardRules.ranges`), when the
    /// guard has range signals; empty otherwise.
    public var ranges: [RangeCounts] = []

    public init() {}
}

/// One number range's counts: codes to numbers of the range (the E.164
/// prefix `range`, "+447520"), as the country's are counted.
public struct RangeCounts: Sendable, Equatable {
    public var range: String
    public var unverifiedDay = 0
    public var unverifiedHour = 0
    public var verifiedDay = 0
    public var verifiedHour = 0
    /// The most codes of the range verified in one UTC day of the last
    /// `historyDays` days (today included).
    public var verifiedDailyMaximum = 0

    public init(range: String) { self.range = range }
}

/// The warnings a send raised, and the thresholds it was judged by.
public struct GuardJudgment: Sendable, Equatable {
    public var warnings: PumpingWarnings = []
    public var countryDaily = 0
    public var countryHourly = 0
    public var addressDaily = 0
    public var addressHourly = 0
    /// The narrowest range whose signal warned ("" when none did), and
    /// its counts and thresholds.
    public var range = ""
    public var rangeUnverifiedDay = 0
    public var rangeUnverifiedHour = 0
    public var rangeDaily = 0
    public var rangeHourly = 0
    /// The send went through its warnings by a challenge the person passed
    /// (its pass used up).
    public var challengePassed = false

    public init() {}
}

/// The pumping signals' warnings (TG_WARNING_* in the C header).
public struct PumpingWarnings: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let unverifiedByCountryDaily = PumpingWarnings(rawValue: 0x1)
    public static let unverifiedByCountryHourly = PumpingWarnings(rawValue: 0x2)
    public static let unverifiedByAddressDaily = PumpingWarnings(rawValue: 0x4)
    public static let unverifiedByAddressHourly = PumpingWarnings(rawValue: 0x8)
    public static let countriesByAddressDaily = PumpingWarnings(rawValue: 0x10)
    public static let unverifiedByRangeDaily = PumpingWarnings(rawValue: 0x20)
    public static let unverifiedByRangeHourly = PumpingWarnings(rawValue: 0x40)

    /// Every warning.
    public static let every = PumpingWarnings(rawValue: 0x7F)

    public static let all: [(PumpingWarnings, String)] = [
        (.unverifiedByCountryDaily, "unverified_by_country_daily"),
        (.unverifiedByCountryHourly, "unverified_by_country_hourly"),
        (.unverifiedByAddressDaily, "unverified_by_address_daily"),
        (.unverifiedByAddressHourly, "unverified_by_address_hourly"),
        (.countriesByAddressDaily, "countries_by_address_daily"),
        (.unverifiedByRangeDaily, "unverified_by_range_daily"),
        (.unverifiedByRangeHourly, "unverified_by_range_hourly"),
    ]

    /// The warnings' names, comma-separated.
    public var names: String { Self.all.filter { contains($0.0) }.map(\.1).joined(separator: ",") }
}
