import Synchronization
import Testing
@testable import TickgateCore

/// Collects events delivered to an observer.
final class Recorder: Sendable {
    let events = LockedValue<[Event]>([])
    let releases = Atomic<Int>(0)

    var observer: Observer {
        Observer(deliver: { event in self.events.withLock { $0.append(event) } },
                 release: { self.releases.add(1, ordering: .relaxed) })
    }

    func take() -> [(EventKind, Int64)] {
        events.withLock { events in
            defer { events.removeAll() }
            return events.map { ($0.kind, $0.remaining.millisecondsRoundedUp) }
        }
    }
}

@Suite struct EngineTests {
    let key = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("+8613800000000"))

    func manualEngine() throws -> Engine {
        try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
    }

    func step(_ engine: Engine, _ ms: Int64) throws {
        try engine.advance(by: .milliseconds(ms))
        _ = try engine.dispatch()
    }

    @Test func countsDownTicksAndFinishesAtTheDeadline() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(key), recorder.observer)
        try engine.start(key, duration: .milliseconds(3_000))
        _ = try engine.dispatch()
        #expect(recorder.take().map(\.0) == [.state, .started])
        try step(engine, 1_000)
        try step(engine, 999)
        #expect(recorder.take().map(\.1) == [2_000])
        try step(engine, 1)
        try step(engine, 1_000)
        #expect(recorder.take().map(\.0) == [.tick, .finished])
        #expect(throws: TickgateError.self) { try engine.remaining(key) }
    }

    @Test func aLongSleepGivesOneCatchUpTick() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(key), recorder.observer)
        try engine.start(key, duration: .milliseconds(60_000))
        _ = try engine.dispatch()
        _ = recorder.take()
        try step(engine, 10_500)
        let events = recorder.take()
        #expect(events.count == 1)
        #expect(events.first?.1 == 49_500)
        try step(engine, 100_000)
        #expect(recorder.take().map(\.0) == [.finished])
    }

    @Test func cancelledRunsDeliverNoQueuedTicks() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(key), recorder.observer)
        try engine.start(key, duration: .milliseconds(5_000))
        _ = try engine.dispatch()
        _ = recorder.take()
        try engine.advance(by: .milliseconds(1_000))
        // The tick is due but not yet dispatched: the cancel drops it.
        try engine.cancel(key)
        _ = try engine.dispatch()
        #expect(recorder.take().map(\.0) == [.cancelled])
    }

    @Test func aRunPastItsDeadlineHasFinishedAndCannotBeCancelled() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        let recorder = Recorder()
        _ = try engine.subscribe(.key(key), recorder.observer)
        try engine.start(key, duration: .milliseconds(5_000))
        try engine.advance(by: .milliseconds(5_000))
        #expect(throws: TickgateError.self) { try engine.cancel(key) }
        _ = try engine.dispatch()
        #expect(recorder.take().map(\.0) == [.state, .started, .finished])
    }

    @Test func namesCompareAsBytes() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        let composed = CountdownKey(scope: try KeyName("login"), subject: try KeyName("jos\u{E9}"))
        let decomposed = CountdownKey(scope: try KeyName("login"), subject: try KeyName("jose\u{301}"))
        #expect(composed != decomposed)
        try engine.start(composed, duration: .milliseconds(5_000))
        try engine.start(decomposed, duration: .milliseconds(7_000))
        #expect(try engine.list().count == 2)
    }

    @Test func coolingDownReportsTheRemainingTime() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        try engine.start(key, duration: .milliseconds(60_000))
        try engine.advance(by: .milliseconds(18_000))
        do throws(TickgateError) {
            try engine.start(key, duration: .milliseconds(60_000))
            Issue.record("a second start must fail")
        } catch {
            #expect(error.status == .coolingDown)
            #expect(error.remaining == .milliseconds(42_000))
        }
        try engine.start(key, duration: .milliseconds(10_000), restart: true)
        #expect(try engine.remaining(key) == .milliseconds(10_000))
    }

    @Test func unobservedCountdownsDoNotWakePerTick() throws {
        let engine = try manualEngine()
        defer { engine.close() }
        try engine.start(key, duration: .milliseconds(60_000))
        // Only the deadline has a timer: nothing is due after 30 s.
        try engine.advance(by: .milliseconds(30_000))
        #expect(try engine.dispatch() == 0)
        let earliest = engine.locked.withLock { state in state.wheel.earliest }
        #expect(earliest == Instant(nanoseconds: 60_000_000_000))
    }

    @Test func closeReleasesEverySubscriptionOnce() throws {
        let engine = try manualEngine()
        let recorder = Recorder()
        for _ in 0..<3 { _ = try engine.subscribe(.key(key), recorder.observer) }
        let id = try engine.subscribe(.scope(try KeyName("login")), recorder.observer)
        try engine.unsubscribe(id)
        #expect(recorder.releases.load(ordering: .relaxed) == 1)
        #expect(engine.close())
        #expect(recorder.releases.load(ordering: .relaxed) == 4)
        #expect(!engine.close())
        #expect(throws: TickgateError.self) { try engine.start(key, duration: .milliseconds(1)) }
    }
}
