/// The rule of a budget key's room, as a pure function (`rules.lua`'s
/// `R.budget_frees` is the same for Redis).
enum BudgetRules {
    /// When a budget key has room for one more send, if it has none at
    /// `now`: a window of cap N is full exactly when the charge N back from
    /// the newest (`chargeBack(N)`, nil: fewer charges) lies inside it, and
    /// frees a send when that charge leaves it; the window that frees last
    /// decides.
    static func frees(_ windows: [Budget.Window], chargeBack: (Int) -> Instant?, at now: Instant) -> Instant? {
        var latest: Instant?
        for window in windows {
            guard let charge = chargeBack(window.maximumSends) else { continue }
            let free = charge.advanced(by: window.length)
            if free > now, latest.map({ free > $0 }) ?? true { latest = free }
        }
        return latest
    }
}
