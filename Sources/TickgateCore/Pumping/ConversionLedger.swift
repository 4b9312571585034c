/// One guarded scope's codes and verifications, as memory keeps them (no
/// store): what the conversion signals count. A store keeps the same
/// (SQLiteStore: rows of guard_codes; Redis: Scripts/guard.lua).
///
/// A code counts as unverified from `unverifiedAfter` past its send until
/// `verified` marks it, for a day. Verifications are counted by when they happened, and per
/// day of the clock for the country's history.
struct ConversionLedger {
    struct Code {
        var subject: KeyName
        var country: String
        var address: ClientAddress?
        /// The number's ranges it was counted in (none: no range signals).
        var ranges: [String] = []
        var sentAt: Instant
        var verified: Bool
        /// Counted among its country's unverified codes
        /// (`GuardRules.countsInCountry`).
        var inCountry = true
    }

    /// One country's or one address's codes.
    struct Series {
        /// When each code was sent, oldest first.
        var sent: [Instant] = []
        /// When each verified code was sent, oldest first.
        var verifiedSent: [Instant] = []
        /// When each verification happened, oldest first.
        var verifiedAt: [Instant] = []

        /// Codes sent after `start` and at or before `end`, not verified.
        func unverified(since start: Instant, until end: Instant) -> Int {
            Self.later(than: start, sent) - Self.later(than: start, verifiedSent)
                - Self.later(than: end, sent) + Self.later(than: end, verifiedSent)
        }

        func verified(since start: Instant) -> Int { Self.later(than: start, verifiedAt) }

        /// How many of the sorted `list` are later than `start`.
        static func later(than start: Instant, _ list: [Instant]) -> Int {
            var low = 0, high = list.count
            while low < high {
                let mid = (low + high) / 2
                if list[mid] > start { high = mid } else { low = mid + 1 }
            }
            return list.count - low
        }

        static func insertSorted(_ instant: Instant, into list: inout [Instant]) {
            var index = list.count
            while index > 0, list[index - 1] > instant { index -= 1 }
            list.insert(instant, at: index)
        }

        mutating func prune(sentBefore sentStart: Instant, before start: Instant) {
            func drop(_ list: inout [Instant], _ start: Instant) {
                let old = list.count - Self.later(than: start, list)
                if old > 0 { list.removeFirst(old) }
            }
            drop(&sent, sentStart)
            drop(&verifiedSent, sentStart)
            drop(&verifiedAt, start)
        }

        var isEmpty: Bool { sent.isEmpty && verifiedAt.isEmpty }
    }

    static let day = Span(nanoseconds: 86_400 * 1_000_000_000)
    static let hour = Span(nanoseconds: 3_600 * 1_000_000_000)

    private(set) var codes: [String: Code] = [:]
    /// A key's last code (the one `verified` marks).
    private(set) var latest: [KeyName: String] = [:]
    /// A key's codes counted in its ranges, oldest first, with their send:
    /// what a range's counts for the key's own sends leave out
    /// (`GuardRules.ranges(ofSubject:)`). Pruned by send time once a day
    /// (a pass over every id each minute, hashing each, cost a busy scope
    /// more than its sends).
    private var rangedCodes: [KeyName: [(id: String, sentAt: Instant)]] = [:]
    private var countries: [String: Series] = [:]
    private var addresses: [ClientAddress: Series] = [:]
    /// Per number range (`GuardRules.ranges`), as per country.
    private(set) var ranges: [String: Series] = [:]
    /// Per address, per country: its last send and last verification.
    private var addressCountries: [ClientAddress: [String: (sent: Instant, verified: Instant?)]] = [:]
    /// Per country, per day of the clock: codes verified.
    private var days: [String: [Int64: Int]] = [:]
    /// Per range, per day of the clock: codes verified.
    private(set) var rangeDays: [String: [Int64: Int]] = [:]
    private var lastPrune: Instant?
    /// The day of the clock `days` and `rangeDays` were last pruned on.
    private var lastPruneDay: Int64?

    static func dayNumber(_ instant: Instant) -> Int64 {
        // Rounded down, before zero too (-1 ns is day -1).
        let nanoseconds = instant.nanoseconds, day = Self.day.nanoseconds
        return nanoseconds >= 0 ? nanoseconds / day : -((-(nanoseconds &+ 1)) / day) - 1
    }

    /// The counts for a send to `subject` in `country` (and its `ranges`)
    /// from `address` at `now`, codes counted unverified from
    /// `unverifiedAfter` past their send; a range's leave out the
    /// subject's own codes.
    func counts(subject: KeyName, country: String, ranges names: [String] = [], address: ClientAddress?,
                historyDays: Int, unverifiedAfter: Span, at now: Instant) -> GuardCounts {
        var counts = GuardCounts()
        let w = GuardRules.windows(at: now, unverifiedAfter: unverifiedAfter)
        let (dayAgo, hourAgo, due) = (w.verifiedSinceDay, w.verifiedSinceHour, w.unverifiedUntil)
        let (sentDayAgo, sentHourAgo) = (w.unverifiedSinceDay, w.unverifiedSinceHour)
        if let series = countries[country] {
            counts.countryUnverifiedDay = series.unverified(since: sentDayAgo, until: due)
            counts.countryUnverifiedHour = series.unverified(since: sentHourAgo, until: due)
            counts.countryVerifiedDay = series.verified(since: dayAgo)
            counts.countryVerifiedHour = series.verified(since: hourAgo)
        }
        if let history = days[country] {
            let today = Self.dayNumber(now)
            counts.countryVerifiedDailyMaximum = GuardRules.verifiedDailyMaximum(history, today: today,
                                                                                 historyDays: historyDays)
        }
        // The subject's own codes that its ranges (each of them: the ranges
        // are the subject's) count unverified now.
        let own = names.isEmpty ? [] : (rangedCodes[subject] ?? [])
            .filter { $0.sentAt > sentDayAgo && $0.sentAt <= due && codes[$0.id]?.verified == false }
        let ownHour = own.filter { $0.sentAt > sentHourAgo }.count
        for name in names {
            var range = RangeCounts(range: name)
            if let series = ranges[name] {
                range.unverifiedDay = max(0, series.unverified(since: sentDayAgo, until: due) - own.count)
                range.unverifiedHour = max(0, series.unverified(since: sentHourAgo, until: due) - ownHour)
                range.verifiedDay = series.verified(since: dayAgo)
                range.verifiedHour = series.verified(since: hourAgo)
            }
            if let history = rangeDays[name] {
                range.verifiedDailyMaximum = GuardRules.verifiedDailyMaximum(history, today: Self.dayNumber(now),
                                                                             historyDays: historyDays)
            }
            counts.ranges.append(range)
        }
        if let address {
            counts.hasAddress = true
            if let series = addresses[address] {
                counts.addressUnverifiedDay = series.unverified(since: sentDayAgo, until: due)
                counts.addressUnverifiedHour = series.unverified(since: sentHourAgo, until: due)
                counts.addressVerifiedDay = series.verified(since: dayAgo)
            }
            var asked = Set<String>([country])
            for (other, seen) in addressCountries[address] ?? [:] where seen.sent > dayAgo {
                asked.insert(other)
            }
            for (other, seen) in addressCountries[address] ?? [:] {
                if let verified = seen.verified, verified > dayAgo { asked.remove(other) }
            }
            counts.addressCountriesDay = asked.count
        }
        return counts
    }

    /// A code went out to `subject` (its key's last code from now on),
    /// counted among its country's unverified codes if `inCountry`.
    mutating func sent(_ id: String, subject: KeyName, country: String, ranges names: [String] = [],
                       address: ClientAddress?, inCountry: Bool = true, at now: Instant, historyDays: Int) {
        prune(at: now, historyDays: historyDays)
        codes[id] = Code(subject: subject, country: country, address: address, ranges: names, sentAt: now,
                         verified: false, inCountry: inCountry)
        latest[subject] = id
        if !names.isEmpty { rangedCodes[subject, default: []].append((id, now)) }
        if inCountry { countries[country, default: Series()].sent.append(now) }
        for name in names { ranges[name, default: Series()].sent.append(now) }
        if let address {
            addresses[address, default: Series()].sent.append(now)
            let verified = addressCountries[address]?[country]?.verified
            addressCountries[address, default: [:]][country] = (now, verified)
        }
    }

    /// A granted code did not go out after all (a failed send): it counts
    /// nowhere.
    mutating func returned(_ id: String) {
        guard let code = codes.removeValue(forKey: id), !code.verified else { return }
        if let held = rangedCodes[code.subject] {
            let kept = held.filter { $0.id != id }
            rangedCodes[code.subject] = kept.isEmpty ? nil : kept
        }
        func remove(_ instant: Instant, _ list: inout [Instant]) {
            if let index = list.lastIndex(of: instant) { list.remove(at: index) }
        }
        if code.inCountry { remove(code.sentAt, &countries[code.country, default: Series()].sent) }
        for name in code.ranges { remove(code.sentAt, &ranges[name, default: Series()].sent) }
        if let address = code.address {
            remove(code.sentAt, &addresses[address, default: Series()].sent)
            // The country stays one the address asked for only by another
            // code (SQLite and Redis count the same).
            let others = codes.values.filter { $0.address == address && $0.country == code.country }.map(\.sentAt)
            if let last = others.max() {
                addressCountries[address]?[code.country]?.sent = last
            } else if let verified = addressCountries[address]?[code.country]?.verified {
                addressCountries[address]?[code.country] = (Instant(nanoseconds: .min), verified)
            } else {
                addressCountries[address]?[code.country] = nil
            }
        }
        // The key's code before it is its last again (the one the user
        // holds), unless that one was verified.
        if latest[code.subject] == id {
            latest[code.subject] = codes.filter { $0.value.subject == code.subject && !$0.value.verified }
                .max { $0.value.sentAt < $1.value.sentAt }?.key
        }
    }

    /// The subject's last code was verified (`country`: the subject's).
    mutating func verified(subject: KeyName, country: String, at now: Instant, historyDays: Int) {
        prune(at: now, historyDays: historyDays)
        var address: ClientAddress?
        // Only a code sent (and not verified yet) counts: a verification
        // with no code would raise the thresholds for nothing.
        guard let id = latest.removeValue(forKey: subject), var code = codes[id], !code.verified else { return }
        code.verified = true
        codes[id] = code
        address = code.address
        if code.inCountry {
            Series.insertSorted(code.sentAt, into: &countries[code.country, default: Series()].verifiedSent)
        }
        for name in code.ranges {
            Series.insertSorted(code.sentAt, into: &ranges[name, default: Series()].verifiedSent)
            ranges[name, default: Series()].verifiedAt.append(now)
            rangeDays[name, default: [:]][Self.dayNumber(now), default: 0] += 1
        }
        if let address {
            Series.insertSorted(code.sentAt, into: &addresses[address, default: Series()].verifiedSent)
        }
        countries[country, default: Series()].verifiedAt.append(now)
        days[country, default: [:]][Self.dayNumber(now), default: 0] += 1
        if let address {
            addresses[address, default: Series()].verifiedAt.append(now)
            let sent = addressCountries[address]?[country]?.sent ?? now
            addressCountries[address, default: [:]][country] = (sent, now)
        }
    }

    /// Drops what no count looks at any more (at most once a minute).
    private mutating func prune(at now: Instant, historyDays: Int) {
        // (Never pruned yet: now. `now.since(.min)` overflows to a negative span.)
        if let lastPrune, now.since(lastPrune) <= Span(nanoseconds: 60 * 1_000_000_000) { return }
        lastPrune = now
        let dayAgo = now.advanced(by: Span(nanoseconds: -Self.day.nanoseconds))
        // Codes sent up to the longest `unverifiedAfter` before a day ago
        // still count.
        let sentDayAgo = dayAgo.advanced(by: Span(nanoseconds: -GuardThresholds.longestUnverifiedAfter.nanoseconds))
        codes = codes.filter { $0.value.sentAt > sentDayAgo }
        latest = latest.filter { codes[$0.value] != nil }
        for key in Array(countries.keys) {
            countries[key]?.prune(sentBefore: sentDayAgo, before: dayAgo)
            if countries[key]?.isEmpty == true { countries.removeValue(forKey: key) }
        }
        for key in Array(ranges.keys) {
            ranges[key]?.prune(sentBefore: sentDayAgo, before: dayAgo)
            if ranges[key]?.isEmpty == true { ranges.removeValue(forKey: key) }
        }
        for key in Array(addresses.keys) {
            addresses[key]?.prune(sentBefore: sentDayAgo, before: dayAgo)
            if addresses[key]?.isEmpty == true { addresses.removeValue(forKey: key) }
        }
        addressCountries = addressCountries.compactMapValues { seen in
            let kept = seen.filter { $0.value.sent > dayAgo || ($0.value.verified.map { $0 > dayAgo } ?? false) }
            return kept.isEmpty ? nil : kept
        }
        // The days' counts change only when the day does (a prune of every
        // range's days each minute cost most of a busy scope's sends).
        let today = Self.dayNumber(now)
        if lastPruneDay == today { return }
        lastPruneDay = today
        rangedCodes = rangedCodes.compactMapValues { held in
            let kept = held.filter { $0.sentAt > sentDayAgo }
            return kept.isEmpty ? nil : kept
        }
        let oldest = today - Int64(max(historyDays, GuardThresholds.maximumHistoryDays))
        days = days.compactMapValues { history in
            let kept = history.filter { $0.key > oldest }
            return kept.isEmpty ? nil : kept
        }
        rangeDays = rangeDays.compactMapValues { history in
            let kept = history.filter { $0.key > oldest }
            return kept.isEmpty ? nil : kept
        }
    }
}
