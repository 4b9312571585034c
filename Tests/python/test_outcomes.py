"""What became of each guarded code (issue 40, item 5), on memory, SQLite
and Redis: one outcome record per code (verified, replaced by a resend,
killed by wrong codes, never verified once unverified_after_seconds
passed) and one per passed challenge, through Engine.subscribe_outcomes
and, on Redis, the guard's record stream; exactly one engine reports each
code on a shared store."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

import tickgate
from tickgate import CodeOutcome, GuardMode
from test_guard import QUIET, URL, OwnRedis, Records, Store, cn, own_redis, probe  # noqa: F401 (a fixture)

STORES = ["memory", "sqlite", "redis"]
SHARED = ["sqlite", "redis"]
# Wrong codes a code survives: the third kills it.
POLICY = tickgate.Policy(cooldowns_ms=(1000,), max_wrong_codes=3)


def opened(kind: str, tmp_path: Path) -> Store:
    if kind == "redis" and not URL:
        pytest.skip("TG_REDIS_URL is not set (CTest's redis fixture sets it)")
    return Store(kind, tmp_path)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = opened(request.param, tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = opened(request.param, tmp_path)
    try:
        yield s
    finally:
        s.close()


class Outcomes:
    """A scope's outcome records, as a subscription delivers them."""

    def __init__(self, engine: tickgate.Engine, scope: str = "login") -> None:
        self.engine = engine
        self.lock = threading.Lock()
        self.items: List[tickgate.GuardRecord] = []
        self.subscription = engine.subscribe_outcomes(scope, self._add)

    def _add(self, record: tickgate.GuardRecord) -> None:
        with self.lock:
            self.items.append(record)

    def all(self) -> List[tickgate.GuardRecord]:
        self.engine.dispatch()
        with self.lock:
            return list(self.items)

    def of(self, number: str) -> List[CodeOutcome]:
        return [r.outcome for r in self.all() if r.number == number]  # type: ignore[misc]


def guarded(store: Store, after: int = 60, **options: object) -> tickgate.Engine:
    engine = store.open()
    engine.set_policy("login", POLICY)
    engine.set_guard("login", GuardMode.ENFORCE, unverified_after_seconds=after, **QUIET, **options)  # type: ignore[arg-type]
    return engine


def sent(engine: tickgate.Engine, number: str, address: str = "203.0.113.7") -> None:
    engine.send_begin("login", number, client_address=address).succeeded()


def later(store: Store, engine: tickgate.Engine, seconds: float) -> None:
    """`seconds` on the store's clock (memory: the engine's manual one)."""
    if store.kind == "memory":
        engine.advance(ms=int(seconds * 1000))
    else:
        time.sleep(seconds)


def test_a_verified_code(store: Store) -> None:
    engine = guarded(store)
    outcomes = Outcomes(engine)
    number = cn()
    before = time.time() * 1000
    sent(engine, number)
    assert outcomes.all() == []
    engine.verified("login", number)
    [record] = outcomes.all()
    assert record.outcome == CodeOutcome.VERIFIED
    assert (record.number, record.country, record.client_address) == (number, "CN", "203.0.113.7")
    assert not record.granted and record.ticket == 0 and record.warnings == 0
    if store.kind != "memory":
        assert before - 1000 <= record.code_sent_wall_ms <= record.wall_ms
    assert record.code_sent_wall_ms <= record.wall_ms
    # Verified once: a second verification reports nothing more.
    engine.verified("login", number)
    assert len(outcomes.all()) == 1


def test_a_resend_replaces_the_code(store: Store) -> None:
    engine = guarded(store)
    outcomes = Outcomes(engine)
    number = cn()
    sent(engine, number)
    later(store, engine, 1.1)  # past the cooldown
    sent(engine, number)
    assert outcomes.of(number) == [CodeOutcome.REPLACED]
    engine.verified("login", number)
    assert outcomes.of(number) == [CodeOutcome.REPLACED, CodeOutcome.VERIFIED]


def test_wrong_codes_kill_the_code(store: Store) -> None:
    engine = guarded(store)
    outcomes = Outcomes(engine)
    number = cn()
    sent(engine, number)
    assert engine.verify_failed("login", number) == 2
    assert engine.verify_failed("login", number) == 1
    assert outcomes.of(number) == []
    assert engine.verify_failed("login", number) == 0
    assert outcomes.of(number) == [CodeOutcome.KILLED]


def test_a_code_never_verified_is_reported_once_its_time_passed(store: Store) -> None:
    engine = guarded(store, after=1)
    outcomes = Outcomes(engine)
    first, second = cn(), cn()
    sent(engine, first)
    sent(engine, second)
    engine.verified("login", second)
    assert outcomes.of(first) == []
    later(store, engine, 1.3)
    # The next guarded send sweeps.
    sent(engine, cn())
    assert outcomes.of(first) == [CodeOutcome.NEVER_VERIFIED]
    assert outcomes.of(second) == [CodeOutcome.VERIFIED]
    record = [r for r in outcomes.all() if r.number == first][0]
    assert record.wall_ms - record.code_sent_wall_ms >= 1000
    # Verified too late: the code's one outcome is already known.
    engine.verified("login", first)
    assert outcomes.of(first) == [CodeOutcome.NEVER_VERIFIED]


def test_a_passed_challenge_is_recorded(store: Store) -> None:
    engine = guarded(store, challenge_signals=int(tickgate.PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY))
    outcomes = Outcomes(engine)
    number = cn()
    engine.challenge_passed("login", number, "198.51.100.1")
    [record] = outcomes.all()
    assert record.outcome == CodeOutcome.CHALLENGE_PASSED
    assert (record.number, record.country, record.client_address, record.code_sent_wall_ms) == \
        (number, "CN", "198.51.100.1", 0)


def test_decision_records_and_outcomes_are_apart(store: Store) -> None:
    engine = guarded(store)
    outcomes = Outcomes(engine)
    decisions: List[tickgate.GuardRecord] = []
    subscription = engine.subscribe_records("login", decisions.append)
    number = cn()
    sent(engine, number)
    engine.verified("login", number)
    engine.dispatch()
    assert [r.outcome for r in decisions] == [None] and decisions[0].granted
    assert [r.outcome for r in outcomes.all()] == [CodeOutcome.VERIFIED]
    subscription.close()


def test_no_one_listening_follows_nothing(store: Store) -> None:
    """A code sent while no one listened has no outcome: its verification,
    heard by a later subscription, reports nothing."""
    engine = guarded(store)
    number = cn()
    sent(engine, number)
    outcomes = Outcomes(engine)
    engine.verified("login", number)
    assert outcomes.all() == []


def test_a_failed_send_is_not_followed(store: Store) -> None:
    engine = guarded(store, after=1)
    outcomes = Outcomes(engine)
    number = cn()
    engine.send_begin("login", number, client_address="203.0.113.7").failed()
    later(store, engine, 1.3)
    sent(engine, cn())
    assert outcomes.of(number) == []


def test_one_engine_reports_each_code(shared: Store) -> None:
    """Engine a sends; engine b verifies one code and kills another: b
    reports them, and a's sweep reports only the code nobody verified."""
    a = guarded(shared, after=1)
    b = shared.open()
    b.set_policy("login", POLICY)
    heard_a, heard_b = Outcomes(a), Outcomes(b)
    verified, killed, left = cn(), cn(), cn()
    for number in (verified, killed, left):
        sent(a, number)
    b.verified("login", verified)
    for _ in range(3):
        b.verify_failed("login", killed)
    assert [(r.number, r.outcome) for r in heard_b.all()] == \
        [(verified, CodeOutcome.VERIFIED), (killed, CodeOutcome.KILLED)]
    time.sleep(1.3)
    sweeper = cn()
    sent(a, sweeper)
    assert [(r.number, r.outcome) for r in heard_a.all()] == [(left, CodeOutcome.NEVER_VERIFIED)]
    # b's sweep finds only the code a sent since (a, not b, was asked to
    # follow it: b listens too, so its own sends are followed as well).
    time.sleep(1.1)
    sent(b, cn())
    assert [(r.number, r.outcome) for r in heard_b.all()] == \
        [(verified, CodeOutcome.VERIFIED), (killed, CodeOutcome.KILLED), (sweeper, CodeOutcome.NEVER_VERIFIED)]
    assert len(heard_a.all()) == 1


def test_concurrent_sweeps_report_each_code_once(shared: Store) -> None:
    """Four engines sweep the same due codes at once: each is reported once."""
    engines = [guarded(shared, after=1)] + [shared.open() for _ in range(3)]
    heard = [Outcomes(e) for e in engines]
    numbers = [cn() for _ in range(40)]
    for number in numbers:
        sent(engines[0], number)
    time.sleep(1.3)
    barrier = threading.Barrier(len(engines))

    def sweep(engine: tickgate.Engine) -> None:
        barrier.wait()
        for _ in range(3):
            sent(engine, cn())
            time.sleep(1.05)

    threads = [threading.Thread(target=sweep, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reported: Dict[str, int] = {}
    for h in heard:
        for r in h.all():
            if r.number in numbers:
                assert r.outcome == CodeOutcome.NEVER_VERIFIED
                reported[r.number] = reported.get(r.number, 0) + 1
    assert reported == {n: 1 for n in numbers}


def test_a_stream_length_on_a_file_follows_no_code_for_no_one(tmp_path: Path) -> None:
    """SQLite keeps no record stream: a guard's record_stream_length there
    has no reader, so a send with no outcome observer follows no code (no
    store call beyond the screen, the begin and the end), as on a guard
    without it; an outcome observer still hears the code's outcome."""
    calls = []
    for length in (0, 1000):
        s = Store("sqlite", tmp_path / f"stream{length}")
        (tmp_path / f"stream{length}").mkdir()
        try:
            engine = guarded(s, record_stream_length=length)
            before = engine.stats().store_calls
            sent(engine, cn())
            calls.append(engine.stats().store_calls - before)
            heard = Outcomes(engine)
            number = cn()
            sent(engine, number)
            engine.verified("login", number)
            assert heard.of(number) == [CodeOutcome.VERIFIED]
        finally:
            s.close()
    assert calls[0] == calls[1] == 3, calls


@pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set")
def test_redis_the_stream_holds_every_engines_outcomes(tmp_path: Path) -> None:
    s = Store("redis", tmp_path)
    try:
        a = guarded(s, record_stream_length=1000)
        b = s.open()
        number, other = cn(), cn()
        sent(a, number)
        sent(a, other)
        b.verified("login", number)  # b has no subscription: the stream hears it
        time.sleep(0.2)
        socket = URL.split("://", 1)[1]  # type: ignore[union-attr]
        raw = subprocess.run(["redis-cli", "-s", socket, "--raw", "XRANGE", f"{s.prefix}u{{5:login}}records", "-", "+"],
                             check=True, capture_output=True, text=True).stdout.split("\n")
        entries = []
        current: Dict[str, str] = {}
        i = 0
        while i < len(raw) - 1:
            if raw[i] == "time_ms" and current:
                entries.append(current)
                current = {}
            if raw[i] in ("time_ms", "number", "outcome", "sent_ms", "country", "address"):
                current[raw[i]] = raw[i + 1]
                i += 2
            else:
                i += 1
        if current:
            entries.append(current)
        outcomes = [(e["number"], e["outcome"]) for e in entries]
        assert outcomes == [(number, "granted"), (other, "granted"), (number, "verified")], outcomes
        assert int(entries[2]["sent_ms"]) <= int(entries[2]["time_ms"])
        assert entries[2]["address"] == "203.0.113.7" and entries[2]["country"] == "CN"
    finally:
        s.close()


@pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set")
def test_redis_a_followed_key_of_the_wrong_type_is_corrupt_and_changes_nothing(tmp_path: Path) -> None:
    s = Store("redis", tmp_path)
    try:
        engine = guarded(s)
        outcomes = Outcomes(engine)
        number = cn()
        sent(engine, number)
        socket = URL.split("://", 1)[1]  # type: ignore[union-attr]
        key = f"{s.prefix}u{{5:login}}dsub"
        subprocess.run(["redis-cli", "-s", socket, "DEL", key], check=True, capture_output=True)
        subprocess.run(["redis-cli", "-s", socket, "SET", key, "x"], check=True, capture_output=True)
        # The verification stands (outcomes are best effort) and nothing
        # is reported from a key that is not Tickgate's.
        engine.verified("login", number)
        assert outcomes.all() == []
        # Nor is the key changed, by a send's follow and sweep either (its
        # expiry included: a step sets it on the keys it wrote).
        other = cn()
        sent(engine, other)
        engine.verified("login", other)

        def held(*command: str) -> str:
            return subprocess.run(["redis-cli", "-s", socket, *command], check=True, capture_output=True,
                                  text=True).stdout.strip()
        assert (held("GET", key), held("PTTL", key)) == ("x", "-1")
        subprocess.run(["redis-cli", "-s", socket, "DEL", key], check=True, capture_output=True)
    finally:
        s.close()


def test_an_engine_no_one_hears_sweeps_nothing(shared: Store) -> None:
    """Engine b has no outcomes subscription (and no stream): its
    verification takes off only its number's code; a's code, due by then,
    is left for a's own sweep to report."""
    a = guarded(shared, after=1)
    b = shared.open()
    b.set_policy("login", POLICY)
    heard = Outcomes(a)
    left, verified = cn(), cn()
    sent(a, left)
    sent(a, verified)
    time.sleep(1.3)
    b.verified("login", verified)
    assert heard.all() == []  # b decided it, and no one hears b
    sent(a, cn())  # a's sweep
    assert [(r.number, r.outcome) for r in heard.all()] == [(left, CodeOutcome.NEVER_VERIFIED)]


def test_aio_records_outcomes_and_a_passed_challenge(store: Store) -> None:
    """tickgate.aio: the guard's records and its codes' outcomes as async
    iterators on the loop, and achallenge_passed on a worker thread."""
    import asyncio

    from tickgate.aio import AsyncEngine

    options: Dict[str, object] = {}
    if store.kind == "sqlite":
        options["store_path"] = str(store.path)
    elif store.kind == "redis":
        options.update(store_url=URL, store_prefix=store.prefix)

    async def main() -> None:
        async with AsyncEngine(**options) as engine:  # type: ignore[arg-type]
            engine.set_policy("login", POLICY)
            engine.set_guard("login", GuardMode.ENFORCE, unverified_after_seconds=60,
                             challenge_signals=int(tickgate.PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY),
                             **QUIET)  # type: ignore[arg-type]
            number = cn()
            async with engine.records("login") as records, engine.outcomes("login") as outcomes:
                ticket = await engine.asend_begin("login", number, client_address="203.0.113.7")
                await engine.asend_end(ticket, tickgate.SendOutcome.SUCCEEDED)
                decision = await records.__anext__()
                assert (decision.number, decision.granted, decision.outcome) == (number, True, None)
                await engine.averified("login", number)
                verified = await outcomes.__anext__()
                assert (verified.number, verified.outcome) == (number, CodeOutcome.VERIFIED)
                await engine.achallenge_passed("login", number, "198.51.100.1")
                passed = await outcomes.__anext__()
                assert (passed.number, passed.outcome, passed.client_address) == \
                    (number, CodeOutcome.CHALLENGE_PASSED, "198.51.100.1")
            # Closed with the block: the streams end, and nothing more is heard.
            assert not records.subscription.active and not outcomes.subscription.active
        with pytest.raises(tickgate.Closed):
            await engine.achallenge_passed("login", number, "198.51.100.1")

    asyncio.run(asyncio.wait_for(main(), 30))


def test_redis_a_verification_that_failed_reports_no_outcome(own_redis: "OwnRedis") -> None:
    """A stopped server (SIGSTOP): the verification fails with a store
    error, changes nothing and reports nothing, even once the server runs
    the held request late; the verification again reports the code once."""
    prefix = f"outcomes:{os.getpid()}:stop:"
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, store_url=own_redis.url, store_prefix=prefix,
                         store_timeout_ms=300) as engine:
        engine.set_policy("login", POLICY)
        engine.set_guard("login", GuardMode.ENFORCE, unverified_after_seconds=60, **QUIET)  # type: ignore[arg-type]
        outcomes = Outcomes(engine)
        number = cn()
        sent(engine, number)
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises((tickgate.StoreUnknown, tickgate.StoreIO)):
                engine.verified("login", number)
            assert time.monotonic() - started < 3
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        time.sleep(0.5)  # the server runs what it held
        records = Records(engine)
        assert outcomes.of(number) == []
        assert probe(engine, records, cn()).count("country_verified_day") == 0
        engine.verified("login", number)
        assert outcomes.of(number) == [CodeOutcome.VERIFIED]
        assert probe(engine, records, cn()).count("country_verified_day") == 1
