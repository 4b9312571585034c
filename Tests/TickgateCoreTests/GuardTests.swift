import Testing
@testable import TickgateCore

/// The SMS pumping guard's core: the adaptive thresholds (the anchor's own
/// example numbers, Authgear's docs/specs/fraud-protection.md) and the
/// memory ledger of codes and verifications the signals count.
@Suite struct GuardTests {
    static let second: Int64 = 1_000_000_000
    static let minute = 60 * second
    static let hour = 60 * minute
    static let day = 24 * hour

    static func at(_ nanoseconds: Int64) -> Instant { Instant(nanoseconds: nanoseconds) }

    // MARK: GuardThresholds.judge

    /// Counts of a country's verified traffic: the most verified in one day
    /// of the history, the last 24 h's and the last hour's.
    static func country(max: Int, day: Int, hour: Int, unverifiedDay: Int = 0,
                        unverifiedHour: Int = 0) -> GuardCounts {
        var counts = GuardCounts()
        counts.countryVerifiedDailyMaximum = max
        counts.countryVerifiedDay = day
        counts.countryVerifiedHour = hour
        counts.countryUnverifiedDay = unverifiedDay
        counts.countryUnverifiedHour = unverifiedHour
        return counts
    }

    @Test(arguments: [
        // (14-day max, last 24 h, last hour) -> daily, hourly
        // Normal traffic (~1k/day, peak hour ~200): 200 and 40.
        (1_000, 1_000, 200, 200, 40),
        // Spike day (~2k/day, peak hour ~400): 400 and 80.
        (1_000, 2_000, 400, 400, 80),
        // Low traffic (~15/day, peak hour ~5): the minimums, 20 and 3.
        (15, 15, 5, 20, 3),
        // Low traffic spike (~30/day, peak hour ~10): still 20 and 3.
        (30, 30, 10, 20, 3),
        // Initial launch (no history, ~300 verified in the first hour): 60 and 60.
        (300, 300, 300, 60, 60),
        // Attack on a quiet day (~500/day against a 1k history): 200 and 33.
        (1_000, 500, 20, 200, 33),
        // Nothing verified at all: the minimums.
        (0, 0, 0, 20, 3),
    ])
    func theAnchorsExamples(_ max: Int, _ day: Int, _ hour: Int, _ daily: Int, _ hourly: Int) {
        let judgment = GuardThresholds().judge(Self.country(max: max, day: day, hour: hour))
        #expect(judgment.countryDaily == daily)
        #expect(judgment.countryHourly == hourly)
        #expect(judgment.warnings.isEmpty)
        // No address: no address thresholds, no address warnings.
        #expect(judgment.addressDaily == 0 && judgment.addressHourly == 0)
    }

    @Test func aThresholdLetsItsNumberThroughAndWarnsAtTheNext() {
        let t = GuardThresholds()
        // Normal traffic: 200 a day, 40 an hour; the send itself counts.
        #expect(t.judge(Self.country(max: 1_000, day: 1_000, hour: 200, unverifiedDay: 199, unverifiedHour: 39))
            .warnings.isEmpty)
        #expect(t.judge(Self.country(max: 1_000, day: 1_000, hour: 200, unverifiedDay: 200, unverifiedHour: 39))
            .warnings == .unverifiedByCountryDaily)
        #expect(t.judge(Self.country(max: 1_000, day: 1_000, hour: 200, unverifiedDay: 199, unverifiedHour: 40))
            .warnings == .unverifiedByCountryHourly)
        // The low traffic attack: the 4th unverified code in an hour, the 21st in a day.
        #expect(t.judge(Self.country(max: 15, day: 15, hour: 5, unverifiedDay: 3, unverifiedHour: 3))
            .warnings == .unverifiedByCountryHourly)
        #expect(t.judge(Self.country(max: 15, day: 15, hour: 5, unverifiedDay: 20, unverifiedHour: 3))
            .warnings == [.unverifiedByCountryDaily, .unverifiedByCountryHourly])
    }

    @Test func theAddressSignals() {
        let t = GuardThresholds()
        var counts = GuardCounts()
        counts.hasAddress = true
        counts.addressCountriesDay = 1
        var judgment = t.judge(counts)
        // max(10, 20 % of 0) and max(5, 0 / 6).
        #expect((judgment.addressDaily, judgment.addressHourly) == (10, 5))
        #expect(judgment.warnings.isEmpty)
        counts.addressVerifiedDay = 300
        judgment = t.judge(counts)
        // 20 % of 300 = 60 a day, 60 / 6 = 10 an hour.
        #expect((judgment.addressDaily, judgment.addressHourly) == (60, 10))
        counts.addressUnverifiedHour = 10
        counts.addressUnverifiedDay = 10
        #expect(t.judge(counts).warnings == .unverifiedByAddressHourly)
        counts.addressUnverifiedDay = 60
        counts.addressUnverifiedHour = 9
        #expect(t.judge(counts).warnings == .unverifiedByAddressDaily)
        // Countries: this send's included, 3 pass, the 4th warns.
        counts.addressUnverifiedDay = 0
        counts.addressUnverifiedHour = 0
        counts.addressCountriesDay = 3
        #expect(t.judge(counts).warnings.isEmpty)
        counts.addressCountriesDay = 4
        #expect(t.judge(counts).warnings == .countriesByAddressDaily)
        // Without an address none of them is judged.
        counts.hasAddress = false
        counts.addressUnverifiedDay = 1_000
        #expect(t.judge(counts).warnings.isEmpty)
    }

    @Test func everyConstantIsSettable() {
        var t = GuardThresholds()
        t.countryDailyMinimum = 5
        t.countryHistoryPercent = 50
        t.countryDayPercent = 10
        t.countryHourlyMinimum = 1
        t.countryHourlyDivisor = 2
        t.countryHourPercent = 100
        t.addressDailyMinimum = 2
        t.addressDayPercent = 50
        t.addressHourlyMinimum = 1
        t.addressHourlyDivisor = 5
        t.addressCountriesMaximum = 1
        var counts = Self.country(max: 40, day: 100, hour: 30)
        counts.hasAddress = true
        counts.addressVerifiedDay = 20
        counts.addressCountriesDay = 2
        let judgment = t.judge(counts)
        // max(5, 50 % of 40, 10 % of 100) = 20; max(1, 20 / 2, 100 % of 30) = 30.
        #expect((judgment.countryDaily, judgment.countryHourly) == (20, 30))
        // max(2, 50 % of 20) = 10; max(1, 10 / 5) = 2.
        #expect((judgment.addressDaily, judgment.addressHourly) == (10, 2))
        #expect(judgment.warnings == .countriesByAddressDaily)
        #expect(PumpingWarnings([.unverifiedByCountryDaily, .countriesByAddressDaily]).names
            == "unverified_by_country_daily,countries_by_address_daily")
    }

    @Test func constantsOutOfRangeAreRefusedAndTheEncodingReadsBack() throws {
        var t = GuardThresholds()
        t.countryHourlyDivisor = 0
        #expect(throws: TickgateError.self) { try t.validate() }
        t = GuardThresholds()
        t.historyDays = 61
        #expect(throws: TickgateError.self) { try t.validate() }
        t = GuardThresholds()
        t.addressDailyMinimum = 1_000_001
        #expect(throws: TickgateError.self) { try t.validate() }
        t = GuardThresholds()
        t.countryDailyMinimum = 7
        t.historyDays = 3
        let bad = { (why: String) in TickgateError(.storeCorrupt, why) }
        #expect(try GuardThresholds.decode(t.encoded, bad) == t)
        var rules = Guard(mode: .enforce, allowed: [try Destination.parse("CN"), try Destination.parse("+1876")],
                          alwaysAllowNumbers: [try NumberPattern.parse("+1555010?")],
                          alwaysAllowAddresses: [try AddressRange.parse("2001:db8::/32")],
                          alwaysAllowCountries: ["HK"], alwaysAllowSkipsBudgets: true, thresholds: t)
        rules.refused = [try Destination.parse("+4475")]
        #expect(try Guard.decode(rules.encoded, bad) == rules)
        #expect(throws: TickgateError.self) { try Guard.decode("1;9;;;;;;0;" + t.encoded + ";0", bad) }
        #expect(throws: TickgateError.self) { try Guard.decode("garbage", bad) }
    }

    // MARK: ConversionLedger

    let alice = try! KeyName("+8613800000001")
    let bob = try! KeyName("+8613800000002")
    let carol = try! KeyName("+14155550100")
    let address = try! ClientAddress.parse("203.0.113.7")

    @Test func windowsOfAnHourAndADay() {
        var ledger = ConversionLedger()
        let t0 = 10 * Self.day
        ledger.sent("a", subject: alice, country: "CN", address: address, at: Self.at(t0), historyDays: 14)
        ledger.sent("b", subject: bob, country: "CN", address: address, at: Self.at(t0 + 30 * Self.minute),
                    historyDays: 14)
        var counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 59 * Self.minute))
        #expect((counts.countryUnverifiedDay, counts.countryUnverifiedHour) == (2, 2))
        #expect((counts.addressUnverifiedDay, counts.addressUnverifiedHour) == (2, 2))
        #expect(counts.hasAddress && counts.addressCountriesDay == 1)
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 61 * Self.minute))
        #expect((counts.countryUnverifiedDay, counts.countryUnverifiedHour) == (2, 1))
        #expect((counts.addressUnverifiedDay, counts.addressUnverifiedHour) == (2, 1))
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero,
                               at: Self.at(t0 + Self.day + 10 * Self.minute))
        #expect((counts.countryUnverifiedDay, counts.countryUnverifiedHour) == (1, 0))
        counts = ledger.counts(subject: carol, country: "CN", address: nil, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 2 * Self.day))
        #expect(counts == GuardCounts())
        // Another country and another address count apart.
        counts = ledger.counts(subject: carol, country: "US", address: try! ClientAddress.parse("198.51.100.1"), historyDays: 14, unverifiedAfter: .zero,
                               at: Self.at(t0 + Self.minute))
        #expect(counts.countryUnverifiedDay == 0 && counts.addressUnverifiedDay == 0)
        #expect(counts.addressCountriesDay == 1)
    }

    @Test func aCodeCountsOnceItsTimeToVerifyPassed() {
        var ledger = ConversionLedger()
        let t0 = 5 * Self.day, after = Span.milliseconds(120_000)
        ledger.sent("a", subject: alice, country: "CN", address: address, at: Self.at(t0), historyDays: 14)
        ledger.sent("b", subject: bob, country: "CN", address: address, at: Self.at(t0 + Self.minute), historyDays: 14)
        func unverified(at t: Int64) -> [Int] {
            let c = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: after, at: Self.at(t))
            return [c.countryUnverifiedDay, c.countryUnverifiedHour, c.addressUnverifiedDay, c.addressUnverifiedHour]
        }
        #expect(unverified(at: t0 + Self.minute) == [0, 0, 0, 0])
        #expect(unverified(at: t0 + 2 * Self.minute) == [1, 1, 1, 1])
        #expect(unverified(at: t0 + 3 * Self.minute) == [2, 2, 2, 2])
        // The hour and the day end that long after the send, too.
        #expect(unverified(at: t0 + 62 * Self.minute) == [2, 1, 2, 1])
        #expect(unverified(at: t0 + 63 * Self.minute) == [2, 0, 2, 0])
        #expect(unverified(at: t0 + Self.day + 2 * Self.minute + Self.second) == [1, 0, 1, 0])
        #expect(unverified(at: t0 + Self.day + 3 * Self.minute + Self.second) == [0, 0, 0, 0])
        // A code verified before it counts never counts.
        ledger.sent("c", subject: carol, country: "CN", address: address, at: Self.at(t0 + 2 * Self.day), historyDays: 14)
        ledger.verified(subject: carol, country: "CN", at: Self.at(t0 + 2 * Self.day + Self.minute), historyDays: 14)
        #expect(unverified(at: t0 + 2 * Self.day + 10 * Self.minute) == [0, 0, 0, 0])
    }

    @Test func aGuardWrittenBeforeUnverifiedAfterCountsFromTheSend() throws {
        let bad: (String) -> TickgateError = { TickgateError(.storeCorrupt, $0) }
        var t = GuardThresholds()
        #expect(t.unverifiedAfterSeconds == 120)
        let twelve = t.encoded.split(separator: ",").dropLast().joined(separator: ",")
        #expect(try GuardThresholds.decode(twelve, bad).unverifiedAfterSeconds == 0)
        // A value that is no number is bad, not left out.
        #expect(throws: TickgateError.self) { try GuardThresholds.decode(twelve + ",x", bad) }
        t.unverifiedAfterSeconds = 3_601
        #expect(throws: TickgateError.self) { try t.validate() }
        #expect(throws: TickgateError.self) { try GuardThresholds.decode(t.encoded, bad) }
    }

    @Test func aKnownCountryRefusalLastsUntilTheOldestCountedCodeLeaves() throws {
        var known = KnownGuardRefusals()
        let spot = KnownGuardRefusals.Spot(scope: try KeyName("login"), country: "CN")
        var judgment = GuardJudgment()
        judgment.warnings = [.unverifiedByCountryHourly]
        // The server's clock reads 10 000 s; the oldest code of the hour was
        // sent at 7 000 s, counted from 120 s after: it leaves the hour at
        // 7 000 + 3 600 + 120 s, 720 s from the read.
        var read = GuardReading(counts: GuardCounts())
        read.serverNow = 10_000_000_000
        read.oldestInHour = 7_000_000_000
        read.oldestInDay = 1_000_000_000
        let now = Self.at(50 * Self.second)
        known.learn(spot, mark: known.epoch, read: read, counts: GuardCounts(), judgment: judgment,
                    unverifiedAfter: .milliseconds(120_000), at: now)
        #expect(known.spots[spot]?.until == Self.at(50 * Self.second + 720 * Self.second))
        #expect(known.refusal(spot, at: Self.at(769 * Self.second)) != nil)
        #expect(known.refusal(spot, at: Self.at(770 * Self.second)) == nil)
        #expect(known.spots.isEmpty)
        // Both signals: the first to leave; a read across a notice is not kept.
        judgment.warnings = [.unverifiedByCountryHourly, .unverifiedByCountryDaily]
        // (The day's oldest leaves at 10 300 s, the hour's at 10 600 s.)
        read.oldestInDay = 10_000_000_000 - 86_400_000_000 + 300_000_000
        known.learn(spot, mark: known.epoch, read: read, counts: GuardCounts(), judgment: judgment,
                    unverifiedAfter: .zero, at: now)
        #expect(known.spots[spot]?.until == Self.at(350 * Self.second))
        let mark = known.epoch
        known.noticed()
        #expect(known.spots.isEmpty)
        known.learn(spot, mark: mark, read: read, counts: GuardCounts(), judgment: judgment,
                    unverifiedAfter: .zero, at: now)
        #expect(known.spots.isEmpty)
        // An address signal alone is not a country's refusal.
        judgment.warnings = [.unverifiedByAddressHourly]
        known.learn(spot, mark: known.epoch, read: read, counts: GuardCounts(), judgment: judgment,
                    unverifiedAfter: .zero, at: now)
        #expect(known.spots.isEmpty)
    }

    @Test func aReturnedCodeCountsNowhere() {
        var ledger = ConversionLedger()
        let t0 = 3 * Self.day
        ledger.sent("a", subject: alice, country: "CN", address: address, at: Self.at(t0), historyDays: 14)
        ledger.sent("c", subject: carol, country: "US", address: address, at: Self.at(t0 + Self.second),
                    historyDays: 14)
        var counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + Self.minute))
        #expect(counts.countryUnverifiedDay == 1 && counts.addressUnverifiedDay == 2 && counts.addressCountriesDay == 2)
        ledger.returned("c")
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + Self.minute))
        #expect(counts.countryUnverifiedDay == 1 && counts.addressUnverifiedDay == 1)
        // The code never went out: its country is not one the address asked for.
        #expect(counts.addressCountriesDay == 1)
        #expect(ledger.counts(subject: carol, country: "US", address: nil, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + Self.minute))
            .countryUnverifiedDay == 0)
        #expect(ledger.codes["c"] == nil && ledger.latest[carol] == nil)
        // A verified code is not given back.
        ledger.verified(subject: alice, country: "CN", at: Self.at(t0 + 2 * Self.minute), historyDays: 14)
        ledger.returned("a")
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 3 * Self.minute))
        #expect(counts.countryVerifiedDay == 1 && counts.countryUnverifiedDay == 0)
        // Returning an unknown code changes nothing.
        ledger.returned("nope")
        #expect(ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 3 * Self.minute))
            == counts)
    }

    @Test func verifiedMarksTheKeysLastCode() {
        var ledger = ConversionLedger()
        let t0 = 20 * Self.day
        ledger.sent("a1", subject: alice, country: "CN", address: address, at: Self.at(t0), historyDays: 14)
        ledger.sent("a2", subject: alice, country: "CN", address: address, at: Self.at(t0 + Self.minute),
                    historyDays: 14)
        ledger.sent("c", subject: carol, country: "US", address: address, at: Self.at(t0 + Self.minute),
                    historyDays: 14)
        var counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 2 * Self.minute))
        #expect((counts.countryUnverifiedDay, counts.addressUnverifiedDay, counts.addressCountriesDay) == (2, 3, 2))
        ledger.verified(subject: alice, country: "CN", at: Self.at(t0 + 2 * Self.minute), historyDays: 14)
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 3 * Self.minute))
        // The last code (a2) is verified; a1 stays unverified.
        #expect((counts.countryUnverifiedDay, counts.countryVerifiedDay, counts.countryVerifiedHour) == (1, 1, 1))
        #expect((counts.addressUnverifiedDay, counts.addressVerifiedDay) == (2, 1))
        // A verified country leaves the address's count (US is still asked).
        #expect(counts.addressCountriesDay == 1)
        #expect(ledger.counts(subject: carol, country: "US", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 3 * Self.minute))
            .addressCountriesDay == 1)
        #expect(counts.countryVerifiedDailyMaximum == 1)
        // Verified again with no new code: nothing counts (a verification
        // with no code would raise the thresholds for nothing).
        ledger.verified(subject: alice, country: "CN", at: Self.at(t0 + 4 * Self.minute), historyDays: 14)
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 5 * Self.minute))
        #expect((counts.countryUnverifiedDay, counts.countryVerifiedDay) == (1, 1))
        // An hour later the verification leaves the hour, a day later the day.
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero,
                               at: Self.at(t0 + 2 * Self.hour))
        #expect((counts.countryVerifiedDay, counts.countryVerifiedHour) == (1, 0))
        counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero,
                               at: Self.at(t0 + Self.day + 10 * Self.minute))
        #expect((counts.countryVerifiedDay, counts.countryUnverifiedDay) == (0, 0))
        // ... but the day's verification stays in the history.
        #expect(counts.countryVerifiedDailyMaximum == 1)
    }

    @Test func aReturnedCodeLeavesTheKeysEarlierCodeToVerify() {
        var ledger = ConversionLedger()
        let t0 = 7 * Self.day
        ledger.sent("a1", subject: alice, country: "CN", address: address, at: Self.at(t0), historyDays: 14)
        ledger.sent("a2", subject: alice, country: "CN", address: address, at: Self.at(t0 + Self.minute),
                    historyDays: 14)
        ledger.returned("a2")
        #expect(ledger.latest[alice] == "a1")
        ledger.verified(subject: alice, country: "CN", at: Self.at(t0 + 2 * Self.minute), historyDays: 14)
        let counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 3 * Self.minute))
        #expect((counts.countryUnverifiedDay, counts.addressUnverifiedDay, counts.countryVerifiedDay) == (0, 0, 1))
        // After a verified code, a returned one leaves none to verify.
        ledger.sent("a3", subject: alice, country: "CN", address: address, at: Self.at(t0 + 4 * Self.minute),
                    historyDays: 14)
        ledger.returned("a3")
        #expect(ledger.latest[alice] == nil)
    }

    @Test func theHistoryIsTheMostVerifiedInOneDayOfItsDays() {
        var ledger = ConversionLedger()
        let start = 100 * Self.day
        // Day 100: 5 verified; day 103: 2; day 110: 1.
        for (dayOffset, count) in [(0, 5), (3, 2), (10, 1)] {
            for index in 0..<count {
                let subject = try! KeyName("+86138000001\(dayOffset)\(index)")
                let when = start + Int64(dayOffset) * Self.day + Int64(index) * Self.minute
                ledger.sent("\(dayOffset)-\(index)", subject: subject, country: "CN", address: nil, at: Self.at(when),
                            historyDays: 14)
                ledger.verified(subject: subject, country: "CN", at: Self.at(when + Self.second), historyDays: 14)
            }
        }
        let day110 = start + 10 * Self.day + Self.hour
        #expect(ledger.counts(subject: carol, country: "CN", address: nil, historyDays: 14, unverifiedAfter: .zero, at: Self.at(day110))
            .countryVerifiedDailyMaximum == 5)
        // 10 days of history (days 101 ... 110) leave day 100 out.
        #expect(ledger.counts(subject: carol, country: "CN", address: nil, historyDays: 10, unverifiedAfter: .zero, at: Self.at(day110))
            .countryVerifiedDailyMaximum == 2)
        #expect(ledger.counts(subject: carol, country: "CN", address: nil, historyDays: 1, unverifiedAfter: .zero, at: Self.at(day110))
            .countryVerifiedDailyMaximum == 1)
        // 14 days after day 100, it leaves the 14-day history too.
        #expect(ledger.counts(subject: carol, country: "CN", address: nil, historyDays: 14, unverifiedAfter: .zero, at: Self.at(start + 14 * Self.day))
            .countryVerifiedDailyMaximum == 2)
        #expect(ledger.counts(subject: carol, country: "US", address: nil, historyDays: 14, unverifiedAfter: .zero, at: Self.at(day110))
            .countryVerifiedDailyMaximum == 0)
    }

    @Test func whatNoCountLooksAtIsPruned() {
        var ledger = ConversionLedger()
        let t0 = 5 * Self.day
        for index in 0..<50 {
            let subject = try! KeyName("+861380000\(1000 + index)")
            ledger.sent("old-\(index)", subject: subject, country: "CN", address: address,
                        at: Self.at(t0 + Int64(index) * Self.second), historyDays: 14)
        }
        #expect(ledger.codes.count == 50 && ledger.latest.count == 50)
        // Two days later one more send: the old codes are gone.
        ledger.sent("new", subject: alice, country: "CN", address: address, at: Self.at(t0 + 2 * Self.day),
                    historyDays: 14)
        #expect(ledger.codes.count == 1 && ledger.latest.count == 1)
        #expect(ledger.codes["new"] != nil && ledger.latest[alice] == "new")
        let counts = ledger.counts(subject: carol, country: "CN", address: address, historyDays: 14, unverifiedAfter: .zero,
                                   at: Self.at(t0 + 2 * Self.day + Self.second))
        #expect((counts.countryUnverifiedDay, counts.addressUnverifiedDay, counts.addressCountriesDay) == (1, 1, 1))
        // A code pruned is no code to verify.
        var later = ledger
        later.verified(subject: alice, country: "CN", at: Self.at(t0 + 4 * Self.day), historyDays: 14)
        #expect(later.codes.isEmpty)
    }

    // MARK: Number ranges

    @Test func aNumbersRangesAreItsCallingCodeAndTwoFourSixNationalDigits() throws {
        #expect(GuardRules.ranges(of: try PhoneNumber.parse("+447520001234")) == ["+4475", "+447520", "+44752000"])
        #expect(GuardRules.ranges(of: try PhoneNumber.parse("+8613800000000")) == ["+8613", "+861380", "+86138000"])
        #expect(GuardRules.ranges(of: try PhoneNumber.parse("+14155550100")) == ["+141", "+14155", "+1415555"])
        // Niue's 4 national digits: one range, leaving 2 digits out of it.
        #expect(GuardRules.ranges(of: try PhoneNumber.parse("+6831234")) == ["+68312"])
        #expect(GuardRules.ranges(ofSubject: try KeyName("alice")) == [])
    }

    @Test func theNarrowestRangeThatWarnsIsNamed() {
        var counts = GuardCounts()
        counts.countryVerifiedDailyMaximum = 1000
        // Known ranges (a code of each verified this day): minimums 40 / 8.
        for (name, hour) in [("+4475", 8), ("+447520", 8), ("+44752000", 7)] {
            var range = RangeCounts(range: name)
            range.unverifiedHour = hour
            range.unverifiedDay = hour
            range.verifiedDailyMaximum = 1
            counts.ranges.append(range)
        }
        let j = GuardRules.judge(counts, by: GuardThresholds())
        #expect(j.warnings == [.unverifiedByRangeHourly])
        #expect(j.range == "+447520" && j.rangeUnverifiedHour == 8 && j.rangeHourly == 8 && j.rangeDaily == 40)
        // None of the narrowest range's codes verified: a new range's
        // minimums (5 / 1), and it is the one named.
        counts.ranges[2].verifiedDailyMaximum = 0
        let k = GuardRules.judge(counts, by: GuardThresholds())
        #expect(k.range == "+44752000" && k.rangeHourly == 1 && k.rangeDaily == 5)
    }

    @Test func aRangeWithNothingInItsWindowsIsDropped() throws {
        var ledger = ConversionLedger()
        let t0 = 5 * Self.day
        // 1000 numbers, each of a block of its own.
        for index in 0..<1000 {
            let number = "+4475\(String(10000 + index).dropFirst())1234"
            let subject = try KeyName(number)
            let ranges = GuardRules.ranges(ofSubject: subject)
            ledger.sent("c\(index)", subject: subject, country: "GB", ranges: ranges, address: nil,
                        at: Self.at(t0 + Int64(index) * Self.second), historyDays: 14)
            if index % 2 == 0 {
                ledger.verified(subject: subject, country: "GB", at: Self.at(t0 + Int64(index) * Self.second + 1),
                                historyDays: 14)
            }
        }
        // +4475, 10 of +4475xx (+447500 ... +447509), 1000 of +4475xxxx.
        #expect(ledger.ranges.count == 1 + 10 + 1000)
        let counts = ledger.counts(subject: carol, country: "GB", ranges: ["+4475", "+447500", "+44750000"], address: nil,
                                   historyDays: 14, unverifiedAfter: .zero, at: Self.at(t0 + 1000 * Self.second))
        #expect(counts.ranges.map(\.unverifiedDay) == [500, 50, 0])
        #expect(counts.ranges.map(\.verifiedDay) == [500, 50, 1])
        // Two days later one send: only its ranges hold codes; the
        // verified days stay for the history.
        let subject = try KeyName("+447400001234")
        ledger.sent("new", subject: subject, country: "GB", ranges: GuardRules.ranges(ofSubject: subject), address: nil,
                    at: Self.at(t0 + 2 * Self.day), historyDays: 14)
        #expect(ledger.ranges.count == 3)
        #expect(ledger.rangeDays.count == 1 + 10 + 500)
        // Past the longest history (60 days) the days go too.
        ledger.sent("later", subject: subject, country: "GB", ranges: GuardRules.ranges(ofSubject: subject),
                    address: nil, at: Self.at(t0 + 62 * Self.day), historyDays: 14)
        #expect(ledger.ranges.count == 3 && ledger.rangeDays.isEmpty)
    }

    @Test func aRangesCountsLeaveOutTheSubjectsOwnCodes() throws {
        var ledger = ConversionLedger()
        let t0 = 5 * Self.day
        let user = try KeyName("+447520001001"), other = try KeyName("+447520001002")
        let ranges = GuardRules.ranges(ofSubject: user)
        func rangeCounts(_ subject: KeyName, at t: Int64) -> [[Int]] {
            ledger.counts(subject: subject, country: "GB", ranges: ranges, address: nil, historyDays: 14,
                          unverifiedAfter: .zero, at: Self.at(t)).ranges.map { [$0.unverifiedDay, $0.unverifiedHour] }
        }
        for index in 0..<3 {
            ledger.sent("u\(index)", subject: user, country: "GB", ranges: ranges, address: nil,
                        at: Self.at(t0 + Int64(index) * Self.minute), historyDays: 14)
        }
        ledger.sent("o", subject: other, country: "GB", ranges: ranges, address: nil,
                    at: Self.at(t0 + 3 * Self.minute), historyDays: 14)
        #expect(rangeCounts(user, at: t0 + 4 * Self.minute) == Array(repeating: [1, 1], count: 3))
        #expect(rangeCounts(other, at: t0 + 4 * Self.minute) == Array(repeating: [3, 3], count: 3))
        // The country counts every code.
        #expect(ledger.counts(subject: user, country: "GB", ranges: ranges, address: nil, historyDays: 14,
                              unverifiedAfter: .zero, at: Self.at(t0 + 4 * Self.minute)).countryUnverifiedDay == 4)
        // A verification marks the user's last code; a code given back
        // counts nowhere; past the hour the user's own still leave the day.
        ledger.verified(subject: user, country: "GB", at: Self.at(t0 + 5 * Self.minute), historyDays: 14)
        ledger.returned("o")
        #expect(rangeCounts(other, at: t0 + 6 * Self.minute) == Array(repeating: [2, 2], count: 3))
        #expect(rangeCounts(user, at: t0 + 6 * Self.minute) == Array(repeating: [0, 0], count: 3))
        ledger.sent("o2", subject: other, country: "GB", ranges: ranges, address: nil,
                    at: Self.at(t0 + 90 * Self.minute), historyDays: 14)
        #expect(rangeCounts(user, at: t0 + 91 * Self.minute) == Array(repeating: [1, 1], count: 3))
        #expect(rangeCounts(other, at: t0 + 91 * Self.minute) == Array(repeating: [2, 0], count: 3))
    }

    @Test func theLedgerWorksOnAClockThatStartsBelowZero() {
        // A manual clock may start anywhere; the day numbers round down.
        #expect(ConversionLedger.dayNumber(Self.at(-1)) == -1)
        #expect(ConversionLedger.dayNumber(Self.at(0)) == 0)
        #expect(ConversionLedger.dayNumber(Self.at(Self.day - 1)) == 0)
        #expect(ConversionLedger.dayNumber(Self.at(-Self.day)) == -1)
        var ledger = ConversionLedger()
        ledger.sent("a", subject: alice, country: "CN", address: nil, at: Self.at(-Self.hour), historyDays: 14)
        ledger.verified(subject: alice, country: "CN", at: Self.at(-Self.minute), historyDays: 14)
        let counts = ledger.counts(subject: carol, country: "CN", address: nil, historyDays: 14, unverifiedAfter: .zero, at: Self.at(Self.minute))
        #expect((counts.countryVerifiedDay, counts.countryUnverifiedDay, counts.countryVerifiedDailyMaximum) == (1, 0, 1))
    }
}

/// A guard that changes during a send, and the passes an engine with no
/// store holds.
@Suite struct GuardChangeTests {
    let key = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("+8613800000000"))

    @Test func aGuardThatChangesOnEveryScreenAsksToTryAgainAndChargesNothing() throws {
        let clock = Clock(manual: true, boot: Instant(nanoseconds: 0), wall: 0, bootID: "manual")
        let store = DoubleStore(clock: clock)
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual), clock: clock,
                                store: store, snapshot: StoreSnapshot())
        defer { engine.close() }
        try engine.setGuard(Guard(mode: .enforce), scope: key.scope)
        store.churningGuard.withLock { $0 = true }
        do throws(TickgateError) {
            _ = try engine.sendBegin(key)
            Issue.record("a send whose guard changed on every screen was granted")
        } catch {
            #expect(error.status == .busy)
            #expect(error.message.contains("three times") && error.message.contains("nothing was charged"))
        }
        #expect(store.screens.withLock { $0 } == 3)
        // Nothing was charged: the key's decision never reached the store;
        // once the guard holds still (the double's: none) it is granted.
        #expect(store.entered(key) == 0)
        store.churningGuard.withLock { $0 = false }
        let ticket = try engine.sendBegin(key)
        #expect(ticket != 0)
    }

    @Test func anEngineWithNoStoreHoldsAtMostItsPassesAndDropsTheExpiredFirst() throws {
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
        defer { engine.close() }
        var rules = Guard(mode: .enforce)
        rules.challengeSignals = [.unverifiedByCountryDaily]
        rules.challengePassSeconds = 60
        try engine.setGuard(rules, scope: key.scope)
        func number(_ n: Int) throws -> CountdownKey {
            CountdownKey(scope: key.scope, subject: try KeyName("+86139" + String(100_000_000 + n).dropFirst()))
        }
        for n in 0..<GuardBook.maximumPasses { try engine.challengePassed(try number(n), from: nil) }
        // Full: a new number's pass is refused (try again), a held one's
        // is renewed.
        let next = try number(GuardBook.maximumPasses)
        do throws(TickgateError) {
            try engine.challengePassed(next, from: nil)
            Issue.record("a pass past the most held was kept")
        } catch {
            #expect(error.status == .busy)
        }
        try engine.challengePassed(try number(7), from: nil)
        // Once they expire, the expired go and a new pass is kept.
        try engine.advance(by: .milliseconds(61_000))
        try engine.challengePassed(next, from: nil)
    }
}

/// The store double's guard side (StoreDoubleTests.swift): it keeps no
/// guard, so a scope set on it stays unguarded. (Without it the test target
/// does not build: the guard added these requirements to `Store`.)
extension DoubleStore {
    func save(guard rules: Guard?, scope: KeyName) throws(TickgateError) {}

    var screensInDecision: Bool { false }

    func guardScreen(scope: KeyName, subject: KeyName, code: String, country: String, address: ClientAddress?,
                     rules: Guard, judge: Bool) throws(TickgateError) -> GuardScreen {
        let screen = screens.withLock { count in count += 1; return count }
        guard churningGuard.withLock({ $0 }) else { return .stale(nil) }
        return .stale(Guard(mode: screen % 2 == 0 ? .enforce : .recordOnly))
    }

    func guardReturned(scope: KeyName, subject: KeyName, code: String, country: String,
                       address: ClientAddress?) throws(TickgateError) {}

    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String]) throws(TickgateError) {}

    func guardChallengePassed(scope: KeyName, subject: KeyName, address: ClientAddress?) throws(TickgateError) {
        throw TickgateError(.notFound, "the store double keeps no guard")
    }

    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, unverifiedAfter: Span,
                       sweep: Bool, records: OutcomeRecords?) throws(TickgateError) -> [DecidedCode] { [] }
}
