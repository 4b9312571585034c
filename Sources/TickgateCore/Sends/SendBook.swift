/// How a ticket that is no longer open ended, kept for clear errors.
enum TicketEnd {
    case ended, expired, cancelled
}

/// The resend flow's state: each key's send history, each scope's policy
/// and titles, and the send tickets, open and recently ended.
struct SendBook {
    var records: [CountdownKey: SendRecord] = [:]
    var policies: [KeyName: SendPolicy] = [:]
    /// Set through `EngineState.setTitles` (the title cache follows them).
    fileprivate(set) var titles: [KeyName: TitleSet] = [:]
    /// Open tickets and their keys.
    var tickets: [UInt64: CountdownKey] = [:]
    var nextTicket: UInt64 = 0
    /// Open tickets that charged budgets: which, and when (a failed send
    /// returns the charge).
    var charges: [UInt64: (budgets: [BudgetKey], at: Instant)] = [:]
    /// Tickets granted "fail open" (the store unreachable): they end in
    /// memory, where they began.
    var localTickets: Set<UInt64> = []
    /// Keys whose state this engine decided alone (fail open): written back
    /// to the store when it is reached again (`Engine.writeBackLocalGrants`).
    var localKeys: Set<CountdownKey> = []
    /// How recent tickets ended, the oldest evicted first.
    private(set) var endedTickets: [UInt64: TicketEnd] = [:]
    private var endedOrder: [UInt64] = []
    static let endedTicketsKept = 4096

    /// Closes a ticket and remembers how it ended.
    mutating func recordEnd(of ticket: UInt64, _ end: TicketEnd) {
        tickets.removeValue(forKey: ticket)
        if !localTickets.isEmpty { localTickets.remove(ticket) }
        if !charges.isEmpty { charges.removeValue(forKey: ticket) }
        endedTickets[ticket] = end
        endedOrder.append(ticket)
        if endedOrder.count > Self.endedTicketsKept * 2 {
            for old in endedOrder.prefix(endedOrder.count - Self.endedTicketsKept) {
                endedTickets.removeValue(forKey: old)
            }
            endedOrder.removeFirst(endedOrder.count - Self.endedTicketsKept)
        }
    }

    mutating func setTitles(_ titles: TitleSet?, scope: KeyName) { self.titles[scope] = titles }
}
