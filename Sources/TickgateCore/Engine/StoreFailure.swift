// Generated from TG_STORE_FAILURE_MAP in include/tickgate_status.h by
// Tests/build/gen_status.py: do not edit. After changing the table, run
// `python3 Tests/build/gen_status.py` (the test build.status_tables fails
// while this file differs from what it writes).

/// The kind of a store failure, so a host acts on it without reading the
/// message: the C API's `tg_store_failure` values, carried by
/// `TickgateError.storeFailure` and told by `tg_last_store_failure()`.
public enum StoreFailure: Int32, Sendable {
    /// Not a store error (or no call on this thread has failed yet).
    case none = 0
    /// The store cannot be reached: the server refused the connection or could
    /// not be found, or the connection was lost and could not be made again
    /// within store_timeout_ms.
    case unreachable = 1
    /// The store did not answer within store_timeout_ms: a server that is slow,
    /// paused or stopped, or a connection gone silent.
    case timeout = 2
    /// The server refused the login or a command for want of rights (a wrong
    /// password, an ACL user without the rights Tickgate needs).
    case auth = 3
    /// The server cannot serve now: it is loading its data or busy with a long
    /// script. It may pass; try again later.
    case busy = 4
    /// The store holds data Tickgate did not write, or a value out of range, or
    /// answered something Tickgate cannot read.
    case corrupt = 5
    /// The server, its topology or the data's format is not supported: a server
    /// too old for Tickgate's scripts, a cluster redirection, a store written
    /// by a newer Tickgate.
    case unsupported = 6
    /// The server is a read-only replica: its primary changed (a failover) and
    /// the engine has not found the new one yet, or the URL names a replica.
    /// With redis+sentinel:// the next call asks the Sentinels.
    case readOnly = 7
    /// The change was made on the primary, but fewer replicas than the URL's
    /// replicas=N confirmed they hold it within replica_timeout_ms (WAIT): a
    /// failover now could lose it. The call fails with TG_E_STORE_UNKNOWN: read
    /// the key to learn what holds.
    case notReplicated = 8
}
