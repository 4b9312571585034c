// Fail open, then reconcile: what this engine granted alone while a shared
// store was out of reach is written back to the store once it answers, so a
// number never gets a second code inside one cooldown across an outage.

extension Engine {
    /// Writes back every key this engine decided alone (fail open) and the
    /// budget charges it made meanwhile, each merged so that the stricter
    /// state wins. Keys written back are the store's again; a key that
    /// cannot be written yet stays for the next try (the next decision, a
    /// query, or the notice link coming back). Every write ends by
    /// `deadline` (the calling decision's: the write-back spends its store
    /// timeout, it does not add one).
    func writeBackLocalGrants(by deadline: Instant) {
        guard store.readsThrough else { return }
        let pending = locked.withLock { state -> [CountdownKey] in
            state.closed ? [] : state.sends.localKeys.sorted()
        }
        for key in pending {
            let (rows, charges) = locked.withLock { state -> (KeyRows, [BudgetKey: [Instant]]) in
                let now = state.now()
                // Charges are written with the first key (all of them:
                // with a shared store, memory holds only local ones).
                return (KeyRows(countdown: state.running(key, at: now), record: state.sends.records[key]),
                        state.budgets.charges)
            }
            do throws(TickgateError) {
                try store.merge(rows, for: key, charges: charges, by: deadline)
            } catch {
                counters.bump(counters.writeBackFailures)
                return
            }
            counters.bump(counters.writeBacks)
            locked.withLock { state in
                state.sends.wroteBack(key)
                state.budgets.wroteBack(charges)
                // The merge changed the key (its notice is this engine's own).
                state.refusals.noticed(key)
                // More charges: a budget known spent may free later.
                if !charges.isEmpty { state.refusals.noticedBudgets() }
            }
        }
    }

    /// True if something decided alone waits to be written back.
    var hasLocalGrants: Bool {
        locked.withLock { !$0.closed && !$0.sends.localKeys.isEmpty }
    }
}
