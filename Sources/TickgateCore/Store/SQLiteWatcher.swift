import CTickgateShim
import Glibc

/// The change notices of a SQLite store: SQLite has no way to say which
/// rows another process wrote, so a thread of the store's own looks at the
/// file's data version (`PRAGMA data_version`) every `interval` and, when
/// another engine or process committed, has the engine re-read every key
/// it observes. Started with the engine's first observer.
final class SQLiteWatcher: @unchecked Sendable {
    /// How often the file is looked at: notices arrive within about this.
    static let interval = Span.milliseconds(50)

    private let changed: @Sendable (StoreNotice) -> Void
    private let look: @Sendable () -> Bool
    private let stopped = LockedValue(false)
    private var thread: UInt = 0

    init(changed: @escaping @Sendable (StoreNotice) -> Void, look: @escaping @Sendable () -> Bool) {
        self.changed = changed
        self.look = look
    }

    func start() -> Bool {
        guard let id = StoreThread.start({ self.run() }) else { return false }
        thread = id
        return true
    }

    func stop() {
        stopped.withLock { $0 = true }
        StoreThread.join(thread)
    }

    private func run() {
        while !stopped.withLock({ $0 }) {
            var delay = timespec(tv_sec: 0, tv_nsec: Int(Self.interval.nanoseconds))
            _ = nanosleep(&delay, nil)
            if stopped.withLock({ $0 }) { break }
            if look() { changed(.anything) }
        }
    }
}
