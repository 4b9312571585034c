import CTickgateShim
import Glibc

/// The engine's one OS timer and wake-up: a timerfd on CLOCK_BOOTTIME and an
/// eventfd behind one epoll descriptor. The host polls that descriptor in
/// host-thread mode; the engine thread blocks on it otherwise.
final class Poller: @unchecked Sendable {
    private var fds = tgshim_poller(epoll_fd: -1, timer_fd: -1, event_fd: -1)

    init() throws(TickgateError) {
        let err = tgshim_poller_open(&fds)
        if err != 0 {
            throw TickgateError(.system, "cannot create the engine's descriptors: errno \(err)")
        }
    }

    deinit { tgshim_poller_close(&fds) }

    var descriptor: Int32 { fds.epoll_fd }

    /// Arms the timer at `deadline` (CLOCK_BOOTTIME), or disarms it.
    func arm(at deadline: Instant?) {
        _ = tgshim_poller_arm(&fds, deadline.map { max($0.nanoseconds, 1) } ?? 0)
    }

    func wake() { _ = tgshim_poller_wake(&fds) }
    func drain() { tgshim_poller_drain(&fds) }

    /// Blocks until the descriptor is readable.
    func wait() { _ = tgshim_poller_wait(&fds, -1) }

    static func boottime() -> Instant { Instant(nanoseconds: tgshim_boottime_ns()) }

    /// Sleeps the calling thread for `span` (a store's back-off).
    static func sleep(_ span: Span) {
        var delay = timespec(tv_sec: Int(span.nanoseconds / 1_000_000_000),
                             tv_nsec: Int(span.nanoseconds % 1_000_000_000))
        _ = nanosleep(&delay, nil)
    }
}
