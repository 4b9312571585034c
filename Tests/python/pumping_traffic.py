"""SMS traffic for the pumping simulation (test_pumping_simulation.py).

Each scenario replays days of sends and verifications through the real
engine (memory store, manual clock, host-thread delivery) in about a second
of real time, deterministically (every draw comes from generators seeded
with the size's and the scenario's names). Fourteen normal days build the
country's history, with the guard in record-only mode as a rollout starts
(docs/pumping.md); then the guard is set to the mode under
test and the scenario's day plays, hour by hour. The users of the first
twelve days send without an address: no signal looks at an address's codes
a day old, so the day's counts are the same, and the run takes less time.

Beside the engine runs `Ledger`: the anchor's formulas (Authgear's
fraud-protection spec, docs/specs/fraud-protection.md in
authgear/authgear-server at commit 020e7893cb, 2026-04-24, the version
Tickgate's defaults follow) applied to the traffic's own ground truth. Every
decision record must carry the counts, thresholds and warnings the ledger
computed before that send, so a refusal is either what the formulas say or
a bug of the engine, and the simulation tells which.

The traffic:

- Legitimate users arrive as a Poisson process whose rate follows
  DIURNAL_WEIGHTS (the peak hour, 19:00 to 20:00, carries 19 % of the
  day, as the anchor's "~1k/day, peak hour ~200"). Each has a number of
  the country and an address from a pool; 87 % type the code 10 s to a few
  minutes after it was sent, 3 % ask again after the cooldown and type the
  second code, 10 % never type it: 90 % of users verify.
- Attackers ask codes for numbers of one range they are paid for and never
  verify, at the rates of the anchor's scenarios (ATTACKS).
- QA sends codes to test numbers matching a pattern, and staff on an office
  network ask codes for numbers of many countries: both on the guard's
  always-allow lists, riding on the normal day.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

import tickgate

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
SCOPE = "login"
HISTORY_DAYS = 14
W = tickgate.PumpingWarning

# The share of a day's users in each hour (UTC): quiet at night, a working
# day's plateau and an evening peak (19:00 to 20:00) of 19 %.
DIURNAL_WEIGHTS = (1.0, 1.0, 0.5, 0.5, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0,
                   6.0, 5.0, 4.0, 4.0, 5.0, 7.0, 10.0, 20.0, 8.0, 3.0, 2.0, 2.0)
PEAK_HOUR = DIURNAL_WEIGHTS.index(max(DIURNAL_WEIGHTS))
LAUNCH_HOUR = 9

# What a legitimate user does with a code.
P_ABANDON = 0.10  # never types it
P_RESEND = 0.03  # asks again after the cooldown, then types the second code
VERIFY_MIN_MS, VERIFY_MEAN_MS, VERIFY_MAX_MS = 10 * SECOND, 50 * SECOND, 10 * MINUTE
# A code counts as unverified this long after its send (the guard's default
# unverified_after_seconds; the anchor counts it from its send).
UNVERIFIED_AFTER = 120 * SECOND
RESEND_AFTER_MS = (70 * SECOND, 180 * SECOND)  # the policy's cooldown is 60 s
# Who passes a challenge (tickgate.ChallengeRequired) when the guard asks
# one: people nearly always, bots nearly never.
P_PASS = {"legit": 0.95, "attack": 0.02}
# The guard's settings that answer every country and range signal with a
# challenge instead of a refusal (the address signals keep refusing), with
# the country's hourly minimum at 4, not the anchor's 3: with ranges on, the
# country is the last resort, and at ~20 a day 3 an hour is crossed by chance
# at a busy hour (docs/pumping.md, "Number ranges").
CHALLENGES = dict(
    range_signals=1,
    challenge_signals=W.UNVERIFIED_BY_COUNTRY_DAILY | W.UNVERIFIED_BY_COUNTRY_HOURLY
    | W.UNVERIFIED_BY_RANGE_DAILY | W.UNVERIFIED_BY_RANGE_HOURLY,
    country_hourly_minimum=4,
)
ANCHOR_HOURLY_MINIMUM = 3
RANGE_WARNINGS = W.UNVERIFIED_BY_RANGE_DAILY | W.UNVERIFIED_BY_RANGE_HOURLY


@dataclass(frozen=True)
class Size:
    """One country's traffic: about `per_day` codes on a normal day."""

    key: str
    label: str
    country: str
    legit_prefix: str  # + random digits: the users' numbers
    legit_digits: int
    attack_prefix: str  # + sequential digits: the range the attackers are paid for
    attack_digits: int
    per_day: float
    address_pool: int  # the users' addresses
    launch_users: int  # users in the first hour of a launch
    qa_pattern: str  # on always_allow_numbers
    qa_prefix: str
    # The attack over 50 ranges: numbers spread_prefix + 2 digits (from
    # spread_first on, one pair per range) + "00" + spread_digits digits,
    # in the users' own 2-digit range, outside their 4-digit ones.
    spread_prefix: str = ""
    spread_first: int = 0
    spread_digits: int = 0


# "+44740" and "+9477" hold only GB and LK numbers ("+4474576" is the Isle
# of Man's); "+447520" and "+9476" are the ranges attacked.
SIZE_1K = Size("1k", "~1 000 SMS a day (GB)", "GB", "+44740", 7, "+447520", 6, 1000.0, 3000, 333,
               "+447700900*", "+447700900", "+4474", 10, 4)
SIZE_20 = Size("20", "~20 SMS a day (LK)", "LK", "+9477", 7, "+9476", 7, 20.0, 60, 11,
               "+94719990*", "+94719990", "+9477", 50, 3)
SIZES = (SIZE_1K, SIZE_20)

# Numbers of 20 countries, for the attack from one address.
MANY_COUNTRIES: Tuple[Tuple[str, str, int], ...] = (
    ("GB", "+447520", 6), ("LK", "+9476", 7), ("BD", "+88017", 8), ("NG", "+234803", 7), ("PK", "+92300", 7),
    ("EG", "+20100", 7), ("ID", "+62812", 8), ("UZ", "+99890", 7), ("TM", "+99365", 6), ("SY", "+96394", 7),
    ("TN", "+2162", 7), ("DZ", "+21355", 7), ("AZ", "+99450", 7), ("IR", "+98912", 7), ("OM", "+9689", 7),
    ("TJ", "+99291", 7), ("UA", "+38050", 7), ("KZ", "+7701", 7), ("JM", "+1876", 7), ("RU", "+7916", 7),
)

OFFICE_CIDR = "203.0.113.0/24"
OFFICE_PREFIX = "203.0.113."
OFFICE_COUNTRIES = ("GB", "LK", "BD", "NG", "PK", "EG", "ID", "UA", "KZ", "JM")
QA_CODES, OFFICE_CODES = 200, 100


@dataclass(frozen=True)
class Attack:
    """`count` codes asked by attackers at `per_hour` from `start_hour`.

    addresses: "botnet" (each request from one of 25, at random),
    "rotating" (a new address for every request) or "one" (one address
    asking numbers of 20 countries, the attacked one first).
    ranges: 1 (numbers of the size's attack_prefix), or 50 (the size's
    spread ranges, in turn: each 6-digit range in a 4-digit range of its
    own, all in the users' 2-digit range, so that only that range and the
    country see the whole attack).
    """

    count: int
    per_hour: float
    start_hour: float
    addresses: str
    ranges: int = 1


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    size: Size
    legit_factor: float = 1.0  # of the size's normal day
    launch: bool = False  # no history; the first users come at LAUNCH_HOUR
    attack: Optional[Attack] = None
    always_allowed: bool = False  # QA and office traffic ride on the day
    snapshot_hour: int = PEAK_HOUR  # thresholds shown when nothing was refused: at this hour's end

    @property
    def needs_no_refusal(self) -> bool:
        return self.attack is None


# The attacks' rates are the anchor's (the inputs of its
# docs/specs/fraud-protection-simulate.py): its simulation has, for ~1k/day,
# 300 unverified codes in a day with 60 in the peak hour (quiet day) and
# 800 with 200 (during a spike); for <20/day, 35 with 8 and 50 with 10.
# The attack from rotating addresses keeps the quiet day's hourly rate up
# around the clock; the one from one address asks the quiet day's codes
# over 20 countries; the one over 50 ranges asks the quiet day's codes
# from rotating addresses, for numbers of 50 ranges of the country.
ATTACKS = {
    "1k": {
        "quiet": Attack(300, 60.0, 10.0, "botnet"),
        "spike": Attack(800, 200.0, 18.0, "botnet"),
        "one": Attack(300, 60.0, 13.0, "one"),
        "rotating": Attack(1440, 60.0, 0.0, "rotating"),
        "spread": Attack(300, 60.0, 10.0, "rotating", ranges=50),
    },
    "20": {
        "quiet": Attack(35, 8.0, 10.0, "botnet"),
        "spike": Attack(50, 10.0, 18.0, "botnet"),
        "one": Attack(35, 8.0, 13.0, "one"),
        "rotating": Attack(192, 8.0, 0.0, "rotating"),
        "spread": Attack(35, 8.0, 10.0, "rotating", ranges=50),
    },
}


def scenarios_of(size: Size) -> List[Scenario]:
    a = ATTACKS[size.key]
    return [
        Scenario(f"{size.key}-normal", "Normal day", size, always_allowed=True),
        Scenario(f"{size.key}-launch", "Launch day (no history)", size, launch=True, snapshot_hour=LAUNCH_HOUR),
        Scenario(f"{size.key}-spike", "Spike day (2x normal)", size, legit_factor=2.0),
        Scenario(f"{size.key}-quiet-attack", "Attack on a quiet day (1/2 normal)", size, legit_factor=0.5,
                 attack=a["quiet"]),
        Scenario(f"{size.key}-spike-attack", "Attack during a spike (2x normal)", size, legit_factor=2.0,
                 attack=a["spike"]),
        Scenario(f"{size.key}-one-address", "One address, 20 countries", size, attack=a["one"]),
        Scenario(f"{size.key}-rotating", "Rotating addresses, one country, all day", size, attack=a["rotating"]),
        Scenario(f"{size.key}-spread", "50 ranges, rotating addresses (1/2 normal)", size, legit_factor=0.5,
                 attack=a["spread"]),
    ]


SCENARIOS = scenarios_of(SIZE_1K) + scenarios_of(SIZE_20)

# The anchor's own simulation table (docs/specs/fraud-protection.md in
# authgear/authgear-server at 020e7893cb): daily threshold, daily result,
# hourly threshold, hourly result, each judged at one moment of the day
# from assumed counts (a normal day: 1 000 verified, 50 unverified).
ANCHOR_TABLE: Dict[str, Tuple[int, str, int, str]] = {
    "1k-launch": (60, "ok", 60, "ok"),
    "1k-normal": (200, "ok", 40, "ok"),
    "1k-spike": (400, "ok", 80, "ok"),
    "1k-quiet-attack": (200, "TRIGGERED", 33, "TRIGGERED"),
    "1k-spike-attack": (400, "TRIGGERED", 80, "TRIGGERED"),
    "20-launch": (20, "ok", 3, "ok"),
    "20-normal": (20, "ok", 3, "ok"),
    "20-spike": (20, "ok", 3, "ok"),
    "20-quiet-attack": (20, "TRIGGERED", 3, "TRIGGERED"),
    "20-spike-attack": (20, "TRIGGERED", 3, "TRIGGERED"),
}


# ---------------------------------------------------------------------------
# The formulas on the ground truth
# ---------------------------------------------------------------------------

COUNT_NAMES = (
    "country_unverified_day", "country_unverified_hour", "country_verified_day", "country_verified_hour",
    "country_verified_daily_max", "address_unverified_day", "address_unverified_hour", "address_verified_day",
    "address_countries_day",
)


def anchor_judgment(c: Dict[str, int], has_address: bool,
                    hourly_minimum: int = ANCHOR_HOURLY_MINIMUM) -> Tuple[Dict[str, int], W]:
    """The anchor's thresholds for counts `c` (the send not counted), and the
    warnings of a send with them; `hourly_minimum`: the country's, if the
    guard sets another. The anchor takes 20 % of a count as a real
    number; a whole count exceeds x exactly when it exceeds floor(x), so
    whole numbers give the same verdicts."""
    daily = max(20, c["country_verified_daily_max"] * 20 // 100, c["country_verified_day"] * 20 // 100)
    hourly = max(hourly_minimum, daily // 6, c["country_verified_hour"] * 20 // 100)
    t = {"country_daily_threshold": daily, "country_hourly_threshold": hourly,
         "address_daily_threshold": 0, "address_hourly_threshold": 0}
    warnings = W(0)
    if c["country_unverified_day"] + 1 > daily:
        warnings |= W.UNVERIFIED_BY_COUNTRY_DAILY
    if c["country_unverified_hour"] + 1 > hourly:
        warnings |= W.UNVERIFIED_BY_COUNTRY_HOURLY
    if has_address:
        share = c["address_verified_day"] * 20 // 100
        t["address_daily_threshold"] = max(10, share)
        t["address_hourly_threshold"] = max(5, share // 6)
        if c["address_unverified_day"] + 1 > t["address_daily_threshold"]:
            warnings |= W.UNVERIFIED_BY_ADDRESS_DAILY
        if c["address_unverified_hour"] + 1 > t["address_hourly_threshold"]:
            warnings |= W.UNVERIFIED_BY_ADDRESS_HOURLY
        if c["address_countries_day"] > 3:
            warnings |= W.COUNTRIES_BY_ADDRESS_DAILY
    return t, warnings


class _Code:
    __slots__ = ("sent", "verified_at", "country", "address", "in_country")

    def __init__(self, sent: int, country: str, address: Optional[str], in_country: bool = True) -> None:
        self.sent, self.verified_at, self.country, self.address = sent, None, country, address
        self.in_country = in_country


class _Unverified:
    """Unverified codes sent in the `span` ms that end UNVERIFIED_AFTER ms
    ago (a code counts as unverified that long after its send)."""

    __slots__ = ("span", "waiting", "codes", "count")

    def __init__(self, span: int) -> None:
        self.span = span
        self.waiting: Deque[_Code] = deque()  # sent less than UNVERIFIED_AFTER ago
        self.codes: Deque[_Code] = deque()  # in the window
        self.count = 0

    def at(self, now: int) -> int:
        due = now - UNVERIFIED_AFTER
        edge, waiting, codes = due - self.span, self.waiting, self.codes
        while waiting and waiting[0].sent <= due:
            code = waiting.popleft()
            codes.append(code)
            if code.verified_at is None:
                self.count += 1
        while codes and codes[0].sent <= edge:
            if codes.popleft().verified_at is None:
                self.count -= 1
        return self.count

    def add(self, code: _Code, now: int) -> None:
        self.at(now)
        self.waiting.append(code)

    def verified(self, code: _Code, now: int) -> None:
        due = now - UNVERIFIED_AFTER
        self.at(now)
        if due - self.span < code.sent <= due:
            self.count -= 1


class _Verified:
    """Verifications in the last `span` ms."""

    __slots__ = ("span", "times")

    def __init__(self, span: int) -> None:
        self.span = span
        self.times: Deque[int] = deque()

    def at(self, now: int) -> int:
        edge, times = now - self.span, self.times
        while times and times[0] <= edge:
            times.popleft()
        return len(times)


class _Series:
    """One country's or one address's codes and verifications."""

    __slots__ = ("day", "hour", "verified_day", "verified_hour", "asked", "days")

    def __init__(self) -> None:
        self.day, self.hour = _Unverified(DAY), _Unverified(HOUR)
        self.verified_day, self.verified_hour = _Verified(DAY), _Verified(HOUR)
        self.asked: Dict[str, List[Optional[int]]] = {}  # an address's: country -> [last sent, last verified]
        self.days: Dict[int, int] = {}  # a country's: day -> verified


class Ledger:
    """What the anchor's signals count, kept from the traffic itself: codes
    the guard judged (always-allowed ones are not), counted unverified from
    UNVERIFIED_AFTER past their send until verified; verifications when they
    happen."""

    def __init__(self) -> None:
        self.countries: Dict[str, _Series] = {}
        self.addresses: Dict[str, _Series] = {}
        self.latest: Dict[str, _Code] = {}

    def _series(self, table: Dict[str, _Series], name: str) -> _Series:
        series = table.get(name)
        if series is None:
            series = table[name] = _Series()
        return series

    def counts(self, now: int, country: str, address: Optional[str]) -> Dict[str, int]:
        c = self._series(self.countries, country)
        today = now // DAY
        counts = dict.fromkeys(COUNT_NAMES, 0)
        counts["country_unverified_day"] = c.day.at(now)
        counts["country_unverified_hour"] = c.hour.at(now)
        counts["country_verified_day"] = c.verified_day.at(now)
        counts["country_verified_hour"] = c.verified_hour.at(now)
        counts["country_verified_daily_max"] = max(
            [n for d, n in c.days.items() if today - HISTORY_DAYS < d <= today], default=0)
        if address is not None:
            a = self._series(self.addresses, address)
            counts["address_unverified_day"] = a.day.at(now)
            counts["address_unverified_hour"] = a.hour.at(now)
            counts["address_verified_day"] = a.verified_day.at(now)
            asked = {country} | {k for k, (sent, _) in a.asked.items() if sent is not None and sent > now - DAY}
            asked -= {k for k, (_, verified) in a.asked.items() if verified is not None and verified > now - DAY}
            counts["address_countries_day"] = len(asked)
        return counts

    def sent(self, now: int, number: str, country: str, address: Optional[str], in_country: bool = True) -> None:
        """A code counted; among its country's unverified codes only if
        `in_country` (not one a pass let through its ranges' warnings alone:
        GuardRules.countsInCountry)."""
        code = _Code(now, country, address, in_country)
        self.latest[number] = code
        c = self._series(self.countries, country)
        if in_country:
            c.day.add(code, now)
            c.hour.add(code, now)
        if address is not None:
            a = self._series(self.addresses, address)
            a.day.add(code, now)
            a.hour.add(code, now)
            a.asked.setdefault(country, [None, None])[0] = now

    def day_verified(self, now: int, country: str) -> None:
        """A verification older than every window by the scenario's day: only
        its day's count matters."""
        days = self._series(self.countries, country).days
        days[now // DAY] = days.get(now // DAY, 0) + 1

    def verified(self, now: int, number: str, country: str) -> None:
        c = self._series(self.countries, country)
        code = self.latest.pop(number, None)
        if code is not None and code.verified_at is None:
            if code.in_country:
                c.day.verified(code, now)
                c.hour.verified(code, now)
            if code.address is not None:
                a = self._series(self.addresses, code.address)
                a.day.verified(code, now)
                a.hour.verified(code, now)
                a.verified_day.times.append(now)
                a.asked.setdefault(country, [now, None])[1] = now
            code.verified_at = now
        c.verified_day.times.append(now)
        c.verified_hour.times.append(now)
        c.days[now // DAY] = c.days.get(now // DAY, 0) + 1


# ---------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------


@dataclass
class Attempt:
    """One send asked on the scenario's day."""

    kind: str  # legit, attack, qa, office
    at: int  # ms since the day began
    number: str
    address: Optional[str]
    granted: bool
    refusal: str  # "" when granted, else the error's class name
    # Challenged, then the person passed and sent again (the next attempt).
    passed: bool = False
    expected: Optional[Tuple[Dict[str, int], Dict[str, int], W]] = None  # the ledger's counts, thresholds, warnings
    record: Optional[tickgate.GuardRecord] = None


@dataclass
class Outcome:
    scenario: Scenario
    mode: tickgate.GuardMode
    attempts: List[Attempt] = field(default_factory=list)
    history_refused: int = 0  # sends refused while the history was built (record-only: none)
    mismatches: List[str] = field(default_factory=list)  # records that are not the formulas' verdicts
    seconds: float = 0.0  # real time the run took

    def of(self, kind: str) -> List[Attempt]:
        return [a for a in self.attempts if a.kind == kind]

    def challenged(self, kind: str) -> int:
        """Sends of `kind` answered with a challenge."""
        return sum(1 for a in self.attempts if a.kind == kind and a.refusal == "ChallengeRequired")

    def turned_away(self, kind: str) -> int:
        """Sends of `kind` that got no code: refused, or challenged and
        the challenge not passed."""
        return sum(1 for a in self.attempts if a.kind == kind and not a.granted and not a.passed)

    def granted(self, kind: str) -> int:
        return sum(1 for a in self.attempts if a.kind == kind and a.granted)

    def refused(self, kind: str) -> int:
        return sum(1 for a in self.attempts if a.kind == kind and not a.granted)

    @property
    def first_refusal(self) -> Optional[Attempt]:
        return next((a for a in self.attempts if not a.granted), None)

    @property
    def first_attack_block(self) -> Optional[Attempt]:
        return next((a for a in self.attempts if a.kind == "attack" and not a.granted), None)

    @property
    def attack_granted_before_block(self) -> int:
        block = self.first_attack_block
        return sum(1 for a in self.attempts if a.kind == "attack" and a.granted and (block is None or a.at < block.at))

    @property
    def first_warning(self) -> Optional[Attempt]:
        return next((a for a in self.attempts if a.record is not None and a.record.warnings), None)

    def warned(self, warning: W) -> bool:
        return any(a.record is not None and a.record.warnings & warning for a in self.attempts)

    def most(self, name: str) -> int:
        """The largest value of a record's count `name` over the day."""
        return max((a.record.count(name) for a in self.attempts if a.record is not None and a.record.bypass is None),
                   default=0)

    def snapshot(self) -> Optional[Attempt]:
        """The last judged send before the end of the snapshot hour."""
        end = (self.scenario.snapshot_hour + 1) * HOUR
        judged = [a for a in self.attempts if a.at < end and a.record is not None and a.record.bypass is None]
        return judged[-1] if judged else None


class _Run:
    def __init__(self, scenario: Scenario, mode: tickgate.GuardMode, seed: str,
                 guard: Optional[Dict[str, object]] = None) -> None:
        self.scenario, self.size, self.mode, self.seed = scenario, scenario.size, mode, seed
        self.guard = dict(guard or {})
        self.hourly_minimum = int(self.guard.get("country_hourly_minimum", ANCHOR_HOURLY_MINIMUM))  # type: ignore[call-overload]
        # Challenges passed or not: draws of their own, so that the day's
        # traffic is the same with challenges or without.
        self.passes = random.Random(f"tickgate pumping passes {scenario.key}{seed}")
        # The history is the same for every scenario of a size; the day's
        # draws are the scenario's own.
        self.rng = random.Random(f"tickgate pumping history {self.size.key}{seed}")
        self.engine = tickgate.Engine(clock=tickgate.ClockKind.MANUAL, delivery=tickgate.Delivery.HOST_THREAD)
        self.ledger = Ledger()
        self.outcome = Outcome(scenario, mode)
        self.heap: List[Tuple[int, int, Callable[..., None], tuple]] = []
        self.seq = 0
        self.now = 0
        self.day_start = 0
        self.recording = False
        # Whether the ledger keeps codes (else only the days' verifications,
        # all that days before the last two can matter on the scenario's day).
        self.tracking = False
        self.records: List[tickgate.GuardRecord] = []
        self.addresses = [f"2001:db8:{i:x}::{i * 7919 % 0xffff + 1:x}" if i % 3 == 2
                          else f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
                          for i in range(self.size.address_pool)]
        self.attack_serial = 0

    def set_guard(self, mode: tickgate.GuardMode) -> None:
        self.engine.set_guard(SCOPE, mode, always_allow_numbers=[self.size.qa_pattern],
                              always_allow_addresses=[OFFICE_CIDR], **self.guard)  # type: ignore[arg-type]

    # -- the clock and the queue -------------------------------------------------

    def at(self, when: int, action: Callable[..., None], *args: object) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, self.seq, action, args))

    def play_until(self, end: int) -> None:
        heap, advance, pop = self.heap, self.engine.advance, heapq.heappop
        n = 0
        while heap and heap[0][0] < end:
            when, _, action, args = pop(heap)
            if when > self.now:
                advance(ms=when - self.now)
                self.now = when
            action(*args)
            n += 1
            if n % 1024 == 0:
                self.engine.dispatch()
        if end > self.now:
            advance(ms=end - self.now)
            self.now = end
        self.engine.dispatch()

    # -- a send, a verification ------------------------------------------------------

    def send(self, kind: str, number: str, country: str, address: Optional[str], after_pass: bool = False) -> bool:
        judged = not (number.startswith(self.size.qa_prefix) or (address or "").startswith(OFFICE_PREFIX))
        expected = None
        if self.recording and judged:
            counts = self.ledger.counts(self.now, country, address)
            thresholds, warnings = anchor_judgment(counts, address is not None, self.hourly_minimum)
            expected = (counts, thresholds, warnings)
        refusal = ""
        try:
            ticket = self.engine.send_begin(SCOPE, number, client_address=address)
        except tickgate.TickgateError as error:
            refusal = type(error).__name__
        else:
            ticket.succeeded()
            if judged and self.tracking:
                # Through a passed challenge with no country or address
                # warning: the ranges' warnings alone challenged it, and the
                # country leaves it out.
                in_country = not after_pass or bool(
                    anchor_judgment(self.ledger.counts(self.now, country, address), address is not None,
                                    self.hourly_minimum)[1])
                self.ledger.sent(self.now, number, country, address, in_country)
        # Asked a challenge: a person passes it (nearly always), then asks again.
        passed = refusal == "ChallengeRequired" and self.passes.random() < P_PASS.get(kind, 0.0)
        if self.recording:
            self.outcome.attempts.append(
                Attempt(kind, self.now - self.day_start, number, address, not refusal, refusal, passed, expected))
        elif refusal and not passed:
            self.outcome.history_refused += 1
        if passed:
            self.engine.challenge_passed(SCOPE, number, address)
            return self.send(kind, number, country, address, after_pass=True)
        return not refusal

    def verify(self, number: str) -> None:
        self.engine.verified(SCOPE, number)
        if self.tracking:
            self.ledger.verified(self.now, number, self.size.country)
        else:
            self.ledger.day_verified(self.now, self.size.country)

    # -- legitimate users ----------------------------------------------------------

    def user(self) -> None:
        """One user asks a code, then types it, asks again, or walks away
        (the plan is drawn before the send, so that outcomes never change
        the draws: both modes see the same traffic)."""
        rng, size = self.rng, self.size
        number = size.legit_prefix + str(rng.randrange(10 ** size.legit_digits)).zfill(size.legit_digits)
        address = self.addresses[rng.randrange(len(self.addresses))]
        plan = rng.random()
        delay = min(VERIFY_MAX_MS, VERIFY_MIN_MS + int(rng.expovariate(1.0 / VERIFY_MEAN_MS)))
        resend_after = rng.randint(*RESEND_AFTER_MS)
        if not self.tracking:
            address = None  # no signal on the scenario's day looks this far back at an address
        if not self.send("legit", number, size.country, address) or plan < P_ABANDON:
            return
        if plan < P_ABANDON + P_RESEND:
            self.at(self.now + resend_after, self.resend, number, address, delay)
        else:
            self.at(self.now + delay, self.verify, number)

    def resend(self, number: str, address: str, delay: int) -> None:
        if self.send("legit", number, self.size.country, address):
            self.at(self.now + delay, self.verify, number)

    def schedule_users(self, start: int, hours: Sequence[float]) -> None:
        """Users arriving as a Poisson process, hours[h] of them in hour h."""
        for h, users in enumerate(hours):
            if users <= 0:
                continue
            t = self.rng.expovariate(users / HOUR)
            while t < HOUR:
                self.at(start + h * HOUR + int(t), self.user)
                t += self.rng.expovariate(users / HOUR)

    def normal_hours(self, factor: float) -> List[float]:
        users = self.size.per_day * factor / (1 + P_RESEND)
        total = sum(DIURNAL_WEIGHTS)
        return [users * w / total for w in DIURNAL_WEIGHTS]

    # -- attackers, QA, the office ---------------------------------------------------

    def schedule_attack(self, start: int, attack: Attack) -> None:
        gap = HOUR / attack.per_hour
        first = start + int(attack.start_hour * HOUR)
        home = next(c for c in MANY_COUNTRIES if c[0] == self.size.country)
        others = [c for c in MANY_COUNTRIES if c[0] != self.size.country]
        self.rng.shuffle(others)
        countries = [home] + others
        self.attack_serial = self.rng.randrange(10 ** 5)
        for i in range(attack.count):
            when = first + int(i * gap + self.rng.random() * gap)
            if attack.addresses == "botnet":
                address = f"192.0.2.{self.rng.randrange(1, 26)}"
            elif attack.addresses == "rotating":
                address = f"100.{64 + i // 65536}.{i // 256 % 256}.{i % 256}"
            else:
                address = "198.51.100.66"
            country, prefix, digits = countries[i % len(countries)] if attack.addresses == "one" else (
                self.size.country, self.size.attack_prefix, self.size.attack_digits)
            if attack.ranges > 1:
                size = self.size
                prefix = f"{size.spread_prefix}{size.spread_first + i % attack.ranges:02d}00"
                digits = size.spread_digits
            self.attack_serial += 1
            number = prefix + str(self.attack_serial % 10 ** digits).zfill(digits)
            self.at(when, self.send, "attack", number, country, address)

    def schedule_qa(self, start: int) -> None:
        """QA asks codes for 50 test numbers from 08:00 to 18:00, never typing them."""
        gap = 10 * HOUR / QA_CODES
        for i in range(QA_CODES):
            self.at(start + 8 * HOUR + int(i * gap), self.send, "qa", f"{self.size.qa_prefix}{i % 50:03d}",
                    self.size.country, f"10.200.0.{i % 7 + 1}")

    def schedule_office(self, start: int) -> None:
        """Staff on the office network ask codes for numbers of 10 countries
        (testing delivery) from 09:00 to 17:00, never typing them."""
        gap = 8 * HOUR / OFFICE_CODES
        prefixes = {c: (p, d) for c, p, d in MANY_COUNTRIES}
        for i in range(OFFICE_CODES):
            country = OFFICE_COUNTRIES[i % len(OFFICE_COUNTRIES)]
            prefix, digits = prefixes[country]
            number = prefix + str(10 ** (digits - 1) + 7919 * i)[-digits:]
            self.at(start + 9 * HOUR + int(i * gap), self.send, "office", number, country,
                    f"{OFFICE_PREFIX}{i % 12 + 10}")

    # -- the whole run -------------------------------------------------------------

    def run(self) -> Outcome:
        s = self.scenario
        try:
            days = 0 if s.launch else HISTORY_DAYS
            self.set_guard(tickgate.GuardMode.RECORD_ONLY)
            for day in range(days):
                self.tracking = day >= days - 2
                self.schedule_users(day * DAY, self.normal_hours(1.0))
                self.play_until((day + 1) * DAY)
            self.day_start = days * DAY
            self.tracking = True
            self.rng = random.Random(f"tickgate pumping day {s.key}{self.seed}")
            self.set_guard(self.mode)
            subscription = self.engine.subscribe_records(SCOPE, self.records.append)
            self.recording = True
            if s.launch:
                hours = [0.0] * LAUNCH_HOUR + [float(self.size.launch_users)] + self.normal_hours(1.0)[LAUNCH_HOUR + 1:]
            else:
                hours = self.normal_hours(s.legit_factor)
            self.schedule_users(self.day_start, hours)
            if s.attack is not None:
                self.schedule_attack(self.day_start, s.attack)
            if s.always_allowed:
                self.schedule_qa(self.day_start)
                self.schedule_office(self.day_start)
            self.play_until(self.day_start + DAY)
            subscription.close()
        finally:
            self.engine.close()
        self.match_records()
        return self.outcome

    def match_records(self) -> None:
        """The i-th record is the i-th send's; each judged one must carry the
        ledger's counts, thresholds and warnings."""
        attempts, records = self.outcome.attempts, self.records
        if len(attempts) != len(records):
            self.outcome.mismatches.append(f"{len(attempts)} sends but {len(records)} records")
            return
        for attempt, record in zip(attempts, records):
            attempt.record = record
            if record.number != attempt.number or record.granted != attempt.granted:
                self.outcome.mismatches.append(f"the record of {record.number} for the send of {attempt.number}")
            elif attempt.expected is None:
                if record.bypass is None:
                    self.outcome.mismatches.append(f"{attempt.number} from {attempt.address} was not always allowed")
            else:
                counts, thresholds, warnings = attempt.expected
                got, want = dict(record.counts), dict(counts, **thresholds)
                # (The ranges are the stores' vectors' to check: the
                # formulas here are the country's and the address's.)
                if got != want or record.warnings & ~RANGE_WARNINGS != warnings:
                    diff = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
                    self.outcome.mismatches.append(
                        f"{clock(attempt.at)} {attempt.kind} {attempt.number} from {attempt.address}: "
                        f"(engine, formulas) {diff}, warnings {record.warnings!r} vs {warnings!r}")


def simulate(scenario: Scenario, mode: tickgate.GuardMode = tickgate.GuardMode.ENFORCE, seed: str = "",
             guard: Optional[Dict[str, object]] = None) -> Outcome:
    """Plays `scenario` with the guard in `mode`; `seed` (default: none)
    draws other traffic of the same kind; `guard`: more of set_guard's
    settings (CHALLENGES: ranges, and challenges instead of refusals)."""
    started = time.perf_counter()
    outcome = _Run(scenario, mode, seed, guard).run()
    outcome.seconds = time.perf_counter() - started
    return outcome


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


def clock(ms: int) -> str:
    return f"{ms // HOUR:02d}:{ms % HOUR // MINUTE:02d}"


WARNING_NAMES = (
    (W.UNVERIFIED_BY_COUNTRY_DAILY, "country/day"), (W.UNVERIFIED_BY_COUNTRY_HOURLY, "country/hour"),
    (W.UNVERIFIED_BY_ADDRESS_DAILY, "address/day"), (W.UNVERIFIED_BY_ADDRESS_HOURLY, "address/hour"),
    (W.COUNTRIES_BY_ADDRESS_DAILY, "countries/address"),
    (W.UNVERIFIED_BY_RANGE_DAILY, "range/day"), (W.UNVERIFIED_BY_RANGE_HOURLY, "range/hour"),
)


def warning_names(warnings: W) -> str:
    return ", ".join(name for bit, name in WARNING_NAMES if warnings & bit) or "-"


HEADERS = ("Scenario", "Legit codes refused", "Attack codes granted: before block / all day",
           "First block", "Warnings at block", "Thresholds day / hour", "Daily", "Hourly", "Anchor: day / hour")


def rows(o: Outcome) -> List[List[str]]:
    s = o.scenario
    block = o.first_attack_block or o.first_refusal
    shown = block if block is not None else o.snapshot()
    r = shown.record if shown is not None else None
    anchor = ANCHOR_TABLE.get(s.key)
    first = "-"
    if block is not None:
        first = clock(block.at)
        if s.attack is not None and block.kind == "attack":
            first += f" (+{(block.at - int(s.attack.start_hour * HOUR)) // MINUTE} min)"
    attack = "-"
    if s.attack is not None:
        attack = f"{o.attack_granted_before_block} / {o.granted('attack')} of {len(o.of('attack'))}"
    table = [[
        s.title,
        f"{o.refused('legit')} of {len(o.of('legit'))}",
        attack,
        first,
        warning_names(block.record.warnings) if block is not None and block.record is not None else "-",
        f"{r.count('country_daily_threshold')} / {r.count('country_hourly_threshold')}" if r else "-",
        "TRIGGERED" if o.warned(W.UNVERIFIED_BY_COUNTRY_DAILY) else "ok",
        "TRIGGERED" if o.warned(W.UNVERIFIED_BY_COUNTRY_HOURLY) else "ok",
        f"{anchor[0]} {anchor[1]} / {anchor[2]} {anchor[3]}" if anchor else "-",
    ]]
    if s.always_allowed:
        for kind, title in (("qa", f"Always allow: QA numbers {s.size.qa_pattern}"),
                            ("office", f"Always allow: office network {OFFICE_CIDR}")):
            table.append([title, f"{kind}: {o.refused(kind)} of {len(o.of(kind))}", "-", "-", "-", "-",
                          "not counted", "not counted", "-"])
    return table


def table(outcomes: Sequence[Outcome], title: str) -> str:
    body = [r for o in outcomes for r in rows(o)]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(HEADERS)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [f"### {title}", "", line(HEADERS), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in body]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Ten seeds, with challenges (issue 40)
# ---------------------------------------------------------------------------

# The fixed seed (the tables above) and nine other draws of the same traffic.
SEEDS = ("",) + tuple(f" draw {n}" for n in range(9))


def signal_of(record: Optional[tickgate.GuardRecord]) -> str:
    """The warnings of a record, with the range that warned: "range/hour +44752000"."""
    if record is None:
        return "-"
    names = warning_names(record.warnings)
    return f"{names} {record.range}" if record.range else names


@dataclass(frozen=True)
class Summary:
    """What the 10-seed sweep keeps of one run (an Outcome holds every
    record; 10 seeds of every scenario would hold too many)."""

    key: str
    seed: str
    legit_asked: int  # legitimate sends, not counting the send again after a passed challenge
    legit_refused: int  # refused outright (not a challenge)
    legit_challenged: int
    legit_turned_away: int  # refused, or challenged and not passed
    attack_asked: int
    attack_granted_before_block: int
    attack_granted: int  # all day, challenges passed included
    attack_passed: int  # challenges the bots passed
    block_minutes: Optional[int]  # from the attack's start to its first refusal or challenge
    block_signal: str  # the warnings (and range) of that first block
    # The bound of the attack codes granted all day: the most the country's
    # daily threshold was at an attack's send, plus the codes granted
    # within UNVERIFIED_AFTER of one another (not counted yet).
    country_daily_most: int
    in_flight: int
    challenged_by: Tuple[Tuple[str, int], ...]  # legitimate challenges by signal and range, most first
    refusals: Tuple[str, ...]  # the kinds of refusal of legitimate sends
    mismatches: int
    seconds: float

    def share(self, n: int) -> float:
        return n / self.legit_asked if self.legit_asked else 0.0


def summarize(o: Outcome, seed: str) -> Summary:
    legit, attack = o.of("legit"), o.of("attack")
    s = o.scenario
    block = o.first_attack_block
    minutes = None
    if block is not None and s.attack is not None:
        minutes = (block.at - int(s.attack.start_hour * HOUR)) // MINUTE
    granted_at = [a.at for a in attack if a.granted]
    in_flight = max((sum(1 for t in granted_at if at - UNVERIFIED_AFTER < t <= at) for at in granted_at), default=0)
    by: Dict[str, int] = {}
    for a in legit:
        if a.refusal == "ChallengeRequired":
            name = signal_of(a.record)
            by[name] = by.get(name, 0) + 1
    return Summary(
        key=s.key, seed=seed,
        legit_asked=len(legit) - sum(1 for a in legit if a.passed),
        legit_refused=sum(1 for a in legit if a.refusal and a.refusal != "ChallengeRequired"),
        legit_challenged=o.challenged("legit"),
        legit_turned_away=o.turned_away("legit"),
        attack_asked=len(attack) - sum(1 for a in attack if a.passed),
        attack_granted_before_block=o.attack_granted_before_block,
        attack_granted=o.granted("attack"),
        attack_passed=sum(1 for a in attack if a.passed),
        block_minutes=minutes,
        block_signal=signal_of(block.record) if block is not None else "-",
        country_daily_most=max((a.record.count("country_daily_threshold") for a in attack if a.record is not None),
                               default=0),
        in_flight=in_flight,
        challenged_by=tuple(sorted(by.items(), key=lambda kv: -kv[1])),
        refusals=tuple(sorted({a.refusal for a in legit if a.refusal})),
        mismatches=len(o.mismatches),
        seconds=o.seconds,
    )


def sweep_run(scenario: Scenario, seed: str) -> Summary:
    """One scenario on one seed, in ENFORCE with CHALLENGES, and the people
    and bots passing challenges at P_PASS."""
    return summarize(simulate(scenario, tickgate.GuardMode.ENFORCE, seed, CHALLENGES), seed)


SWEEP_HEADERS = ("Scenario", "Legit refused", "Legit challenged", "Attack granted before block",
                 "Attack granted all day", "First block", "Signal at first block (no attack: most challenges)")


def _pct(n: int, of: int) -> str:
    return f"{n} ({100.0 * n / of:.1f} %)" if of else str(n)


def sweep_rows(runs: Sequence[Summary]) -> List[str]:
    """One scenario's row: the fixed seed's values, then "/ " the worst of
    the seeds (most refused, challenged and granted; latest block)."""
    fixed, s = runs[0], None
    for scenario in SCENARIOS:
        if scenario.key == fixed.key:
            s = scenario
    assert s is not None and fixed.seed == SEEDS[0]

    def worst_share(f: Callable[[Summary], int]) -> str:
        w = max(runs, key=lambda r: (r.share(f(r)), f(r)))
        return f"{f(fixed)} of {fixed.legit_asked} / {_pct(f(w), w.legit_asked)}"

    attack = s.attack is not None
    minutes = [r.block_minutes for r in runs]
    first = "-"
    if attack:
        latest = "never" if None in minutes else f"+{max(m for m in minutes if m is not None)} min"
        first = (f"+{fixed.block_minutes} min" if fixed.block_minutes is not None else "never") + f" / {latest}"
    return [
        s.title,
        worst_share(lambda r: r.legit_refused),
        worst_share(lambda r: r.legit_challenged),
        f"{fixed.attack_granted_before_block} / {max(r.attack_granted_before_block for r in runs)}" if attack else "-",
        (f"{fixed.attack_granted} of {fixed.attack_asked} / {max(r.attack_granted for r in runs)}" if attack else "-"),
        first,
        fixed.block_signal if attack else (fixed.challenged_by[0][0] if fixed.challenged_by else "-"),
    ]


def sweep_table(by_scenario: Sequence[Sequence[Summary]], title: str) -> str:
    body = [sweep_rows(runs) for runs in by_scenario]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(SWEEP_HEADERS)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [f"### {title}", "", line(SWEEP_HEADERS), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in body]
    return "\n".join(out) + "\n"
