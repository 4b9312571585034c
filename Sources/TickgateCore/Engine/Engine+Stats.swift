// The engine's statistics: what it counts, where, and the read.
//
// Counted where every path goes through: a send decision in `sendBegin`
// (granted, or refused with its status), a verification in `verified` and
// `verifyFailed`, a store call in `MeasuredStore` (the engine's store,
// wrapped at the open), a fail-open grant and a write-back in the
// decision's fail-open path, a refusal made without asking the store in
// `LocalRefusals` (under the lock it already holds).

extension Engine {
    /// What this engine did since it was opened (counters that only grow)
    /// and what it holds now. Never waits on the store; takes the engine's
    /// lock briefly for the gauges.
    public func stats() -> EngineStats {
        var stats = counters.read()
        locked.withLock { state in
            stats.sendsRefusedLocally = state.refusals.refusedSends
            stats.verifiesRefusedLocally = state.refusals.refusedVerifies
            stats.localRefusalsKept = UInt64(state.refusals.entries.count)
            stats.countdowns = UInt64(state.table.count)
            stats.sendRecords = UInt64(state.sends.records.count)
            stats.localGrantsPending = UInt64(state.sends.localKeys.count)
        }
        return stats
    }

    /// A send decision, counted by how it ended.
    @inline(__always)
    func countingSend(_ decide: () throws(TickgateError) -> UInt64) throws(TickgateError) -> UInt64 {
        do throws(TickgateError) {
            let ticket = try decide()
            counters.bump(counters.sendsGranted)
            return ticket
        } catch {
            counters.sendRefused(error.status)
            throw error
        }
    }

    /// A verification (`wrong`: a wrong code), counted by how it ended;
    /// `killed` tells from its answer whether a wrong code killed the code.
    @inline(__always)
    func countingVerify<R>(wrong: Bool, killed: (R) -> Bool = { _ in false },
                           _ decide: () throws(TickgateError) -> R) throws(TickgateError) -> R {
        do throws(TickgateError) {
            let answer = try decide()
            if wrong {
                counters.bump(counters.wrongCodes)
                if killed(answer) { counters.bump(counters.codesKilled) }
            } else {
                counters.bump(counters.verified)
            }
            return answer
        } catch {
            if error.status == .codeDead { counters.bump(counters.verifiesRefusedDead) }
            throw error
        }
    }
}
