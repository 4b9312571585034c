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
    /// A key's hash as HGETALL returns it (Scripts/decide.lua describes its
    /// fields), at server time `now`: checked as the decide script checks
    /// it.
    static func keyRows(_ reply: RedisReply, for key: CountdownKey, name: [UInt8], now: Int64,
                        offset: Int64) throws(TickgateError) -> KeyRows {
        let bad = corruption(name)
        if case let .error(text) = reply { throw bad(text) }
        guard case let .array(entries) = reply, entries.count % 2 == 0 else { throw bad("not a hash") }
        if entries.isEmpty { return KeyRows() }
        var fields: [UInt8: [UInt8]] = [:]
        var index = 0
        while index < entries.count {
            guard case let .string(field) = entries[index], case let .string(value) = entries[index + 1] else {
                throw bad("an unknown field")
            }
            index += 2
            // An engine's last answer on the key, kept for its retry.
            if field.count > 1 && field[0] == UInt8(ascii: "q") { continue }
            guard field.count == 1, "dplichnswxtk".utf8.contains(field[0]) else { throw bad("an unknown field") }
            fields[field[0]] = value
        }
        return try checkedRows(fields, for: key, now: now, offset: offset, bad)
    }

    /// The key's rows from a decision's answer: its twelve fields in the
    /// order d p l i c k h n w x s t joined by "|" (nothing: no fields).
    static func keyRows(packed reply: RedisReply, for key: CountdownKey, name: [UInt8], now: Int64,
                        offset: Int64) throws(TickgateError) -> KeyRows {
        let bad = corruption(name)
        guard case let .string(text) = reply else { throw bad("an answer without its fields") }
        if text.isEmpty { return KeyRows() }
        let parts = text.split(separator: UInt8(ascii: "|"), omittingEmptySubsequences: false)
        guard parts.count == 12 else { throw bad("an answer with \(parts.count) of its 12 fields") }
        var fields: [UInt8: [UInt8]] = [:]
        for (field, value) in zip("dplickhnwxst".utf8, parts) { fields[field] = Array(value) }
        return try checkedRows(fields, for: key, now: now, offset: offset, bad)
    }

    private static func corruption(_ name: [UInt8]) -> (String) -> TickgateError {
        { why in
            TickgateError(.storeCorrupt,
                          "the Redis key \(String(decoding: name, as: UTF8.self).prefix(300)) is corrupt: \(why)")
        }
    }

    /// Checks a key's fields as the scripts do and makes its rows.
    private static func checkedRows(_ fields: [UInt8: [UInt8]], for key: CountdownKey, now: Int64, offset: Int64,
                                    _ bad: (String) -> TickgateError) throws(TickgateError) -> KeyRows {
        var fields = fields
        if fields.isEmpty { return KeyRows() }
        // Format 1 had no ticket field.
        if fields.count == 11 && fields[UInt8(ascii: "k")] == nil { fields[UInt8(ascii: "k")] = [] }
        guard fields.count == 12 else { throw bad("holds \(fields.count) of its 12 fields") }
        let ticket = fields[UInt8(ascii: "k")]!
        guard ticket.count <= 64, !ticket.contains(UInt8(ascii: "|")), !ticket.contains(UInt8(ascii: "~")) else {
            throw bad("field k holds \"\(String(decoding: ticket.prefix(40), as: UTF8.self))\"")
        }
        let most = Int64(1) << 53 - 1
        func int(_ field: Character, _ range: ClosedRange<Int64>) throws(TickgateError) -> Int64 {
            let bytes = fields[field.asciiValue!]!
            guard bytes.count <= 17, !bytes.isEmpty,
                  bytes.enumerated().allSatisfy({ $0.element >= 48 && $0.element <= 57 || ($0.offset == 0 && $0.element == 45) }),
                  let value = Int64(String(decoding: bytes, as: UTF8.self)), range.contains(value) else {
                throw bad("field \(field) holds \"\(String(decoding: bytes.prefix(40), as: UTF8.self))\"")
            }
            return value
        }
        let year = Limits.maximumDuration.nanoseconds / 1_000
        let day = Limits.maximumTickInterval.nanoseconds / 1_000
        var rows = KeyRows()
        let deadline = try int("d", -1...most)
        let phase = try int("p", -1...2)
        let duration = try int("l", -1...year)
        let tick = try int("i", -1...day)
        _ = try int("c", -1...most)
        if deadline >= 0 {
            guard phase >= 0, let phase = Phase(rawValue: UInt8(phase)), duration >= 1, tick >= 10_000 else {
                throw bad("a countdown field")
            }
            if deadline > now {
                rows.countdown = Countdown(key: key, phase: phase, instance: 0,
                                           deadline: Instant(nanoseconds: deadline * 1_000 + offset),
                                           duration: Span(nanoseconds: duration * 1_000),
                                           tickInterval: Span(nanoseconds: tick * 1_000))
            }
        }
        let hasSent = try int("h", -1...1)
        let consecutive = try int("n", -1...Int64(Limits.maximumConsecutiveSends))
        let wrong = try int("w", -1...Int64(SendPolicy.maximumWrongCodesLimit + 1))
        let dead = try int("x", -1...1)
        let last = try int("s", -1...most)
        if hasSent >= 0 {
            guard consecutive >= 0, wrong >= 0, dead >= 0 else { throw bad("a record field") }
            var sends: [Instant] = []
            let list = fields[UInt8(ascii: "t")]!
            if !list.isEmpty {
                var previous: Int64 = -1
                for part in list.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                    guard !part.isEmpty, part.count <= 17, part.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                          let value = Int64(String(decoding: part, as: UTF8.self)), value <= most, value >= previous
                    else { throw bad("field t") }
                    previous = value
                    sends.append(Instant(nanoseconds: value * 1_000 + offset))
                }
                guard sends.count <= Limits.maximumWindowSends else { throw bad("field t") }
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
