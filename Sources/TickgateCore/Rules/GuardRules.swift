/// The pumping guard's rules, as pure functions: counts and thresholds in,
/// the judgment out. Memory and SQLite call them; `rules.lua` holds the
/// same functions (`R.guard_judge`, `R.verified_daily_maximum`), which
/// judge a guarded send on Redis inside the script that counts it.
enum GuardRules {
    /// `percent` % of `count`, rounded down.
    static func percent(_ count: Int, _ percent: Int) -> Int { count &* percent / 100 }

    /// The windows a guarded send at `now` counts in: codes sent in
    /// (`unverifiedSinceDay` or `unverifiedSinceHour`, `unverifiedUntil`]
    /// and not verified, where `unverifiedUntil` is `unverifiedAfter`
    /// before now (a code in flight is no evidence yet), and verifications
    /// in the last day or hour (after `verifiedSinceDay` or
    /// `verifiedSinceHour`).
    struct Windows: Equatable {
        var unverifiedUntil: Instant
        var unverifiedSinceDay: Instant
        var unverifiedSinceHour: Instant
        var verifiedSinceDay: Instant
        var verifiedSinceHour: Instant
    }

    static func windows(at now: Instant, unverifiedAfter: Span) -> Windows {
        let day = Span(microseconds: RuleConstants.dayMicroseconds)
        let hour = Span(microseconds: RuleConstants.hourMicroseconds)
        let due = now.advanced(by: Span(nanoseconds: -unverifiedAfter.nanoseconds))
        return Windows(unverifiedUntil: due, unverifiedSinceDay: due.advanced(by: Span(nanoseconds: -day.nanoseconds)),
                       unverifiedSinceHour: due.advanced(by: Span(nanoseconds: -hour.nanoseconds)),
                       verifiedSinceDay: now.advanced(by: Span(nanoseconds: -day.nanoseconds)),
                       verifiedSinceHour: now.advanced(by: Span(nanoseconds: -hour.nanoseconds)))
    }

    /// The most codes verified in one UTC day of the last `historyDays`
    /// days (today included), from codes verified per day number.
    static func verifiedDailyMaximum(_ days: [Int64: Int], today: Int64, historyDays: Int) -> Int {
        days.filter { $0.key > today - Int64(historyDays) && $0.key <= today }.map(\.value).max() ?? 0
    }

    /// How many national digits (after the country calling code) name a
    /// number's ranges: a carrier's block of numbers is found at one of
    /// these lengths (docs/pumping.md, "Number ranges").
    static let rangeNationalDigits = [2, 4, 6]

    /// The ranges of `number`, widest first: "+" and the calling code and
    /// 2, 4, 6 national digits ("+4475", "+447520", "+44752000"); a length
    /// that would leave fewer than 2 national digits out of the range
    /// (a number of one or two ranges only) has none.
    static func ranges(of number: PhoneNumber) -> [String] {
        let national = number.digits.count - number.callingCode.count
        return rangeNationalDigits.filter { $0 + 2 <= national }
            .map { "+" + String(number.digits.prefix(number.callingCode.count + $0)) }
    }

    /// The ranges of a guarded key's subject (none if it is no number).
    ///
    /// A range's unverified counts for a send leave out the codes of the
    /// send's own subject: a number is judged by the other numbers of its
    /// ranges, and its own resends are its key's policy's to limit (a user
    /// whose first code never came, alone in a new range, would otherwise be
    /// challenged for asking again). Each store's count does so:
    /// `ConversionLedger.counts`, `SQLiteFile.guardCounts`, and guard.lua's
    /// screen (`B us:SUBJECT`). The country's and the address's counts keep
    /// every code.
    static func ranges(ofSubject subject: KeyName) -> [String] {
        (try? PhoneNumber.parse(subject.value)).map { ranges(of: $0) } ?? []
    }

    /// A range's daily and hourly thresholds: the country's formulas (and
    /// its percents and divisor) over the range's own verified history,
    /// with the range's minimums, or a new range's when none of its codes
    /// was verified in the history (a range a carrier pays for is one that
    /// never verifies; a user's own range verifies with its first code).
    static func rangeThresholds(_ r: RangeCounts, by t: GuardThresholds) -> (daily: Int, hourly: Int) {
        let known = r.verifiedDailyMaximum > 0 || r.verifiedDay > 0
        let daily = max(known ? t.rangeDailyMinimum : t.rangeNewDailyMinimum,
                        percent(r.verifiedDailyMaximum, t.countryHistoryPercent),
                        percent(r.verifiedDay, t.countryDayPercent))
        let hourly = max(known ? t.rangeHourlyMinimum : t.rangeNewHourlyMinimum,
                         daily / max(t.countryHourlyDivisor, 1),
                         percent(r.verifiedHour, t.countryHourPercent))
        return (daily, hourly)
    }

    /// What a guard answers a send judged `judgment`: granted (and
    /// counted), refused, or a challenge asked (neither counted). In
    /// `.enforce`, a send whose every warning is one of `challenge` is
    /// asked for a challenge, or granted if the person `passed` one
    /// (guard.lua's screen: R.guard_answer).
    enum Answer: Equatable { case grant, refuse, challenge }

    static func answer(_ judgment: GuardJudgment, mode: Guard.Mode, challenge: PumpingWarnings,
                       passed: Bool) -> Answer {
        guard refuses(judgment, mode: mode) else { return .grant }
        guard judgment.warnings.isSubset(of: challenge) else { return .refuse }
        return passed ? .grant : .challenge
    }

    /// Whether a granted code counts among its country's unverified codes:
    /// not when a passed challenge let it through warnings of its ranges
    /// alone. The range that challenged it keeps counting it (and stays
    /// warned); the country, the last resort for an attack no range sees,
    /// leaves it out: else the few bots that pass a range's challenges
    /// fill the country's hour, and every user of the country is
    /// challenged. A pass through a country's or an address's warning
    /// counts as any code.
    static func countsInCountry(_ judgment: GuardJudgment) -> Bool {
        let ranges: PumpingWarnings = [.unverifiedByRangeDaily, .unverifiedByRangeHourly]
        return !(judgment.challengePassed && !judgment.warnings.isEmpty && judgment.warnings.isSubset(of: ranges))
    }

    /// True if a guard in `mode` refuses a send judged `judgment` (enforced
    /// and warned): it is not counted (guard.lua's screen: mode 2 and any
    /// warning bit).
    static func refuses(_ judgment: GuardJudgment, mode: Guard.Mode) -> Bool {
        mode == .enforce && !judgment.warnings.isEmpty
    }

    /// The thresholds for `counts` (the send itself not counted), and the
    /// warnings the send raises: a threshold of N lets N unverified codes
    /// through and warns at the next (GuardThresholds has the formulas).
    static func judge(_ counts: GuardCounts, by t: GuardThresholds) -> GuardJudgment {
        var judgment = GuardJudgment()
        let countryDaily = max(t.countryDailyMinimum, percent(counts.countryVerifiedDailyMaximum, t.countryHistoryPercent),
                               percent(counts.countryVerifiedDay, t.countryDayPercent))
        let countryHourly = max(t.countryHourlyMinimum, countryDaily / max(t.countryHourlyDivisor, 1),
                                percent(counts.countryVerifiedHour, t.countryHourPercent))
        judgment.countryDaily = countryDaily
        judgment.countryHourly = countryHourly
        if counts.countryUnverifiedDay + 1 > countryDaily { judgment.warnings.insert(.unverifiedByCountryDaily) }
        if counts.countryUnverifiedHour + 1 > countryHourly { judgment.warnings.insert(.unverifiedByCountryHourly) }
        if counts.hasAddress {
            let addressDaily = max(t.addressDailyMinimum, percent(counts.addressVerifiedDay, t.addressDayPercent))
            let addressHourly = max(t.addressHourlyMinimum,
                                    percent(counts.addressVerifiedDay, t.addressDayPercent) / max(t.addressHourlyDivisor, 1))
            judgment.addressDaily = addressDaily
            judgment.addressHourly = addressHourly
            if counts.addressUnverifiedDay + 1 > addressDaily { judgment.warnings.insert(.unverifiedByAddressDaily) }
            if counts.addressUnverifiedHour + 1 > addressHourly { judgment.warnings.insert(.unverifiedByAddressHourly) }
            if counts.addressCountriesDay > t.addressCountriesMaximum { judgment.warnings.insert(.countriesByAddressDaily) }
        }
        // The ranges, widest first: the narrowest that warns is named.
        for r in counts.ranges {
            let (daily, hourly) = rangeThresholds(r, by: t)
            var warned: PumpingWarnings = []
            if r.unverifiedDay + 1 > daily { warned.insert(.unverifiedByRangeDaily) }
            if r.unverifiedHour + 1 > hourly { warned.insert(.unverifiedByRangeHourly) }
            guard !warned.isEmpty else { continue }
            judgment.warnings.formUnion(warned)
            judgment.range = r.range
            judgment.rangeUnverifiedDay = r.unverifiedDay
            judgment.rangeUnverifiedHour = r.unverifiedHour
            judgment.rangeDaily = daily
            judgment.rangeHourly = hourly
        }
        return judgment
    }
}
