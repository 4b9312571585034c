import Testing
@testable import TickgateCore

@Suite struct SendFlowTests {
    let key = CountdownKey(scope: try! KeyName("login"), subject: try! KeyName("+8613800000000"))

    func engine(_ policy: SendPolicy = SendPolicy()) throws -> Engine {
        let engine = try Engine(options: EngineOptions(delivery: .hostThread, clock: .manual))
        try engine.setPolicy(policy, scope: try KeyName("login"))
        return engine
    }

    func status(_ body: () throws -> Void) -> Status? {
        do {
            try body()
            return .ok
        } catch let error as TickgateError {
            return error.status
        } catch {
            return nil
        }
    }

    @Test func successStartsTheCooldownAndFailureDoesNot() throws {
        let engine = try engine()
        defer { engine.close() }
        let first = try engine.sendBegin(key)
        #expect(try engine.button(key).state == .sending)
        #expect(status { _ = try engine.sendBegin(key) } == .inFlight)
        #expect(try engine.sendEnd(first, .failed) == .zero)
        #expect(try engine.button(key).state == .idle)
        let second = try engine.sendBegin(key)
        #expect(try engine.sendEnd(second, .succeeded) == .milliseconds(60_000))
        #expect(try engine.button(key).state == .cooling)
        #expect(status { _ = try engine.sendEnd(second, .succeeded) } == .notFound)
        try engine.advance(by: .milliseconds(60_000))
        _ = try engine.dispatch()
        #expect(try engine.button(key).state == .readyAgain)
    }

    @Test func scheduleEscalatesAndQuietPeriodResetsIt() throws {
        let engine = try engine(SendPolicy(
            cooldowns: [.milliseconds(60_000), .milliseconds(120_000), .milliseconds(300_000)],
            quietReset: .milliseconds(3_600_000)))
        defer { engine.close() }
        var lengths: [Int64] = []
        for _ in 0..<4 {
            let ticket = try engine.sendBegin(key)
            lengths.append(try engine.sendEnd(ticket, .succeeded).millisecondsRoundedUp)
            try engine.advance(by: .milliseconds(300_000))
            _ = try engine.dispatch()
        }
        #expect(lengths == [60_000, 120_000, 300_000, 300_000])
        try engine.advance(by: .milliseconds(3_600_000))
        let ticket = try engine.sendBegin(key)
        #expect(try engine.sendEnd(ticket, .succeeded) == .milliseconds(60_000))
    }

    @Test func windowCapLocksUntilTheOldestSendLeaves() throws {
        let engine = try engine(SendPolicy(cooldowns: [.milliseconds(1_000)],
                                           windowMaximumSends: 2, window: .milliseconds(600_000)))
        defer { engine.close() }
        _ = try engine.sendEnd(try engine.sendBegin(key), .succeeded)
        try engine.advance(by: .milliseconds(10_000))
        let length = try engine.sendEnd(try engine.sendBegin(key), .succeeded)
        #expect(length == .milliseconds(590_000))
        #expect(try engine.button(key).state == .locked)
        #expect(status { _ = try engine.sendBegin(key) } == .locked)
        try engine.advance(by: .milliseconds(590_000))
        _ = try engine.dispatch()
        #expect(try engine.button(key).state == .readyAgain)
        _ = try engine.sendBegin(key)
    }

    @Test func serverRetryAfterWinsWhenLonger() throws {
        let engine = try engine()
        defer { engine.close() }
        #expect(try engine.sendEnd(try engine.sendBegin(key), .succeeded,
                                   serverRetryAfter: .milliseconds(90_000)) == .milliseconds(90_000))
        try engine.verified(key)
        #expect(try engine.sendEnd(try engine.sendBegin(key), .succeeded,
                                   serverRetryAfter: .milliseconds(5_000)) == .milliseconds(60_000))
    }

    @Test func ticketsExpireAndFreeTheKey() throws {
        let engine = try engine(SendPolicy(ticketTimeout: .milliseconds(30_000)))
        defer { engine.close() }
        let ticket = try engine.sendBegin(key)
        try engine.advance(by: .milliseconds(30_000))
        _ = try engine.dispatch()
        #expect(try engine.button(key).state == .idle)
        #expect(status { _ = try engine.sendEnd(ticket, .succeeded) } == .expired)
        _ = try engine.sendBegin(key)
    }

    @Test func verifiedResetsEscalationAndCancelsTheCooldown() throws {
        let engine = try engine(SendPolicy(cooldowns: [.milliseconds(60_000), .milliseconds(120_000)]))
        defer { engine.close() }
        _ = try engine.sendEnd(try engine.sendBegin(key), .succeeded)
        try engine.verified(key)
        #expect(try engine.button(key).state == .idle)
        #expect(try engine.sendEnd(try engine.sendBegin(key), .succeeded) == .milliseconds(60_000))
    }

    @Test func anEndedTicketSaysHowItEndedUntil4096MoreHaveEnded() throws {
        let engine = try engine()
        defer { engine.close() }
        let first = try engine.sendBegin(key)
        _ = try engine.sendEnd(first, .failed)
        // A second end of it keeps the first: still "failed".
        #expect(throws: TickgateError.self) { try engine.sendEnd(first, .succeeded) }
        func message(_ ticket: UInt64) -> String {
            do {
                _ = try engine.sendEnd(ticket, .succeeded)
                return "ended"
            } catch {
                return error.message
            }
        }
        #expect(message(first).contains("was already ended: it failed"))
        for _ in 0..<EndedTickets.capacity - 1 { _ = try engine.sendEnd(try engine.sendBegin(key), .failed) }
        #expect(message(first).contains("was already ended: it failed"))
        let last = try engine.sendBegin(key)
        _ = try engine.sendEnd(last, .succeeded)
        #expect(message(first) == "no send ticket \(first)")
        #expect(message(last).contains("was already ended: it succeeded"))
    }

    @Test func policiesAreValidated() {
        #expect(throws: TickgateError.self) { try SendPolicy(cooldowns: []).validated() }
        #expect(throws: TickgateError.self) { try SendPolicy(cooldowns: [.zero]).validated() }
        #expect(throws: TickgateError.self) {
            try SendPolicy(windowMaximumSends: 3, window: .zero).validated()
        }
        #expect(throws: TickgateError.self) { try SendPolicy(ticketTimeout: .zero).validated() }
    }
}
