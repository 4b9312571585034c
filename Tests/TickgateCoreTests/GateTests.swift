import Testing
@testable import TickgateCore

/// Records what a gate did with its requests, in order.
final class GateLog: Sendable {
    let lines = LockedValue<[String]>([])

    func add(_ line: String) { lines.withLock { $0.append(line) } }

    func take() -> [String] {
        lines.withLock { lines in
            defer { lines.removeAll() }
            return lines
        }
    }

    func handlers(_ name: String) -> GateRequestHandlers {
        GateRequestHandlers(run: { _ in self.add("run \(name)") },
                            cancel: { _, reason in self.add("cancel \(name) \(reason)") },
                            release: { self.add("release \(name)") })
    }

    var observer: Observer {
        Observer(deliverGate: { event in self.add("event \(event.kind) queued=\(event.queued)") })
    }
}

@Suite struct GateTests {
    let realm = try! KeyName("account")

    func engine() throws -> Engine {
        try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
    }

    @Test func actionsWaitForLoginAndRunOnceInOrder() throws {
        let engine = try engine()
        defer { engine.close() }
        let log = GateLog()
        _ = try engine.subscribe(.realm(realm), log.observer)
        #expect(try engine.require(realm: realm, needsLogin: true, log.handlers("a")).result == .queued)
        #expect(try engine.require(realm: realm, needsLogin: true, log.handlers("b")).result == .queued)
        _ = try engine.dispatch()
        #expect(log.take() == ["event state queued=0", "event loginRequired queued=1",
                               "event queueChanged queued=1", "event queueChanged queued=2"])
        try engine.loginSucceeded(realm: realm, sessionTTL: nil)
        try engine.loginSucceeded(realm: realm, sessionTTL: nil)
        _ = try engine.dispatch()
        #expect(log.take() == ["event loggedIn queued=0", "run a", "release a", "run b", "release b",
                               "event queueChanged queued=0", "event loggedIn queued=0"])
    }

    @Test func cancelRunsEveryCancelOnceAndCoalescingMerges() throws {
        let engine = try engine()
        defer { engine.close() }
        let log = GateLog()
        let key = try KeyName("tab")
        let first = try engine.require(realm: realm, needsLogin: true, coalesceKey: key, log.handlers("a"))
        let second = try engine.require(realm: realm, needsLogin: true, coalesceKey: key, log.handlers("b"))
        #expect(second.result == .coalesced && second.request == first.request)
        #expect(log.take() == ["release b"])
        try engine.loginCancelled(realm: realm)
        try engine.loginCancelled(realm: realm)
        _ = try engine.dispatch()
        #expect(log.take() == ["cancel a loginCancelled", "release a"])
    }

    @Test func sessionsExpireAndRequestsTimeOut() throws {
        let engine = try engine()
        defer { engine.close() }
        let log = GateLog()
        try engine.setRequestTimeout(realm: realm, .milliseconds(10_000))
        try engine.loginSucceeded(realm: realm, sessionTTL: .milliseconds(5_000))
        #expect(try engine.session(realm: realm) == (true, .milliseconds(5_000)))
        try engine.advance(by: .milliseconds(5_000))
        _ = try engine.dispatch()
        #expect(try engine.session(realm: realm).loggedIn == false)
        _ = try engine.require(realm: realm, needsLogin: true, log.handlers("a"))
        try engine.advance(by: .milliseconds(10_000))
        _ = try engine.dispatch()
        #expect(log.take() == ["cancel a timedOut", "release a"])
    }

    @Test func logoutCancelsGrantedActionsThatNeedLogin() throws {
        let engine = try engine()
        defer { engine.close() }
        let log = GateLog()
        try engine.loginSucceeded(realm: realm, sessionTTL: nil)
        _ = try engine.require(realm: realm, needsLogin: true, log.handlers("a"))
        _ = try engine.require(realm: realm, needsLogin: false, log.handlers("b"))
        try engine.logout(realm: realm)
        _ = try engine.dispatch()
        #expect(log.take() == ["run b", "release b", "cancel a loggedOut", "release a"])
    }

    @Test func withdrawAndCloseReleaseWithoutCallbacks() throws {
        let engine = try engine()
        let log = GateLog()
        let a = try engine.require(realm: realm, needsLogin: true, log.handlers("a"))
        _ = try engine.require(realm: realm, needsLogin: true, log.handlers("b"))
        try engine.withdraw(a.request)
        #expect(throws: TickgateError.self) { try engine.withdraw(a.request) }
        #expect(log.take() == ["release a"])
        engine.close()
        #expect(log.take() == ["release b"])
    }
}
