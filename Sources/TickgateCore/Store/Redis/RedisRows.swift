/// What the Redis store reads back, checked as strictly as a SQLite row:
/// a value out of range gives `TG_E_STORE_CORRUPT` naming the key.

/// The reply of the `decide` script.
struct ReplyReader {
    let elements: [RedisReply]
    let key: String
    let server: String

    init(_ reply: RedisReply, key: [UInt8], server: String) throws(TickgateError) {
        self.key = String(decoding: key, as: UTF8.self)
        self.server = server
        guard case let .array(elements) = reply, !elements.isEmpty else {
            throw TickgateError(.storeCorrupt, "the Redis server \(server) sent a bad reply for the key \(self.key)")
        }
        self.elements = elements
    }

    func corrupt(_ what: String? = nil) -> TickgateError {
        // The script's own report: {'corrupt', key, why}.
        if what == nil, elements.count == 3, let name = elements[1].text, let why = elements[2].text {
            return TickgateError(.storeCorrupt, "the Redis key \(name.prefix(300)) is corrupt: \(why.prefix(300))")
        }
        return TickgateError(.storeCorrupt,
            "the Redis server \(server) sent a bad reply for the key \(key.prefix(300)) (\(what ?? "shape"))")
    }

    func element(_ index: Int) throws(TickgateError) -> RedisReply {
        guard index < elements.count else { throw corrupt("too short") }
        return elements[index]
    }

    func text(_ index: Int) throws(TickgateError) -> String {
        guard let text = try element(index).text else { throw corrupt("element \(index)") }
        return text
    }

    func integer(_ index: Int, _ range: ClosedRange<Int64>) throws(TickgateError) -> Int64 {
        guard case let .integer(value) = try element(index), range.contains(value) else {
            throw corrupt("element \(index)")
        }
        return value
    }
}

/// Settings and sessions as the Redis store writes them.
enum RedisRows {
    /// The key hash's twelve fields, in the order the scripts list them
    /// (FIELDS in Scripts/decide.lua).
    static let fieldOrder = Array("dplickhnwxst".utf8)

    /// A key's hash as HGETALL returns it (Scripts/decide.lua describes its
    /// fields), at server time `now`: checked as the decide script checks
    /// it.
    static func keyRows(_ reply: RedisReply, for key: CountdownKey, name: [UInt8], now: Int64,
                        offset: Int64) throws(TickgateError) -> KeyRows {
        if case let .error(text) = reply { throw corrupt(name, text) }
        guard case let .array(entries) = reply, entries.count % 2 == 0 else { throw corrupt(name, "not a hash") }
        if entries.isEmpty { return KeyRows() }
        var fields = [ArraySlice<UInt8>?](repeating: nil, count: 12)
        var count = 0
        var index = 0
        while index < entries.count {
            guard case let .string(field) = entries[index], case let .string(value) = entries[index + 1] else {
                throw corrupt(name, "an unknown field")
            }
            index += 2
            // An engine's last answer on the key, kept for its retry.
            if field.count > 1 && field[0] == UInt8(ascii: "q") { continue }
            guard field.count == 1, let slot = fieldOrder.firstIndex(of: field[0]), fields[slot] == nil else {
                throw corrupt(name, "an unknown field")
            }
            fields[slot] = value[...]
            count += 1
        }
        if count == 0 { return KeyRows() }
        // Format 1 had no ticket field.
        if count == 11 && fields[5] == nil {
            fields[5] = []
            count = 12
        }
        guard count == 12 else { throw corrupt(name, "holds \(count) of its 12 fields") }
        return try checkedRows(fields, for: key, name: name, now: now, offset: offset)
    }

    /// The key's rows from a decision's answer: its twelve fields in the
    /// order of `fieldOrder` joined by "|" (nothing: no fields).
    static func keyRows(packed reply: RedisReply, for key: CountdownKey, name: [UInt8], now: Int64,
                        offset: Int64) throws(TickgateError) -> KeyRows {
        guard case let .string(text) = reply else { throw corrupt(name, "an answer without its fields") }
        if text.isEmpty { return KeyRows() }
        var fields = [ArraySlice<UInt8>?](repeating: nil, count: 12)
        var count = 0
        var start = 0
        for index in 0...text.count where index == text.count || text[index] == UInt8(ascii: "|") {
            guard count < 12 else { throw corrupt(name, "an answer with more than its 12 fields") }
            fields[count] = text[start..<index]
            count += 1
            start = index + 1
        }
        guard count == 12 else { throw corrupt(name, "an answer with \(count) of its 12 fields") }
        return try checkedRows(fields, for: key, name: name, now: now, offset: offset)
    }

    private static func corrupt(_ name: [UInt8], _ why: String) -> TickgateError {
        TickgateError(.storeCorrupt, "the Redis key \(String(decoding: name, as: UTF8.self).prefix(300)) is corrupt: \(why)")
    }

    /// Digits (a "-" first allowed), at most 17 of them, or nil.
    @inline(__always)
    private static func integer(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard !bytes.isEmpty, bytes.count <= 17 else { return nil }
        var index = bytes.startIndex
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative {
            index += 1
            if index == bytes.endIndex { return nil }
        }
        var value: Int64 = 0
        while index < bytes.endIndex {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value &* 10 &+ Int64(digit)
            index += 1
        }
        return negative ? -value : value
    }

    /// Checks a key's twelve fields (in `fieldOrder`) as the scripts do and
    /// makes its rows.
    private static func checkedRows(_ fields: [ArraySlice<UInt8>?], for key: CountdownKey, name: [UInt8],
                                    now: Int64, offset: Int64) throws(TickgateError) -> KeyRows {
        let ticket = fields[5]!
        guard ticket.count <= 64, !ticket.contains(UInt8(ascii: "|")), !ticket.contains(UInt8(ascii: "~")) else {
            throw corrupt(name, "field k holds \"\(String(decoding: ticket.prefix(40), as: UTF8.self))\"")
        }
        let most = Int64(1) << 53 - 1
        func int(_ slot: Int, _ range: ClosedRange<Int64>) throws(TickgateError) -> Int64 {
            let bytes = fields[slot]!
            guard let value = integer(bytes), range.contains(value) else {
                throw corrupt(name, "field \(Character(UnicodeScalar(fieldOrder[slot]))) holds \"\(String(decoding: bytes.prefix(40), as: UTF8.self))\"")
            }
            return value
        }
        let year = Limits.maximumDuration.nanoseconds / 1_000
        let day = Limits.maximumTickInterval.nanoseconds / 1_000
        var rows = KeyRows()
        let deadline = try int(0, -1...most)
        let phase = try int(1, -1...2)
        let duration = try int(2, -1...year)
        let tick = try int(3, -1...day)
        _ = try int(4, -1...most)
        if deadline >= 0 {
            guard phase >= 0, let phase = Phase(rawValue: UInt8(phase)), duration >= 1, tick >= 10_000 else {
                throw corrupt(name, "a countdown field")
            }
            if deadline > now {
                rows.countdown = Countdown(key: key, phase: phase, instance: 0,
                                           deadline: Instant(nanoseconds: deadline * 1_000 + offset),
                                           duration: Span(nanoseconds: duration * 1_000),
                                           tickInterval: Span(nanoseconds: tick * 1_000))
            }
        }
        let hasSent = try int(6, -1...1)
        let consecutive = try int(7, -1...Int64(Limits.maximumConsecutiveSends))
        let wrong = try int(8, -1...Int64(SendPolicy.maximumWrongCodesLimit + 1))
        let dead = try int(9, -1...1)
        let last = try int(10, -1...most)
        if hasSent >= 0 {
            guard consecutive >= 0, wrong >= 0, dead >= 0 else { throw corrupt(name, "a record field") }
            var sends: [Instant] = []
            let list = fields[11]!
            if !list.isEmpty {
                var previous: Int64 = -1
                var start = list.startIndex
                for index in list.startIndex...list.endIndex
                where index == list.endIndex || list[index] == UInt8(ascii: ",") {
                    guard let value = integer(list[start..<index]), value >= 0, value <= most, value >= previous,
                          sends.count < Limits.maximumWindowSends else { throw corrupt(name, "field t") }
                    previous = value
                    sends.append(Instant(nanoseconds: value * 1_000 + offset))
                    start = index + 1
                }
            }
            rows.record = SendRecord(sends: sends, consecutive: Int(consecutive),
                                     lastSend: last >= 0 ? Instant(nanoseconds: last * 1_000 + offset) : nil,
                                     hasSent: hasSent == 1, wrongCodes: Int(wrong), codeDead: dead == 1)
        }
        return rows
    }

    static func name(_ text: String, _ bad: (String) -> TickgateError) throws(TickgateError) -> KeyName {
        var bytes = Array(text.utf8)
        do throws(TickgateError) {
            return try bytes.withUnsafeMutableBufferPointer { (buffer) throws(TickgateError) -> KeyName in
                try KeyName(bytes: UnsafeBufferPointer(buffer), role: "name")
            }
        } catch {
            throw bad("names no valid key: \(error.message)")
        }
    }

    private static func number(_ text: Substring, _ range: ClosedRange<Int64>) -> Int64? {
        guard text.count <= 17, let value = Int64(text), range.contains(value) else { return nil }
        return value
    }

    /// "c1,c2|max|window|quiet|ticket|wrong", spans in µs.
    static func policy(_ value: [UInt8], _ bad: (String) -> TickgateError) throws(TickgateError) -> SendPolicy {
        let text = String(decoding: value.prefix(1_024), as: UTF8.self)
        let parts = text.split(separator: "|", omittingEmptySubsequences: false)
        let year = Limits.maximumDuration.nanoseconds / 1_000
        guard value.count <= 1_024, parts.count == 6 else { throw bad("is not a policy") }
        var steps: [Span] = []
        for step in parts[0].split(separator: ",", omittingEmptySubsequences: false) {
            guard let micros = number(step, 1...year) else { throw bad("has a bad cooldown step") }
            steps.append(Span(nanoseconds: micros * 1_000))
        }
        guard let cap = number(parts[1], 0...Int64(Limits.maximumWindowSends)),
              let window = number(parts[2], 0...year), let quiet = number(parts[3], 0...year),
              let ticket = number(parts[4], 1...year),
              let wrong = number(parts[5], 0...Int64(SendPolicy.maximumWrongCodesLimit)) else {
            throw bad("has a field out of range")
        }
        do throws(TickgateError) {
            return try SendPolicy(cooldowns: steps, windowMaximumSends: Int(cap),
                                  window: Span(nanoseconds: window * 1_000),
                                  quietReset: Span(nanoseconds: quiet * 1_000),
                                  ticketTimeout: Span(nanoseconds: ticket * 1_000),
                                  maximumWrongCodes: Int(wrong)).validated()
        } catch {
            throw bad(error.message)
        }
    }

    /// Six templates, each "LENGTH:BYTES".
    static func titles(_ value: [UInt8], _ bad: (String) -> TickgateError) throws(TickgateError) -> TitleSet {
        var templates: [TitleTemplate] = []
        var rest = value[...]
        let roles = ["idle", "sending", "cooling", "ready_again", "locked", "code_dead"]
        for role in roles {
            guard let colon = rest.prefix(4).firstIndex(of: UInt8(ascii: ":")),
                  let length = Int(String(decoding: rest[rest.startIndex..<colon], as: UTF8.self)),
                  length >= 0, length <= TitleTemplate.maximumBytes,
                  rest.distance(from: colon, to: rest.endIndex) > length else {
                throw bad("is not a title set")
            }
            let start = rest.index(after: colon)
            let bytes = rest[start..<rest.index(start, offsetBy: length)]
            rest = rest[rest.index(start, offsetBy: length)...]
            guard let text = String(validating: Array(bytes), as: UTF8.self) else { throw bad("is not UTF-8") }
            do throws(TickgateError) {
                templates.append(try TitleTemplate(text, role: role))
            } catch {
                throw bad(error.message)
            }
        }
        guard rest.isEmpty else { throw bad("is longer than a title set") }
        return TitleSet(idle: templates[0], sending: templates[1], cooling: templates[2],
                        readyAgain: templates[3], locked: templates[4], codeDead: templates[5])
    }

    /// "N/MS,N/MS".
    static func budget(_ value: [UInt8], _ bad: (String) -> TickgateError) throws(TickgateError) -> Budget {
        guard value.count <= 256 else { throw bad("is not a budget") }
        var windows: [Budget.Window] = []
        let maximumMs = Limits.maximumDuration.nanoseconds / Span.nanosecondsPerMillisecond
        for part in String(decoding: value, as: UTF8.self).split(separator: ",", omittingEmptySubsequences: false) {
            let fields = part.split(separator: "/", omittingEmptySubsequences: false)
            guard fields.count == 2, let sends = number(fields[0], 1...Int64(Budget.maximumSends)),
                  let ms = number(fields[1], 1...maximumMs) else { throw bad("has a window that is not SENDS/MS") }
            windows.append(Budget.Window(maximumSends: Int(sends), length: .milliseconds(ms)))
            guard windows.count <= Budget.maximumWindows else { throw bad("has too many windows") }
        }
        do throws(TickgateError) {
            return try Budget(windows: windows).validated()
        } catch {
            throw bad(error.message)
        }
    }

    /// "END|TTL" in µs (END -1: no expiry).
    static func session(_ value: [UInt8], _ bad: (String) -> TickgateError) throws(TickgateError) -> (Int64?, Span) {
        let parts = String(decoding: value.prefix(64), as: UTF8.self).split(separator: "|", omittingEmptySubsequences: false)
        guard value.count <= 64, parts.count == 2, let end = number(parts[0], -1...(Int64(1) << 53)),
              let ttl = number(parts[1], 0...Limits.maximumDuration.nanoseconds / 1_000) else {
            throw bad("is not a session")
        }
        return (end >= 0 ? end : nil, Span(nanoseconds: ttl * 1_000))
    }
}
