/// A key's slot in the countdown table as a caller already looked it up
/// (under the same hold of the engine's lock), so that the table is not
/// searched again.
enum SlotLookup {
    /// Not looked up: the table is searched.
    case notLookedUp
    /// Looked up: the key has no slot (a new one is made).
    case absent
    /// Looked up: the key's slot.
    case found(Int32)

    /// What a lookup (`CountdownTable.find`) answered.
    init(_ slot: Int32?) {
        if let slot { self = .found(slot) } else { self = .absent }
    }
}
