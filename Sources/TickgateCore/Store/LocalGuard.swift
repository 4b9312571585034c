/// A scope's guard as a store can tell it at no cost (`Store.localGuard`).
enum LocalGuard {
    /// Only a round trip would tell (Redis): the engine keeps what it knows.
    case unknown
    /// As the store holds it, read from a local file (SQLite); nil: the
    /// scope has no guard.
    case known(Guard?)
}
