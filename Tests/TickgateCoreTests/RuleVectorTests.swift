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

    @Test func everyRuleCaseInSwift() throws {
        let data = try Data(contentsOf: Self.file)
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? Object)
        let groups = try #require(document["groups"] as? [String: [Object]])
        var total = 0
        for (rule, cases) in groups.sorted(by: { $0.key < $1.key }) {
            for (index, vector) in cases.enumerated() {
                total += 1
                let input = try #require(vector["in"] as? Object)
                let want = try #require(vector["out"] as? Object)
                let got = try answer(rule, input)
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
