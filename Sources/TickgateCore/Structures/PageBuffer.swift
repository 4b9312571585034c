import CTickgateShim

/// A growable buffer of plain values (no references inside) for the
/// engine's big tables. Small buffers live on the malloc heap; from 64 KiB
/// a buffer has its own anonymous mapping that the kernel grows in place or
/// moves (mremap), so growing a million-entry table copies nothing, and the
/// old pages never stay resident the way freed heap blocks do.
///
/// The buffer owns its memory and frees it exactly once, when it goes away
/// (it cannot be copied). It never initialises or deinitialises elements:
/// its owner does, for the elements it placed.
struct PageBuffer<Element>: ~Copyable {
    private(set) var base: UnsafeMutablePointer<Element>
    private(set) var capacity: Int
    private var mappedBytes = 0

    private static var mapThreshold: Int { 64 * 1024 }
    private static var pageSize: Int { 4096 }

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        base = .allocate(capacity: self.capacity)
        if let mapped = Self.map(self.capacity) {
            base.deallocate()
            base = mapped.base
            mappedBytes = mapped.bytes
            self.capacity = mapped.capacity
        }
    }

    /// Bytes rounded up to whole pages, if a buffer this big is mapped.
    private static func mappedSize(_ capacity: Int) -> Int? {
        let bytes = capacity &* MemoryLayout<Element>.stride
        guard bytes >= mapThreshold else { return nil }
        return (bytes + pageSize - 1) / pageSize * pageSize
    }

    private static func map(_ capacity: Int) -> (base: UnsafeMutablePointer<Element>, bytes: Int, capacity: Int)? {
        guard let bytes = mappedSize(capacity), let raw = tgshim_pages_map(bytes) else { return nil }
        return (raw.bindMemory(to: Element.self, capacity: capacity), bytes,
                bytes / MemoryLayout<Element>.stride)
    }

    /// Grows to at least `newCapacity`, keeping the first `count` elements.
    mutating func grow(to newCapacity: Int, keeping count: Int) {
        guard newCapacity > capacity else { return }
        if mappedBytes > 0, let bytes = Self.mappedSize(newCapacity),
           let raw = tgshim_pages_remap(base, mappedBytes, bytes) {
            base = raw.bindMemory(to: Element.self, capacity: bytes / MemoryLayout<Element>.stride)
            mappedBytes = bytes
            capacity = bytes / MemoryLayout<Element>.stride
            return
        }
        let fresh = PageBuffer(capacity: newCapacity)
        fresh.base.moveInitialize(from: base, count: count)
        // The old memory goes with the old value.
        self = fresh
    }

    deinit {
        if mappedBytes > 0 {
            tgshim_pages_unmap(base, mappedBytes)
        } else {
            base.deallocate()
        }
    }
}
