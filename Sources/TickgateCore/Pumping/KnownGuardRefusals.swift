/// Pumping refusals an engine on Redis makes without a round trip: a
/// guarded scope's country whose counts refused a send (a country signal
/// over its threshold) refuses the country's next sends here, until the
/// counts can have room again. They can only by a code given back or
/// verified, which the store announces (`StoreNotice.guardCounts`), by a
/// change of the guard (a settings notice), or when the oldest code
/// counted in a window leaves it (its deadline, from the store's read). A
/// flood of pumping sends then costs the store one read per country and
/// per engine until then, not one per send.
///
/// Kept by `LocalRefusals` (on when it is: Redis with its notices heard),
/// so that whatever drops every known refusal drops these too. The window
/// where one can be stale is that of `LocalRefusals`: a verification on
/// another engine whose notice has not arrived yet; it refuses, the safe
/// side.
struct KnownGuardRefusals {
    struct Spot: Hashable {
        var scope: KeyName
        var country: String
    }

    /// What the store's read showed of the country (its address parts
    /// were another client's), and until when it holds.
    struct Known {
        var counts: GuardCounts
        var judgment: GuardJudgment
        var until: Instant
    }

    private(set) var spots: [Spot: Known] = [:]
    /// Bumped by every drop: a read made across one is not kept.
    private(set) var epoch: UInt64 = 0

    /// At most this many countries are kept (past it, nothing new).
    static let capacity = 10_000

    /// The refusal known for a send to `spot`'s country, if it holds.
    mutating func refusal(_ spot: Spot, at now: Instant) -> Known? {
        guard !spots.isEmpty, let known = spots[spot] else { return nil }
        guard known.until > now else {
            spots[spot] = nil
            return nil
        }
        return known
    }

    /// Keeps a refusal by the country's counts of `read` (made while
    /// `epoch` was `mark`), from `now` (the engine's clock after the reply)
    /// until the oldest code counted in a window that refused leaves it.
    mutating func learn(_ spot: Spot, mark: UInt64, read: GuardReading, counts: GuardCounts,
                        judgment: GuardJudgment, unverifiedAfter: Span, at now: Instant) {
        guard mark == epoch, spots.count < Self.capacity, let serverNow = read.serverNow else { return }
        var leaves: [Int64] = []
        if judgment.warnings.contains(.unverifiedByCountryDaily), let oldest = read.oldestInDay {
            leaves.append(oldest + 86_400_000_000)
        }
        if judgment.warnings.contains(.unverifiedByCountryHourly), let oldest = read.oldestInHour {
            leaves.append(oldest + 3_600_000_000)
        }
        // The earliest a count that refused can go down (in the server's
        // µs), mapped onto this engine's clock from after the reply: never
        // early.
        guard let first = leaves.min() else { return }
        // (At most a day and an hour away; a server's odd clock no more.)
        let micros = min(first + unverifiedAfter.nanoseconds / 1_000 - serverNow, 2 * 86_400_000_000)
        guard micros > 0 else { return }
        var country = GuardCounts()
        country.countryUnverifiedDay = counts.countryUnverifiedDay
        country.countryUnverifiedHour = counts.countryUnverifiedHour
        country.countryVerifiedDay = counts.countryVerifiedDay
        country.countryVerifiedHour = counts.countryVerifiedHour
        country.countryVerifiedDailyMaximum = counts.countryVerifiedDailyMaximum
        var refused = GuardJudgment()
        refused.warnings = judgment.warnings.intersection([.unverifiedByCountryDaily, .unverifiedByCountryHourly])
        refused.countryDaily = judgment.countryDaily
        refused.countryHourly = judgment.countryHourly
        spots[spot] = Known(counts: country, judgment: refused,
                            until: now.advanced(by: Span(nanoseconds: micros * 1_000)))
    }

    /// A code went back or was verified (a notice, or this engine's own):
    /// every country's counts may have room.
    mutating func noticed() {
        epoch &+= 1
        spots.removeAll()
    }
}
