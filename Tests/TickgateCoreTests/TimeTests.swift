import Testing
@testable import TickgateCore

@Suite struct TimeTests {
    @Test func displaySecondsAreTheCeiling() {
        #expect(Span.milliseconds(60_000).displaySeconds == 60)
        #expect(Span.milliseconds(59_999).displaySeconds == 60)
        #expect(Span.milliseconds(59_000).displaySeconds == 59)
        #expect(Span(nanoseconds: 1).displaySeconds == 1)
        #expect(Span.zero.displaySeconds == 0)
        #expect(Span(nanoseconds: -5).displaySeconds == 0)
        #expect(Span(nanoseconds: 1).millisecondsRoundedUp == 1)
        #expect(Span(nanoseconds: 1_000_001).millisecondsRoundedUp == 2)
    }

    func countdown(duration: Int64, interval: Int64) -> Countdown {
        let key = CountdownKey(scope: try! KeyName("s"), subject: try! KeyName("k"))
        return Countdown(key: key, instance: 1, deadline: Instant(nanoseconds: 0).advanced(by: .milliseconds(duration)),
                         duration: .milliseconds(duration), tickInterval: .milliseconds(interval))
    }

    @Test func ticksFallOnDeadlineMinusWholeIntervals() {
        let c = countdown(duration: 2_500, interval: 1_000)
        func next(_ ms: Int64) -> Int64 {
            EngineState.nextFireTime(of: c, at: Instant(nanoseconds: ms * 1_000_000), observed: true)
                .nanoseconds / 1_000_000
        }
        #expect(next(0) == 500)      // 2500 -> shows 3 until 2000 left
        #expect(next(500) == 1_500)  // exactly on a boundary: the next one
        #expect(next(501) == 1_500)
        #expect(next(1_500) == 2_500)
        #expect(next(2_499) == 2_500)
    }

    @Test func unobservedCountdownsWaitForTheDeadlineOnly() {
        let c = countdown(duration: 60_000, interval: 1_000)
        #expect(EngineState.nextFireTime(of: c, at: Instant(nanoseconds: 0), observed: false)
            == c.deadline)
    }
}
