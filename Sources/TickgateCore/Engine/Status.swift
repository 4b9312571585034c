// Generated from TG_STATUS_MAP in include/tickgate_status.h by
// Tests/build/gen_status.py: do not edit. After changing the table, run
// `python3 Tests/build/gen_status.py` (the test build.status_tables fails
// while this file differs from what it writes).

/// Why a call failed. The raw values are the C API's `tg_status` values.
public enum Status: Int32, Sendable {
    /// Success.
    case ok = 0
    /// A required pointer was NULL, or a flag, enum or option value is not one
    /// this library knows.
    case invalidArgument = 1
    /// A scope or subject is NULL, empty, longer than TG_KEY_MAX_BYTES or not
    /// valid UTF-8.
    case invalidKey = 2
    /// A duration, tick interval or clock step is zero, negative or beyond the
    /// limits of tickgate.h.
    case invalidDuration = 3
    /// No countdown is running for that key, or no subscription has that id.
    case notFound = 4
    /// The key is already counting down; *out_remaining_ms says how long it
    /// still runs. Pass TG_START_RESTART to replace the running countdown.
    case coolingDown = 5
    /// The engine handle was closed (use after tg_engine_close).
    case closed = 6
    /// The pointer is not an engine handle this library returned.
    case invalidHandle = 7
    /// The function needs another delivery mode or clock than the engine was
    /// opened with (tg_engine_fd on an engine-thread engine, tg_clock_advance
    /// on the system clock).
    case wrongMode = 8
    /// Try again: tg_engine_dispatch was called while a dispatch of the same
    /// engine is running (on another thread, or from inside one of its
    /// callbacks); a guarded send met a guard that changed three times during
    /// it (nothing was charged); tg_challenge_passed found 100000 passes of the
    /// scope waiting, on an engine with no store.
    case busy = 9
    /// An options struct has a struct_size this library does not accept.
    case version = 10
    /// An operating-system call failed; the message names it and its errno.
    case system = 11
    /// A send for this key is under way (a ticket is open): a double tap never
    /// makes two requests. *out_wait_ms says when the ticket expires.
    case inFlight = 12
    /// The key reached its policy's cap of sends per window, or a budget the
    /// send names is spent; *out_wait_ms says when a send is free again.
    case locked = 13
    /// The send ticket expired before tg_send_end (its timeout passed).
    case expired = 14
    /// A title template is malformed: unknown placeholder, unbalanced brace,
    /// too long, or not valid UTF-8.
    case invalidTemplate = 15
    /// The store file is corrupt or not a database, or one of its rows holds a
    /// value outside what the API accepts (the message names the table, the row
    /// and the column); on Redis, a key under the prefix holds something
    /// Tickgate did not write (the message names the key). At tg_engine_open
    /// the file is left as it was, unless TG_STORE_START_FRESH_IF_CORRUPT moved
    /// it aside; a row or key that goes bad while the store is open fails the
    /// calls on its key, which change nothing.
    case storeCorrupt = 16
    /// The store was written by a newer Tickgate (a higher schema version); it
    /// is left untouched.
    case storeVersion = 17
    /// The store cannot be created, opened, read or written (permissions, a
    /// symbolic link at the path, a full disk, a read-only directory, another
    /// process holding its lock past store_timeout_ms; on Redis, the server
    /// could not be reached in time, refused the login or answered with an
    /// error, so the request surely did not apply). The change the call asked
    /// for was not made. tg_last_store_failure() tells the kind.
    case storeIO = 18
    /// The key's code took its policy's maximum of wrong codes
    /// (tg_verify_failed): it is dead, and only a new send revives the key.
    /// tg_verified refuses it too, so the login must be refused.
    case codeDead = 19
    /// The store may or may not have made the change: the request reached the
    /// server (or may have) and no answer came back within store_timeout_ms or
    /// the connection was lost and could not be re-established in time. Every
    /// decision carries a deadline, and the server refuses it once past it, so
    /// nothing will apply later; read the key (a query) to learn what holds.
    /// tg_last_store_failure() tells the kind (TG_STORE_FAILURE_TIMEOUT or
    /// TG_STORE_FAILURE_UNREACHABLE).
    case storeUnknown = 20
    /// The subject of a guarded scope (tg_guard_set) is not a phone number in
    /// E.164 form: "+", a country calling code and at most 15 digits in all,
    /// nothing else. Nothing was charged.
    case invalidNumber = 21
    /// The guard of the scope does not send codes to this destination: its
    /// country or prefix is not on the allowed list, or is on the refused list;
    /// the message names the rule. Nothing was charged.
    case destinationRefused = 22
    /// The guard of the scope (in TG_GUARD_ENFORCE mode) sees SMS pumping: a
    /// signal crossed its threshold (too many unverified codes to the number's
    /// country or from the client's address, or too many countries from one
    /// address); the message names the warnings. Nothing was charged.
    case pumpingSuspected = 23
    /// tg_store_finish_upgrade: engines that cannot read the format the store
    /// would be raised to are still live on it (engines of an older release);
    /// the message says how many. Nothing was changed: stop or upgrade them,
    /// then call again.
    case olderEnginesLive = 24
    /// The guard of the scope (in TG_GUARD_ENFORCE mode) asks for a challenge:
    /// every signal the send crossed answers with a challenge
    /// (tg_guard.challenge_signals), not a refusal; the message names them.
    /// Show the person a challenge (a CAPTCHA, a proof of work, another
    /// factor); once passed, call tg_challenge_passed and send again. Nothing
    /// was charged.
    case challengeRequired = 25

    /// Static English text for the status (`tg_status_string`).
    public var text: StaticString {
        switch self {
        case .ok: "ok"
        case .invalidArgument: "invalid argument"
        case .invalidKey: "invalid key"
        case .invalidDuration: "invalid duration"
        case .notFound: "not found"
        case .coolingDown: "cooling down"
        case .closed: "engine closed"
        case .invalidHandle: "invalid handle"
        case .wrongMode: "wrong mode"
        case .busy: "busy"
        case .version: "unsupported struct version"
        case .system: "system error"
        case .inFlight: "send in flight"
        case .locked: "locked"
        case .expired: "ticket expired"
        case .invalidTemplate: "invalid title template"
        case .storeCorrupt: "store corrupt"
        case .storeVersion: "store from a newer version"
        case .storeIO: "store I/O error"
        case .codeDead: "code dead"
        case .storeUnknown: "store outcome unknown"
        case .invalidNumber: "invalid phone number"
        case .destinationRefused: "destination refused"
        case .pumpingSuspected: "SMS pumping suspected"
        case .olderEnginesLive: "engines of an older format live"
        case .challengeRequired: "challenge required"
        }
    }
}
