import Testing
@testable import TickgateCore

/// Memory's codes followed for their outcome (Pumping/CodeOutcomes.swift);
/// Tests/python/test_outcomes.py runs the same cases on SQLite and Redis.
@Suite struct FollowedCodesTests {
    let alice = try! KeyName("+8613800000001")
    let bob = try! KeyName("+8613800000002")
    let after = Span(nanoseconds: 120 * 1_000_000_000)

    func code(_ subject: KeyName, at seconds: Int64) -> ConversionLedger.Code {
        ConversionLedger.Code(subject: subject, country: "CN", address: nil,
                              sentAt: Instant(nanoseconds: seconds * 1_000_000_000), verified: false)
    }

    func at(_ seconds: Int64) -> Instant { Instant(nanoseconds: seconds * 1_000_000_000) }

    @Test func eachCodeHasOneOutcome() {
        var followed = FollowedCodes()
        #expect(followed.apply(.sent(code: "a1"), subject: alice, sent: code(alice, at: 0), latest: "a1",
                               at: at(0), unverifiedAfter: after).isEmpty)
        // A resend replaces it.
        let replaced = followed.apply(.sent(code: "a2"), subject: alice, sent: code(alice, at: 60), latest: "a2",
                                      at: at(60), unverifiedAfter: after)
        #expect(replaced.map(\.code) == ["a1"] && replaced.map(\.outcome) == [.replaced])
        #expect(replaced.first?.age == Span(nanoseconds: 60 * 1_000_000_000))
        let verified = followed.apply(.verified, subject: alice, sent: nil, latest: "a2", at: at(70),
                                      unverifiedAfter: after)
        #expect(verified.map(\.outcome) == [.verified])
        // Verified again: nothing more.
        #expect(followed.apply(.verified, subject: alice, sent: nil, latest: nil, at: at(71),
                               unverifiedAfter: after).isEmpty)
        #expect(followed.isEmpty)
    }

    @Test func aVerificationOfANewerCodeReplacesTheFollowedOne() {
        var followed = FollowedCodes()
        _ = followed.apply(.sent(code: "b1"), subject: bob, sent: code(bob, at: 0), latest: "b1", at: at(0),
                           unverifiedAfter: after)
        // b2 was sent while no one listened: the ledger's last code is b2.
        let decided = followed.apply(.verified, subject: bob, sent: nil, latest: "b2", at: at(30),
                                     unverifiedAfter: after)
        #expect(decided.map(\.outcome) == [.replaced])
    }

    @Test func theSweepReportsDueCodesOnceAndOnlyWhenAsked() {
        var followed = FollowedCodes()
        _ = followed.apply(.sent(code: "a1"), subject: alice, sent: code(alice, at: 0), latest: "a1", at: at(0),
                           unverifiedAfter: after)
        _ = followed.apply(.sent(code: "b1"), subject: bob, sent: code(bob, at: 100), latest: "b1", at: at(100),
                           unverifiedAfter: after)
        #expect(followed.apply(.sweep, subject: alice, sent: nil, latest: nil, at: at(119),
                               unverifiedAfter: after).isEmpty)
        #expect(followed.apply(.sweep, subject: alice, sent: nil, latest: nil, at: at(200), unverifiedAfter: after,
                               sweep: false).isEmpty)
        let due = followed.apply(.sweep, subject: alice, sent: nil, latest: nil, at: at(200), unverifiedAfter: after)
        #expect(due.map(\.code) == ["a1"] && due.map(\.outcome) == [.neverVerified])
        let later = followed.apply(.sweep, subject: alice, sent: nil, latest: nil, at: at(300), unverifiedAfter: after)
        #expect(later.map(\.code) == ["b1"])
        #expect(followed.isEmpty)
    }
}
