import CTickgateShim
import TickgateCore

// Starting, cancelling, querying and listing countdowns.

@c @implementation
public func tg_countdown_start(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                               _ subject: UnsafePointer<CChar>?, _ duration_ms: Int64,
                               _ tick_interval_ms: Int64, _ flags: UInt32,
                               _ out_remaining_ms: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let key = try Boundary.rawKey(scope, subject)
        let duration = try Boundary.duration(duration_ms)
        let interval = try Boundary.tickInterval(tick_interval_ms)
        guard flags & ~TG_START_RESTART == 0 else {
            throw TickgateError(.invalidArgument, "flags 0x\(String(flags, radix: 16)) has unknown bits")
        }
        do throws(TickgateError) {
            try engine.start(key, duration: duration, tickInterval: interval,
                             restart: flags & TG_START_RESTART != 0)
            out_remaining_ms?.pointee = duration_ms
        } catch {
            if error.status == .coolingDown || error.status == .inFlight || error.status == .locked {
                out_remaining_ms?.pointee = error.remaining.millisecondsRoundedUp
            }
            throw error
        }
    }
}

@c @implementation
public func tg_countdown_cancel(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                _ subject: UnsafePointer<CChar>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.cancel(try Boundary.rawKey(scope, subject))
    }
}

@c @implementation
public func tg_countdown_cancel_scope(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                      _ out_cancelled: UnsafeMutablePointer<Int>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let count = try engine.cancelAll(scope: try Boundary.name(scope, "scope"))
        out_cancelled?.pointee = count
    }
}

@c @implementation
public func tg_countdown_cancel_all(_ engine: OpaquePointer?,
                                    _ out_cancelled: UnsafeMutablePointer<Int>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let count = try engine.cancelAll()
        out_cancelled?.pointee = count
    }
}

@c @implementation
public func tg_countdown_remaining(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                   _ subject: UnsafePointer<CChar>?,
                                   _ out_remaining_ms: UnsafeMutablePointer<Int64>?,
                                   _ out_display_seconds: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let key = try Boundary.rawKey(scope, subject)
        do throws(TickgateError) {
            let remaining = try engine.remaining(key)
            out_remaining_ms?.pointee = remaining.millisecondsRoundedUp
            out_display_seconds?.pointee = remaining.displaySeconds
        } catch {
            if error.status == .notFound {
                out_remaining_ms?.pointee = 0
                out_display_seconds?.pointee = 0
            }
            throw error
        }
    }
}

@c @implementation
public func tg_countdown_list(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                              _ visit: tg_countdown_visit_fn?, _ user_data: UnsafeMutableRawPointer?,
                              _ out_count: UnsafeMutablePointer<Int>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let filter = try scope.map { (pointer) throws(TickgateError) in
            try Boundary.name(pointer, "scope")
        }
        let items = try engine.list(scope: filter)
        out_count?.pointee = items.count
        guard let visit else { return }
        for item in items {
            let stop = item.key.scope.value.withCString { scopeText in
                item.key.subject.value.withCString { subjectText in
                    var info = tg_countdown_info(
                        struct_size: UInt32(MemoryLayout<tg_countdown_info>.size),
                        scope: scopeText, subject: subjectText,
                        remaining_ms: item.remaining.millisecondsRoundedUp,
                        display_seconds: item.remaining.displaySeconds,
                        duration_ms: item.duration.millisecondsRoundedUp)
                    return visit(&info, user_data)
                }
            }
            if stop != 0 { break }
        }
    }
}
