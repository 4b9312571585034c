import Synchronization
import TickgateCore

/// Engine handles as C sees them. A handle is not a pointer to memory but
/// an id (`id << 4 | 0x8`) looked up in a table, so a closed handle finds
/// its tombstone (ids are never reused: `TG_E_CLOSED`) and a pointer the
/// library never returned finds nothing (`TG_E_INVALID_HANDLE`).
enum Handles {
    private struct Table {
        /// Indexed by id; a closed engine's entry is nil (its tombstone).
        /// Ids are never reused, so this grows by one word per engine ever
        /// opened.
        var engines: [Engine?] = [nil]
        var nextID: UInt { UInt(engines.count) }
    }

    private static let table = Mutex(Table())
    private static let tag: UInt = 0x8

    static func register(_ engine: Engine) -> OpaquePointer? {
        let id = table.withLock { table in
            let id = table.nextID
            table.engines.append(engine)
            return id
        }
        return OpaquePointer(bitPattern: id << 4 | tag)
    }

    static func lookup(_ handle: OpaquePointer?) throws(TickgateError) -> Engine {
        let id = try decode(handle)
        let engine = table.withLock { id < $0.nextID ? $0.engines[Int(id)] : nil }
        if let engine { return engine }
        throw try tombstoneError(id)
    }

    /// Removes the handle from the table (the first step of close).
    static func remove(_ handle: OpaquePointer?) throws(TickgateError) -> Engine {
        let id = try decode(handle)
        let engine = table.withLock { table -> Engine? in
            guard id < table.nextID else { return nil }
            defer { table.engines[Int(id)] = nil }
            return table.engines[Int(id)]
        }
        if let engine { return engine }
        throw try tombstoneError(id)
    }

    private static func decode(_ handle: OpaquePointer?) throws(TickgateError) -> UInt {
        guard let handle else {
            throw TickgateError(.invalidArgument, "engine is NULL")
        }
        let bits = UInt(bitPattern: handle)
        guard bits & 0xF == tag else {
            throw TickgateError(.invalidHandle, "the pointer is not a Tickgate engine handle")
        }
        return bits >> 4
    }

    private static func tombstoneError(_ id: UInt) throws(TickgateError) -> TickgateError {
        let issued = table.withLock { id < $0.nextID }
        return issued
            ? TickgateError(.closed, "the engine was closed")
            : TickgateError(.invalidHandle, "the pointer is not a Tickgate engine handle")
    }
}
