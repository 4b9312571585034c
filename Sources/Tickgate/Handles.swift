import CTickgateShim
import Synchronization
import TickgateCore

/// Engine handles as C sees them. A handle is not a pointer to memory but
/// an id (`id << 4 | 0x8`) looked up in a table, so a closed handle finds
/// its tombstone (ids are never reused: `TG_E_CLOSED`) and a pointer the
/// library never returned finds nothing (`TG_E_INVALID_HANDLE`).
///
/// Every call holds its engine for as long as it runs, without a lock or a
/// reference count on the engine: each slot has one atomic word, an "open"
/// bit plus the number of calls holding the engine. A call enters by
/// adding one while the bit is set; close clears the bit; whoever leaves
/// the word at zero (the last call out, or close when no call is in)
/// drops the table's one reference to the engine. So a call never finds a
/// freed engine, and close from inside a callback (on the thread of a call
/// still holding the engine) cannot wait on itself.
///
/// Slots live in chunks of 256 (4 KB) that are allocated once and never
/// freed: a word pair (16 bytes) per engine ever opened. The directory of
/// chunks is the shim's static storage (gone with the library at dlclose).
enum Handles {
    private static let tag: UInt = 0x8
    private static let open: UInt = 1 << (UInt.bitWidth - 1)
    private static let chunkShift = 8
    private static let chunkSlots = 1 << chunkShift
    private static let chunkCount = Int(TGSHIM_HANDLE_CHUNKS)

    /// Chunk addresses (0 until allocated), indexed by `id >> chunkShift`:
    /// the shim's zeroed words, used as atomics (same layout). A chunk
    /// holds two words per slot: its state and its engine.
    @inline(__always)
    private static var chunks: UnsafeMutablePointer<Atomic<UInt>> {
        tgshim_handle_directory().assumingMemoryBound(to: Atomic<UInt>.self)
    }
    /// The next id to issue (id 0 is never issued).
    private static let nextID = Atomic<UInt>(1)
    /// Serialises `register` (ids and chunk allocation) only.
    private static let registering = Mutex(())

    static func register(_ engine: Engine) throws(TickgateError) -> OpaquePointer? {
        let chunks = chunks
        return try registering.withLock { _ throws(TickgateError) in
            let id = nextID.load(ordering: .relaxed)
            guard id < chunkSlots * chunkCount else {
                throw TickgateError(.system, "the process opened \(id - 1) engines, the most one process may")
            }
            if chunks[Int(id >> chunkShift)].load(ordering: .relaxed) == 0 {
                let words = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: 2 * chunkSlots)
                for index in 0..<2 * chunkSlots { (words + index).initialize(to: Atomic(0)) }
                chunks[Int(id >> chunkShift)].store(UInt(bitPattern: words), ordering: .releasing)
            }
            let slot = slot(id)
            slot[1].store(UInt(bitPattern: Unmanaged.passRetained(engine).toOpaque()), ordering: .relaxed)
            slot[0].store(open, ordering: .relaxed)
            nextID.store(id + 1, ordering: .releasing)
            return OpaquePointer(bitPattern: id << 4 | tag)
        }
    }

    /// Runs `body` with the handle's engine held (see the type's comment).
    @inline(__always)
    static func with<T>(_ handle: OpaquePointer?,
                        _ body: (Engine) throws(TickgateError) -> T) throws(TickgateError) -> T {
        let slot = try enter(handle)
        defer { leave(slot) }
        return try engine(slot)._withUnsafeGuaranteedRef { engine in
            Result { () throws(TickgateError) -> T in try body(engine) }
        }.get()
    }

    /// Closes the handle: later calls get `TG_E_CLOSED`. `body` runs with
    /// the engine held, once, by the one caller that closed it.
    static func close(_ handle: OpaquePointer?, _ body: (Engine) -> Void) throws(TickgateError) {
        let slot = try enter(handle)
        defer { leave(slot) }
        let before = slot[0].bitwiseAnd(~open, ordering: .acquiringAndReleasing).oldValue
        guard before & open != 0 else {
            throw closed
        }
        engine(slot)._withUnsafeGuaranteedRef { body($0) }
    }

    /// The handle's slot, with one more call holding it.
    @inline(__always)
    private static func enter(_ handle: OpaquePointer?) throws(TickgateError) -> UnsafeMutablePointer<Atomic<UInt>> {
        let id = try decode(handle)
        guard id < nextID.load(ordering: .acquiring) else {
            throw notAHandle
        }
        let slot = slot(id)
        var state = slot[0].load(ordering: .relaxed)
        while state & open != 0 {
            let (entered, found) = slot[0].weakCompareExchange(
                expected: state, desired: state + 1,
                successOrdering: .acquiring, failureOrdering: .relaxed)
            if entered { return slot }
            state = found
        }
        throw closed
    }

    /// One call fewer; the last one out of a closed slot drops the engine.
    @inline(__always)
    private static func leave(_ slot: UnsafeMutablePointer<Atomic<UInt>>) {
        if slot[0].subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            engine(slot).release()
        }
    }

    /// The two words of an issued id's slot: its state and its engine.
    @inline(__always)
    private static func slot(_ id: UInt) -> UnsafeMutablePointer<Atomic<UInt>> {
        let chunk = chunks[Int(id >> chunkShift)].load(ordering: .acquiring)
        let words = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: chunk).unsafelyUnwrapped
        return words + 2 * Int(id & UInt(chunkSlots - 1))
    }

    @inline(__always)
    private static func engine(_ slot: UnsafeMutablePointer<Atomic<UInt>>) -> Unmanaged<Engine> {
        let bits = slot[1].load(ordering: .relaxed)
        return Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
    }

    private static var closed: TickgateError { TickgateError(.closed, "the engine was closed") }
    private static var notAHandle: TickgateError {
        TickgateError(.invalidHandle, "the pointer is not a Tickgate engine handle")
    }

    @inline(__always)
    private static func decode(_ handle: OpaquePointer?) throws(TickgateError) -> UInt {
        guard let handle else {
            throw TickgateError(.invalidArgument, "engine is NULL")
        }
        let bits = UInt(bitPattern: handle)
        guard bits & 0xF == tag, bits >> 4 != 0 else {
            throw notAHandle
        }
        return bits >> 4
    }
}
