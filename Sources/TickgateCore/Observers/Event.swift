/// What happened to a key, as observers see it.
public enum EventKind: Int32, Sendable {
    /// The key's state when the subscription began.
    case state = 1
    case started = 2
    case tick = 3
    case finished = 4
    case cancelled = 5
    /// A send ticket was granted.
    case sending = 6
    /// A send failed, or its ticket expired or was cancelled.
    case sendFailed = 7
    /// `verified` reset the key.
    case reset = 8
    /// The key's code took the policy's maximum of wrong codes.
    case codeDead = 9
    /// The shared store went out of reach: what the subscription shows may
    /// be stale until `storeBack` (a scope's subscription gets it once,
    /// with an empty subject).
    case storeLost = 10
    /// The shared store answers again; the key was read again, and any
    /// change made meanwhile came as its own event before this one.
    case storeBack = 11
}

/// One event for one subscription.
public struct Event: Sendable {
    // Declared in this order to pack: a mass expiry queues a million.
    public var scope: KeyName
    /// The subject, kept inline when short: a timer that fires makes no
    /// string for it.
    public var subject: EventSubject
    public var kind: EventKind
    /// The key's button state after the event, and its rendered title.
    public var state: ButtonState
    /// Made while the store was unreachable, in this engine only (a send
    /// granted "fail open"; TG_EVENT_FLAG_LOCAL_ONLY).
    public var localOnly = false
    public var title: String
    /// Time left on the countdown; zero when idle, finished or cancelled.
    public var remaining: Span
    /// The length the countdown was started with; zero when idle.
    public var duration: Span
    public var subscription: SubscriptionID

    public var key: CountdownKey { CountdownKey(scope: scope, subject: subject.name) }

    /// Calls `body` with the scope, the subject and the title as
    /// NUL-terminated C strings, valid for the call (one call, no generic
    /// closures across modules: a mass expiry delivers a million).
    public func withCStrings(_ body: (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafePointer<CChar>) -> Void) {
        scope.value.withCString { scope in
            subject.withCString { subject in
                title.withCString { title in body(scope, subject, title) }
            }
        }
    }

    public init(kind: EventKind, key: CountdownKey, remaining: Span, duration: Span,
                subscription: SubscriptionID, state: ButtonState, title: String) {
        self.init(kind: kind, scope: key.scope, subject: EventSubject(key.subject),
                  remaining: remaining, duration: duration, subscription: subscription,
                  state: state, title: title)
    }

    init(kind: EventKind, scope: KeyName, subject: EventSubject, remaining: Span, duration: Span,
         subscription: SubscriptionID, state: ButtonState, title: String) {
        self.kind = kind
        self.scope = scope
        self.subject = subject
        self.remaining = remaining
        self.duration = duration
        self.subscription = subscription
        self.state = state
        self.title = title
    }
}

/// A subject as an event carries it: up to 23 bytes inline (no allocation,
/// nothing to retain), a longer one as its name.
public struct EventSubject: Sendable {
    private enum Storage {
        /// The bytes in the first 23 of 24, the count in the last.
        case inline(UInt64, UInt64, UInt64)
        case name(KeyName)
    }

    private var storage: Storage

    static let inlineCapacity = 23

    /// Bytes that passed validation.
    init(validated source: UnsafeRawBufferPointer) {
        guard source.count <= Self.inlineCapacity, !source.isEmpty else {
            storage = .name(KeyName(validated: source))
            return
        }
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            raw.copyMemory(from: source)
            raw[Self.inlineCapacity] = UInt8(source.count)
        }
        storage = .inline(words.0, words.1, words.2)
    }

    init(_ name: KeyName) { storage = .name(name) }

    /// The subject as a name.
    public var name: KeyName {
        switch storage {
        case .name(let name): name
        case .inline: withBytes { KeyName(validated: $0) }
        }
    }

    /// Calls `body` with the subject's bytes.
    public func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        withCString { text in
            switch storage {
            case .name(let name): name.withBytes(body)
            case .inline(_, _, let last):
                body(UnsafeRawBufferPointer(start: text, count: Int(last >> 56)))
            }
        }
    }

    /// Calls `body` with the subject as a NUL-terminated C string.
    public func withCString<T>(_ body: (UnsafePointer<CChar>) -> T) -> T {
        switch storage {
        case .name(let name):
            return name.value.withCString(body)
        case .inline(let a, let b, let c):
            var words: (UInt64, UInt64, UInt64, UInt64) = (a, b, c, 0)
            return withUnsafeMutableBytes(of: &words) { raw in
                raw[Int(c >> 56)] = 0
                return body(raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
        }
    }
}
/// The id of a subscription: unique within an engine, never reused.
public typealias SubscriptionID = UInt64

/// What a subscription watches.
public enum SubscriptionTarget: Sendable {
    case key(CountdownKey)
    case scope(KeyName)
    /// A login gate's realm.
    case realm(KeyName)
    /// The decision records of a guarded scope's sends (`GuardRecord`).
    case records(KeyName)
    /// What became of a guarded scope's codes (`GuardRecord.outcome`:
    /// Pumping/CodeOutcomes.swift), and its passed challenges.
    case outcomes(KeyName)
}

/// An observer: `deliver` runs for each event (on the engine thread or in
/// `dispatch()`), `release` runs exactly once when the subscription ends.
/// A class, so that queuing and delivering an event copies one reference,
/// not three closures.
public final class Observer: Sendable {
    public let deliver: @Sendable (Event) -> Void
    /// Receives the events of a realm subscription.
    public let deliverGate: @Sendable (GateEvent) -> Void
    /// Receives the decision records of a records subscription.
    public let deliverRecord: @Sendable (GuardRecord) -> Void
    public let release: @Sendable () -> Void

    public init(deliver: @escaping @Sendable (Event) -> Void = { _ in },
                deliverGate: @escaping @Sendable (GateEvent) -> Void = { _ in },
                deliverRecord: @escaping @Sendable (GuardRecord) -> Void = { _ in },
                release: @escaping @Sendable () -> Void = {}) {
        self.deliver = deliver
        self.deliverGate = deliverGate
        self.deliverRecord = deliverRecord
        self.release = release
    }
}

/// One running countdown, as `Engine.list` reports it.
public struct CountdownInfo: Sendable {
    public var key: CountdownKey
    public var remaining: Span
    public var duration: Span
}
