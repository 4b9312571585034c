/// The decision record of one send of a guarded scope: who asked, for
/// which number, what the guard saw and what was decided. Delivered to the
/// scope's record observers (`SubscriptionTarget.records`) like events, and
/// appended to the store's stream when the guard keeps one.
public struct GuardRecord: Sendable {
    public var scope: KeyName
    /// The subject as the host gave it (it may not be a number).
    public var number: String
    /// The number's region ("CN"), "+CODE" for a non-geographic one, or ""
    /// if it is no E.164 number.
    public var country = ""
    public var callingCode = ""
    public var address: ClientAddress?
    /// Wall-clock time of the decision, in ms since 1970.
    public var wallMilliseconds: Int64
    /// `.ok` (granted) or why it was refused.
    public var status: Status = .ok
    public var message = ""
    public var ticket: UInt64 = 0
    public var mode: Guard.Mode = .off
    /// The always-allow entry that let it bypass the signals, if one did.
    public var bypass: String?
    /// The destination rule that refused it, if one did.
    public var rule: String?
    /// The signals' judgment (nil: not judged: mode off, bypassed, or
    /// refused before).
    public var judgment: GuardJudgment?
    public var counts: GuardCounts?
    /// The guard's record stream length (0: no stream).
    var streamLength = 0
    /// Appended to the stream already, by the store's step that granted
    /// the send (`GuardScreenRequest.record`).
    var inStream = false
    /// nil: a decision's record. Else the record of what became of a code
    /// granted earlier (or of a passed challenge): its number, country and
    /// address, and when its code was sent (Pumping/CodeOutcomes.swift).
    public var outcome: CodeOutcome?
    /// When the code whose outcome this is was sent (ms since 1970, wall
    /// clock; 0 in a decision's record and a challenge's).
    public var codeSentWallMilliseconds: Int64 = 0

    init(scope: KeyName, number: String, address: ClientAddress?, wallMilliseconds: Int64) {
        self.scope = scope
        self.number = number
        self.address = address
        self.wallMilliseconds = wallMilliseconds
    }

    /// The warnings raised (recorded in record-only mode, refusing in
    /// enforce mode).
    public var warnings: PumpingWarnings { judgment?.warnings ?? [] }

    /// The signals judged the send with no client address: the address
    /// signals (`unverifiedByAddress*`, `countriesByAddressDaily`) were
    /// skipped, only the country's counted. Informational: it refuses
    /// nothing, and `message` says so too (`addressSkippedNote`).
    public var addressSignalsSkipped: Bool { address == nil && judgment != nil }

    /// What `message` carries when the address signals were skipped.
    public static let addressSkippedNote = "no client address: the address signals were skipped"

    /// The record as delivered: its message says if the address signals
    /// were skipped (after the refusal's message, if any).
    var noted: GuardRecord {
        guard addressSignalsSkipped, !message.contains(Self.addressSkippedNote) else { return self }
        var record = self
        record.message = message.isEmpty ? Self.addressSkippedNote : message + "; " + Self.addressSkippedNote
        return record
    }
}

extension Engine {
    /// Appends `record` to the store's stream if the guard keeps one (best
    /// effort: the decision stands whatever happens to its record), and
    /// queues it for the scope's record observers.
    func deliver(_ record: GuardRecord) {
        let record = record.noted
        if record.streamLength > 0, store.keepsRecordStream, !record.inStream {
            try? store.appendRecord(record, maximumLength: record.streamLength)
        }
        locked.withLock { state in
            let observers = record.outcome == nil ? state.observers.recordObservers : state.observers.outcomeObservers
            guard !state.closed, let ids = observers[record.scope], !ids.isEmpty else { return }
            let wasEmpty = state.dispatch.pending.isEmpty
            for id in ids { state.dispatch.pending.append(PendingEvent(.record(record, id))) }
            if wasEmpty { poller.wake() }
        }
    }
}
