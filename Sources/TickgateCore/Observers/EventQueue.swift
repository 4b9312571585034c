/// The events and gate items waiting for delivery, in order. A plain
/// buffer (`PageBuffer`), so a mass expiry's million events sit in one
/// mapping with huge pages (a few dozen page faults, not tens of
/// thousands) and grow with `mremap`. Items are moved out one by one as
/// they are delivered. A class: the engine swaps whole queues, never copies
/// one. The engine's lock guards it.
final class EventQueue {
    private var buffer = PageBuffer<PendingEvent>(capacity: 16)
    private(set) var count = 0
    /// Items below this index were moved out by `take`.
    private var taken = 0

    var isEmpty: Bool { count == taken }
    var capacity: Int { buffer.capacity }

    deinit {
        removeAll()
    }

    func append(_ item: PendingEvent) {
        if count == buffer.capacity { buffer.grow(to: count * 2, keeping: count) }
        (buffer.base + count).initialize(to: item)
        count += 1
    }

    func reserveCapacity(_ minimum: Int) {
        if minimum > buffer.capacity { buffer.grow(to: minimum, keeping: count) }
    }

    /// Moves out the next item in order.
    func take() -> PendingEvent? {
        guard taken < count else { return nil }
        defer { taken += 1 }
        return (buffer.base + taken).move()
    }

    /// Marks the events queued at `start` and later as local-only.
    func markLocalOnly(from start: Int) {
        for index in max(start, taken)..<count {
            if case var .event(event) = buffer.base[index].payload {
                event.localOnly = true
                buffer.base[index].payload = .event(event)
            }
        }
    }

    /// Drops every item not taken yet and starts over.
    func removeAll() {
        (buffer.base + taken).deinitialize(count: count - taken)
        count = 0
        taken = 0
    }
}
