import CTickgateShim
import TickgateCore

// Subscribing C callbacks to keys and scopes.

/// A C callback, its user_data and its destructor. The engine may call it
/// from its own thread; C promises nothing about Sendable, the header's
/// threading contract does.
private struct CObserver: @unchecked Sendable {
    let callback: tg_event_fn
    let userData: UnsafeMutableRawPointer?
    let destroy: tg_destroy_fn?

    func deliver(_ event: Event) {
        event.withCStrings { scope, subject, title in
            var raw = tg_event(
                struct_size: UInt32(MemoryLayout<tg_event>.size),
                kind: tg_event_kind(rawValue: UInt32(bitPattern: event.kind.rawValue)),
                scope: scope, subject: subject,
                remaining_ms: event.remaining.millisecondsRoundedUp,
                display_seconds: event.remaining.displaySeconds,
                duration_ms: event.duration.millisecondsRoundedUp,
                subscription: event.subscription,
                state: tg_button_state(rawValue: UInt32(bitPattern: event.state.rawValue)),
                enabled: event.state.isEnabled ? 1 : 0,
                title: title,
                flags: event.localOnly ? TG_EVENT_FLAG_LOCAL_ONLY : 0)
            callback(&raw, userData)
        }
    }

    func release() { destroy?(userData) }
}

@c @implementation
public func tg_subscribe(_ engine: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                         _ subject: UnsafePointer<CChar>?, _ callback: tg_event_fn?,
                         _ user_data: UnsafeMutableRawPointer?, _ destroy: tg_destroy_fn?,
                         _ out_subscription: UnsafeMutablePointer<UInt64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let scopeName = try Boundary.name(scope, "scope")
        let target: SubscriptionTarget = subject == nil
            ? .scope(scopeName)
            : .key(CountdownKey(scope: scopeName, subject: try Boundary.name(subject, "subject")))
        let callback = try Boundary.required(callback, "callback")
        let out = try Boundary.required(out_subscription, "out_subscription")
        let observer = CObserver(callback: callback, userData: user_data, destroy: destroy)
        out.pointee = try engine.subscribe(target, Observer(
            deliver: { observer.deliver($0) }, release: { observer.release() }))
    }
}

@c @implementation
public func tg_unsubscribe(_ engine: OpaquePointer?, _ subscription: UInt64) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.unsubscribe(subscription)
    }
}
