import CTickgateShim
import TickgateCore

// Budgets: limits on sends across keys.

@c @implementation
public func tg_budget_init(_ budget: UnsafeMutablePointer<tg_budget>?, _ struct_size: Int) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        var defaults = tg_budget()
        defaults.struct_size = UInt32(MemoryLayout<tg_budget>.size)
        try Versioned.initialise(budget, struct_size, to: defaults, "budget")
    }
}

@c @implementation
public func tg_budget_set(_ engine: OpaquePointer?, _ name: UnsafePointer<CChar>?,
                          _ budget: UnsafePointer<tg_budget>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let name = try Boundary.name(name, "budget name")
        let raw = try Versioned.read(try Boundary.required(budget, "budget"), defaults: tg_budget(), "budget")
        let slots = Int(TG_BUDGET_MAX_WINDOWS)
        guard (1...slots).contains(Int(raw.window_count)) else {
            throw TickgateError(.invalidArgument, "budget.window_count \(raw.window_count) is outside 1 ... \(slots)")
        }
        let sends = withUnsafeBytes(of: raw.max_sends) { Array($0.bindMemory(to: UInt32.self)) }
        let lengths = withUnsafeBytes(of: raw.window_ms) { Array($0.bindMemory(to: Int64.self)) }
        var windows: [Budget.Window] = []
        for index in 0..<Int(raw.window_count) {
            guard lengths[index] >= 1, lengths[index] <= Boundary.maximumDurationMilliseconds else {
                throw TickgateError(.invalidDuration,
                    "budget.window_ms[\(index)] = \(lengths[index]) is outside 1 ... \(Boundary.maximumDurationMilliseconds) ms")
            }
            windows.append(Budget.Window(maximumSends: Int(sends[index]), length: .milliseconds(lengths[index])))
        }
        try engine.setBudget(Budget(windows: windows), name: name)
    }
}

@c @implementation
public func tg_send_begin_budgeted(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                   _ subject: UnsafePointer<CChar>?,
                                   _ budgets: UnsafePointer<tg_budget_key>?, _ budget_count: Int,
                                   _ out_ticket: UnsafeMutablePointer<UInt64>?,
                                   _ out_wait_ms: UnsafeMutablePointer<Int64>?,
                                   _ out_budget_index: UnsafeMutablePointer<Int>?) -> tg_status {
    BudgetKeys.sendBegin(engine, out_ticket, out_wait_ms, out_budget_index) { (engine, checkOut) throws(TickgateError) in
        let key = try Boundary.key(scope, subject)
        let keys = try BudgetKeys.read(budgets, budget_count)
        try checkOut()
        return try engine.sendBegin(key, budgets: keys)
    }
}

@c @implementation
public func tg_budget_read(_ engine: OpaquePointer?, _ budget: UnsafePointer<CChar>?,
                           _ key: UnsafePointer<CChar>?,
                           _ out_usage: UnsafeMutablePointer<tg_budget_usage>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let key = try BudgetKeys.key(budget, key)
        let out = try Boundary.required(out_usage, "out_usage")
        try Versioned.check(Int(out.pointee.struct_size), tg_budget_usage.self, "out_usage")
        let usage = try engine.budgetUsage(key)
        var raw = tg_budget_usage()
        raw.used = UInt32(clamping: usage.used)
        raw.max_sends = UInt32(clamping: usage.window.maximumSends)
        raw.window_ms = usage.window.length.millisecondsRoundedUp
        raw.frees_in_ms = usage.freesIn.millisecondsRoundedUp
        try Versioned.write(raw, to: out, "out_usage")
    }
}

@c @implementation
public func tg_budget_reset(_ engine: OpaquePointer?, _ budget: UnsafePointer<CChar>?,
                            _ key: UnsafePointer<CChar>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.resetBudget(try BudgetKeys.key(budget, key))
    }
}

/// Budget keys from C, checked.
enum BudgetKeys {
    /// A send's begin with budgets (tg_send_begin_budgeted,
    /// tg_send_begin_from): `begin` checks its arguments, then calls
    /// `checkOut` (out_ticket), then asks the engine; the wait and the
    /// refusing budget's index are written on every failure, a bad
    /// handle's too (TG_BUDGET_NONE).
    static func sendBegin(_ engine: OpaquePointer?, _ out_ticket: UnsafeMutablePointer<UInt64>?,
                          _ out_wait_ms: UnsafeMutablePointer<Int64>?, _ out_budget_index: UnsafeMutablePointer<Int>?,
                          _ begin: (Engine, () throws(TickgateError) -> Void) throws(TickgateError) -> UInt64)
        -> tg_status {
        var refusedBy: Int?
        let status = Boundary.call(engine) { (engine) throws(TickgateError) in
            do throws(TickgateError) {
                let ticket = try begin(engine) { () throws(TickgateError) in
                    _ = try Boundary.required(out_ticket, "out_ticket")
                }
                out_ticket?.pointee = ticket
                out_wait_ms?.pointee = 0
            } catch {
                out_wait_ms?.pointee = error.remaining.millisecondsRoundedUp
                refusedBy = error.budgetIndex
                throw error
            }
        }
        if status != TG_OK { out_budget_index?.pointee = refusedBy ?? -1 }
        return status
    }

    static func key(_ budget: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?) throws(TickgateError) -> BudgetKey {
        BudgetKey(budget: try Boundary.name(budget, "budget name"), key: try Boundary.name(key, "budget key"))
    }

    static func read(_ pointer: UnsafePointer<tg_budget_key>?, _ count: Int) throws(TickgateError) -> [BudgetKey] {
        guard count > 0 else { return [] }
        guard let pointer else { throw TickgateError(.invalidArgument, "budgets is NULL with budget_count \(count)") }
        guard count <= Budget.maximumKeysPerSend else {
            throw TickgateError(.invalidArgument,
                "budget_count \(count) is larger than TG_SEND_MAX_BUDGETS (\(Budget.maximumKeysPerSend))")
        }
        var keys: [BudgetKey] = []
        for index in 0..<count {
            let raw = pointer[index]
            do throws(TickgateError) {
                keys.append(try key(raw.budget, raw.key))
            } catch {
                throw TickgateError(error.status, "budgets[\(index)]: \(error.message)")
            }
        }
        return keys
    }
}
