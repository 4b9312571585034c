import CTickgateShim

/// A joinable thread of a store's (named, every signal blocked:
/// `tgshim_thread_start`) that runs `body` and holds what it captures
/// until `body` returns: the change-notice threads of the Redis and SQLite
/// stores.
enum StoreThread {
    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// The thread's id, or nil if it could not start.
    static func start(_ body: @escaping () -> Void) -> UInt? {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var id: UInt = 0
        let err = tgshim_thread_start({ context in
            guard let context else { return nil }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context, &id)
        if err != 0 {
            Unmanaged<Body>.fromOpaque(context).release()
            return nil
        }
        return id
    }

    /// Waits for the thread, unless it is the caller (it then ends by
    /// itself once `body` returns).
    static func join(_ id: UInt) {
        if id != 0, id != tgshim_thread_self() { _ = tgshim_thread_join(id) }
    }
}
