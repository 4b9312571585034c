import CTickgateShim
import Glibc
import TickgateCore

// Opening and closing engines, host-thread delivery, and the manual clock.

@c @implementation
public func tg_engine_options_init(_ options: UnsafeMutablePointer<tg_engine_options>?,
                                   _ struct_size: Int) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        try Versioned.initialise(options, struct_size, to: EngineOptionsReader.defaults,
                                 olderLayouts: EngineOptionsReader.olderLayouts, "options")
    }
}

@c @implementation
public func tg_engine_open(_ options: UnsafePointer<tg_engine_options>?,
                           _ out_engine: UnsafeMutablePointer<OpaquePointer?>?) -> tg_status {
    Boundary.call { () throws(TickgateError) in
        let out = try Boundary.required(out_engine, "out_engine")
        let engine = try Engine(options: try EngineOptionsReader.read(options))
        do throws(TickgateError) {
            out.pointee = try Handles.register(engine)
        } catch {
            engine.close()
            throw error
        }
    }
}

@c @implementation
public func tg_engine_close(_ engine: OpaquePointer?) -> tg_status {
    guard engine != nil else { return TG_OK }
    return Boundary.call { () throws(TickgateError) in
        try Handles.close(engine) { $0.close() }
    }
}

@c @implementation
public func tg_engine_store_warning(_ engine: OpaquePointer?, _ buffer: UnsafeMutablePointer<CChar>?,
                                    _ size: Int, _ out_length: UnsafeMutablePointer<Int>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        guard buffer != nil || size == 0 else {
            throw TickgateError(.invalidArgument, "buffer is NULL and size is \(size)")
        }
        let text = Array((engine.storeWarning ?? "").utf8)
        if let buffer, size > 0 {
            let count = min(text.count, size - 1)
            for index in 0..<count { buffer[index] = CChar(bitPattern: text[index]) }
            buffer[count] = 0
        }
        out_length?.pointee = text.count
    }
}

@c @implementation
public func tg_engine_fd(_ engine: OpaquePointer?,
                         _ out_fd: UnsafeMutablePointer<Int32>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let out = try Boundary.required(out_fd, "out_fd")
        out.pointee = try engine.descriptor()
    }
}

@c @implementation
public func tg_engine_dispatch(_ engine: OpaquePointer?,
                               _ out_delivered: UnsafeMutablePointer<Int>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let delivered = try engine.dispatch()
        out_delivered?.pointee = delivered
    }
}

@c @implementation
public func tg_clock_advance(_ engine: OpaquePointer?, _ delta_ms: Int64) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        guard delta_ms >= 0, delta_ms <= Boundary.maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "clock step \(delta_ms) ms is outside 0 ... \(Boundary.maximumDurationMilliseconds) ms")
        }
        try engine.advance(by: .milliseconds(delta_ms))
    }
}

@c @implementation
public func tg_clock_set_wall(_ engine: OpaquePointer?, _ wall_ms: Int64) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        // Any date from 1970 to about 2262 fits in nanoseconds.
        guard wall_ms >= 0, wall_ms <= Int64.max / 1_000_000 else {
            throw TickgateError(.invalidDuration, "wall time \(wall_ms) ms is outside 0 ... \(Int64.max / 1_000_000)")
        }
        try engine.setWall(wall_ms * 1_000_000)
    }
}

@c @implementation
public func tg_store_flush(_ engine: OpaquePointer?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.flush()
    }
}

@c @implementation
public func tg_store_finish_upgrade(_ engine: OpaquePointer?,
                                   _ out_format: UnsafeMutablePointer<Int32>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let format = try engine.finishStoreUpgrade()
        out_format?.pointee = Int32(clamping: format)
    }
}

@c @implementation
public func tg_clock_now(_ engine: OpaquePointer?,
                         _ out_now_ms: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let out = try Boundary.required(out_now_ms, "out_now_ms")
        out.pointee = engine.now().nanoseconds / 1_000_000
    }
}

/// Reads a caller's `tg_engine_options`.
enum EngineOptionsReader {
    /// The first layout ended at manual_boot_id (store_timeout_ms came
    /// after it).
    static let olderLayouts = [MemoryLayout<tg_engine_options>.offset(of: \tg_engine_options.store_timeout_ms)
        ?? MemoryLayout<tg_engine_options>.size,
        MemoryLayout<tg_engine_options>.offset(of: \tg_engine_options.store_url)
        ?? MemoryLayout<tg_engine_options>.size]

    static var defaults: tg_engine_options {
        var options = tg_engine_options()
        options.struct_size = UInt32(MemoryLayout<tg_engine_options>.size)
        options.delivery = TG_DELIVERY_ENGINE_THREAD
        options.clock = TG_CLOCK_SYSTEM
        return options
    }

    static func read(_ pointer: UnsafePointer<tg_engine_options>?) throws(TickgateError) -> EngineOptions {
        guard let pointer else { return EngineOptions() }
        let raw = try Versioned.read(pointer, defaults: defaults, olderLayouts: olderLayouts, "options")
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
        guard raw.store_flags & ~(TG_STORE_START_FRESH_IF_CORRUPT | TG_STORE_FULL_SYNC | TG_STORE_ENGINE_CLOCK
                                      | TG_STORE_FAIL_OPEN | TG_STORE_NO_LOCAL_REFUSALS) == 0 else {
            throw TickgateError(.invalidArgument, "options.store_flags has unknown bits")
        }
        let redisFlags = TG_STORE_ENGINE_CLOCK | TG_STORE_FAIL_OPEN | TG_STORE_NO_LOCAL_REFUSALS
        let sqliteFlags = TG_STORE_START_FRESH_IF_CORRUPT | TG_STORE_FULL_SYNC
        if raw.store_url == nil, raw.store_flags & redisFlags != 0 {
            throw TickgateError(.invalidArgument,
                "options.store_flags: TG_STORE_ENGINE_CLOCK and TG_STORE_FAIL_OPEN need options.store_url")
        }
        if raw.store_url != nil, raw.store_flags & sqliteFlags != 0 {
            throw TickgateError(.invalidArgument,
                "options.store_flags: TG_STORE_START_FRESH_IF_CORRUPT and TG_STORE_FULL_SYNC need options.store_path")
        }
        if let url = raw.store_url {
            guard raw.store_path == nil else {
                throw TickgateError(.invalidArgument, "options.store_path and options.store_url are both set: pick one store")
            }
            let text = try text(url, "options.store_url", limit: RedisOptions.maximumURLBytes)
            var redis = RedisOptions(url: text)
            if let prefix = raw.store_prefix {
                redis.prefix = try self.text(prefix, "options.store_prefix", limit: RedisOptions.maximumPrefixBytes)
            }
            redis.timeout = .milliseconds(try timeout(raw.store_timeout_ms))
            if raw.store_flags & TG_STORE_ENGINE_CLOCK != 0 { redis.time = .engine }
            redis.failOpen = raw.store_flags & TG_STORE_FAIL_OPEN != 0
            redis.localRefusals = raw.store_flags & TG_STORE_NO_LOCAL_REFUSALS == 0
            options.redis = redis
        } else if raw.store_prefix != nil {
            throw TickgateError(.invalidArgument, "options.store_prefix needs options.store_url")
        }
        if let path = raw.store_path {
            let text = try text(path, "options.store_path", limit: Int(PATH_MAX) - 1)
            let delay = raw.store_commit_delay_ms
            guard delay >= 0, delay <= Boundary.maximumDurationMilliseconds else {
                throw TickgateError(.invalidDuration, "options.store_commit_delay_ms \(delay) is out of range")
            }
            let timeout = try timeout(raw.store_timeout_ms)
            options.store = StoreOptions(
                path: text, commitDelay: .milliseconds(delay), timeout: .milliseconds(timeout),
                startFreshIfCorrupt: raw.store_flags & TG_STORE_START_FRESH_IF_CORRUPT != 0,
                fullSync: raw.store_flags & TG_STORE_FULL_SYNC != 0)
        }
        if options.clock == .manual {
            let limit = Int64.max / 1_000_000
            guard raw.manual_boot_ms >= 0, raw.manual_boot_ms <= Boundary.maximumDurationMilliseconds,
                  raw.manual_wall_ms >= 0, raw.manual_wall_ms <= limit else {
                throw TickgateError(.invalidDuration, "options.manual_boot_ms or manual_wall_ms is out of range")
            }
            options.manualBoot = Instant(nanoseconds: raw.manual_boot_ms * 1_000_000)
            options.manualWall = raw.manual_wall_ms * 1_000_000
            if let id = raw.manual_boot_id {
                let name = try Boundary.name(id, "options.manual_boot_id").value
                guard !name.contains(where: { $0.isNewline }) else {
                    throw TickgateError(.invalidArgument, "options.manual_boot_id has a line break")
                }
                options.manualBootID = name
            }
        }
        return options
    }

    /// store_timeout_ms: 0 is the default.
    private static func timeout(_ milliseconds: Int64) throws(TickgateError) -> Int64 {
        let timeout = milliseconds == 0 ? Limits.defaultStoreTimeout.nanoseconds / 1_000_000 : milliseconds
        guard timeout >= 1, timeout <= Boundary.maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "options.store_timeout_ms \(milliseconds) is outside 0 ... \(Boundary.maximumDurationMilliseconds) ms")
        }
        return timeout
    }

    /// A C string of 1 to `limit` bytes of UTF-8.
    private static func text(_ pointer: UnsafePointer<CChar>, _ field: String, limit: Int) throws(TickgateError) -> String {
        let length = strnlen(pointer, limit + 1)
        guard length > 0, length <= limit else {
            throw TickgateError(.invalidArgument, "\(field) is empty or longer than \(limit) bytes")
        }
        guard let text = String(validating: UnsafeBufferPointer(
            start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: length), as: UTF8.self) else {
            throw TickgateError(.invalidArgument, "\(field) is not valid UTF-8")
        }
        return text
    }
}
