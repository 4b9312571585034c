import Foundation
import Testing
@testable import TickgateCore

/// Decisions on one key by memory (`KeyDecision.apply` on the engine's
/// state) and by SQLite (`SQLiteStore.decide`, one transaction, on a
/// manual clock): every sequence of Tests/rules/decisions.json. decide.lua
/// runs the same sequences on a real redis-server
/// (Tests/python/test_decision_vectors.py).
@Suite struct DecisionVectorTests {
    typealias Object = [String: Any]
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("rules/decisions.json")
    let key = CountdownKey(scope: try! KeyName("vec"), subject: try! KeyName("+8613800000000"))
    let tick = Span.milliseconds(1_000)

    static func sequences() throws -> [Object] {
        let data = try Data(contentsOf: file)
        let document = try JSONSerialization.jsonObject(with: data) as? Object
        return (document?["sequences"] as? [Object]) ?? []
    }

    func micro(_ value: Any?) -> Int64? { (value as? NSNumber)?.int64Value }
    func at(_ value: Any?) -> Instant { Instant(nanoseconds: (micro(value) ?? 0) * 1_000) }

    func policy(_ p: Object) -> SendPolicy {
        SendPolicy(cooldowns: ((p["cooldowns"] as? [NSNumber]) ?? []).map { Span(microseconds: $0.int64Value) },
                   windowMaximumSends: (p["wmax"] as? NSNumber)?.intValue ?? 0,
                   window: Span(microseconds: micro(p["window"]) ?? 0),
                   quietReset: Span(microseconds: micro(p["quiet"]) ?? 0),
                   ticketTimeout: Span(microseconds: micro(p["ticket"]) ?? 0),
                   maximumWrongCodes: (p["wrong"] as? NSNumber)?.intValue ?? 0)
    }

    /// A step's decision; `ticketDeadline`: the open ticket's countdown.
    func decision(_ step: Object, _ policy: SendPolicy, ticketDeadline: Instant) -> KeyDecision {
        switch step["op"] as? String {
        case "start":
            return .start(duration: Span(microseconds: micro(step["duration"]) ?? 0), tickInterval: tick,
                          restart: (step["restart"] as? Bool) ?? false)
        case "cancel": return .cancel
        case "begin": return .sendBegin(policy: policy, tickInterval: tick, ticket: 1, screening: .screened)
        case "end":
            return .sendEnd(ticket: 1, ticketDeadline: ticketDeadline,
                            outcome: (step["outcome"] as? String) == "ok" ? .succeeded : .failed,
                            serverRetryAfter: Span(microseconds: micro(step["retry"]) ?? 0), policy: policy,
                            tickInterval: tick, chargedAt: nil)
        case "verified": return .verified(policy: policy)
        default: return .verifyFailed(policy: policy)
        }
    }

    static let statuses: [Status: String] = [.inFlight: "in_flight", .coolingDown: "cooling_down", .locked: "locked",
                                             .notFound: "not_found", .expired: "expired", .codeDead: "code_dead"]

    /// The answer and the state after it, in the vectors' terms.
    func describe(_ rows: KeyRows?, _ error: TickgateError?, _ policy: SendPolicy, at now: Instant) -> Object {
        if let error {
            var out: Object = ["result": Self.statuses[error.status] ?? "\(error.status)"]
            out["remaining"] = error.remaining.nanoseconds / 1_000
            return out
        }
        let countdown = rows?.countdown.flatMap { $0.deadline > now ? $0 : nil }
        let record = rows?.record
        let life = SendRules.keyLife(countdownDeadline: countdown?.deadline, lastSend: record?.lastSend,
                                     newestSend: record?.sends.last, quietReset: policy.quietReset,
                                     window: policy.window, at: now)
        let phase: String = switch countdown?.phase {
        case .sending: "sending"
        case .locked: "locked"
        default: "cooling"
        }
        let micros = { (i: Instant) -> Int64 in i.nanoseconds / 1_000 }
        return [
            "result": "ok",
            "countdown": countdown.map { ["deadline": micros($0.deadline), "phase": phase] as Object } ?? NSNull(),
            "record": record.map {
                ["n": $0.consecutive, "last": $0.lastSend.map(micros) ?? NSNull(), "sends": $0.sends.map(micros),
                 "w": $0.wrongCodes, "dead": $0.codeDead, "sent": $0.hasSent] as Object
            } ?? NSNull(),
            "life": life.map(micros) ?? NSNull(),
        ]
    }

    func same(_ got: Object, _ want: Object) throws -> Bool {
        var want = want
        if (want["result"] as? String) != "ok", want["remaining"] == nil { want.removeValue(forKey: "remaining") }
        var got = got
        if want["remaining"] == nil { got.removeValue(forKey: "remaining") }
        let a = try JSONSerialization.data(withJSONObject: got, options: .sortedKeys)
        let b = try JSONSerialization.data(withJSONObject: want, options: .sortedKeys)
        return a == b
    }

    /// Runs every sequence through `decide` (a fresh store per sequence).
    func run(_ store: String, _ open: () throws -> (KeyDecision, Instant) throws -> (KeyRows?, TickgateError?)) throws {
        var steps = 0
        for sequence in try Self.sequences() {
            let policy = policy((sequence["policy"] as? Object) ?? [:])
            let decide = try open()
            var ticketDeadline = Instant(nanoseconds: 0)
            for (index, step) in ((sequence["steps"] as? [Object]) ?? []).enumerated() {
                steps += 1
                let now = at(step["at"])
                let (rows, error) = try decide(decision(step, policy, ticketDeadline: ticketDeadline), now)
                if (step["op"] as? String) == "begin", let countdown = rows?.countdown { ticketDeadline = countdown.deadline }
                let got = describe(rows, error, policy, at: now)
                let want = (step["expect"] as? Object) ?? [:]
                #expect(try same(got, want),
                        "\(store): \(sequence["name"] ?? "") step \(index): got \(got), want \(want)")
            }
        }
        #expect(steps >= 50)
    }

    @Test func everySequenceInMemory() throws {
        try run("memory") {
            var rows = KeyRows()
            return { decision, now in
                var after = rows
                var budgets: [BudgetRow] = []
                do {
                    _ = try decision.apply(to: &after, budgets: &budgets, key: key, at: now)
                } catch let error as TickgateError {
                    return (nil, error)
                }
                rows = after
                return (after, nil)
            }
        }
    }

    /// The same sequences through an engine with no store (manual clock
    /// from 0): sends begun on the caller's bytes and ended by ticket, bare
    /// countdowns on bytes, verifications by names. The send path on bytes
    /// decides by the rules' parts (`KeyDecision.windowFull`,
    /// `KeyDecision.succeeded`) without `KeyDecision.apply`: it must answer
    /// and leave the key as `apply` does.
    @Test func everySequenceOnTheEngine() throws {
        var engines: [Engine] = []
        defer { for engine in engines { _ = engine.close() } }
        let key = self.key
        func onBytes<T>(_ body: (RawKey) throws(TickgateError) -> T) throws(TickgateError) -> T {
            try key.withBytes { scope, subject in
                Result { () throws(TickgateError) -> T in try body(RawKey(scope: scope, subject: subject)) }
            }.get()
        }
        try run("engine") {
            let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
            engines.append(engine)
            var ticket: UInt64 = 0
            var policySet = false
            return { decision, now in
                if now > engine.now() { try engine.advance(by: now.since(engine.now())) }
                if !policySet, let policy = decision.policy {
                    try engine.setPolicy(policy, scope: key.scope)
                    policySet = true
                }
                do throws(TickgateError) {
                    switch decision {
                    case let .start(duration, _, restart):
                        _ = try onBytes { (raw) throws(TickgateError) in
                            try engine.start(raw, duration: duration, restart: restart)
                        }
                    case .cancel:
                        try onBytes { (raw) throws(TickgateError) in try engine.cancel(raw) }
                    case .sendBegin:
                        ticket = try onBytes { (raw) throws(TickgateError) in try engine.sendBegin(raw) }
                    case let .sendEnd(_, _, outcome, retry, _, _, _, _):
                        _ = try engine.sendEnd(ticket, outcome, serverRetryAfter: retry)
                    case .verified:
                        try engine.verified(key)
                    case .verifyFailed:
                        _ = try engine.verifyFailed(key)
                    case .read:
                        break
                    }
                } catch {
                    return (nil, error)
                }
                return (engine.locked.withLock { $0.keyRows(key, at: now).rows }, nil)
            }
        }
    }

    @Test func everySequenceOnSQLite() throws {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("tickgate-vectors-\(getpid())-\(UInt64.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var opened: [SQLiteStore] = []
        defer { for store in opened { store.close() } }
        var serial = 0
        try run("SQLite") {
            serial += 1
            let clock = Clock(manual: true, boot: Instant(nanoseconds: 0), wall: 1_800_000_000_000_000_000,
                              bootID: "vectors")
            let store = try SQLiteStore(options: StoreOptions(path: folder.appendingPathComponent("\(serial).db").path),
                                        clock: clock)
            opened.append(store)
            return { decision, now in
                if now > clock.now() { clock.advance(to: now, by: now.since(clock.now())) }
                let result = try store.decide(decision, budgets: [], for: key, by: now.advanced(by: .milliseconds(5_000)))
                return (result.refusal == nil ? result.after : nil, result.refusal)
            }
        }
    }
}
