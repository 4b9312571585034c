import CTickgateShim
import TickgateCore

// Opening and closing engines, host-thread delivery, and the manual clock.

@c @implementation
public func tg_engine_options_init(_ options: UnsafeMutablePointer<tg_engine_options>?) {
    options?.pointee = EngineOptionsReader.defaults
}

@c @implementation
public func tg_engine_open(_ options: UnsafePointer<tg_engine_options>?,
                           _ out_engine: UnsafeMutablePointer<OpaquePointer?>?) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let out = try Boundary.required(out_engine, "out_engine")
        let engine = try Engine(options: try EngineOptionsReader.read(options))
        out.pointee = Handles.register(engine)
    }
}

@c @implementation
public func tg_engine_close(_ engine: OpaquePointer?) -> tg_status {
    guard engine != nil else { return TG_OK }
    return Boundary.call { () throws(TickgateError) in
        try Handles.remove(engine).close()
    }
}

@c @implementation
public func tg_engine_fd(_ engine: OpaquePointer?,
                         _ out_fd: UnsafeMutablePointer<Int32>?) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let engine = try Handles.lookup(engine)
        let out = try Boundary.required(out_fd, "out_fd")
        out.pointee = try engine.descriptor()
    }
}

@c @implementation
public func tg_engine_dispatch(_ engine: OpaquePointer?,
                               _ out_delivered: UnsafeMutablePointer<Int>?) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let delivered = try Handles.lookup(engine).dispatch()
        out_delivered?.pointee = delivered
    }
}

@c @implementation
public func tg_clock_advance(_ engine: OpaquePointer?, _ delta_ms: Int64) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let engine = try Handles.lookup(engine)
        guard delta_ms >= 0, delta_ms <= Boundary.maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "clock step \(delta_ms) ms is outside 0 ... \(Boundary.maximumDurationMilliseconds) ms")
        }
        try engine.advance(by: .milliseconds(delta_ms))
    }
}

@c @implementation
public func tg_clock_now(_ engine: OpaquePointer?,
                         _ out_now_ms: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let engine = try Handles.lookup(engine)
        let out = try Boundary.required(out_now_ms, "out_now_ms")
        out.pointee = engine.now().nanoseconds / 1_000_000
    }
}

/// Reads a caller's `tg_engine_options`, of this version or a later one.
enum EngineOptionsReader {
    static let size = MemoryLayout<tg_engine_options>.size
    /// Larger structs than this are refused rather than scanned.
    static let largestAccepted = 4096

    static var defaults: tg_engine_options {
        tg_engine_options(struct_size: UInt32(size), delivery: TG_DELIVERY_ENGINE_THREAD,
                          clock: TG_CLOCK_SYSTEM, tick_interval_ms: 0)
    }

    static func read(_ pointer: UnsafePointer<tg_engine_options>?) throws(TickgateError) -> EngineOptions {
        guard let pointer else { return EngineOptions() }
        let declared = Int(UnsafeRawPointer(pointer).load(as: UInt32.self))
        guard declared >= size else {
            throw TickgateError(.version,
                "options.struct_size is \(declared); this library needs at least \(size)")
        }
        guard declared <= largestAccepted else {
            throw TickgateError(.version, "options.struct_size \(declared) is implausibly large")
        }
        // A newer caller's struct: accept it only if the fields this library
        // does not know are left at zero (their defaults).
        let bytes = UnsafeRawPointer(pointer)
        for offset in size..<declared where bytes.load(fromByteOffset: offset, as: UInt8.self) != 0 {
            throw TickgateError(.version,
                "options set a field this library version (\(TG_VERSION_STRING)) does not know, at byte \(offset)")
        }
        let raw = pointer.pointee
        var options = EngineOptions()
        switch raw.delivery {
        case TG_DELIVERY_ENGINE_THREAD: options.delivery = .engineThread
        case TG_DELIVERY_HOST_THREAD: options.delivery = .hostThread
        default: throw TickgateError(.invalidArgument, "options.delivery \(raw.delivery.rawValue) is unknown")
        }
        switch raw.clock {
        case TG_CLOCK_SYSTEM: options.clock = .system
        case TG_CLOCK_MANUAL: options.clock = .manual
        default: throw TickgateError(.invalidArgument, "options.clock \(raw.clock.rawValue) is unknown")
        }
        if let interval = try Boundary.tickInterval(raw.tick_interval_ms) {
            options.tickInterval = interval
        }
        return options
    }
}
