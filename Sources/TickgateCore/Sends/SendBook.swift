/// How a ticket that is no longer open ended, kept for clear errors.
enum TicketEnd {
    case succeeded, failed, expired, cancelled
}

/// A ticket number as a dictionary key. Numbers come from this engine's
/// counter, not from the host, so one multiply spreads them: the ticket
/// tables are touched several times per send decision, and a `Hasher`
/// (SipHash) cost more than the rest of each lookup.
struct TicketNumber: Hashable {
    let value: UInt64

    @inline(__always)
    init(_ value: UInt64) { self.value = value }

    func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: ByteHash.mix(value ^ UInt64(UInt(bitPattern: seed)), 0x9e37_79b9_7f4a_7c15))
    }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }
}

/// A dictionary keyed by ticket number, read by number as `[UInt64: Value]`
/// is (`tickets[ticket]`), hashed as a `TicketNumber`.
struct TicketTable<Value> {
    private var storage: [TicketNumber: Value] = [:]

    var isEmpty: Bool { storage.isEmpty }

    subscript(ticket: UInt64) -> Value? {
        get { storage.isEmpty ? nil : storage[TicketNumber(ticket)] }
        set { storage[TicketNumber(ticket)] = newValue }
    }

    @discardableResult
    mutating func removeValue(forKey ticket: UInt64) -> Value? {
        storage.isEmpty ? nil : storage.removeValue(forKey: TicketNumber(ticket))
    }
}

/// A set of ticket numbers (`contains` as `Set<UInt64>` has it).
struct TicketSet {
    private var storage: Set<TicketNumber> = []

    var isEmpty: Bool { storage.isEmpty }

    func contains(_ ticket: UInt64) -> Bool { !storage.isEmpty && storage.contains(TicketNumber(ticket)) }

    mutating func insert(_ ticket: UInt64) { storage.insert(TicketNumber(ticket)) }

    mutating func remove(_ ticket: UInt64) {
        if !storage.isEmpty { storage.remove(TicketNumber(ticket)) }
    }
}

/// How the last `capacity` tickets to end ended, in a ring: writing one is
/// two stores (the send path ends a ticket on every decision), and only an
/// error reads it back, by a scan from the newest.
struct EndedTickets {
    static let capacity = 4096
    private var numbers = [UInt64](repeating: 0, count: EndedTickets.capacity)
    private var ends = [TicketEnd](repeating: .succeeded, count: EndedTickets.capacity)
    private var count = 0
    private var next = 0

    mutating func append(_ ticket: UInt64, _ end: TicketEnd) {
        numbers[next] = ticket
        ends[next] = end
        next = next == Self.capacity - 1 ? 0 : next + 1
        if count < Self.capacity { count += 1 }
    }

    /// How `ticket` ended, if it is among the last `capacity` to end.
    subscript(ticket: UInt64) -> TicketEnd? {
        var index = next
        for _ in 0..<count {
            index = index == 0 ? Self.capacity - 1 : index - 1
            if numbers[index] == ticket { return ends[index] }
        }
        return nil
    }
}

/// Where an open ticket's run is: its slot in the countdown table, and the
/// key's hash there (a slot freed and taken by another key is told apart).
struct TicketPlace {
    var slot: Int32
    var hash: UInt64
}

/// The resend flow's state: each key's send history, each scope's policy
/// and titles, and the send tickets, open and recently ended. Every way
/// this state changes is a method below; the engine's send code reads the
/// fields and calls these.
struct SendBook {
    /// Each key's send history, found by the key's bytes (the send path's
    /// lookups make no names).
    let records = KeyMap<SendRecord>()
    /// Local copies of the scopes' policies (on a store that holds the
    /// rules, decisions read the store's; these serve `tg_policy_get`).
    private(set) var policies: [KeyName: SendPolicy] = [:]
    /// Set through `EngineState.setTitles` (the title cache follows them).
    fileprivate(set) var titles: [KeyName: TitleSet] = [:]
    /// Open tickets and where their runs are.
    private(set) var tickets = TicketTable<TicketPlace>()
    private var nextTicket: UInt64 = 0
    /// Open tickets that charged budgets: which, and when (a failed send
    /// returns the charge).
    private(set) var charges = TicketTable<(budgets: [BudgetKey], at: Instant)>()
    /// Tickets granted "fail open" (the store unreachable): they end in
    /// memory, where they began.
    private(set) var localTickets = TicketSet()
    /// Keys whose state this engine decided alone (fail open): written back
    /// to the store when it is reached again (`Engine.writeBackLocalGrants`).
    private(set) var localKeys: Set<CountdownKey> = []
    /// How recent tickets ended, the oldest forgotten first.
    private(set) var endedTickets = EndedTickets()

    // MARK: Records and policies

    /// Sets a key's send history (nil: it has none).
    mutating func setRecord(_ record: SendRecord?, for key: CountdownKey) {
        records[key] = record
    }

    /// Changes the send history of the key with these bytes in place:
    /// `body` gets it (nil: none) and what it leaves is kept.
    mutating func updateRecord<R>(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer,
                                  _ body: (inout SendRecord?) -> R) -> R {
        records.update(scope: scope, subject: subject, body)
    }

    mutating func setPolicy(_ policy: SendPolicy, scope: KeyName) { policies[scope] = policy }

    /// Takes `policies` as the whole set (what a store holds).
    mutating func replacePolicies(_ policies: [KeyName: SendPolicy]) { self.policies = policies }

    mutating func setTitles(_ titles: TitleSet?, scope: KeyName) { self.titles[scope] = titles }

    // MARK: Tickets

    /// The number of the next ticket (taken before the decision: a store
    /// keeps it with the ticket, and a refusal leaves a gap).
    mutating func takeTicketNumber() -> UInt64 {
        nextTicket &+= 1
        return nextTicket
    }

    /// Opens a granted ticket: where its run is, the budgets it charged at
    /// `at`, and, if this engine alone granted it (fail open), its key.
    mutating func open(_ ticket: UInt64, place: TicketPlace, charged budgets: [BudgetKey] = [], at: Instant,
                       localKey: CountdownKey? = nil) {
        tickets[ticket] = place
        if !budgets.isEmpty { charges[ticket] = (budgets, at) }
        if let localKey {
            localTickets.insert(ticket)
            localKeys.insert(localKey)
        }
    }

    /// Closes a ticket and remembers how it ended. The first end is the
    /// one kept: a ticket's run replaced after it ended (its cooldown
    /// starting) did not cancel it.
    mutating func recordEnd(of ticket: UInt64, _ end: TicketEnd) {
        // An open ticket has not ended: only one that is not open is looked
        // for among the ended (a scan, off the send path).
        if tickets.removeValue(forKey: ticket) == nil, endedTickets[ticket] != nil { return }
        if !localTickets.isEmpty { localTickets.remove(ticket) }
        if !charges.isEmpty { charges.removeValue(forKey: ticket) }
        endedTickets.append(ticket, end)
    }

    // MARK: Fail open

    /// `key` was decided by this engine alone: it waits to be written back.
    mutating func decidedAlone(_ key: CountdownKey) { localKeys.insert(key) }

    /// `key` was written back: the store holds it again.
    mutating func wroteBack(_ key: CountdownKey) { localKeys.remove(key) }
}
