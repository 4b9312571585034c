import CTickgateShim
import TickgateCore

// Statistics: what an engine did, read without waiting on the store.

@c @implementation
public func tg_stats_read(_ engine: OpaquePointer?, _ out_stats: UnsafeMutablePointer<tg_stats>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let out = try Boundary.required(out_stats, "out_stats")
        // Only the size is read from the caller's struct (it may be smaller).
        try Versioned.check(Int(UnsafeRawPointer(out).load(as: UInt32.self)), tg_stats.self, "out_stats")
        try Versioned.write(StatsWriter.raw(engine.stats()), to: out, "out_stats")
    }
}

/// `EngineStats` as `tg_stats`.
enum StatsWriter {
    static func raw(_ stats: EngineStats) -> tg_stats {
        var raw = tg_stats()
        raw.sends_granted = stats.sendsGranted
        copy(stats.sendsRefused, into: &raw.sends_refused)
        raw.sends_refused_locally = stats.sendsRefusedLocally
        raw.fail_open_grants = stats.failOpenGrants
        raw.write_backs = stats.writeBacks
        raw.write_back_failures = stats.writeBackFailures
        raw.verified = stats.verified
        raw.wrong_codes = stats.wrongCodes
        raw.codes_killed = stats.codesKilled
        raw.verifies_refused_dead = stats.verifiesRefusedDead
        raw.verifies_refused_locally = stats.verifiesRefusedLocally
        raw.store_calls = stats.storeCalls.count
        copy(stats.storeCalls.buckets, into: &raw.store_latency)
        raw.store_latency_sum_ns = UInt64(clamping: stats.storeCalls.sum.nanoseconds)
        copy(stats.storeErrors, into: &raw.store_errors)
        raw.notices = stats.notices
        raw.notices_timed = stats.noticeLag.count
        copy(stats.noticeLag.buckets, into: &raw.notice_lag)
        raw.notice_lag_sum_ns = UInt64(clamping: stats.noticeLag.sum.nanoseconds)
        raw.notice_links_lost = stats.noticeLinksLost
        raw.local_refusals_now = stats.localRefusalsKept
        raw.countdowns_now = stats.countdowns
        raw.send_records_now = stats.sendRecords
        raw.local_grants_now = stats.localGrantsPending
        return raw
    }

    /// Copies `values` into a C array (imported as a tuple), as many as fit.
    private static func copy<Tuple>(_ values: [UInt64], into array: inout Tuple) {
        withUnsafeMutableBytes(of: &array) { bytes in
            let slots = bytes.bindMemory(to: UInt64.self)
            for index in 0..<min(slots.count, values.count) { slots[index] = values[index] }
        }
    }
}
