import CTickgateShim
import Glibc
import TickgateCore

// The guard against SMS pumping: numbers, destination and allow lists,
// signals, and decision records.

/// The comma-separated lists of a tg_guard.
private enum GuardLists {
    /// The guard tg_guard_init hands out (TG_GUARD_INIT): record-only, no
    /// lists, GuardThresholds' and Guard's defaults.
    static var defaults: tg_guard {
        var defaults = tg_guard()
        defaults.struct_size = UInt32(MemoryLayout<tg_guard>.size)
        defaults.mode = TG_GUARD_RECORD_ONLY
        let t = GuardThresholds()
        defaults.country_daily_minimum = UInt32(t.countryDailyMinimum)
        defaults.country_history_percent = UInt32(t.countryHistoryPercent)
        defaults.country_day_percent = UInt32(t.countryDayPercent)
        defaults.country_hourly_minimum = UInt32(t.countryHourlyMinimum)
        defaults.country_hourly_divisor = UInt32(t.countryHourlyDivisor)
        defaults.country_hour_percent = UInt32(t.countryHourPercent)
        defaults.address_daily_minimum = UInt32(t.addressDailyMinimum)
        defaults.address_day_percent = UInt32(t.addressDayPercent)
        defaults.address_hourly_minimum = UInt32(t.addressHourlyMinimum)
        defaults.address_hourly_divisor = UInt32(t.addressHourlyDivisor)
        defaults.address_countries_maximum = UInt32(t.addressCountriesMaximum)
        defaults.history_days = UInt32(t.historyDays)
        defaults.unverified_after_seconds = UInt32(t.unverifiedAfterSeconds)
        defaults.range_daily_minimum = UInt32(t.rangeDailyMinimum)
        defaults.range_hourly_minimum = UInt32(t.rangeHourlyMinimum)
        defaults.range_new_daily_minimum = UInt32(t.rangeNewDailyMinimum)
        defaults.range_new_hourly_minimum = UInt32(t.rangeNewHourlyMinimum)
        defaults.challenge_pass_seconds = UInt32(Guard().challengePassSeconds)
        return defaults
    }

    /// tg_guard's first layout (0.1.0's), padded as C pads it.
    static let olderLayouts: [Int] = {
        let end = MemoryLayout<tg_guard>.offset(of: \tg_guard.range_signals) ?? MemoryLayout<tg_guard>.stride
        let align = MemoryLayout<tg_guard>.alignment
        return [(end + align - 1) / align * align]
    }()

    static func entries(_ text: UnsafePointer<CChar>?, _ role: String) throws(TickgateError) -> [String] {
        guard let text else { return [] }
        let limit = Int(TG_GUARD_LIST_MAX_BYTES)
        let count = strnlen(text, limit + 1)
        guard count <= limit else { throw TickgateError(.invalidArgument, "\(role) is longer than \(limit) bytes") }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: count)
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw TickgateError(.invalidArgument, "\(role) is not valid UTF-8")
        }
        if string.isEmpty { return [] }
        return string.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    }

    static func parsed<T>(_ text: UnsafePointer<CChar>?, _ role: String,
                          _ parse: (String) throws(TickgateError) -> T) throws(TickgateError) -> [T] {
        var out: [T] = []
        for entry in try entries(text, role) {
            do throws(TickgateError) {
                out.append(try parse(entry))
            } catch {
                throw TickgateError(.invalidArgument, "\(role): \(error.message)")
            }
        }
        return out
    }
}

@c @implementation
public func tg_guard_init(_ guard_: UnsafeMutablePointer<tg_guard>?, _ struct_size: Int) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        try Versioned.initialise(guard_, struct_size, to: GuardLists.defaults, olderLayouts: GuardLists.olderLayouts,
                                 "guard")
    }
}

@c @implementation
public func tg_guard_set(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                         _ guard_: UnsafePointer<tg_guard>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let scope = try Boundary.name(scope, "scope")
        guard let guard_ else {
            try engine.setGuard(nil, scope: scope)
            return
        }
        // A shorter (older) layout takes the fields it lacks from the defaults.
        let raw = try Versioned.read(guard_, defaults: GuardLists.defaults, olderLayouts: GuardLists.olderLayouts, "guard")
        guard let mode = Guard.Mode(rawValue: Int(raw.mode.rawValue)) else {
            throw TickgateError(.invalidArgument, "guard.mode \(raw.mode.rawValue) is not a tg_guard_mode")
        }
        var rules = Guard(mode: mode)
        rules.allowed = try GuardLists.parsed(raw.allowed_destinations, "allowed_destinations") {
            (entry) throws(TickgateError) in try Destination.parse(entry)
        }
        rules.refused = try GuardLists.parsed(raw.refused_destinations, "refused_destinations") {
            (entry) throws(TickgateError) in try Destination.parse(entry)
        }
        rules.alwaysAllowNumbers = try GuardLists.parsed(raw.always_allow_numbers, "always_allow_numbers") {
            (entry) throws(TickgateError) in try NumberPattern.parse(entry)
        }
        rules.alwaysAllowAddresses = try GuardLists.parsed(raw.always_allow_addresses, "always_allow_addresses") {
            (entry) throws(TickgateError) in try AddressRange.parse(entry)
        }
        rules.alwaysAllowCountries = try GuardLists.entries(raw.always_allow_countries, "always_allow_countries")
        rules.alwaysAllowSkipsBudgets = raw.always_allow_skips_budgets != 0
        var t = GuardThresholds()
        t.countryDailyMinimum = Int(raw.country_daily_minimum)
        t.countryHistoryPercent = Int(raw.country_history_percent)
        t.countryDayPercent = Int(raw.country_day_percent)
        t.countryHourlyMinimum = Int(raw.country_hourly_minimum)
        t.countryHourlyDivisor = Int(raw.country_hourly_divisor)
        t.countryHourPercent = Int(raw.country_hour_percent)
        t.addressDailyMinimum = Int(raw.address_daily_minimum)
        t.addressDayPercent = Int(raw.address_day_percent)
        t.addressHourlyMinimum = Int(raw.address_hourly_minimum)
        t.addressHourlyDivisor = Int(raw.address_hourly_divisor)
        t.addressCountriesMaximum = Int(raw.address_countries_maximum)
        t.historyDays = Int(raw.history_days)
        t.unverifiedAfterSeconds = Int(raw.unverified_after_seconds)
        t.rangeDailyMinimum = Int(raw.range_daily_minimum)
        t.rangeHourlyMinimum = Int(raw.range_hourly_minimum)
        t.rangeNewDailyMinimum = Int(raw.range_new_daily_minimum)
        t.rangeNewHourlyMinimum = Int(raw.range_new_hourly_minimum)
        guard raw.range_signals <= 1 else {
            throw TickgateError(.invalidArgument, "guard.range_signals is \(raw.range_signals); it must be 0 or 1")
        }
        rules.rangeSignals = raw.range_signals == 1
        rules.challengeSignals = PumpingWarnings(rawValue: raw.challenge_signals)
        rules.challengePassSeconds = Int(raw.challenge_pass_seconds)
        rules.thresholds = t
        rules.recordStreamLength = Int(raw.record_stream_length)
        try engine.setGuard(rules, scope: scope)
    }
}

@c @implementation
public func tg_send_begin_from(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                               _ number: UnsafePointer<CChar>?, _ client_address: UnsafePointer<CChar>?,
                               _ budgets: UnsafePointer<tg_budget_key>?, _ budget_count: Int,
                               _ out_ticket: UnsafeMutablePointer<UInt64>?,
                               _ out_wait_ms: UnsafeMutablePointer<Int64>?,
                               _ out_budget_index: UnsafeMutablePointer<Int>?) -> tg_status {
    BudgetKeys.sendBegin(engine, out_ticket, out_wait_ms, out_budget_index) { (engine, checkOut) throws(TickgateError) in
        let key = try Boundary.key(scope, number)
        let address = try ClientAddressText.read(client_address)
        let keys = try BudgetKeys.read(budgets, budget_count)
        try checkOut()
        return try engine.sendBegin(key, budgets: keys, from: address)
    }
}

@c @implementation
public func tg_challenge_passed(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                _ number: UnsafePointer<CChar>?,
                                _ client_address: UnsafePointer<CChar>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let name = try Boundary.name(scope, "scope")
        let text = try Boundary.required(number, "number")
        let subject: KeyName
        do throws(TickgateError) { subject = try Boundary.name(text, "number") } catch {
            throw TickgateError(.invalidNumber, error.message)
        }
        try engine.challengePassed(CountdownKey(scope: name, subject: subject),
                                   from: try ClientAddressText.read(client_address))
    }
}

@c @implementation
public func tg_number_parse(_ number: UnsafePointer<CChar>?,
                            _ out_info: UnsafeMutablePointer<tg_number_info>?) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let number = try Boundary.required(number, "number")
        let out = try Boundary.required(out_info, "out_info")
        try Versioned.check(Int(out.pointee.struct_size), tg_number_info.self, "out_info")
        let count = strnlen(number, 64)
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(number).assumingMemoryBound(to: UInt8.self), count: count)
        let parsed = try PhoneNumber.parse(String(decoding: bytes, as: UTF8.self))
        var raw = tg_number_info()
        raw.struct_size = out.pointee.struct_size
        withUnsafeMutableBytes(of: &raw.calling_code) { target in
            for (index, byte) in parsed.callingCode.utf8.prefix(3).enumerated() { target[index] = byte }
        }
        withUnsafeMutableBytes(of: &raw.region) { target in
            for (index, byte) in parsed.region.utf8.prefix(3).enumerated() { target[index] = byte }
        }
        raw.digits = UInt32(parsed.digits.utf8.count)
        try Versioned.write(raw, to: out, "out_info")
    }
}

/// A client address as C gives it: NULL or "" for none.
private enum ClientAddressText {
    static func read(_ text: UnsafePointer<CChar>?) throws(TickgateError) -> ClientAddress? {
        guard let text, text.pointee != 0 else { return nil }
        let count = strnlen(text, 128)
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: count)
        guard count < 128, let string = String(validating: bytes, as: UTF8.self) else {
            throw TickgateError(.invalidArgument, "client_address is not an IP address")
        }
        return try ClientAddress.parse(string)
    }
}

/// A records observer's C callback and user_data.
private struct CRecordObserver: @unchecked Sendable {
    let callback: tg_guard_record_fn
    let userData: UnsafeMutableRawPointer?
    let destroy: tg_destroy_fn?

    func deliver(_ record: GuardRecord) {
        let counts = record.counts ?? GuardCounts()
        let judgment = record.judgment ?? GuardJudgment()
        func u(_ value: Int) -> UInt32 { UInt32(clamping: value) }
        record.scope.value.withCString { scope in
        record.number.withCString { number in
        record.country.withCString { country in
        (record.address?.description ?? "").withCString { address in
        record.message.withCString { message in
        withOptionalCString(record.bypass) { bypass in
        withOptionalCString(record.rule) { rule in
        judgment.range.withCString { range in
            var raw = tg_guard_record()
            raw.struct_size = UInt32(MemoryLayout<tg_guard_record>.stride)  // C's sizeof
            raw.scope = scope
            raw.number = number
            raw.country = country
            raw.client_address = address
            raw.wall_ms = record.wallMilliseconds
            raw.status = tg_status(rawValue: UInt32(bitPattern: record.status.rawValue))
            raw.message = message
            raw.ticket = record.ticket
            raw.mode = tg_guard_mode(rawValue: UInt32(record.mode.rawValue))
            raw.warnings = record.warnings.rawValue
            raw.bypass = bypass
            raw.rule = rule
            raw.country_unverified_day = u(counts.countryUnverifiedDay)
            raw.country_unverified_hour = u(counts.countryUnverifiedHour)
            raw.country_verified_day = u(counts.countryVerifiedDay)
            raw.country_verified_hour = u(counts.countryVerifiedHour)
            raw.country_verified_daily_max = u(counts.countryVerifiedDailyMaximum)
            raw.address_unverified_day = u(counts.addressUnverifiedDay)
            raw.address_unverified_hour = u(counts.addressUnverifiedHour)
            raw.address_verified_day = u(counts.addressVerifiedDay)
            raw.address_countries_day = u(counts.addressCountriesDay)
            raw.country_daily_threshold = u(judgment.countryDaily)
            raw.country_hourly_threshold = u(judgment.countryHourly)
            raw.address_daily_threshold = u(judgment.addressDaily)
            raw.address_hourly_threshold = u(judgment.addressHourly)
            raw.address_skipped = record.addressSignalsSkipped ? 1 : 0
            raw.range = range
            raw.range_unverified_day = u(judgment.rangeUnverifiedDay)
            raw.range_unverified_hour = u(judgment.rangeUnverifiedHour)
            raw.range_daily_threshold = u(judgment.rangeDaily)
            raw.range_hourly_threshold = u(judgment.rangeHourly)
            raw.challenge_passed = judgment.challengePassed ? 1 : 0
            raw.outcome = tg_code_outcome(rawValue: UInt32(record.outcome?.rawValue ?? 0))
            raw.code_sent_wall_ms = record.codeSentWallMilliseconds
            callback(&raw, userData)
        }}}}}}}}
    }

    func release() { destroy?(userData) }
}

private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}

@c @implementation
public func tg_guard_subscribe(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                               _ callback: tg_guard_record_fn?, _ user_data: UnsafeMutableRawPointer?,
                               _ destroy: tg_destroy_fn?,
                               _ out_subscription: UnsafeMutablePointer<UInt64>?) -> tg_status {
    subscribeRecords(engine, scope, callback, user_data, destroy, out_subscription, to: { .records($0) })
}

@c @implementation
public func tg_guard_subscribe_outcomes(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                        _ callback: tg_guard_record_fn?, _ user_data: UnsafeMutableRawPointer?,
                                        _ destroy: tg_destroy_fn?,
                                        _ out_subscription: UnsafeMutablePointer<UInt64>?) -> tg_status {
    subscribeRecords(engine, scope, callback, user_data, destroy, out_subscription, to: { .outcomes($0) })
}

/// tg_guard_subscribe and tg_guard_subscribe_outcomes: a callback of guard
/// records of a scope: its decisions or its codes' outcomes (`target`).
private func subscribeRecords(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                              _ callback: tg_guard_record_fn?, _ user_data: UnsafeMutableRawPointer?,
                              _ destroy: tg_destroy_fn?, _ out_subscription: UnsafeMutablePointer<UInt64>?,
                              to target: (KeyName) -> SubscriptionTarget) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let scope = try Boundary.name(scope, "scope")
        let callback = try Boundary.required(callback, "callback")
        let out = try Boundary.required(out_subscription, "out_subscription")
        let observer = CRecordObserver(callback: callback, userData: user_data, destroy: destroy)
        out.pointee = try engine.subscribe(target(scope), Observer(
            deliverRecord: { observer.deliver($0) }, release: { observer.release() }))
    }
}
