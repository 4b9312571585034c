// The Redis store's side of a guarded scope: one script (Scripts/guard.lua)
// on the scope's slot reads the guard and the signals' counts in one step,
// and counts codes sent, returned and verified.

extension RedisStore {
    @discardableResult
    func runGuard(_ op: String, scope: KeyName, country: String, address client: ClientAddress?,
                  extra: [[UInt8]] = [], ranges: [String] = []) throws(TickgateError) -> ReplyReader {
        let call = clock.begin()
        let base = keys.guardBase(scope)
        let name = base + Array("guard".utf8)
        var arguments = [
            Array(op.utf8), base, Array(country.utf8), Array((client?.description ?? "").utf8), call.notAfter,
        ] + extra
        if !ranges.isEmpty {
            // ARGV 10 (the store's time: read by the script), 11 the ranges.
            while arguments.count < 10 { arguments.append([]) }
            arguments.append(Array(ranges.joined(separator: ",").utf8))
        }
        let reply = try run("guardSignals", keys: [name], arguments: arguments, by: call.deadline)
        if case let .array(parts) = reply, parts.first?.text == "late" { throw late("the guard's \(op)") }
        return try guardReply(reply, name)
    }

    /// A guard script's reply, its own report of a corrupt key thrown.
    private func guardReply(_ reply: RedisReply, _ name: [UInt8]) throws(TickgateError) -> ReplyReader {
        let reader = try ReplyReader(reply, key: name, server: address.description)
        if reader.elements.first?.text == "corrupt" {
            throw TickgateError(.storeCorrupt, reader.corrupt().message, store: .corrupt)
        }
        return reader
    }

    /// Reading the guard costs a round trip: the engine keeps its copy.
    func localGuard(scope: KeyName) throws(TickgateError) -> LocalGuard { .unknown }

    /// One server screens a guarded send in the step that decides it
    /// (decide.lua); a cluster's guard is in another slot than the key.
    var screensInDecision: Bool { cluster == nil }
    var decidesInEngine: Bool { false }

    func guardScreen(scope: KeyName, subject: KeyName, code: String, country: String, address: ClientAddress?,
                     rules: Guard, judge: Bool) throws(TickgateError) -> GuardScreen {
        try guardScreen(try runGuard("screen", scope: scope, country: country, address: address,
                                     extra: [Array(code.utf8), Array(subject.value.utf8), Array(rules.storedText.utf8),
                                             judge ? [UInt8(ascii: "1")] : []],
                                     ranges: rules.ranges(ofSubject: subject)),
                        address: address)
    }

    /// guard.lua's answer to a screen (from its own run, or the 9th element
    /// of decide.lua's answer to a guarded send screened in its step).
    func guardScreen(_ reader: ReplyReader, address: ClientAddress?) throws(TickgateError) -> GuardScreen {
        if reader.elements.first?.text == "corrupt" {
            throw TickgateError(.storeCorrupt, reader.corrupt().message, store: .corrupt)
        }
        if reader.elements.first?.text == "late" { throw late("the guard's screen") }
        func bad(_ why: String) -> TickgateError {
            TickgateError(.storeCorrupt, "the Redis key \(reader.key.prefix(300)) \(why)", store: .corrupt)
        }
        switch reader.elements.first?.text {
        case "stale":
            let text = try reader.text(1)
            return .stale(text.isEmpty ? nil : try Guard.decodeStored(text, bad))
        case "same":
            return .same
        default:
            var read = try reading(reader, address: address)
            guard reader.elements.count >= 21 else { throw bad("answered a screen of \(reader.elements.count) parts") }
            let count: ClosedRange<Int64> = 0...Int64(1) << 40
            var judgment = GuardJudgment()
            judgment.warnings = PumpingWarnings(rawValue: UInt32(try reader.integer(15, 0...127)))
            judgment.countryDaily = Int(try reader.integer(16, count))
            judgment.countryHourly = Int(try reader.integer(17, count))
            judgment.addressDaily = Int(try reader.integer(18, count))
            judgment.addressHourly = Int(try reader.integer(19, count))
            read.counts.countryVerifiedDailyMaximum = Int(try reader.integer(20, count))
            if reader.elements.count >= 27 {
                // A pass used, the range that warned, then each range's
                // counts (guard.lua).
                judgment.challengePassed = try reader.text(21) == "1"
                judgment.range = try reader.text(22)
                judgment.rangeUnverifiedDay = Int(try reader.integer(23, count))
                judgment.rangeUnverifiedHour = Int(try reader.integer(24, count))
                judgment.rangeDaily = Int(try reader.integer(25, count))
                judgment.rangeHourly = Int(try reader.integer(26, count))
                var index = 27
                while index + 6 <= reader.elements.count {
                    var range = RangeCounts(range: try reader.text(index))
                    range.unverifiedDay = Int(try reader.integer(index + 1, count))
                    range.unverifiedHour = Int(try reader.integer(index + 2, count))
                    range.verifiedDay = Int(try reader.integer(index + 3, count))
                    range.verifiedHour = Int(try reader.integer(index + 4, count))
                    range.verifiedDailyMaximum = Int(try reader.integer(index + 5, count))
                    read.counts.ranges.append(range)
                    index += 6
                }
            }
            return .judged(read, judgment, counted: try reader.text(14) == "1")
        }
    }

    /// A reply of the check's layout: {guard, counts..., today, days, address counts...}.
    private func reading(_ reader: ReplyReader, address: ClientAddress?) throws(TickgateError) -> GuardReading {
        func bad(_ why: String) -> TickgateError {
            TickgateError(.storeCorrupt, "the Redis key \(reader.key.prefix(300)) \(why)", store: .corrupt)
        }
        // (Element 0, the guard's text, is the one the screen compared.)
        let count: ClosedRange<Int64> = 0...Int64(1) << 40
        var counts = GuardCounts()
        counts.countryUnverifiedDay = Int(try reader.integer(1, count))
        counts.countryUnverifiedHour = Int(try reader.integer(2, count))
        counts.countryVerifiedDay = Int(try reader.integer(3, count))
        counts.countryVerifiedHour = Int(try reader.integer(4, count))
        let today = try reader.integer(5, 0...Int64(1) << 40)
        var days: [Int64: Int] = [:]
        guard case let .array(pairs) = try reader.element(6), pairs.count % 2 == 0 else { throw bad("holds bad days") }
        var index = 0
        while index < pairs.count {
            guard let day = pairs[index].text.flatMap({ Int64($0) }),
                  let verified = pairs[index + 1].text.flatMap({ Int($0) }), verified >= 0 else {
                throw bad("holds a bad day of verified codes")
            }
            days[day] = verified
            index += 2
        }
        if address != nil {
            counts.hasAddress = true
            counts.addressUnverifiedDay = Int(try reader.integer(7, count))
            counts.addressUnverifiedHour = Int(try reader.integer(8, count))
            counts.addressVerifiedDay = Int(try reader.integer(9, count))
            counts.addressCountriesDay = Int(try reader.integer(10, count))
        }
        var read = GuardReading(counts: counts, days: days, today: today)
        if reader.elements.count >= 14 {
            let time: ClosedRange<Int64> = 0...Int64(1) << 62
            read.serverNow = try reader.integer(11, time)
            func oldest(_ index: Int) throws(TickgateError) -> Int64? {
                try reader.element(index).text == "" ? nil : try reader.integer(index, time)
            }
            read.oldestInDay = try oldest(12)
            read.oldestInHour = try oldest(13)
        }
        return read
    }


    func guardReturned(scope: KeyName, subject: KeyName, code: String, country: String,
                       address: ClientAddress?) throws(TickgateError) {
        try runGuard("returned", scope: scope, country: country, address: address,
                     extra: [Array(code.utf8), Array(subject.value.utf8), keys.keyChannel, keys.guardCountsNotice],
                     ranges: GuardRules.ranges(ofSubject: subject))
    }

    func guardChallengePassed(scope: KeyName, subject: KeyName, address: ClientAddress?) throws(TickgateError) {
        let reader = try runGuard("pass", scope: scope, country: "", address: address,
                                  extra: [[], Array(subject.value.utf8)])
        if reader.elements.first?.text == "none" {
            throw TickgateError(.notFound, "the scope \(scope.value) has no guard with challenge signals")
        }
    }

    func guardOutcomes(scope: KeyName, subject: KeyName, event: OutcomeEvent, unverifiedAfter: Span,
                       sweep: Bool, records: OutcomeRecords?) throws(TickgateError) -> [DecidedCode] {
        let call = clock.begin()
        let base = keys.guardBase(scope)
        let name = base + Array("guard".utf8)
        var code = ""
        if case let .sent(id) = event { code = id }
        let op = switch event {
        case .sent: "sent"
        case .verified: "verified"
        case .killed: "killed"
        case .sweep: "sweep"
        }
        let arguments = [Array(op.utf8), base, call.notAfter, Array(subject.value.utf8), Array(code.utf8),
                         Array(String(unverifiedAfter.nanoseconds / 1000).utf8),
                         Array(String(sweep ? FollowedCodes.sweepLimit : 0).utf8)]
            + Self.outcomeTemplate(records, scope: scope)
        let reader = try guardReply(try run("outcomes", keys: [name], arguments: arguments, by: call.deadline), name)
        if reader.elements.first?.text == "late" { throw late("the outcomes' \(op)") }
        return try outcomes(reader)
    }

    /// outcomes.lua's answer (from its own run, or the 9th element of
    /// decide.lua's answer to a send's end that followed its code).
    func outcomes(_ reader: ReplyReader) throws(TickgateError) -> [DecidedCode] {
        if reader.elements.first?.text == "corrupt" {
            throw TickgateError(.storeCorrupt, reader.corrupt().message, store: .corrupt)
        }
        guard reader.elements.first?.text == "ok", (reader.elements.count - 1) % 6 == 0 else {
            throw TickgateError(.storeCorrupt, "the Redis key \(reader.key.prefix(300)) answered outcomes of \(reader.elements.count) parts",
                                store: .corrupt)
        }
        var decided: [DecidedCode] = []
        var index = 1
        while index < reader.elements.count {
            let name = try reader.text(index + 1)
            guard let outcome = CodeOutcome.allCases.first(where: { $0.name == name }), outcome != .challengePassed else {
                throw TickgateError(.storeCorrupt, "the Redis key \(reader.key.prefix(300)) answered an unknown outcome",
                                    store: .corrupt)
            }
            decided.append(DecidedCode(code: try reader.text(index), subject: try reader.text(index + 2),
                                       country: try reader.text(index + 3), address: try reader.text(index + 4),
                                       age: Span(microseconds: try reader.integer(index + 5, 0...Int64(1) << 52)),
                                       outcome: outcome))
            index += 6
        }
        return decided
    }

    /// The scope's stream `u{N:SCOPE}records`, for the operator's readers.
    var keepsRecordStream: Bool { true }
    /// A sweep is a round trip: at most once a second per scope.
    var sweepInterval: Span { .milliseconds(1_000) }

    func appendRecord(_ record: GuardRecord, maximumLength: Int) throws(TickgateError) {
        let call = clock.begin()
        let name = keys.guardBase(record.scope) + Array("records".utf8)
        if let outcome = record.outcome {
            // What became of a code (or a passed challenge): no decision.
            let fields = Self.outcomeFields(
                wallMilliseconds: String(record.wallMilliseconds), scope: record.scope.value, number: record.number,
                country: record.country, address: record.address?.description ?? "", outcome: outcome.name,
                mode: record.mode,
                sentMilliseconds: record.codeSentWallMilliseconds != 0 ? String(record.codeSentWallMilliseconds) : nil)
            var arguments = [Array(String(maximumLength).utf8)]
            for (field, value) in fields { arguments += [Array(field.utf8), Array(value.utf8)] }
            _ = try guardReply(try run("guardRecord", keys: [name], arguments: arguments, by: call.deadline), name)
            return
        }
        var arguments = [Array(String(maximumLength).utf8)]
        for (field, value) in Self.decisionFields(record) { arguments += [Array(field.utf8), Array(value.utf8)] }
        _ = try guardReply(try run("guardRecord", keys: [name], arguments: arguments, by: call.deadline), name)
    }

    /// An outcome's record's fields in the stream (`sentMilliseconds` nil:
    /// a passed challenge's, which has none).
    static func outcomeFields(wallMilliseconds: String, scope: String, number: String, country: String,
                              address: String, outcome: String, mode: Guard.Mode,
                              sentMilliseconds: String?) -> [(String, String)] {
        var fields = [("time_ms", wallMilliseconds), ("scope", scope), ("number", number),
                      ("country", country), ("address", address), ("outcome", outcome),
                      ("mode", String(mode.rawValue))]
        if let sentMilliseconds { fields.append(("sent_ms", sentMilliseconds)) }
        return fields
    }

    /// outcomes.lua's ARGV 8...: the stream's length and the template of
    /// the records of the codes it decides (its `records`), or none.
    static func outcomeTemplate(_ records: OutcomeRecords?, scope: KeyName) -> [[UInt8]] {
        guard let records, records.streamLength > 0 else { return [] }
        // The code's answer's values: 2 outcome, 3 subject, 4 country, 5
        // address; "\u{3}W": sent, W (µs) less its age.
        let fields = outcomeFields(wallMilliseconds: String(records.wallNanoseconds / 1_000_000),
                                   scope: literal(scope.value),
                                   number: "\u{1}3", country: "\u{1}4", address: "\u{1}5", outcome: "\u{1}2",
                                   mode: records.mode, sentMilliseconds: "\u{3}\(records.wallNanoseconds / 1000)")
        var arguments = [Array(String(records.streamLength).utf8)]
        for (field, value) in fields { arguments += [Array(field.utf8), Array(value.utf8)] }
        return arguments
    }

    /// A value of a record's template that is itself (prelude.lua's
    /// `append_record`): one whose first byte would read as a reference is
    /// escaped.
    static func literal(_ value: String) -> String {
        guard let first = value.utf8.first, first <= 3 else { return value }
        return "\u{0}" + value
    }

    /// A decision record's fields in the stream. `judgedInStep`: the
    /// template of a send screened in decide.lua's step, before the screen
    /// (nil: the record as decided), which the script appends if it grants
    /// the send: its judged values are references to the screen's answer
    /// (`guardScreen(_:address:)`'s elements, decide.lua's
    /// `append_record`), filled in there; true when the send is judged.
    static func decisionFields(_ record: GuardRecord, judgedInStep: Bool? = nil) -> [(String, String)] {
        let template = judgedInStep != nil
        let judged = judgedInStep ?? (record.judgment != nil)
        // The screen's element `index` (the reader's, from 0; Lua's from
        // 1), left out with its field if element `unless` is '' or 0.
        func element(_ index: Int, unless gate: Int? = nil) -> String {
            "\u{1}\(index + 1)" + (gate.map { "?\($0 + 1)" } ?? "")
        }
        var record = record
        if template {
            record.status = .ok
            if judged && record.address == nil { record.judgment = GuardJudgment() }
        }
        record = record.noted
        var fields: [(String, String)] = [
            ("time_ms", String(record.wallMilliseconds)), ("scope", record.scope.value), ("number", record.number),
            ("country", record.country), ("address", record.address?.description ?? ""),
            ("status", String(record.status.rawValue)),
            ("outcome", record.status == .ok ? "granted" : record.status == .challengeRequired ? "challenged" : "refused"),
            ("message", record.message), ("mode", String(record.mode.rawValue)),
            // (In a judged template, the screen's: set below.)
            ("warnings", record.warnings.names),
        ]
        if record.ticket != 0 { fields.append(("ticket", String(record.ticket))) }
        if let bypass = record.bypass { fields.append(("bypass", bypass)) }
        if let rule = record.rule { fields.append(("rule", rule)) }
        if record.addressSignalsSkipped { fields.append(("address_skipped", "1")) }
        if template {
            fields = fields.map { ($0.0, literal($0.1)) }
        }
        if template, judged {
            let address = record.address != nil
            if let warnings = fields.firstIndex(where: { $0.0 == "warnings" }) {
                fields[warnings].1 = "\u{2}\(15 + 1)=" + PumpingWarnings.all.map(\.1).joined(separator: ",")
            }
            fields += [("challenge_passed", element(21, unless: 21)),
                       ("country_unverified_day", element(1)), ("country_unverified_hour", element(2)),
                       ("country_daily_threshold", element(16)), ("country_hourly_threshold", element(17)),
                       ("address_unverified_day", address ? element(7) : "0"),
                       ("address_unverified_hour", address ? element(8) : "0"),
                       ("address_countries_day", address ? element(10) : "0"),
                       ("range", element(22, unless: 22)),
                       ("range_unverified_day", element(23, unless: 22)),
                       ("range_unverified_hour", element(24, unless: 22)),
                       ("range_daily_threshold", element(25, unless: 22)),
                       ("range_hourly_threshold", element(26, unless: 22))]
            return fields
        }
        if record.judgment?.challengePassed == true { fields.append(("challenge_passed", "1")) }
        if let counts = record.counts, let judgment = record.judgment {
            fields += [("country_unverified_day", counts.countryUnverifiedDay),
                       ("country_unverified_hour", counts.countryUnverifiedHour),
                       ("country_daily_threshold", judgment.countryDaily),
                       ("country_hourly_threshold", judgment.countryHourly),
                       ("address_unverified_day", counts.addressUnverifiedDay),
                       ("address_unverified_hour", counts.addressUnverifiedHour),
                       ("address_countries_day", counts.addressCountriesDay)].map { ($0.0, String($0.1)) }
            if !judgment.range.isEmpty {
                fields.append(("range", judgment.range))
                fields += [("range_unverified_day", judgment.rangeUnverifiedDay),
                           ("range_unverified_hour", judgment.rangeUnverifiedHour),
                           ("range_daily_threshold", judgment.rangeDaily),
                           ("range_hourly_threshold", judgment.rangeHourly)].map { ($0.0, String($0.1)) }
            }
        }
        return fields
    }

    func guardVerified(scope: KeyName, subject: KeyName, country: String, ranges: [String]) throws(TickgateError) {
        try runGuard("verified", scope: scope, country: country, address: nil,
                     extra: [[], Array(subject.value.utf8), keys.keyChannel, keys.guardCountsNotice], ranges: ranges)
    }
}
