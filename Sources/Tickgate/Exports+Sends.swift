import CTickgateShim
import Glibc
import TickgateCore

// The resend flow: policies, send tickets, verification, titles, buttons.

@c @implementation
public func tg_policy_init(_ policy: UnsafeMutablePointer<tg_policy>?, _ struct_size: Int) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        try Versioned.initialise(policy, struct_size, to: PolicyReader.cPolicy(SendPolicy()),
                                 olderLayouts: PolicyReader.olderLayouts, "policy")
    }
}

@c @implementation
public func tg_policy_set(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                          _ policy: UnsafePointer<tg_policy>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let scope = try Boundary.name(scope, "scope")
        let policy = try PolicyReader.read(try Boundary.required(policy, "policy"))
        try engine.setPolicy(policy, scope: scope)
    }
}

@c @implementation
public func tg_policy_get(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                          _ out_policy: UnsafeMutablePointer<tg_policy>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let scope = try Boundary.name(scope, "scope")
        let out = try Boundary.required(out_policy, "out_policy")
        try Versioned.check(Int(out.pointee.struct_size), tg_policy.self, olderLayouts: PolicyReader.olderLayouts,
                            "out_policy")
        try Versioned.write(PolicyReader.cPolicy(try engine.policy(scope: scope)), to: out,
                            olderLayouts: PolicyReader.olderLayouts, "out_policy")
    }
}

@c @implementation
public func tg_send_begin(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                          _ subject: UnsafePointer<CChar>?,
                          _ out_ticket: UnsafeMutablePointer<UInt64>?,
                          _ out_wait_ms: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let key = try Boundary.rawKey(scope, subject)
        let out = try Boundary.required(out_ticket, "out_ticket")
        do throws(TickgateError) {
            out.pointee = try engine.sendBegin(key)
            out_wait_ms?.pointee = 0
        } catch {
            out_wait_ms?.pointee = error.remaining.millisecondsRoundedUp
            throw error
        }
    }
}

@c @implementation
public func tg_send_end(_ engine: OpaquePointer?, _ ticket: UInt64, _ outcome: tg_send_outcome,
                        _ server_retry_after_ms: Int64,
                        _ out_cooldown_ms: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let result: SendOutcome
        switch outcome {
        case TG_SEND_SUCCEEDED: result = .succeeded
        case TG_SEND_FAILED: result = .failed
        default: throw TickgateError(.invalidArgument, "send outcome \(outcome.rawValue) is unknown")
        }
        guard server_retry_after_ms >= 0, server_retry_after_ms <= Boundary.maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "server retry-after \(server_retry_after_ms) ms is outside 0 ... \(Boundary.maximumDurationMilliseconds) ms")
        }
        let cooldown = try engine.sendEnd(ticket, result,
                                          serverRetryAfter: .milliseconds(server_retry_after_ms))
        out_cooldown_ms?.pointee = cooldown.millisecondsRoundedUp
    }
}

@c @implementation
public func tg_verify_failed(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                             _ subject: UnsafePointer<CChar>?,
                             _ out_attempts_left: UnsafeMutablePointer<UInt32>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let left = try engine.verifyFailed(try Boundary.key(scope, subject))
        out_attempts_left?.pointee = left.map { UInt32(clamping: $0) } ?? UInt32.max
    }
}

@c @implementation
public func tg_verified(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                        _ subject: UnsafePointer<CChar>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.verified(try Boundary.key(scope, subject))
    }
}

@c @implementation
public func tg_titles_set(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                          _ titles: UnsafePointer<tg_titles>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let scope = try Boundary.name(scope, "scope")
        let raw = try Versioned.read(try Boundary.required(titles, "titles"), defaults: tg_titles(),
                                     olderLayouts: [MemoryLayout<tg_titles>.offset(of: \tg_titles.code_dead) ?? 0],
                                     "titles")
        let english = TitleSet.english
        func template(_ text: UnsafePointer<CChar>?, _ role: String,
                      _ fallback: TitleTemplate) throws(TickgateError) -> TitleTemplate {
            guard let text else { return fallback }
            let count = strnlen(text, TitleTemplate.maximumBytes + 1)
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: count)
            guard count <= TitleTemplate.maximumBytes else {
                throw TickgateError(.invalidTemplate, "\(role) title is longer than \(TitleTemplate.maximumBytes) bytes")
            }
            guard let source = String(validating: bytes, as: UTF8.self) else {
                throw TickgateError(.invalidTemplate, "\(role) title is not valid UTF-8")
            }
            return try TitleTemplate(source, role: role)
        }
        try engine.setTitles(TitleSet(
            idle: try template(raw.idle, "idle", english.idle),
            sending: try template(raw.sending, "sending", english.sending),
            cooling: try template(raw.cooling, "cooling", english.cooling),
            readyAgain: try template(raw.ready_again, "ready_again", english.readyAgain),
            locked: try template(raw.locked, "locked", english.locked),
            codeDead: try template(raw.code_dead, "code_dead", english.codeDead)), scope: scope)
    }
}

@c @implementation
public func tg_button_get(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                          _ subject: UnsafePointer<CChar>?,
                          _ out_button: UnsafeMutablePointer<tg_button>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let key = try Boundary.key(scope, subject)
        let out = try Boundary.required(out_button, "out_button")
        try Versioned.check(Int(out.pointee.struct_size), tg_button.self, "out_button")
        let button = try engine.button(key)
        var raw = tg_button()
        raw.state = tg_button_state(rawValue: UInt32(bitPattern: button.state.rawValue))
        raw.enabled = button.state.isEnabled ? 1 : 0
        raw.remaining_ms = button.remaining.millisecondsRoundedUp
        raw.display_seconds = button.remaining.displaySeconds
        withUnsafeMutableBytes(of: &raw.title) { buffer in
            // Rendered titles stay far below the buffer's size (a template
            // has at most 128 bytes and 8 placeholders); cut at a character
            // boundary all the same.
            var bytes = Array(button.title.utf8.prefix(buffer.count - 1))
            while String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        try Versioned.write(raw, to: out, "out_button")
    }
}

/// Converts between `tg_policy` and `SendPolicy`.
enum PolicyReader {
    static let steps = Int(TG_POLICY_MAX_STEPS)
    /// The first layout ended at ticket_timeout_ms.
    static let olderLayouts = [MemoryLayout<tg_policy>.offset(of: \tg_policy.max_wrong_codes) ?? 0]

    static func read(_ pointer: UnsafePointer<tg_policy>) throws(TickgateError) -> SendPolicy {
        let raw = try Versioned.read(pointer, defaults: cPolicy(SendPolicy()), olderLayouts: olderLayouts, "policy")
        let count = Int(raw.step_count)
        guard (1...steps).contains(count) else {
            throw TickgateError(.invalidArgument, "policy.step_count \(raw.step_count) is outside 1 ... \(steps)")
        }
        let all = withUnsafeBytes(of: raw.cooldown_ms) { Array($0.bindMemory(to: Int64.self)) }
        var cooldowns: [Span] = []
        for (index, milliseconds) in all.prefix(count).enumerated() {
            guard milliseconds >= 1, milliseconds <= Boundary.maximumDurationMilliseconds else {
                throw TickgateError(.invalidDuration, "policy.cooldown_ms[\(index)] = \(milliseconds) is outside 1 ... \(Boundary.maximumDurationMilliseconds) ms")
            }
            cooldowns.append(.milliseconds(milliseconds))
        }
        func span(_ value: Int64, _ name: String, allowZero: Bool) throws(TickgateError) -> Span {
            guard value >= (allowZero ? 0 : 1), value <= Boundary.maximumDurationMilliseconds else {
                throw TickgateError(.invalidDuration, "policy.\(name) = \(value) is out of range")
            }
            return .milliseconds(value)
        }
        let capped = raw.window_max_sends > 0
        guard raw.window_max_sends <= Limits.maximumWindowSends else {
            throw TickgateError(.invalidArgument,
                "policy.window_max_sends \(raw.window_max_sends) is larger than \(Limits.maximumWindowSends)")
        }
        guard raw.max_wrong_codes <= SendPolicy.maximumWrongCodesLimit else {
            throw TickgateError(.invalidArgument,
                "policy.max_wrong_codes \(raw.max_wrong_codes) is larger than \(SendPolicy.maximumWrongCodesLimit)")
        }
        return SendPolicy(
            cooldowns: cooldowns,
            windowMaximumSends: Int(raw.window_max_sends),
            window: capped ? try span(raw.window_ms, "window_ms", allowZero: false) : .zero,
            quietReset: try span(raw.quiet_reset_ms, "quiet_reset_ms", allowZero: true),
            ticketTimeout: try span(raw.ticket_timeout_ms, "ticket_timeout_ms", allowZero: false),
            maximumWrongCodes: Int(raw.max_wrong_codes))
    }

    static func cPolicy(_ policy: SendPolicy) -> tg_policy {
        var raw = tg_policy()
        raw.struct_size = UInt32(MemoryLayout<tg_policy>.size)
        raw.step_count = UInt32(policy.cooldowns.count)
        withUnsafeMutableBytes(of: &raw.cooldown_ms) { buffer in
            let slots = buffer.bindMemory(to: Int64.self)
            for (index, step) in policy.cooldowns.prefix(slots.count).enumerated() {
                slots[index] = step.millisecondsRoundedUp
            }
        }
        raw.window_max_sends = UInt32(clamping: policy.windowMaximumSends)
        raw.window_ms = policy.window.millisecondsRoundedUp
        raw.quiet_reset_ms = policy.quietReset.millisecondsRoundedUp
        raw.ticket_timeout_ms = policy.ticketTimeout.millisecondsRoundedUp
        raw.max_wrong_codes = UInt32(clamping: policy.maximumWrongCodes)
        return raw
    }
}
