/// A budget: a named limit on sends across keys (per client address, per
/// device, per country, in all), of at most `maximumSends` per `length` in
/// each of its windows. A send that names a budget key is granted only if
/// every window of that key has room, and is charged to it.
public struct Budget: Sendable, Equatable {
    public struct Window: Sendable, Equatable {
        public var maximumSends: Int
        public var length: Span
        public init(maximumSends: Int, length: Span) {
            self.maximumSends = maximumSends
            self.length = length
        }
    }

    /// Most windows in one budget (TG_BUDGET_MAX_WINDOWS).
    @inlinable public static var maximumWindows: Int { RuleConstants.maximumBudgetWindows }
    /// Most sends one window may allow (TG_BUDGET_MAX_SENDS): every charge
    /// inside the longest window is kept, in memory and in the store.
    @inlinable public static var maximumSends: Int { RuleConstants.maximumBudgetSends }
    /// Most budget keys one send may name (TG_SEND_MAX_BUDGETS).
    @inlinable public static var maximumKeysPerSend: Int { 8 }

    public var windows: [Window]

    public init(windows: [Window]) { self.windows = windows }

    /// Throws unless every window is in range.
    public func validated() throws(TickgateError) -> Budget {
        guard (1...Self.maximumWindows).contains(windows.count) else {
            throw TickgateError(.invalidArgument,
                "a budget needs 1 to \(Self.maximumWindows) windows, not \(windows.count)")
        }
        for (index, window) in windows.enumerated() {
            guard (1...Self.maximumSends).contains(window.maximumSends) else {
                throw TickgateError(.invalidArgument,
                    "window \(index + 1) allows \(window.maximumSends) sends; a window allows 1 ... \(Self.maximumSends)")
            }
            guard window.length.nanoseconds > 0, window.length <= Limits.maximumDuration else {
                throw TickgateError(.invalidDuration, "window \(index + 1) is outside 1 ms ... 365 days")
            }
        }
        return self
    }

    /// The longest window: charges older than it count nowhere.
    var horizon: Span { windows.map(\.length).max() ?? .zero }

    /// What one budget key has used, in the window that binds it most.
    public struct Usage: Sendable, Equatable {
        /// Sends charged inside that window.
        public var used: Int
        public var window: Window
        /// Zero if a send may be charged now, else when the window frees one.
        public var freesIn: Span
    }

    /// The usage of a key whose charges (oldest first) are `charges`: the
    /// window that frees last if any is full, else the one with the least
    /// room.
    func usage(of charges: [Instant], at now: Instant) -> Usage {
        var best: Usage?
        for window in windows {
            let used = Self.count(charges, within: window.length, at: now)
            let frees = Self.frees(charges, used: used, window, at: now).map { $0.since(now) } ?? .zero
            let usage = Usage(used: used, window: window, freesIn: frees)
            guard let current = best else { best = usage; continue }
            if usage.freesIn > current.freesIn
                || (usage.freesIn == current.freesIn
                    && usage.window.maximumSends - usage.used < current.window.maximumSends - current.used) {
                best = usage
            }
        }
        return best ?? Usage(used: 0, window: Window(maximumSends: 0, length: .zero), freesIn: .zero)
    }

    /// Charges later than `now - length`.
    static func count(_ charges: [Instant], within length: Span, at now: Instant) -> Int {
        charges.count - firstLater(than: now.advanced(by: Span(nanoseconds: -length.nanoseconds)), in: charges)
    }

    /// The index of the first charge later than `moment` (charges are kept
    /// oldest first): a binary search, so a key with many charges costs
    /// little more than one with few.
    static func firstLater(than moment: Instant, in charges: [Instant]) -> Int {
        var low = 0
        var high = charges.count
        while low < high {
            let middle = low + (high - low) / 2
            if charges[middle] > moment { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// A full window frees a send when the charge `maximumSends` back
    /// from the newest leaves it.
    private static func frees(_ charges: [Instant], used: Int, _ window: Window, at now: Instant) -> Instant? {
        guard used >= window.maximumSends, window.maximumSends > 0 else { return nil }
        let free = charges[charges.count - window.maximumSends].advanced(by: window.length)
        return free > now ? free : nil
    }

    /// Drops charges no window counts any more, once they are a quarter
    /// of the list or more (so dropping costs O(1) per charge on average;
    /// the rest are never counted: every count starts at its window).
    func prune(_ charges: inout [Instant], at now: Instant) {
        let stale = Self.firstLater(than: now.advanced(by: Span(nanoseconds: -horizon.nanoseconds)), in: charges)
        if stale == charges.count {
            charges.removeAll(keepingCapacity: true)
        } else if stale > 0, stale * 4 >= charges.count {
            charges.removeFirst(stale)
        }
    }
}

/// One budget key a send names: the budget ("ip") and the key within it
/// ("203.0.113.7").
public struct BudgetKey: Hashable, Sendable {
    public var budget: KeyName
    public var key: KeyName
    public init(budget: KeyName, key: KeyName) {
        self.budget = budget
        self.key = key
    }

    var description: String { "budget \"\(budget.value)\" key \"\(key.value)\"" }
}

/// A budget key as a decision sees it: its limit and its charges.
///
/// A window of cap N is full exactly when the charge N back from the
/// newest lies inside it, and then it frees a send when that charge leaves
/// it: a decision needs only those charges. Memory holds every charge in
/// `charges` (oldest first) and changes the list; a store may read only
/// the charge each cap needs into `back` and write what the decision did
/// (`charged`, `refunded`).
struct BudgetRow {
    var key: BudgetKey
    var budget: Budget
    var charges: [Instant] = []
    /// A store's sparse read: cap N -> the charge N back from the newest
    /// (absent: fewer than N charges). Nil: `charges` holds them all.
    var back: [Int: Instant]?
    /// What the decision did, for a store that writes changes.
    var charged: Instant?
    var refunded: Instant?

    init(key: BudgetKey, budget: Budget, charges: [Instant] = [], back: [Int: Instant]? = nil) {
        self.key = key
        self.budget = budget
        self.charges = charges
        self.back = back
    }

    /// The charge `count` back from the newest, if there are that many.
    func charge(back count: Int) -> Instant? {
        if let back { return back[count] }
        return charges.count >= count ? charges[charges.count - count] : nil
    }

    /// When the budget key has room for one more send, if it has none now.
    func frees(at now: Instant) -> Instant? {
        BudgetRules.frees(budget.windows, chargeBack: { charge(back: $0) }, at: now)
    }

    /// Charges one send at `now`.
    mutating func charge(at now: Instant) {
        charged = now
        if back == nil {
            budget.prune(&charges, at: now)
            charges.append(now)
        }
    }

    /// Returns the charge made at `moment`.
    mutating func refund(_ moment: Instant, at now: Instant) {
        refunded = moment
        if back == nil {
            if let index = charges.lastIndex(of: moment) { charges.remove(at: index) }
            budget.prune(&charges, at: now)
        }
    }
}
