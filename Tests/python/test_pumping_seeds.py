"""The pumping simulation over 10 seeds, in ENFORCE with challenges (issue
40): every scenario of test_pumping_simulation.py played on the fixed seed
and 9 other draws of the same traffic, with the guard's number ranges on
and its country and range signals answering with a challenge (CHALLENGES),
legitimate users passing a challenge with probability 0.95 and bots with
0.02 (P_PASS). It asserts the issue's "Done when" targets on every seed.

A target the current guard misses is marked xfail (strict: it fails the
day it holds, so that the mark goes) with the worst seed's number in its
reason; docs/pumping.md gives the same numbers. `pytest -s` prints the
table ("10 seeds, with challenges" in docs/pumping.md).

It runs as a CTest test of its own (python.pumping_seeds, 10 to 13 minutes
on 2 shared cores), apart from python.pytest. The attack from one address is
left out (the address signals' case, which ranges and challenges do not
change: test_pumping_simulation.py plays it).
"""

from __future__ import annotations

import functools
import time
from typing import Dict, List, Tuple

import pytest

from pumping_traffic import (
    SCENARIOS, SEEDS, SIZES, UNVERIFIED_AFTER, Summary, scenarios_of, sweep_run, sweep_table,
)

BY_KEY = {s.key: s for s in SCENARIOS}
# Every scenario but the attack from one address (the address signals'
# case, which ranges and challenges do not change): 7 per size.
SWEPT = [s for s in SCENARIOS if not s.key.endswith("one-address")]
ONE_RANGE = ("quiet-attack", "spike-attack", "rotating")
NO_ATTACK = ("normal", "launch", "spike")

# Attack codes granted all day on the fixed seed before ranges and
# challenges (docs/pumping.md, the first two tables): the most a one-range
# attack may get now.
TODAY_ALL_DAY = {
    "1k-quiet-attack": 102, "1k-spike-attack": 71, "1k-rotating": 178,
    "20-quiet-attack": 11, "20-spike-attack": 15, "20-rotating": 20,
}

# Targets missed with CHALLENGES, with the worst of the 10 seeds
# (docs/pumping.md, "10 seeds, with challenges", says why): none today.
MISSED: Dict[Tuple[str, str], str] = {}


@functools.lru_cache(maxsize=None)
def runs(key: str) -> Tuple[Summary, ...]:
    return tuple(sweep_run(BY_KEY[key], seed) for seed in SEEDS)


def params(kinds: Tuple[str, ...], target: str) -> List[object]:
    out: List[object] = []
    for size in SIZES:
        for kind in kinds:
            key = f"{size.key}-{kind}"
            reason = MISSED.get((key, target))
            out.append(pytest.param(key, id=key, marks=pytest.mark.xfail(strict=True, reason=reason))
                       if reason else pytest.param(key, id=key))
    return out


def worst(key: str, f) -> str:
    """The seeds whose value `f` is largest, for the assertion's message."""
    rs = runs(key)
    top = max(f(r) for r in rs)
    return f"{key}: {top} on {[r.seed for r in rs if f(r) == top]}"


@pytest.mark.parametrize("key", [s.key for s in SWEPT])
def test_every_seed_is_judged_by_the_formulas(key: str) -> None:
    """On every seed, every record carries the anchor's counts, thresholds
    and warnings for the country and the address (the ranges are the shared
    vectors' to check), and each attack is blocked."""
    for r in runs(key):
        assert r.mismatches == 0, r.seed
        assert set(r.refusals) <= {"ChallengeRequired", "PumpingSuspected"}, r.seed
        if BY_KEY[key].attack is not None:
            assert r.block_minutes is not None, r.seed
            assert r.attack_granted < r.attack_asked, r.seed


@pytest.mark.parametrize("key", params(NO_ATTACK, "refused"))
def test_no_legitimate_user_is_refused_on_normal_launch_and_spike_days(key: str) -> None:
    """Challenged, maybe; refused, never (a challenge that a person did not
    pass is theirs to try again)."""
    assert all(r.legit_refused == 0 for r in runs(key)), worst(key, lambda r: r.legit_refused)


@pytest.mark.parametrize("key", params(ONE_RANGE, "refused"))
def test_a_one_range_attack_refuses_at_most_1_percent_of_the_country(key: str) -> None:
    assert all(r.legit_refused <= 0.01 * r.legit_asked for r in runs(key)), worst(key, lambda r: r.legit_refused)


@pytest.mark.parametrize("key", params(ONE_RANGE, "challenged"))
def test_a_one_range_attack_challenges_at_most_5_percent_of_the_users(key: str) -> None:
    assert all(r.legit_challenged <= 0.05 * r.legit_asked for r in runs(key)), \
        worst(key, lambda r: round(r.share(r.legit_challenged), 3))


@pytest.mark.parametrize("key", params(ONE_RANGE, "granted"))
def test_a_one_range_attack_gets_no_more_codes_than_before(key: str) -> None:
    """No more attack codes all day than the fixed seed's table gave before
    ranges and challenges (the bots' passed challenges included)."""
    assert all(r.attack_granted <= TODAY_ALL_DAY[key] for r in runs(key)), worst(key, lambda r: r.attack_granted)


@pytest.mark.parametrize("key", params(("spread",), "refused"))
def test_an_attack_over_50_ranges_refuses_at_most_1_percent(key: str) -> None:
    """The country (and the users' own 2-digit range) see it: its users
    are challenged, not refused."""
    assert all(r.legit_refused <= 0.01 * r.legit_asked for r in runs(key)), worst(key, lambda r: r.legit_refused)


@pytest.mark.parametrize("key", params(("spread",), "granted"))
def test_an_attack_over_50_ranges_gets_at_most_the_countrys_day(key: str) -> None:
    """At most the country's daily threshold plus the codes of one
    unverified_after_seconds (granted within UNVERIFIED_AFTER of one
    another: not counted yet when the next was judged)."""
    assert UNVERIFIED_AFTER == 120_000
    assert all(r.attack_granted <= r.country_daily_most + r.in_flight for r in runs(key)), \
        worst(key, lambda r: r.attack_granted - r.country_daily_most - r.in_flight)


def test_print_the_sweep() -> None:
    """pytest -s prints the table (docs/pumping.md, "10 seeds, with
    challenges"), and the signals and ranges that challenged legitimate
    users on each scenario's worst seed."""
    started = time.perf_counter()
    print()
    for size in SIZES:
        keyed = [runs(s.key) for s in scenarios_of(size) if s in SWEPT]
        print(sweep_table(keyed, f"{size.label}, enforce with challenges: fixed seed / worst of {len(SEEDS)}"))
        for rs in keyed:
            w = max(rs, key=lambda r: r.legit_challenged)
            print(f"  {w.key}: worst seed {w.seed!r}: {w.legit_challenged} challenged, by {list(w.challenged_by[:5])}; "
                  f"attack granted {[r.attack_granted for r in rs]}, bots passed {[r.attack_passed for r in rs]}")
        print()
    print(f"({sum(r.seconds for s in SWEPT for r in runs(s.key)):.0f} s of simulation; "
          f"{time.perf_counter() - started:.0f} s left to run here)")
