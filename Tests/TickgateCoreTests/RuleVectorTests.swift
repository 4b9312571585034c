import Foundation
import Testing
@testable import TickgateCore

/// The decision's rules in Swift: every case of Tests/rules/rules.json
/// through Rules/*.swift. rules.lua answers the same cases on a real
/// redis-server (Tests/python/test_rule_vectors.py): a case the two answer
/// differently fails one of them.
@Suite struct RuleVectorTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("rules/rules.json")

    typealias Object = [String: Any]

    func instant(_ value: Any?) -> Instant? {
        (value as? NSNumber).map { Instant(nanoseconds: $0.int64Value * 1_000) }
    }
    func span(_ value: Any?) -> Span { Span(microseconds: (value as? NSNumber)?.int64Value ?? 0) }
    func int(_ value: Any?) -> Int { (value as? NSNumber)?.intValue ?? 0 }
    func micro(_ instant: Instant?) -> Any { instant.map { $0.nanoseconds / 1_000 } ?? NSNull() }
    func instants(_ value: Any?) -> [Instant] { ((value as? [NSNumber]) ?? []).map { Instant(nanoseconds: $0.int64Value * 1_000) } }

    /// GuardThresholds' defaults as the vectors write them (checked equal
    /// to Swift's own by `theGuardDefaultsAreSwifts`).
    var defaults: Object = [:]

    /// A case's answer by the Swift rules, in the vectors' terms.
    func answer(_ rule: String, _ i: Object) throws -> Object {
        switch rule {
        case "consecutive":
            return ["n": SendRules.consecutive(after: int(i["n"]), lastSend: instant(i["last"]),
                                               quietReset: span(i["quiet"]), at: instant(i["now"])!)]
        case "cooldown":
            let steps = ((i["cooldowns"] as? [NSNumber]) ?? []).map { Span(microseconds: $0.int64Value) }
            return ["step": SendRules.cooldown(steps, afterConsecutive: int(i["n"])).nanoseconds / 1_000]
        case "countdown_after_send":
            let (deadline, phase) = SendRules.countdownAfterSend(step: span(i["step"]), serverRetryAfter: span(i["retry"]),
                                                                 windowFrees: instant(i["frees"]), at: instant(i["now"])!)
            return ["deadline": micro(deadline), "phase": phase == .locked ? "locked" : "cooling"]
        case "prune":
            var record = SendRecord()
            record.sends = instants(i["sends"])
            record.prune(at: instant(i["now"])!,
                         policy: SendPolicy(windowMaximumSends: int(i["wmax"]), window: span(i["window"])))
            return ["sends": record.sends.map { $0.nanoseconds / 1_000 }]
        case "window_frees":
            return ["frees": micro(SendRules.windowFrees(instants(i["sends"]), maximumSends: int(i["wmax"]),
                                                         window: span(i["window"]), at: instant(i["now"])!))]
        case "wrong_code":
            let (count, dead) = SendRules.wrongCode(after: int(i["w"]), maximum: int(i["max"]))
            return ["w": count, "dead": dead]
        case "wrong_codes_left":
            let left = SendRules.wrongCodesLeft(after: int(i["w"]), maximum: int(i["max"]))
            return ["left": left.map { $0 as Any } ?? NSNull()]
        case "key_life":
            return ["life": micro(SendRules.keyLife(countdownDeadline: instant(i["deadline"]), lastSend: instant(i["last"]),
                                                    newestSend: instant(i["newest"]), quietReset: span(i["quiet"]),
                                                    window: span(i["window"]), at: instant(i["now"])!))]
        case "guard_judge":
            var merged = defaults
            for (name, value) in (i["t"] as? Object) ?? [:] { merged[name] = value }
            let text = GuardThresholds.names.map { String(int(merged[$0])) }.joined(separator: ",")
            var t = try GuardThresholds.decode(text) { TickgateError(.invalidArgument, $0) }
            t.rangeDailyMinimum = int(merged["range_daily_minimum"])
            t.rangeHourlyMinimum = int(merged["range_hourly_minimum"])
            t.rangeNewDailyMinimum = int(merged["range_new_daily_minimum"])
            t.rangeNewHourlyMinimum = int(merged["range_new_hourly_minimum"])
            let c = (i["c"] as? Object) ?? [:]
            var counts = GuardCounts()
            counts.countryUnverifiedDay = int(c["country_unverified_day"])
            counts.countryUnverifiedHour = int(c["country_unverified_hour"])
            counts.countryVerifiedDay = int(c["country_verified_day"])
            counts.countryVerifiedHour = int(c["country_verified_hour"])
            counts.countryVerifiedDailyMaximum = int(c["country_verified_daily_maximum"])
            counts.hasAddress = (c["has_address"] as? Bool) ?? false
            counts.addressUnverifiedDay = int(c["address_unverified_day"])
            counts.addressUnverifiedHour = int(c["address_unverified_hour"])
            counts.addressVerifiedDay = int(c["address_verified_day"])
            counts.addressCountriesDay = int(c["address_countries_day"])
            for r in (c["ranges"] as? [Object]) ?? [] {
                var range = RangeCounts(range: (r["range"] as? String) ?? "")
                range.unverifiedDay = int(r["unverified_day"])
                range.unverifiedHour = int(r["unverified_hour"])
                range.verifiedDay = int(r["verified_day"])
                range.verifiedHour = int(r["verified_hour"])
                range.verifiedDailyMaximum = int(r["verified_daily_maximum"])
                counts.ranges.append(range)
            }
            let j = GuardRules.judge(counts, by: t)
            var out: Object = ["warnings": PumpingWarnings.all.filter { j.warnings.contains($0.0) }.map(\.1),
                               "country_daily": j.countryDaily, "country_hourly": j.countryHourly,
                               "address_daily": j.addressDaily, "address_hourly": j.addressHourly]
            if c["ranges"] != nil {
                out["range"] = j.range
                out["range_unverified_day"] = j.rangeUnverifiedDay
                out["range_unverified_hour"] = j.rangeUnverifiedHour
                out["range_daily"] = j.rangeDaily
                out["range_hourly"] = j.rangeHourly
            }
            return out
        case "guard_windows":
            let w = GuardRules.windows(at: instant(i["now"])!, unverifiedAfter: span(i["after"]))
            return ["due": micro(w.unverifiedUntil), "unverified_day": micro(w.unverifiedSinceDay),
                    "unverified_hour": micro(w.unverifiedSinceHour), "verified_day": micro(w.verifiedSinceDay),
                    "verified_hour": micro(w.verifiedSinceHour)]
        case "guard_refuses":
            var judgment = GuardJudgment()
            judgment.warnings = PumpingWarnings(rawValue: UInt32(int(i["warnings"])))
            let mode = Guard.Mode(rawValue: int(i["mode"])) ?? .off
            return ["refuses": GuardRules.refuses(judgment, mode: mode)]
        case "counts_in_country":
            var judgment = GuardJudgment()
            judgment.warnings = PumpingWarnings(rawValue: UInt32(int(i["warnings"])))
            judgment.challengePassed = (i["passed"] as? Bool) ?? false
            return ["counts": GuardRules.countsInCountry(judgment)]
        case "guard_answer":
            var judgment = GuardJudgment()
            judgment.warnings = PumpingWarnings(rawValue: UInt32(int(i["warnings"])))
            let answer = GuardRules.answer(judgment, mode: Guard.Mode(rawValue: int(i["mode"])) ?? .off,
                                           challenge: PumpingWarnings(rawValue: UInt32(int(i["challenge"]))),
                                           passed: (i["passed"] as? Bool) ?? false)
            return ["answer": answer == .grant ? "grant" : answer == .refuse ? "refuse" : "challenge"]
        case "verified_daily_maximum":
            var days: [Int64: Int] = [:]
            for pair in (i["days"] as? [[NSNumber]]) ?? [] where pair.count == 2 { days[pair[0].int64Value] = pair[1].intValue }
            return ["most": GuardRules.verifiedDailyMaximum(days, today: (i["today"] as? NSNumber)?.int64Value ?? 0,
                                                            historyDays: int(i["history"]))]
        case "budget_frees":
            let windows = ((i["windows"] as? [Object]) ?? []).map {
                Budget.Window(maximumSends: int($0["cap"]), length: span($0["len"]))
            }
            let charges = instants(i["charges"])
            let row = BudgetRow(key: BudgetKey(budget: try KeyName("b"), key: try KeyName("k")),
                                budget: Budget(windows: windows), charges: charges)
            return ["frees": micro(row.frees(at: instant(i["now"])!))]
        default:
            Issue.record("no Swift runner for the rule \(rule)")
            return [:]
        }
    }

    static func document() throws -> Object {
        let data = try Data(contentsOf: file)
        return (try JSONSerialization.jsonObject(with: data) as? Object) ?? [:]
    }

    @Test func theGuardDefaultsAreSwifts() throws {
        let defaults = try #require(try Self.document()["guard_defaults"] as? Object)
        let swift = GuardThresholds()
        #expect(GuardThresholds.names.map { int(defaults[$0]) } == swift.all)
        #expect(int(defaults["range_daily_minimum"]) == swift.rangeDailyMinimum)
        #expect(int(defaults["range_hourly_minimum"]) == swift.rangeHourlyMinimum)
        #expect(int(defaults["range_new_daily_minimum"]) == swift.rangeNewDailyMinimum)
        #expect(int(defaults["range_new_hourly_minimum"]) == swift.rangeNewHourlyMinimum)
        #expect(defaults.count == GuardThresholds.names.count + 4)
    }

    @Test func everyRuleCaseInSwift() throws {
        let document = try Self.document()
        var runner = self
        runner.defaults = (document["guard_defaults"] as? Object) ?? [:]
        let groups = try #require(document["groups"] as? [String: [Object]])
        var total = 0
        for (rule, cases) in groups.sorted(by: { $0.key < $1.key }) {
            for (index, vector) in cases.enumerated() {
                total += 1
                let input = try #require(vector["in"] as? Object)
                let want = try #require(vector["out"] as? Object)
                let got = try runner.answer(rule, input)
                // Compared as JSON text: one spelling for numbers, lists and null.
                let a = try JSONSerialization.data(withJSONObject: got, options: .sortedKeys)
                let b = try JSONSerialization.data(withJSONObject: want, options: .sortedKeys)
                #expect(String(decoding: a, as: UTF8.self) == String(decoding: b, as: UTF8.self),
                        "\(rule)[\(index)] (\(vector["note"] ?? "")): in \(input)")
            }
        }
        #expect(total >= 60)
    }
}
