/// What a realm's observers hear. Raw values are `tg_gate_event_kind`.
public enum GateEventKind: Int32, Sendable {
    case state = 1
    /// Present the login screen: once per burst of queued requests.
    case loginRequired = 2
    case loggedIn = 3
    case loggedOut = 4
    case expired = 5
    case queueChanged = 6
}

public struct GateEvent: Sendable {
    public var kind: GateEventKind
    public var realm: String
    public var loggedIn: Bool
    /// Time to the session's expiry; zero for none or logged out.
    public var sessionRemaining: Span
    public var queued: Int
    public var subscription: SubscriptionID
}

/// Why a request was cancelled. Raw values are `tg_cancel_reason`.
public enum CancelReason: Int32, Sendable {
    case loginCancelled = 1
    case timedOut = 2
    case loggedOut = 3
}

/// What `require` did.
public enum RequireResult: Sendable {
    case runsNow
    case queued
    /// Merged into the queued request with the same coalesce key.
    case coalesced
}

/// The host's callbacks of one request: exactly one of `run` and `cancel`
/// runs at most once, then `release` exactly once.
public struct GateRequestHandlers: Sendable {
    public var run: @Sendable (UInt64) -> Void
    public var cancel: @Sendable (UInt64, CancelReason) -> Void
    public var release: @Sendable () -> Void

    public init(run: @escaping @Sendable (UInt64) -> Void,
                cancel: @escaping @Sendable (UInt64, CancelReason) -> Void = { _, _ in },
                release: @escaping @Sendable () -> Void = {}) {
        self.run = run
        self.cancel = cancel
        self.release = release
    }
}

/// One realm's session and queue.
struct Gate {
    var loggedIn = false
    var expiry: Instant?
    var expiryTimer: Int32?
    /// Requests waiting for login, in the order they were required.
    var queue: [UInt64] = []
    /// The login screen was asked for and the host has not answered yet.
    var presenting = false
    var requestTimeout = Span.milliseconds(300_000)

    func isLive(at now: Instant) -> Bool {
        loggedIn && (expiry.map { $0 > now } ?? true)
    }
}

struct GateRequest {
    enum Phase {
        case queued
        /// Its action is queued for delivery.
        case ready
        /// Its cancel callback is queued for delivery.
        case cancelling
    }

    var realm: KeyName
    var needsLogin: Bool
    var coalesceKey: String?
    var handlers: GateRequestHandlers
    var phase: Phase
    var timeoutTimer: Int32?
}

/// What a gate timer is for.
enum GateTimer {
    case session(KeyName)
    case request(UInt64)
}
