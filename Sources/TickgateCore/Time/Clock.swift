import CTickgateShim
import Synchronization

/// The engine's clock, shared by the engine and its store without the
/// engine's lock: CLOCK_BOOTTIME and the wall clock, or a manual clock
/// that moves only when told. Also converts moments to and from the
/// stamps a store keeps across restarts.
final class Clock: Sendable {
    let isManual: Bool
    /// This boot's id (the manual clock's own, or the system's).
    let bootID: String
    private let manualNow: Atomic<Int64>
    private let manualWall: Atomic<Int64>

    init(manual: Bool, boot: Instant, wall: Int64, bootID: String) {
        isManual = manual
        manualNow = Atomic(boot.nanoseconds)
        manualWall = Atomic(wall)
        if manual {
            self.bootID = bootID
        } else {
            var buffer = [CChar](repeating: 0, count: 64)
            tgshim_boot_id(&buffer, buffer.count)
            self.bootID = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) },
                                 as: UTF8.self)
        }
    }

    @inline(__always)
    func now() -> Instant {
        isManual ? Instant(nanoseconds: manualNow.load(ordering: .acquiring)) : Poller.boottime()
    }

    /// The wall clock, in nanoseconds since the epoch.
    func wallNow() -> Int64 { isManual ? manualWall.load(ordering: .acquiring) : tgshim_walltime_ns() }

    /// Manual clock: moves both readings forward (the caller serializes
    /// advances).
    func advance(to now: Instant, by step: Span) {
        manualWall.wrappingAdd(step.nanoseconds, ordering: .releasing)
        manualNow.store(now.nanoseconds, ordering: .releasing)
    }

    /// Manual clock: sets the wall reading.
    func setWall(_ wall: Int64) { manualWall.store(wall, ordering: .releasing) }

    // MARK: Moments across restarts

    /// The stamp of an instant of this clock.
    func stamp(_ instant: Instant, at now: Instant) -> Stamp {
        Stamp(bootID: bootID, boot: instant.nanoseconds, wall: wallNow() &+ instant.since(now).nanoseconds)
    }

    /// A stored deadline as an instant of this clock: the boot clock within
    /// the same boot; across a reboot the wall clock, but never more than
    /// `length` from now (a clock set backwards cannot extend a countdown).
    func deadline(of stamp: Stamp, length: Span, at now: Instant) -> Instant {
        let latest = now.advanced(by: length)
        if stamp.bootID == bootID { return min(Instant(nanoseconds: stamp.boot), latest) }
        // Both wall readings are non-negative (checked on load): no wrap.
        let left = stamp.wall - wallNow()
        return now.advanced(by: Span(nanoseconds: min(max(left, 0), length.nanoseconds)))
    }

    /// A stored past moment (a send) as an instant, never in the future.
    func moment(of stamp: Stamp, at now: Instant) -> Instant {
        if stamp.bootID == bootID { return min(Instant(nanoseconds: stamp.boot), now) }
        let ago = wallNow() - stamp.wall
        return now.advanced(by: Span(nanoseconds: -max(ago, 0)))
    }
}
