import CTickgateShim
import TickgateCore

// The login gate: requests, sessions and realm observers.

/// A request's C callbacks and user_data.
private struct CRequest: @unchecked Sendable {
    let action: tg_action_fn
    let cancel: tg_cancel_fn?
    let userData: UnsafeMutableRawPointer?
    let destroy: tg_destroy_fn?

    var handlers: GateRequestHandlers {
        GateRequestHandlers(
            run: { id in action(id, userData) },
            cancel: { id, reason in
                cancel?(id, tg_cancel_reason(rawValue: UInt32(bitPattern: reason.rawValue)), userData)
            },
            release: { destroy?(userData) })
    }
}

/// A realm observer's C callback and user_data.
private struct CGateObserver: @unchecked Sendable {
    let callback: tg_gate_event_fn
    let userData: UnsafeMutableRawPointer?
    let destroy: tg_destroy_fn?

    func deliver(_ event: GateEvent) {
        event.realm.withCString { realm in
            var raw = tg_gate_event(
                struct_size: UInt32(MemoryLayout<tg_gate_event>.size),
                kind: tg_gate_event_kind(rawValue: UInt32(bitPattern: event.kind.rawValue)),
                realm: realm, logged_in: event.loggedIn ? 1 : 0,
                session_remaining_ms: event.sessionRemaining.millisecondsRoundedUp,
                queued: event.queued, subscription: event.subscription)
            callback(&raw, userData)
        }
    }

    func release() { destroy?(userData) }
}

@c @implementation
public func tg_gate_require(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?,
                            _ needs_login: Int32, _ coalesce_key: UnsafePointer<CChar>?,
                            _ action: tg_action_fn?, _ cancel: tg_cancel_fn?,
                            _ user_data: UnsafeMutableRawPointer?, _ destroy: tg_destroy_fn?,
                            _ out_request: UnsafeMutablePointer<UInt64>?,
                            _ out_result: UnsafeMutablePointer<tg_require_result>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let realm = try Boundary.name(realm, "realm")
        let key = try coalesce_key.map { (text) throws(TickgateError) in
            try Boundary.name(text, "coalesce_key")
        }
        let action = try Boundary.required(action, "action")
        let out = try Boundary.required(out_request, "out_request")
        let request = CRequest(action: action, cancel: cancel, userData: user_data, destroy: destroy)
        let (id, result) = try engine.require(realm: realm, needsLogin: needs_login != 0,
                                              coalesceKey: key, request.handlers)
        out.pointee = id
        switch result {
        case .runsNow: out_result?.pointee = TG_REQUIRE_RUNS_NOW
        case .queued: out_result?.pointee = TG_REQUIRE_QUEUED
        case .coalesced: out_result?.pointee = TG_REQUIRE_COALESCED
        }
    }
}

@c @implementation
public func tg_gate_withdraw(_ engine: OpaquePointer?, _ request: UInt64) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.withdraw(request)
    }
}

@c @implementation
public func tg_gate_login_succeeded(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?,
                                    _ session_ttl_ms: Int64) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let realm = try Boundary.name(realm, "realm")
        guard session_ttl_ms >= 0, session_ttl_ms <= Boundary.maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "session TTL \(session_ttl_ms) ms is outside 0 ... \(Boundary.maximumDurationMilliseconds) ms")
        }
        try engine.loginSucceeded(realm: realm,
                                  sessionTTL: session_ttl_ms == 0 ? nil : .milliseconds(session_ttl_ms))
    }
}

@c @implementation
public func tg_gate_login_cancelled(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.loginCancelled(realm: try Boundary.name(realm, "realm"))
    }
}

@c @implementation
public func tg_gate_logout(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        try engine.logout(realm: try Boundary.name(realm, "realm"))
    }
}

@c @implementation
public func tg_gate_session(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?,
                            _ out_logged_in: UnsafeMutablePointer<Int32>?,
                            _ out_remaining_ms: UnsafeMutablePointer<Int64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let session = try engine.session(realm: try Boundary.name(realm, "realm"))
        out_logged_in?.pointee = session.loggedIn ? 1 : 0
        out_remaining_ms?.pointee = session.remaining.millisecondsRoundedUp
    }
}

@c @implementation
public func tg_gate_set_request_timeout(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?,
                                        _ timeout_ms: Int64) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let realm = try Boundary.name(realm, "realm")
        guard timeout_ms >= 1, timeout_ms <= Boundary.maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "request timeout \(timeout_ms) ms is outside 1 ... \(Boundary.maximumDurationMilliseconds) ms")
        }
        try engine.setRequestTimeout(realm: realm, .milliseconds(timeout_ms))
    }
}

@c @implementation
public func tg_gate_subscribe(_ engine: OpaquePointer?, _ realm: UnsafePointer<CChar>?,
                              _ callback: tg_gate_event_fn?, _ user_data: UnsafeMutableRawPointer?,
                              _ destroy: tg_destroy_fn?,
                              _ out_subscription: UnsafeMutablePointer<UInt64>?) -> tg_status {
    Boundary.call(engine) { (engine) throws(TickgateError) in
        let realm = try Boundary.name(realm, "realm")
        let callback = try Boundary.required(callback, "callback")
        let out = try Boundary.required(out_subscription, "out_subscription")
        let observer = CGateObserver(callback: callback, userData: user_data, destroy: destroy)
        out.pointee = try engine.subscribe(.realm(realm), Observer(
            deliverGate: { observer.deliver($0) }, release: { observer.release() }))
    }
}
