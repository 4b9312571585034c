/// A scope's guard as a store can tell it at no cost (`Store.localGuard`).
enum LocalGuard {
    /// The engine keeps what it knows: only a round trip would tell
    /// (Redis), or what it knows is the guard (memory).
    case unknown
    /// As the store holds it, read from a local file (SQLite); nil: the
    /// scope has no guard.
    case known(Guard?)
}
