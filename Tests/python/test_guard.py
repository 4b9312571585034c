"""The SMS pumping guard (issue 31) through the Python bindings, on memory,
SQLite (store_path) and Redis (TG_REDIS_URL, the CTest fixture "redis"):
E.164 subjects, destination lists, always-allow lists, the conversion
signals and their adaptive thresholds, one truth across engines, decision
records, bad input, and hostile or stopped Redis servers."""

from __future__ import annotations

import itertools
import re
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

import tickgate
from tickgate import GuardMode, PumpingWarning, Status
from conftest import wait_until

URL = os.environ.get("TG_REDIS_URL")
REDIS_SERVER = shutil.which("redis-server")
_SERIAL = itertools.count(1)
_NUMBERS = itertools.count(1)

STORES = ["memory", "sqlite", "redis"]
SHARED = ["sqlite", "redis"]


def cn() -> str:
    """A fresh mainland China number (a key of its own: no cooldown)."""
    return f"+86138{next(_NUMBERS):08d}"


def us() -> str:
    return f"+1415555{next(_NUMBERS) % 10000:04d}"


def gb() -> str:
    return f"+447700{next(_NUMBERS) % 1000000:06d}"


def hk() -> str:
    return f"+8529{next(_NUMBERS) % 10000000:07d}"


def redis_cli(*args: str) -> str:
    assert URL is not None
    socket = URL.split("://", 1)[1]
    return subprocess.run(["redis-cli", "-s", socket, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


class Store:
    """Engines on one store: memory (each engine its own), one SQLite file,
    or one Redis prefix."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.path = folder / "guard.db"
        self.prefix = f"guard:{os.getpid()}:{next(_SERIAL)}:"
        self.engines: List[tickgate.Engine] = []

    def open(self, **options: object) -> tickgate.Engine:
        options.setdefault("delivery", tickgate.Delivery.HOST_THREAD)
        if self.kind == "memory":
            options.setdefault("clock", tickgate.ClockKind.MANUAL)
        elif self.kind == "sqlite":
            options.setdefault("store_path", str(self.path))
        else:
            options.setdefault("store_url", URL)
            options.setdefault("store_prefix", self.prefix)
        engine = tickgate.Engine(**options)  # type: ignore[arg-type]
        self.engines.append(engine)
        return engine

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "redis" and not URL:
        pytest.skip("TG_REDIS_URL is not set (CTest's redis fixture sets it)")
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "redis" and not URL:
        pytest.skip("TG_REDIS_URL is not set (CTest's redis fixture sets it)")
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        s.close()


class Records:
    """A scope's decision records, as a subscription delivers them."""

    def __init__(self, engine: tickgate.Engine, scope: str = "login") -> None:
        self.engine = engine
        self.lock = threading.Lock()
        self.items: List[tickgate.GuardRecord] = []
        self.threads: set = set()
        self.subscription = engine.subscribe_records(scope, self._add)

    def _add(self, record: tickgate.GuardRecord) -> None:
        with self.lock:
            self.items.append(record)
            self.threads.add(threading.get_ident())

    def all(self) -> List[tickgate.GuardRecord]:
        if self.engine.delivery == tickgate.Delivery.HOST_THREAD:
            self.engine.dispatch()
        with self.lock:
            return list(self.items)

    def last(self) -> tickgate.GuardRecord:
        items = self.all()
        assert items, "no record was delivered"
        return items[-1]


def grant(engine: tickgate.Engine, number: str, address: Optional[str] = None,
          budgets: Optional[list] = None, scope: str = "login") -> tickgate.SendTicket:
    ticket = engine.send_begin(scope, number, budgets=budgets, client_address=address)
    ticket.succeeded()
    return ticket


def probe(engine: tickgate.Engine, records: Records, number: str, address: Optional[str] = None,
          scope: str = "login") -> tickgate.GuardRecord:
    """The counts a send sees now (its record), without leaving a code
    counted: granted, it fails (and is given back)."""
    try:
        engine.send_begin(scope, number, client_address=address).failed()
    except (tickgate.PumpingSuspected, tickgate.DestinationRefused):
        pass
    return records.last()


def wait_guarded(engine: tickgate.Engine, scope: str = "login", timeout: float = 10.0) -> None:
    """Until `engine` guards `scope` (on Redis: once the settings notice
    of another engine's tg_guard_set arrived)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            engine.send_begin(scope, f"not-a-number-{next(_NUMBERS)}").failed()
        except tickgate.InvalidNumber:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the engine did not guard {scope} within {timeout} s")
        time.sleep(0.01)


def wait_unguarded(engine: tickgate.Engine, scope: str = "login", timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            engine.send_begin(scope, f"not-a-number-{next(_NUMBERS)}").failed()
            return
        except tickgate.InvalidNumber:
            if time.monotonic() > deadline:
                pytest.fail(f"the engine still guards {scope} after {timeout} s")
            time.sleep(0.01)


# Thresholds that keep every signal out of the way unless a test lowers one.
QUIET = dict(country_daily_minimum=1000, country_hourly_minimum=1000, address_daily_minimum=1000,
             address_hourly_minimum=1000, address_countries_maximum=1000)


@pytest.fixture(autouse=True)
def codes_count_from_their_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases here count a code from its send (unverified_after_seconds=0,
    the anchor's way) unless a case sets it, so that their sends meet the
    thresholds at once; test_a_code_counts_once_its_time_to_verify_passed
    covers the delay."""
    plain = tickgate.Engine.set_guard

    def set_guard(self: tickgate.Engine, scope: str, mode: object = GuardMode.RECORD_ONLY, **options: object) -> None:
        options.setdefault("unverified_after_seconds", 0)
        plain(self, scope, mode, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(tickgate.Engine, "set_guard", set_guard)


def test_a_code_counts_once_its_time_to_verify_passed(store: Store) -> None:
    """With unverified_after_seconds=2 a code in flight is not counted; two
    seconds after its send it is, until it is verified (on the store's
    clock: memory's engine clock, the file's wall time, the Redis server's)."""
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=1, country_hourly_minimum=1,
                                                      unverified_after_seconds=2))
    sent = time.monotonic()
    engine.send_begin("login", "+8613800000001").succeeded()
    # In flight: not counted, so the threshold of 1 lets a second one through.
    engine.send_begin("login", "+8613800000002").succeeded()
    assert time.monotonic() - sent < 1.5, "the machine took over 1.5 s for two sends"
    counted = [dict(r.counts)["country_unverified_day"] for r in records.all()]
    assert counted == [0, 0]
    if store.kind == "memory":
        engine.advance(ms=2200)  # memory counts on the engine's clock (manual here)
    else:
        time.sleep(2.2)
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", "+8613800000003")
    assert dict(records.all()[-1].counts)["country_unverified_day"] == 2
    assert dict(records.all()[-1].counts)["country_unverified_hour"] == 2
    # Verified: counted no more.
    engine.verified("login", "+8613800000001")
    engine.verified("login", "+8613800000002")
    engine.send_begin("login", "+8613800000004").succeeded()
    assert dict(records.all()[-1].counts)["country_unverified_day"] == 0


@pytest.mark.parametrize("seconds", [-1, 3601])
def test_unverified_after_is_at_most_an_hour(seconds: int) -> None:
    with tickgate.Engine() as engine:
        with pytest.raises((tickgate.InvalidArgument, ValueError)):
            engine.set_guard("login", GuardMode.ENFORCE, unverified_after_seconds=seconds)
        # Refused: the scope stays unguarded (a subject that is no number passes).
        engine.send_begin("login", "alice").succeeded()


# -- E.164 ----------------------------------------------------------------------------


def test_a_guarded_scope_takes_only_e164_numbers(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_budget("ip", [(5, 600)])
    engine.set_guard("login", GuardMode.ENFORCE, country_daily_minimum=1, country_hourly_minimum=1)
    for subject in ("alice", "8613800000000", "+", "+0123456", "+86 138 0000 0000", "+8613800000000000000",
                    "+999123456"):
        with pytest.raises(tickgate.InvalidNumber) as refused:
            engine.send_begin("login", subject, budgets=[("ip", "203.0.113.7")], client_address="203.0.113.7")
        assert refused.value.status == Status.E_INVALID_NUMBER
        # Nothing charged: no budget, no countdown.
        assert engine.budget_usage("ip", "203.0.113.7").used == 0
        assert engine.button("login", subject).state is tickgate.ButtonState.IDLE
        record = records.last()
        assert (record.number, record.status, record.country, record.ticket) == \
            (subject, Status.E_INVALID_NUMBER, "", 0)
        assert record.mode == GuardMode.ENFORCE
        assert record.message
    # No code was counted: the limit of 1 still lets the first one through.
    number = cn()
    grant(engine, number, "203.0.113.7", budgets=[("ip", "203.0.113.7")])
    record = records.last()
    assert record.granted and record.country == "CN"
    assert record.count("country_unverified_day") == 0 and record.count("address_unverified_day") == 0
    assert engine.budget_usage("ip", "203.0.113.7").used == 1
    # An unguarded scope takes any subject, as before.
    grant(engine, "alice", scope="signup")
    assert engine.button("signup", "alice").state is tickgate.ButtonState.COOLING
    # Removing the guard makes the scope take any subject again.
    engine.set_guard("login", None)
    grant(engine, "alice")
    assert len(records.all()) == 8


# -- destinations ---------------------------------------------------------------------


def test_destinations_by_region_and_by_prefix(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.OFF, allowed_destinations=["CN", "+1876"],
                     refused_destinations=["+86170"])
    grant(engine, cn())
    grant(engine, "+18765550100")      # JM by its prefix
    with pytest.raises(tickgate.DestinationRefused) as refused:
        engine.send_begin("login", "+14155550100")
    assert "US is not on the allowed list" in str(refused.value)
    assert records.last().rule is not None and "US" in records.last().rule
    with pytest.raises(tickgate.DestinationRefused) as refused:
        engine.send_begin("login", "+8617012345678")
    assert "+86170 is on the refused list" in str(refused.value)
    record = records.last()
    assert (record.status, record.country, record.bypass) == (Status.E_DESTINATION_REFUSED, "CN", None)
    assert "+86170" in (record.rule or "")
    # Refused by region.
    engine.set_guard("login", GuardMode.OFF, refused_destinations=["GB", "+1876"])
    with pytest.raises(tickgate.DestinationRefused) as refused:
        engine.send_begin("login", gb())
    assert "GB is on the refused list" in str(refused.value)
    with pytest.raises(tickgate.DestinationRefused):
        engine.send_begin("login", "+18765550199")
    grant(engine, us())
    grant(engine, "+8617012345678")
    assert [r.status for r in records.all()] == [0, 0, 22, 22, 22, 22, 0, 0]


def test_a_refused_destination_charges_nothing_before_cooldowns_and_budgets(store: Store) -> None:
    engine = store.open()
    engine.set_budget("ip", [(1, 600)])
    engine.set_guard("login", GuardMode.ENFORCE, **QUIET)
    number = us()
    grant(engine, number, budgets=[("ip", "x")])
    # Budget spent and the key cooling down: the destination rule comes first.
    engine.set_guard("login", GuardMode.ENFORCE, refused_destinations=["US"], **QUIET)
    with pytest.raises(tickgate.DestinationRefused):
        engine.send_begin("login", number, budgets=[("ip", "x")])
    with pytest.raises(tickgate.DestinationRefused):
        engine.send_begin("login", us(), budgets=[("ip", "x")])
    engine.reset_budget("ip", "x")
    with pytest.raises(tickgate.DestinationRefused):
        engine.send_begin("login", us(), budgets=[("ip", "x")])
    # The refusals charged nothing: the budget's one send is still there.
    assert engine.budget_usage("ip", "x").used == 0
    grant(engine, cn(), budgets=[("ip", "x")])
    with pytest.raises(tickgate.Locked):
        engine.send_begin("login", cn(), budgets=[("ip", "x")])


# -- always allow ---------------------------------------------------------------------


def test_always_allow_numbers_exact_and_patterns(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    # Every destination refused and every signal at 0: only a bypass passes.
    engine.set_guard("login", GuardMode.ENFORCE, refused_destinations=["CN", "US"],
                     always_allow_numbers=["+8613800000000", "+861390000000?", "+1415*"])
    grant(engine, "+8613800000000")
    assert records.last().bypass == "always-allow number +8613800000000"
    grant(engine, "+8613900000007")
    assert records.last().bypass == "always-allow number +861390000000?"
    grant(engine, "+14155550123")
    assert records.last().bypass == "always-allow number +1415*"
    for number in ("+8613800000001", "+86139000000071", "+12125550123"):
        with pytest.raises(tickgate.DestinationRefused):
            engine.send_begin("login", number)
        assert records.last().bypass is None


def test_always_allow_addresses(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, refused_destinations=["CN"],
                     always_allow_addresses=["203.0.113.0/24", "2001:db8::/32", "198.51.100.7"])
    for address, entry in (("203.0.113.200", "203.0.113.0/24"), ("2001:db8:ffff::1", "2001:db8::/32"),
                           ("198.51.100.7", "198.51.100.7/32"), ("::ffff:203.0.113.5", "203.0.113.0/24")):
        grant(engine, cn(), address)
        assert records.last().bypass == f"always-allow address {entry}", address
    for address in ("203.0.114.1", "2001:db9::1", "198.51.100.8"):
        with pytest.raises(tickgate.DestinationRefused):
            engine.send_begin("login", cn(), client_address=address)
    # The record names the address in canonical form.
    grant(engine, cn(), "2001:DB8:0:0:0:0:0:1")
    assert records.last().client_address == "2001:db8::1"


def test_always_allow_countries_bypass_the_signals_and_are_not_counted(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, always_allow_countries=["HK"],
                     always_allow_addresses=["192.0.2.0/24"],
                     country_daily_minimum=2, country_hourly_minimum=2, address_daily_minimum=2,
                     address_hourly_minimum=2, address_countries_maximum=1)
    for _ in range(5):
        grant(engine, hk(), "203.0.113.7")
        assert records.last().bypass == "always-allow country HK"
        assert records.last().warnings == PumpingWarning(0)
    for _ in range(5):
        grant(engine, cn(), "192.0.2.1")
    # None of those ten was counted: for CN and for 203.0.113.7 and
    # 192.0.2.1, the signals see nothing.
    record = probe(engine, records, cn(), "203.0.113.7")
    assert record.granted and record.bypass is None
    assert dict(record.counts)["country_unverified_day"] == 0
    assert dict(record.counts)["address_unverified_day"] == 0
    assert dict(record.counts)["address_countries_day"] == 1
    grant(engine, cn(), "198.51.100.1")
    grant(engine, cn(), "198.51.100.2")
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", cn(), client_address="198.51.100.3")
    # The bypassed ones stay granted.
    grant(engine, hk())
    grant(engine, cn(), "192.0.2.99")


@pytest.mark.parametrize("skips", [True, False])
def test_always_allow_skips_budgets(store: Store, skips: bool) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_budget("ip", [(1, 600)])
    engine.set_guard("login", GuardMode.ENFORCE, always_allow_numbers=["+1555*"],
                     always_allow_skips_budgets=skips)
    grant(engine, "+15550100001", budgets=[("ip", "x")])
    if skips:
        grant(engine, "+15550100002", budgets=[("ip", "x")])
        assert engine.budget_usage("ip", "x").used == 0
        # A number not always allowed is still charged and refused.
        grant(engine, cn(), budgets=[("ip", "x")])
        with pytest.raises(tickgate.Locked):
            engine.send_begin("login", cn(), budgets=[("ip", "x")])
    else:
        with pytest.raises(tickgate.Locked):
            engine.send_begin("login", "+15550100002", budgets=[("ip", "x")])
        assert engine.budget_usage("ip", "x").used == 1
        assert records.last().bypass == "always-allow number +1555*"


# -- the signals ----------------------------------------------------------------------

# name, warning, thresholds, one send (number, address) per call
SIGNALS = [
    ("unverified_by_country_daily", PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY,
     dict(QUIET, country_daily_minimum=2), lambda: (cn(), None), "country_daily_threshold"),
    ("unverified_by_country_hourly", PumpingWarning.UNVERIFIED_BY_COUNTRY_HOURLY,
     dict(QUIET, country_hourly_minimum=2, country_hourly_divisor=1000000), lambda: (cn(), None),
     "country_hourly_threshold"),
    ("unverified_by_address_daily", PumpingWarning.UNVERIFIED_BY_ADDRESS_DAILY,
     dict(QUIET, address_daily_minimum=2), lambda: (next(ROTATING)(), "203.0.113.7"), "address_daily_threshold"),
    ("unverified_by_address_hourly", PumpingWarning.UNVERIFIED_BY_ADDRESS_HOURLY,
     dict(QUIET, address_hourly_minimum=2), lambda: (cn(), "2001:db8::7"), "address_hourly_threshold"),
    ("countries_by_address_daily", PumpingWarning.COUNTRIES_BY_ADDRESS_DAILY,
     dict(QUIET, address_countries_maximum=2), lambda: (next(ROTATING)(), "203.0.113.8"), None),
]
ROTATING = itertools.cycle([cn, us, gb])


@pytest.mark.parametrize("mode", [GuardMode.ENFORCE, GuardMode.RECORD_ONLY])
@pytest.mark.parametrize("signal", SIGNALS, ids=[s[0] for s in SIGNALS])
def test_each_signal(store: Store, signal: tuple, mode: GuardMode) -> None:
    name, warning, thresholds, one, threshold_name = signal
    global ROTATING
    ROTATING = itertools.cycle([cn, us, gb])
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", mode, **thresholds)
    for _ in range(2):
        grant(engine, *one())
        assert records.last().warnings == PumpingWarning(0)
    number, address = one()
    if mode == GuardMode.ENFORCE:
        with pytest.raises(tickgate.PumpingSuspected) as refused:
            engine.send_begin("login", number, client_address=address)
        assert name in str(refused.value)
        assert refused.value.status == Status.E_PUMPING_SUSPECTED
        record = records.last()
        assert record.status == Status.E_PUMPING_SUSPECTED and record.ticket == 0
        assert name in record.message
    else:
        grant(engine, number, address)
        record = records.last()
        assert record.granted and record.ticket != 0
        assert record.message == ("" if address else SKIPPED_NOTE)
    assert record.address_signals_skipped == (address is None)
    assert record.warnings == warning, record
    assert record.mode == mode
    assert record.country == tickgate.parse_number(number).region
    assert record.client_address == (address or "")
    if threshold_name:
        assert record.count(threshold_name) == 2
    if name == "countries_by_address_daily":
        assert record.count("address_countries_day") == 3
    elif "country" in name:
        assert record.count("country_unverified_day") == 2
    else:
        assert record.count("address_unverified_day") == 2
    assert record.wall_ms > 0 or store.kind == "memory"


SKIPPED_NOTE = "no client address: the address signals were skipped"


def test_a_send_judged_with_no_client_address_says_the_address_signals_were_skipped(store: Store) -> None:
    """Issue 41: a guarded send with no client address was granted with no
    word that the address signals were skipped. Its record now says so (a
    flag and its message); it refuses nothing. A send that was not judged
    (always allowed, refused by its destination, mode OFF) carries no flag."""
    engine = store.open()
    records = Records(engine)
    stream_length = 100 if store.kind == "redis" else 0
    engine.set_guard("login", GuardMode.RECORD_ONLY, refused_destinations=["US"], always_allow_countries=["HK"],
                     record_stream_length=stream_length, **QUIET)
    grant(engine, cn())
    record = records.last()
    assert record.granted and record.warnings == PumpingWarning(0)
    assert record.address_signals_skipped and record.message == SKIPPED_NOTE
    assert record.client_address == ""
    grant(engine, cn(), "203.0.113.7")
    record = records.last()
    assert not record.address_signals_skipped and record.message == ""
    grant(engine, hk())
    record = records.last()
    assert record.bypass == "always-allow country HK" and not record.address_signals_skipped
    assert record.message == ""
    with pytest.raises(tickgate.DestinationRefused):
        engine.send_begin("login", us())
    record = records.last()
    assert not record.address_signals_skipped and SKIPPED_NOTE not in record.message
    # Enforcing: a refusal by the country's counts keeps its message, then the note.
    # (CN has 2 unverified codes already: a third crosses a threshold of 2.)
    engine.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=2))
    with pytest.raises(tickgate.PumpingSuspected) as refused:
        engine.send_begin("login", cn())
    assert SKIPPED_NOTE not in str(refused.value)  # the caller's error is the refusal alone
    record = records.last()
    assert record.status == Status.E_PUMPING_SUSPECTED and record.address_signals_skipped
    assert record.message == f"{refused.value.message}; {SKIPPED_NOTE}"
    # Mode OFF judges nothing: no flag.
    engine.set_guard("login", GuardMode.OFF)
    grant(engine, cn())
    record = records.last()
    assert record.granted and not record.address_signals_skipped and record.message == ""
    if store.kind == "redis":
        # The stream's records carry it as a field (only when set).
        stream = guard_key(store.prefix, "login", "records")
        entries = redis_cli("XRANGE", stream, "-", "+").splitlines()
        assert entries.count("address_skipped") == 1, entries
        # Four decisions (with unverified_after_seconds 0, the stream also
        # holds each code's outcome, never verified, which has no status).
        assert entries.count("status") == 4, entries


@pytest.mark.parametrize("mode", [GuardMode.ENFORCE, GuardMode.RECORD_ONLY])
def test_concurrent_sends_are_judged_one_after_another(store: Store, mode: GuardMode) -> None:
    # A burst of parallel requests (the pumping bot's) is judged as if it
    # came one by one: a threshold of 2 grants 2, not every send that read
    # the counts before the others were counted.
    engine = store.open()
    for burst in range(3):
        scope = f"burst{burst}"
        records = Records(engine, scope)
        engine.set_guard(scope, mode, **dict(QUIET, country_daily_minimum=2))
        barrier = threading.Barrier(8)
        outcomes: List[object] = []
        lock = threading.Lock()

        def send(i: int) -> None:
            barrier.wait()
            try:
                engine.send_begin(scope, cn(), client_address="203.0.113.7" if i % 2 else None).succeeded()
                result: object = "granted"
            except tickgate.TickgateError as error:
                result = type(error)
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        warned = [r for r in records.all() if r.warnings]
        if mode == GuardMode.ENFORCE:
            assert sorted(map(str, outcomes)) == sorted(["granted"] * 2 + [str(tickgate.PumpingSuspected)] * 6)
        else:
            assert outcomes == ["granted"] * 8
        assert len(warned) == 6, records.all()
        # Every record was judged by the codes counted before it (in
        # ENFORCE a refused one's count, given back after, may be among them).
        if mode == GuardMode.ENFORCE:
            assert all(r.count("country_unverified_day") <= 1 for r in records.all() if r.granted)
            assert all(r.count("country_unverified_day") >= 2 for r in records.all() if not r.granted)
        else:
            assert sorted(r.count("country_unverified_day") for r in records.all()) == list(range(8))
        records.subscription.close()


def test_a_verified_country_leaves_the_count_of_countries(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, address_countries_maximum=2))
    china, usa = cn(), us()
    grant(engine, china, "203.0.113.9")
    grant(engine, usa, "203.0.113.9")
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", gb(), client_address="203.0.113.9")
    assert records.last().count("address_countries_day") == 3
    engine.verified("login", china)
    grant(engine, gb(), "203.0.113.9")
    assert records.last().count("address_countries_day") == 2
    # Another address has its own count.
    grant(engine, hk(), "203.0.113.10")
    assert records.last().count("address_countries_day") == 1


def test_a_failed_send_gives_its_code_back(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE,
                     **dict(QUIET, country_daily_minimum=1, address_daily_minimum=1, address_countries_maximum=1))
    for _ in range(3):
        engine.send_begin("login", cn(), client_address="203.0.113.7").failed()
    # A code to another country that failed: not a country the address asked for.
    engine.send_begin("login", us(), client_address="198.51.100.1").failed()
    grant(engine, cn(), "198.51.100.1")
    record = records.last()
    assert record.granted, record
    assert record.count("address_countries_day") == 1
    assert record.count("address_unverified_day") == 0
    grant(engine, us(), "203.0.113.7")
    record = records.last()
    assert record.count("address_unverified_day") == 0 and record.count("country_unverified_day") == 0
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", cn(), client_address="192.0.2.1")
    assert records.last().count("country_unverified_day") == 1


def test_verified_marks_the_keys_last_code(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.RECORD_ONLY, **QUIET)
    a, b = cn(), cn()
    grant(engine, a, "203.0.113.7")
    grant(engine, b, "203.0.113.7")
    record = probe(engine, records, cn(), "203.0.113.7")
    assert (record.count("country_unverified_day"), record.count("address_unverified_day")) == (2, 2)
    engine.verified("login", a)
    record = probe(engine, records, cn(), "203.0.113.7")
    assert (record.count("country_unverified_day"), record.count("country_verified_day"),
            record.count("country_verified_hour")) == (1, 1, 1)
    assert (record.count("address_unverified_day"), record.count("address_verified_day")) == (1, 1)
    assert record.count("country_verified_daily_max") == 1
    engine.verified("login", b)
    record = probe(engine, records, cn(), "203.0.113.7")
    assert (record.count("country_unverified_day"), record.count("country_verified_day")) == (0, 2)
    # Verified again without a new code: nothing more is marked.
    engine.verified("login", b)
    record = probe(engine, records, cn(), "203.0.113.7")
    assert record.count("country_unverified_day") == 0
    # An unguarded scope's verification counts nowhere.
    grant(engine, cn(), scope="signup")
    engine.verified("signup", a)


def test_a_failed_send_leaves_the_keys_earlier_code_to_verify(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1,)))
    engine.set_guard("login", GuardMode.RECORD_ONLY, **QUIET)
    number = cn()
    grant(engine, number, "203.0.113.7")        # the code the user holds
    if store.kind == "memory":
        engine.advance(ms=5)
    else:
        time.sleep(0.01)
    engine.send_begin("login", number, client_address="203.0.113.7").failed()   # never went out
    engine.verified("login", number)
    # The code verified is the one that went out: nothing is left unverified.
    record = probe(engine, records, cn(), "203.0.113.7")
    assert (record.count("country_unverified_day"), record.count("country_verified_day")) == (0, 1), record
    assert (record.count("address_unverified_day"), record.count("address_verified_day")) == (0, 1), record


# -- thresholds that adapt ------------------------------------------------------------

ADAPTING = [
    ("day", dict(QUIET, country_daily_minimum=1, country_day_percent=50, country_history_percent=0),
     "country_daily_threshold", None),
    ("history", dict(QUIET, country_daily_minimum=1, country_day_percent=0, country_history_percent=50),
     "country_daily_threshold", None),
    ("hour", dict(QUIET, country_hourly_minimum=1, country_hourly_divisor=1000000, country_hour_percent=50),
     "country_hourly_threshold", None),
    ("address_day", dict(QUIET, address_daily_minimum=1, address_day_percent=50), "address_daily_threshold",
     "203.0.113.7"),
    ("address_hour", dict(QUIET, address_hourly_minimum=1, address_hourly_divisor=1, address_day_percent=50),
     "address_hourly_threshold", "203.0.113.7"),
]


@pytest.mark.parametrize("case", ADAPTING, ids=[c[0] for c in ADAPTING])
def test_verified_codes_raise_the_thresholds(store: Store, case: tuple) -> None:
    _, thresholds, threshold_name, address = case
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, **thresholds)
    # Each verified before the next: never more than 1 unverified.
    for _ in range(4):
        number = cn()
        grant(engine, number, address)
        engine.verified("login", number)
    # 50 % of 4 verified: 2 unverified codes pass, the third is refused.
    grant(engine, cn(), address)
    assert records.last().count(threshold_name) == 2
    grant(engine, cn(), address)
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", cn(), client_address=address)
    record = records.last()
    assert record.count(threshold_name) == 2
    if address:
        assert record.count("address_verified_day") == 4
    else:
        assert (record.count("country_verified_day"), record.count("country_verified_hour"),
                record.count("country_verified_daily_max")) == (4, 4, 4)


def test_thresholds_adapt_over_days_on_the_manual_clock() -> None:
    hour = 3600 * 1000
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, clock=tickgate.ClockKind.MANUAL) as engine:
        records = Records(engine)
        engine.set_guard("login", GuardMode.ENFORCE, country_daily_minimum=2, country_hourly_minimum=1,
                         country_hourly_divisor=1000000, address_daily_minimum=1000,
                         address_hourly_minimum=1000)
        # One an hour passes; the second in the hour is refused.
        grant(engine, cn())
        with pytest.raises(tickgate.PumpingSuspected) as refused:
            engine.send_begin("login", cn())
        assert "unverified_by_country_hourly" in str(refused.value)
        engine.advance(ms=hour + 1)
        grant(engine, cn())
        engine.advance(ms=hour + 1)
        # Two in the day: the day's limit.
        with pytest.raises(tickgate.PumpingSuspected) as refused:
            engine.send_begin("login", cn())
        assert str(refused.value).count("unverified_by_country_daily") == 1
        assert "hourly" not in str(refused.value).split("(")[0]
        engine.advance(ms=22 * hour)
        # The first code left the day.
        grant(engine, cn())
        assert records.last().count("country_unverified_day") == 1
        # A busy day: 20 verified. 20 % of the 14-day max is 4.
        engine.advance(ms=25 * hour)
        engine.set_guard("login", GuardMode.ENFORCE, country_daily_minimum=2, country_hourly_minimum=1000,
                         address_daily_minimum=1000, address_hourly_minimum=1000)
        for _ in range(20):
            number = cn()
            grant(engine, number)
            engine.verified("login", number)
        # Two days later the day's verified are gone, the history stays.
        engine.advance(ms=50 * hour)
        for _ in range(4):
            grant(engine, cn())
        record = records.last()
        assert (record.count("country_verified_day"), record.count("country_verified_daily_max"),
                record.count("country_daily_threshold")) == (0, 20, 4)
        with pytest.raises(tickgate.PumpingSuspected):
            engine.send_begin("login", cn())
        # 14 days on, the busy day left the history: the minimum again.
        engine.advance(ms=14 * 24 * hour)
        record = probe(engine, records, cn())
        assert (record.count("country_verified_daily_max"), record.count("country_daily_threshold")) == (0, 2)


# -- one truth across engines ---------------------------------------------------------


def test_two_engines_judge_by_the_same_counts(shared: Store) -> None:
    a = shared.open()
    b = shared.open()
    records_a = Records(a)
    records_b = Records(b)
    a.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=3, address_countries_maximum=2))
    # SQLite: B reads the guard with its next send; Redis: once A's notice arrived.
    wait_guarded(b)
    first = cn()
    grant(a, first, "203.0.113.7")
    grant(a, cn(), "203.0.113.7")
    record = probe(b, records_b, cn(), "203.0.113.7")
    assert record.count("country_unverified_day") == 2
    assert record.count("address_unverified_day") == 2
    # Countries asked from one address on both engines.
    grant(b, us(), "203.0.113.7")
    with pytest.raises(tickgate.PumpingSuspected):
        a.send_begin("login", gb(), client_address="203.0.113.7")
    assert records_a.last().count("address_countries_day") == 3
    # B verifies a code A sent: both see it verified.
    b.verified("login", first)
    record = probe(a, records_a, cn(), "198.51.100.9")
    assert (record.count("country_unverified_day"), record.count("country_verified_day")) == (1, 1)
    grant(a, cn(), "198.51.100.1")
    grant(b, cn(), "198.51.100.2")
    with pytest.raises(tickgate.PumpingSuspected):
        a.send_begin("login", cn(), client_address="198.51.100.3")
    with pytest.raises(tickgate.PumpingSuspected):
        b.send_begin("login", cn())
    # A changes the guard: B's next sends follow it.
    a.set_guard("login", GuardMode.ENFORCE, refused_destinations=["CN"], **QUIET)
    if shared.kind == "sqlite":
        with pytest.raises(tickgate.DestinationRefused):
            b.send_begin("login", cn())
    else:
        deadline = time.monotonic() + 10
        while True:
            try:
                b.send_begin("login", cn())
            except tickgate.DestinationRefused:
                break
            except tickgate.PumpingSuspected:
                assert time.monotonic() < deadline, "B never heard the new guard"
                time.sleep(0.01)
    # Removed on A: B takes any subject again.
    a.set_guard("login", None)
    wait_unguarded(b)


def test_a_range_over_its_threshold_is_refused_and_named(store: Store) -> None:
    """Codes of one carrier's block (+44752000...) are refused by the
    narrowest range that holds them, named in the refusal and the record;
    another kind of number (+4474...) is judged by its own ranges."""
    engine = store.open()
    records = Records(engine)
    # The block's minimums, new (none of its codes verified) or known.
    engine.set_guard("login", GuardMode.ENFORCE, range_signals=1, range_new_daily_minimum=1000,
                     range_new_hourly_minimum=2, range_daily_minimum=1000, range_hourly_minimum=2,
                     country_hourly_divisor=1000000, **QUIET)
    grant(engine, "+447520001001", "198.51.100.1")
    grant(engine, "+447520001002", "198.51.100.2")
    with pytest.raises(tickgate.PumpingSuspected) as refused:
        engine.send_begin("login", "+447520001003", client_address="198.51.100.3")
    assert "range +44752000: 2 of 1000 a day, 2 of 2 an hour" in str(refused.value)
    record = records.last()
    assert record.warnings == PumpingWarning.UNVERIFIED_BY_RANGE_HOURLY
    assert record.warnings.names == ("unverified_by_range_hourly",)
    assert record.range == "+44752000"
    assert (record.count("range_unverified_hour"), record.count("range_hourly_threshold")) == (2, 2)
    assert record.count("range_daily_threshold") == 1000
    # The country (its thresholds 1000) and another kind of number pass.
    grant(engine, "+447400123456", "198.51.100.4")
    assert records.last().warnings == PumpingWarning(0)
    assert records.last().range == ""
    # A verified code leaves the range's count: room for one more.
    engine.verified("login", "+447520001001")
    grant(engine, "+447520001004")
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", "+447520001005")


def test_a_new_range_is_trusted_least(store: Store) -> None:
    """A range none of whose codes was verified in the history is judged by
    range_new_daily_minimum and range_new_hourly_minimum; once one of its
    codes is verified, by range_daily_minimum and range_hourly_minimum."""
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, range_signals=1, country_hourly_divisor=1000000, **QUIET)
    # The defaults: a new range lets 1 unverified code an hour through.
    grant(engine, "+447520001001")
    with pytest.raises(tickgate.PumpingSuspected) as refused:
        engine.send_begin("login", "+447520001002")
    assert "range +44752000: 1 of 5 a day, 1 of 1 an hour" in str(refused.value)
    assert (records.last().count("range_daily_threshold"), records.last().count("range_hourly_threshold")) == (5, 1)
    # A verified code makes the ranges known: 40 a day, 8 an hour.
    engine.verified("login", "+447520001001")
    for n in range(8):
        grant(engine, f"+44752000200{n}")
    with pytest.raises(tickgate.PumpingSuspected) as refused:
        engine.send_begin("login", "+447520002099")
    assert "range +44752000: 8 of 40 a day, 8 of 8 an hour" in str(refused.value)


def test_a_number_is_not_judged_by_its_own_codes(store: Store) -> None:
    """A user whose code never came asks again: a range's counts for a
    send leave out the number's own unverified codes (alone in a new range,
    the user was refused or challenged for asking again). Other numbers of
    the range still count them, and a verification marks only the number's
    last code, as before."""
    engine = store.open()
    records = Records(engine)
    engine.set_policy("login", tickgate.Policy(cooldowns_ms=(1,)))
    # The defaults of a new range (1 unverified code an hour) for a known
    # one too, so that the verification below leaves the minimums alone.
    engine.set_guard("login", GuardMode.ENFORCE, range_signals=1, range_daily_minimum=5, range_hourly_minimum=1,
                     country_hourly_divisor=1000000, **QUIET)
    number = "+447520001001"

    def later() -> None:
        if store.kind == "memory":
            engine.advance(ms=5)
        else:
            time.sleep(0.01)

    grant(engine, number)
    for _ in range(2):
        later()
        grant(engine, number)
        assert records.last().warnings == PumpingWarning(0), records.last()
    # Its three codes count for another number of the range.
    with pytest.raises(tickgate.PumpingSuspected) as refused:
        engine.send_begin("login", "+447520001002")
    assert "range +44752000: 3 of 5 a day, 3 of 1 an hour" in str(refused.value)
    # A verification marks the last code: the two before it still count
    # for others, not for the number.
    engine.verified("login", number)
    with pytest.raises(tickgate.PumpingSuspected) as refused:
        engine.send_begin("login", "+447520001003")
    assert re.search(r"range \+44752000: 2 of \d+ a day, 2 of \d+ an hour", str(refused.value)), str(refused.value)
    later()
    grant(engine, number)
    assert records.last().warnings == PumpingWarning(0), records.last()
    # A code given back leaves the number's own too: the next one is judged
    # as before it.
    later()
    engine.send_begin("login", number).failed()
    later()
    grant(engine, number)
    assert records.last().warnings == PumpingWarning(0), records.last()


def test_ranges_are_off_unless_set(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, range_hourly_minimum=0, **QUIET)
    for n in range(3):
        grant(engine, f"+44752000100{n}")
    assert records.last().warnings == PumpingWarning(0)
    assert records.last().range == ""


def test_record_only_records_a_range_and_grants(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.RECORD_ONLY, range_signals=1, range_new_daily_minimum=1,
                     range_new_hourly_minimum=1, **QUIET)
    grant(engine, "+447520001001")
    grant(engine, "+447520001002")
    record = records.last()
    assert record.granted
    assert record.warnings == PumpingWarning.UNVERIFIED_BY_RANGE_DAILY | PumpingWarning.UNVERIFIED_BY_RANGE_HOURLY
    assert record.range == "+44752000"


def test_two_engines_count_the_same_ranges(shared: Store) -> None:
    a = shared.open()
    b = shared.open()
    records_b = Records(b)
    a.set_guard("login", GuardMode.ENFORCE, range_signals=1, range_new_daily_minimum=1000, range_new_hourly_minimum=2,
                range_daily_minimum=1000, range_hourly_minimum=2,
                country_hourly_divisor=1000000, **QUIET)
    wait_guarded(b)
    grant(a, "+447520001001")
    grant(b, "+447520001002")
    with pytest.raises(tickgate.PumpingSuspected):
        a.send_begin("login", "+447520001003")
    with pytest.raises(tickgate.PumpingSuspected):
        b.send_begin("login", "+447520001004")
    assert records_b.last().range == "+44752000"
    # A verification on B frees the range on A.
    b.verified("login", "+447520001001")
    grant(a, "+447520001005")


CHALLENGED = dict(range_signals=1, range_new_daily_minimum=1000, range_new_hourly_minimum=1, range_daily_minimum=1000,
                  range_hourly_minimum=1, country_hourly_divisor=1000000,
                  challenge_signals=PumpingWarning.UNVERIFIED_BY_RANGE_DAILY | PumpingWarning.UNVERIFIED_BY_RANGE_HOURLY)


def test_a_challenge_instead_of_a_refusal(store: Store) -> None:
    """A send whose warnings all challenge raises ChallengeRequired (its
    message and record name the signal); once the person passed, the next
    send of the number from the address goes through, once, counted."""
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, **CHALLENGED, **QUIET)
    x = "198.51.100.2"
    grant(engine, "+447520001001", "198.51.100.1")
    with pytest.raises(tickgate.ChallengeRequired) as asked:
        engine.send_begin("login", "+447520001002", client_address=x)
    assert asked.value.status == Status.E_CHALLENGE_REQUIRED
    assert "a challenge is required: unverified_by_range_hourly" in str(asked.value)
    record = records.last()
    assert record.status == Status.E_CHALLENGE_REQUIRED and not record.challenge_passed
    assert record.range == "+44752000"
    engine.challenge_passed("login", "+447520001002", x)
    with pytest.raises(tickgate.ChallengeRequired):  # another address: no pass
        engine.send_begin("login", "+447520001002", client_address="198.51.100.3")
    grant(engine, "+447520001002", x)
    record = records.last()
    assert record.granted and record.challenge_passed
    assert record.warnings == PumpingWarning.UNVERIFIED_BY_RANGE_HOURLY
    # Once: the pass is used up; and the code was counted.
    with pytest.raises(tickgate.ChallengeRequired):
        engine.send_begin("login", "+447520001003", client_address=x)
    assert records.last().count("range_unverified_hour") == 2
    # Never past a cooldown.
    engine.challenge_passed("login", "+447520001002", x)
    with pytest.raises(tickgate.CoolingDown):
        engine.send_begin("login", "+447520001002", client_address=x)


def test_a_code_through_a_ranges_challenge_is_the_ranges_not_the_countrys(store: Store) -> None:
    """A code a passed challenge let through warnings of its ranges alone
    keeps counting in the range (still warned), not in the country: the few
    bots that pass a range's challenges must not fill the country's hour
    and challenge every user of the country. A code passed through a
    country's warning counts in the country as any."""
    engine = store.open()
    records = Records(engine)
    engine.set_guard("login", GuardMode.ENFORCE, **CHALLENGED, **QUIET)
    grant(engine, "+447520001001", "198.51.100.1")
    with pytest.raises(tickgate.ChallengeRequired):
        engine.send_begin("login", "+447520001002", client_address="198.51.100.2")
    engine.challenge_passed("login", "+447520001002", "198.51.100.2")
    grant(engine, "+447520001002", "198.51.100.2")
    assert records.last().challenge_passed
    # The range counts both codes; the country only the first.
    with pytest.raises(tickgate.ChallengeRequired):
        engine.send_begin("login", "+447520001003", client_address="198.51.100.3")
    assert records.last().count("range_unverified_hour") == 2
    record = probe(engine, records, "+447700900123", "198.51.100.4")
    assert (record.count("country_unverified_day"), record.count("country_unverified_hour")) == (1, 1), record
    # Verified, the passed code leaves the range and adds a verification.
    engine.verified("login", "+447520001002")
    record = probe(engine, records, "+447700900124", "198.51.100.4")
    assert (record.count("country_unverified_day"), record.count("country_verified_day")) == (1, 1), record
    # A pass through the country's warning: counted in the country.
    engine.set_guard("login", GuardMode.ENFORCE, **dict(CHALLENGED, challenge_signals=PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY
                                                        | PumpingWarning.UNVERIFIED_BY_RANGE_HOURLY),
                     **dict(QUIET, country_daily_minimum=1, country_day_percent=0, country_history_percent=0))
    with pytest.raises(tickgate.ChallengeRequired):
        engine.send_begin("login", "+447400123456", client_address="198.51.100.5")
    assert records.last().warnings == PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY
    engine.challenge_passed("login", "+447400123456", "198.51.100.5")
    grant(engine, "+447400123456", "198.51.100.5")
    with pytest.raises(tickgate.ChallengeRequired):
        engine.send_begin("login", "+447700900125", client_address="198.51.100.4")
    assert records.last().count("country_unverified_day") == 2, records.last()


def test_a_pass_is_one_truth_on_a_shared_store(shared: Store) -> None:
    a = shared.open()
    b = shared.open()
    a.set_guard("login", GuardMode.ENFORCE, **CHALLENGED, **QUIET)
    wait_guarded(b)
    grant(a, "+447520001001")
    with pytest.raises(tickgate.ChallengeRequired):
        b.send_begin("login", "+447520001002")
    b.challenge_passed("login", "+447520001002")
    grant(a, "+447520001002")
    with pytest.raises(tickgate.ChallengeRequired):
        b.send_begin("login", "+447520001003")


def test_challenge_passed_refuses_bad_input(store: Store) -> None:
    engine = store.open()
    with pytest.raises(tickgate.NotFound):
        engine.challenge_passed("login", "+447520001001")
    engine.set_guard("login", GuardMode.ENFORCE, **QUIET)
    with pytest.raises(tickgate.NotFound, match="no guard with challenge signals"):
        engine.challenge_passed("login", "+447520001001")
    engine.set_guard("login", GuardMode.ENFORCE, **CHALLENGED, **QUIET)
    for number in ["447520001001", "+44 7520", "alice", "+4475200010011234567"]:
        with pytest.raises(tickgate.InvalidNumber):
            engine.challenge_passed("login", number)
    with pytest.raises(tickgate.InvalidArgument):
        engine.challenge_passed("login", "+447520001001", "203.0.113.256")
    with pytest.raises(tickgate.InvalidKey):
        engine.challenge_passed("", "+447520001001")
    with pytest.raises(tickgate.InvalidArgument, match="challenge_signals"):
        engine.set_guard("login", GuardMode.ENFORCE, challenge_signals=0x80)
    with pytest.raises(tickgate.InvalidArgument, match="challenge_pass_seconds"):
        engine.set_guard("login", GuardMode.ENFORCE, challenge_signals=1, challenge_pass_seconds=0)


def test_a_verification_on_an_engine_that_never_sent_counts(shared: Store) -> None:
    a = shared.open()
    b = shared.open()
    records_a = Records(a)
    a.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=1))
    number = cn()
    grant(a, number)
    # B learns of the guard without sending (Redis: by the notice).
    if shared.kind == "redis":
        wait_guarded(b)
    b.verified("login", number)
    record = probe(a, records_a, cn())
    assert (record.count("country_unverified_day"), record.count("country_verified_day")) == (0, 1), record


def test_a_guard_survives_reopening(shared: Store) -> None:
    a = shared.open()
    a.set_guard("login", GuardMode.ENFORCE, allowed_destinations=["CN"],
                always_allow_numbers=["+1555*"], always_allow_addresses=["2001:db8::/32"], **QUIET)
    a.close()
    b = shared.open()
    with pytest.raises(tickgate.DestinationRefused):
        b.send_begin("login", us())
    with pytest.raises(tickgate.InvalidNumber):
        b.send_begin("login", "alice")
    grant(b, "+15550100001")
    grant(b, us(), "2001:db8::1")


# -- records --------------------------------------------------------------------------


def test_every_send_has_one_record_delivered_by_dispatch(store: Store) -> None:
    engine = store.open()
    records = Records(engine)
    other = Records(engine, "signup")
    engine.set_guard("login", GuardMode.ENFORCE, refused_destinations=["US"], always_allow_countries=["HK"],
                     **dict(QUIET, country_daily_minimum=1))
    engine.set_guard("signup", GuardMode.RECORD_ONLY, **QUIET)
    outcomes = []

    def attempt(number: str, address: Optional[str] = None) -> None:
        try:
            ticket = engine.send_begin("login", number, client_address=address)
            outcomes.append(ticket.id)
            ticket.succeeded()
        except tickgate.TickgateError as error:
            outcomes.append(error.status)

    for number, address in (("+8613800000000", "203.0.113.7"), ("+8613800000001", None),
                            ("alice", None), (us(), "2001:db8::1"), (hk(), "198.51.100.1")):
        attempt(number, address)
    # Never inside the call: nothing until dispatch.
    with records.lock:
        assert records.items == []
    delivered = records.all()
    assert len(delivered) == 5
    assert [r.status if r.status else r.ticket for r in delivered] == outcomes
    assert outcomes[2:4] == [Status.E_INVALID_NUMBER, Status.E_DESTINATION_REFUSED]
    assert outcomes[1] == Status.E_PUMPING_SUSPECTED
    assert [r.country for r in delivered] == ["CN", "CN", "", "US", "HK"]
    assert [r.client_address for r in delivered] == ["203.0.113.7", "", "", "2001:db8::1", "198.51.100.1"]
    assert delivered[4].bypass == "always-allow country HK"
    assert all(r.scope == "login" for r in delivered)
    assert delivered[0].count("country_daily_threshold") == 1
    assert delivered[0].count("address_daily_threshold") == 1000
    # Only the subscribed scope's records.
    assert other.all() == []
    grant(engine, cn(), scope="signup")
    assert len(other.all()) == 1 and len(records.all()) == 5
    # An unguarded scope has no records; a ended subscription gets none.
    grant(engine, "bob", scope="other")
    records.subscription.close()
    attempt(cn())
    engine.dispatch()
    assert len(records.all()) == 5


def test_records_on_the_engine_thread(store: Store) -> None:
    engine = store.open(delivery=tickgate.Delivery.ENGINE_THREAD)
    records = Records(engine)
    engine.set_guard("login", GuardMode.RECORD_ONLY, **QUIET)
    for _ in range(3):
        grant(engine, cn(), "203.0.113.7")
    with pytest.raises(tickgate.InvalidNumber):
        engine.send_begin("login", "mallory")
    assert wait_until(lambda: len(records.all()) == 4)
    assert threading.get_ident() not in records.threads
    assert [r.status for r in records.all()] == [0, 0, 0, Status.E_INVALID_NUMBER]
    records.subscription.close()
    grant(engine, cn())
    time.sleep(0.1)
    assert len(records.all()) == 4


def test_a_record_callback_that_raises_does_not_stop_the_engine(store: Store) -> None:
    engine = store.open()
    seen = []
    previous = tickgate.set_callback_error_hook(lambda error, event: seen.append(error))
    try:
        def boom(record: tickgate.GuardRecord) -> None:
            raise RuntimeError("host bug")

        engine.subscribe_records("login", boom)
        engine.set_guard("login", GuardMode.RECORD_ONLY)
        grant(engine, cn())
        engine.dispatch()
        grant(engine, cn())
        engine.dispatch()
    finally:
        tickgate.set_callback_error_hook(previous)
    assert len(seen) == 2


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize("options, error, named", [
    (dict(mode=7), tickgate.InvalidArgument, "mode"),
    (dict(mode=-1), tickgate.InvalidArgument, "mode"),
    (dict(allowed_destinations=["cn"]), tickgate.InvalidArgument, "cn"),
    (dict(allowed_destinations=["XX"]), tickgate.InvalidArgument, "XX"),
    (dict(refused_destinations=["+0"]), tickgate.InvalidArgument, "+0"),
    (dict(refused_destinations=["86"]), tickgate.InvalidArgument, "86"),
    (dict(always_allow_numbers=["+1555**"]), tickgate.InvalidArgument, "+1555**"),
    (dict(always_allow_numbers=["1555"]), tickgate.InvalidArgument, "1555"),
    (dict(always_allow_numbers=["+?555"]), tickgate.InvalidArgument, "+?555"),
    (dict(always_allow_addresses=["203.0.113.0/33"]), tickgate.InvalidArgument, "203.0.113.0/33"),
    (dict(always_allow_addresses=["2001:db8::/129"]), tickgate.InvalidArgument, "2001:db8::/129"),
    (dict(always_allow_addresses=["example.com"]), tickgate.InvalidArgument, "example.com"),
    (dict(always_allow_countries=["ZZ"]), tickgate.InvalidArgument, "ZZ"),
    (dict(allowed_destinations=["CN", ""]), tickgate.InvalidArgument, "destination"),
    (dict(allowed_destinations=["\udcff"]), tickgate.InvalidArgument, "UTF-8"),
    (dict(history_days=0), tickgate.InvalidArgument, "history_days"),
    (dict(history_days=61), tickgate.InvalidArgument, "history_days"),
    (dict(country_hourly_divisor=0), tickgate.InvalidArgument, "country_hourly_divisor"),
    (dict(address_hourly_divisor=0), tickgate.InvalidArgument, "address_hourly_divisor"),
    (dict(country_daily_minimum=1000001), tickgate.InvalidArgument, "country_daily_minimum"),
    (dict(address_countries_maximum=0xFFFFFFFF), tickgate.InvalidArgument, "address_countries_maximum"),
    (dict(country_day_percent=-1), tickgate.InvalidArgument, "country_day_percent"),
    (dict(allowed_destinations=["CN,US"]), tickgate.InvalidArgument, "one entry"),
    (dict(allowed_destinations=["CN"] * 30000), tickgate.InvalidArgument, "65536"),
    (dict(always_allow_numbers=["+1555"] * 1001), tickgate.InvalidArgument, "1000"),
    (dict(range_signals=2), tickgate.InvalidArgument, "range_signals"),
    (dict(range_signals=1, range_daily_minimum=1000001), tickgate.InvalidArgument, "range_daily_minimum"),
    (dict(range_signals=1, range_hourly_minimum=-1), tickgate.InvalidArgument, "range_hourly_minimum"),
    (dict(range_signals=1, range_new_daily_minimum=1000001), tickgate.InvalidArgument, "range_new_daily_minimum"),
    (dict(range_signals=1, range_new_hourly_minimum=-1), tickgate.InvalidArgument, "range_new_hourly_minimum"),
])
def test_bad_guards_are_refused_and_change_nothing(store: Store, options: dict, error: type,
                                                  named: str) -> None:
    engine = store.open()
    engine.set_guard("login", GuardMode.ENFORCE, refused_destinations=["US"])
    options = dict(options)
    mode = options.pop("mode", GuardMode.ENFORCE)
    with pytest.raises(error) as refused:
        engine.set_guard("login", mode, **options)
    assert named in str(refused.value)
    # The guard set before is still the guard.
    with pytest.raises(tickgate.DestinationRefused):
        engine.send_begin("login", us())
    grant(engine, cn())


def test_bad_scope_and_unknown_threshold(store: Store) -> None:
    engine = store.open()
    with pytest.raises(tickgate.InvalidKey):
        engine.set_guard("", GuardMode.ENFORCE)
    with pytest.raises(TypeError):
        engine.set_guard("login", GuardMode.ENFORCE, country_dayly_minimum=3)
    with pytest.raises(TypeError):
        engine.subscribe_records("login", None)  # type: ignore[arg-type]
    with pytest.raises(tickgate.InvalidKey):
        engine.subscribe_records("", lambda record: None)
    # Removing a guard that was never set is no error.
    engine.set_guard("login", None)
    grant(engine, "alice")


@pytest.mark.parametrize("address", ["203.0.113", "203.0.113.256", "203.0.113.07", "2001:db8:::1",
                                     "2001:db8::1%eth0", "[2001:db8::1]", "203.0.113.7:443", " 203.0.113.7",
                                     "x" * 200, "\udcff", "203.0.113.0/24", "2001:db8::1\u00e9"])
def test_a_bad_client_address_charges_nothing(store: Store, address: str) -> None:
    engine = store.open()
    records = Records(engine)
    engine.set_budget("ip", [(1, 600)])
    engine.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=1))
    number = cn()
    with pytest.raises(tickgate.InvalidArgument):
        engine.send_begin("login", number, budgets=[("ip", "x")], client_address=address)
    # Also on an unguarded scope.
    with pytest.raises(tickgate.InvalidArgument):
        engine.send_begin("signup", number, budgets=[("ip", "x")], client_address=address)
    assert engine.budget_usage("ip", "x").used == 0
    assert engine.button("login", number).state is tickgate.ButtonState.IDLE
    grant(engine, number, "203.0.113.7", budgets=[("ip", "x")])
    assert records.last().count("country_unverified_day") == 0
    # An empty address is no address.
    with pytest.raises(tickgate.PumpingSuspected):
        engine.send_begin("login", cn(), client_address="")
    assert records.last().client_address == ""


def test_parse_number() -> None:
    assert tickgate.parse_number("+8613800000000") == tickgate.NumberInfo("86", "CN", 13)
    assert tickgate.parse_number("+18765550100") == tickgate.NumberInfo("1", "JM", 11)
    assert tickgate.parse_number("+447700900123").region == "GB"
    assert tickgate.parse_number("+80012345678").region == ""
    assert tickgate.parse_number("+80012345678").calling_code == "800"
    assert tickgate.parse_number("+8801712345678").calling_code == "880"
    for bad in ("", "+", "8613800000000", "+0", "+86138000000000000", "+86 138", "+86138O0000000", "\udcff",
                "+" + "1" * 10000, "x" * 10000, "+999123456", "+٣٣٣٣٣٣"):
        with pytest.raises(tickgate.InvalidNumber) as refused:
            tickgate.parse_number(bad)
        assert refused.value.status == Status.E_INVALID_NUMBER
        assert len(str(refused.value)) < 500
    with pytest.raises(tickgate.InvalidArgument):
        tickgate.parse_number("+86\x00138")
    with pytest.raises(tickgate.InvalidArgument):
        tickgate.parse_number(None)  # type: ignore[arg-type]


# -- Redis: hostile data and a stopped server -----------------------------------------

needs_redis = pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set (CTest's redis fixture sets it)")


def guard_key(prefix: str, scope: str, what: str) -> str:
    return f"{prefix}u{{{len(scope.encode())}:{scope}}}{what}"


@needs_redis
@pytest.mark.parametrize("key, kind", [("guard", "hash"), ("codes", "string"), ("latest", "string"),
                                       ("uc:CN", "string"), ("vc:CN", "hash"), ("d:CN", "zset"),
                                       ("ua:203.0.113.7", "string"), ("ac:203.0.113.7", "zset"),
                                       ("va:203.0.113.7", "string"),
                                       ("avc:203.0.113.7", "zset")])
def test_redis_a_guard_key_of_the_wrong_type_is_corrupt(tmp_path: Path, key: str, kind: str) -> None:
    store = Store("redis", tmp_path)
    try:
        engine = store.open(store_local_refusals=False)
        records = Records(engine)
        engine.set_budget("ip", [(5, 600)])
        engine.set_guard("login", GuardMode.ENFORCE, **QUIET)
        name = guard_key(store.prefix, "login", key)
        if kind == "hash":
            if key == "guard":
                redis_cli("DEL", name)
            redis_cli("HSET", name, "f", "v")
        elif kind == "zset":
            redis_cli("ZADD", name, "1", "m")
        else:
            redis_cli("SET", name, "x")
        before = sorted(redis_cli("KEYS", f"{store.prefix}*").split())
        number = cn()
        with pytest.raises(tickgate.StoreCorrupt) as corrupt:
            engine.send_begin("login", number, budgets=[("ip", "x")], client_address="203.0.113.7")
        assert name.split("}", 1)[1] in str(corrupt.value)
        # Nothing changed: no key, no charge, no code counted.
        assert sorted(redis_cli("KEYS", f"{store.prefix}*").split()) == before
        assert engine.budget_usage("ip", "x").used == 0
        assert engine.button("login", number).state is tickgate.ButtonState.IDLE
        assert records.last().status == Status.E_STORE_CORRUPT
        # Put right, the scope works again.
        redis_cli("DEL", name)
        if key == "guard":
            engine.set_guard("login", GuardMode.ENFORCE, **QUIET)
        grant(engine, number, "203.0.113.7", budgets=[("ip", "x")])
    finally:
        store.close()


@needs_redis
@pytest.mark.parametrize("key", ["prev", "codes"])
def test_redis_a_wrong_typed_hash_is_corrupt_when_a_number_asks_again(tmp_path: Path, key: str) -> None:
    """The screen type-checks the two hashes it writes unread (prev, which
    links a number's code to its code before, and codes) by writing them,
    with no TYPE call: a number that asks again while one of them is of
    another type is answered corrupt, and nothing is written (a link
    written before codes failed is taken back)."""
    store = Store("redis", tmp_path)
    try:
        engine = store.open(store_local_refusals=False)
        records = Records(engine)
        engine.set_guard("login", GuardMode.ENFORCE, **QUIET)
        number = cn()
        grant(engine, number, "203.0.113.7")
        name = guard_key(store.prefix, "login", key)
        other = guard_key(store.prefix, "login", "codes" if key == "prev" else "prev")
        redis_cli("DEL", name)
        redis_cli("SET", name, "x")
        held = redis_cli("HGETALL", other)
        before = sorted(redis_cli("KEYS", f"{store.prefix}*").split())
        with pytest.raises(tickgate.StoreCorrupt) as corrupt:
            engine.send_begin("login", number, client_address="203.0.113.7")
        assert name.split("}", 1)[1] in str(corrupt.value)
        assert sorted(redis_cli("KEYS", f"{store.prefix}*").split()) == before
        assert redis_cli("GET", name) == "x"
        assert redis_cli("HGETALL", other) == held
        assert records.last().status == Status.E_STORE_CORRUPT
        # Put right, the scope works again (another number: this one cools).
        redis_cli("DEL", name)
        grant(engine, cn(), "203.0.113.7")
    finally:
        store.close()


@needs_redis
@pytest.mark.parametrize("key, field, value", [("d:CN", "x", "1"), ("d:CN", "20000", "y"),
                                               ("dr:+861380", "x", "1"), ("dr:+86138000", "20000", "")])
def test_redis_a_day_count_that_is_no_number_is_corrupt(tmp_path: Path, key: str, field: str, value: str) -> None:
    """The codes verified per day of the country (d:) or of a range (dr:),
    read back from Redis: a field that is no number is answered as
    corrupt, and changes nothing."""
    store = Store("redis", tmp_path)
    try:
        engine = store.open(store_local_refusals=False)
        records = Records(engine)
        engine.set_guard("login", GuardMode.ENFORCE, range_signals=1, **QUIET)
        number = "+8613800000077"
        name = guard_key(store.prefix, "login", key)
        redis_cli("HSET", name, field, value)
        before = sorted(redis_cli("KEYS", f"{store.prefix}*").split())
        with pytest.raises(tickgate.StoreCorrupt) as corrupt:
            engine.send_begin("login", number, client_address="203.0.113.7")
        assert name.split("}", 1)[1] in str(corrupt.value)
        assert "not a number" in str(corrupt.value)
        assert sorted(redis_cli("KEYS", f"{store.prefix}*").split()) == before
        assert engine.button("login", number).state is tickgate.ButtonState.IDLE
        assert records.last().status == Status.E_STORE_CORRUPT
        redis_cli("DEL", name)
        grant(engine, number, "203.0.113.7")
    finally:
        store.close()


@needs_redis
@pytest.mark.parametrize("text", ["garbage", "1;9;;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;0",
                                  "1;2;XX;;;;;0;20,20,20,3,6,20,10,20,5,6,3,14;0",
                                  "1;2;;;;;;0;20,20,20,3,0,20,10,20,5,6,3,14;0",
                                  "1;2;;;;;;0;20,20,20,3,6,20,10,20,5,6,3;0"])
def test_redis_a_bad_guard_text_is_corrupt(tmp_path: Path, text: str) -> None:
    store = Store("redis", tmp_path)
    try:
        engine = store.open(store_local_refusals=False)
        engine.set_guard("login", GuardMode.ENFORCE, **QUIET)
        # The scope's own slot: every send reads it.
        redis_cli("SET", guard_key(store.prefix, "login", "guard"), text)
        number = cn()
        with pytest.raises(tickgate.StoreCorrupt):
            engine.send_begin("login", number, client_address="203.0.113.7")
        assert engine.button("login", number).state is tickgate.ButtonState.IDLE
        assert redis_cli("EXISTS", guard_key(store.prefix, "login", "codes")) == "0"
        # The settings hash: an engine opening reads it and refuses to open.
        redis_cli("HSET", f"{store.prefix}settings", "u:login", text)
        with pytest.raises(tickgate.StoreCorrupt) as corrupt:
            store.open()
        assert "u:login" in str(corrupt.value)
        # A running engine hears the settings notice, keeps what it had
        # and still refuses the scope's sends by the slot.
        engine.set_budget("ip", [(5, 600)])
        with pytest.raises(tickgate.StoreCorrupt):
            engine.send_begin("login", cn())
    finally:
        store.close()


class OwnRedis:
    """A redis-server of the test's own (it gets SIGSTOPped)."""

    def __init__(self) -> None:
        assert REDIS_SERVER is not None
        self.folder = tempfile.mkdtemp(prefix="tg-guard-")
        self.socket = os.path.join(self.folder, "redis.sock")
        for _attempt in range(5):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--unixsocket", self.socket,
                 "--save", "", "--appendonly", "no", "--dir", self.folder],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_until(lambda: os.path.exists(self.socket) and self.cli("PING") == "PONG", 10):
                return
            self.process.kill()   # the port was taken meanwhile: another one
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        raise RuntimeError("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis+unix://{self.socket}"

    def cli(self, *args: str) -> str:
        done = subprocess.run(["redis-cli", "-s", self.socket, *args], capture_output=True, text=True, timeout=10)
        return done.stdout.strip()

    def stop(self) -> None:
        try:
            os.kill(self.process.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    if REDIS_SERVER is None or shutil.which("redis-cli") is None:
        pytest.skip("needs redis-server and redis-cli")
    server = OwnRedis()
    try:
        yield server
    finally:
        server.stop()


def test_redis_a_stopped_server_counts_no_code(own_redis: OwnRedis) -> None:
    prefix = f"guard:{os.getpid()}:stop:"
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, store_url=own_redis.url, store_prefix=prefix,
                         store_timeout_ms=300) as engine:
        records = Records(engine)
        engine.set_budget("ip", [(5, 600)])
        engine.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=1))
        number = cn()
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises((tickgate.StoreUnknown, tickgate.StoreIO)):
                engine.send_begin("login", number, budgets=[("ip", "x")], client_address="203.0.113.7")
            assert time.monotonic() - started < 3
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        assert records.last().status in (Status.E_STORE_UNKNOWN, Status.E_STORE_IO)
        time.sleep(0.2)
        # Nothing was counted or charged: the limit of 1 lets the next one through.
        assert own_redis.cli("EXISTS", guard_key(prefix, "login", "codes")) == "0"
        assert engine.budget_usage("ip", "x").used == 0
        grant(engine, number, "203.0.113.7", budgets=[("ip", "x")])
        assert records.last().count("country_unverified_day") == 0
        with pytest.raises(tickgate.PumpingSuspected):
            engine.send_begin("login", cn())


class GuardProxy:
    """A TCP proxy (tcp_proxy.TcpProxy) in front of a server of the test's
    own that breaks the step that screens a granted code by the guard (its
    judgment and count: on one server, the send's begin, decide.lua with the
    flag 'g'): "cut" lets the server run it and drops its reply; "hold" keeps
    the request back `hold` seconds, as a SIGSTOPped server runs it late."""

    def __init__(self, port: int) -> None:
        from tcp_proxy import TcpProxy

        outer = self
        self.mode: Optional[str] = None
        self.hold = 0.0
        self.hit = threading.Event()

        class Proxy(TcpProxy):
            def _upstream(self, link) -> None:  # type: ignore[no-untyped-def]
                while True:
                    try:
                        data = link.client.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        link.close()
                        return
                    if outer.mode and b"EVALSHA" in data.upper() and b"\r\n$5\r\nbegin\r\n" in data \
                            and b"\r\n$1\r\ng\r\n" in data:
                        mode, outer.mode = outer.mode, None
                        outer.hit.set()
                        if mode == "cut":
                            link.cut_next_reply = True
                        else:
                            time.sleep(outer.hold)
                    try:
                        link.server.sendall(data)
                    except OSError:
                        link.close()
                        return

        self.proxy = Proxy(("127.0.0.1", port))

    @property
    def url(self) -> str:
        return self.proxy.url

    def close(self) -> None:
        self.proxy.close()


@pytest.mark.parametrize("fault", ["cut", "hold"])
def test_redis_a_count_that_failed_counts_no_code(own_redis: "OwnRedis", fault: str) -> None:
    proxy = GuardProxy(own_redis.port)
    prefix = f"guard:{os.getpid()}:{fault}:"
    try:
        with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, store_url=proxy.url, store_prefix=prefix,
                             store_timeout_ms=500) as engine:
            records = Records(engine)
            engine.set_budget("ip", [(5, 600)])
            engine.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=5))
            number = cn()
            proxy.mode, proxy.hold = fault, 1.5
            try:
                engine.send_begin("login", number, budgets=[("ip", "x")], client_address="203.0.113.7").succeeded()
                counted = 1
            except (tickgate.StoreUnknown, tickgate.StoreIO):
                counted = 0
                assert records.last().status in (Status.E_STORE_UNKNOWN, Status.E_STORE_IO)
            assert proxy.hit.is_set()
            if fault == "hold":
                # The send fails at its deadline; the held request reaches
                # the server later, as a stopped server runs it.
                assert counted == 0
                time.sleep(2.0)
            # Exactly once: a grant counted once (a retry of the lost reply
            # counts the same code), a failure undone and counted nowhere.
            assert engine.budget_usage("ip", "x").used == counted
            assert engine.button("login", number).state is (
                tickgate.ButtonState.COOLING if counted else tickgate.ButtonState.IDLE)
            record = probe(engine, records, cn(), "203.0.113.7")
            assert record.granted, record
            assert (record.count("country_unverified_day"), record.count("address_unverified_day")) == \
                (counted, counted)
    finally:
        proxy.close()


# -- Refusals by the country's counts without a round trip (Redis) -------------------


def evalsha_calls() -> int:
    """EVALSHA the Redis server ran so far (INFO commandstats)."""
    found = re.search(r"cmdstat_evalsha:calls=(\d+)", redis_cli("INFO", "commandstats"))
    return int(found.group(1)) if found else 0


def test_a_country_over_its_threshold_is_refused_without_a_round_trip(tmp_path: Path) -> None:
    """Once the store's counts refused a send to a country, the engine
    refuses the country's next sends itself: no script runs on the server,
    the status is the store's, the record says so. A code verified on
    another engine (its notice) makes it ask the store again, and so does a
    code given back; another engine, which never asked, asks the store."""
    if not URL:
        pytest.skip("TG_REDIS_URL is not set (CTest's redis fixture sets it)")
    store = Store("redis", tmp_path)
    try:
        a, b = store.open(), store.open()
        records = Records(a)
        a.set_guard("login", GuardMode.ENFORCE, **dict(QUIET, country_daily_minimum=2, country_hourly_minimum=2),
                    record_stream_length=1000)
        stream = guard_key(store.prefix, "login", "records")
        first, second = cn(), cn()
        a.send_begin("login", first).succeeded()
        a.send_begin("login", second).succeeded()
        with pytest.raises(tickgate.PumpingSuspected) as asked:
            a.send_begin("login", cn())
        assert "known from an earlier read" not in str(asked.value)
        before, locally = evalsha_calls(), a.stats().sends_refused_locally
        kept = int(redis_cli("XLEN", stream))
        for _ in range(20):
            with pytest.raises(tickgate.PumpingSuspected) as known:
                a.send_begin("login", cn(), client_address="198.51.100.7")
            assert known.value.status == Status.E_PUMPING_SUSPECTED
            assert "known from an earlier read" in str(known.value)
        # No decision script ran (each record went to the stream: a script
        # of its own, guardRecord, on EVALSHA too).
        assert evalsha_calls() == before + 20  # (INFO itself runs no script)
        assert int(redis_cli("XLEN", stream)) == kept + 20
        assert a.stats().sends_refused_locally == locally + 20
        last = records.all()[-1]
        assert not last.granted
        assert last.warnings == PumpingWarning.UNVERIFIED_BY_COUNTRY_DAILY | PumpingWarning.UNVERIFIED_BY_COUNTRY_HOURLY
        counts = dict(last.counts)
        assert counts["country_unverified_hour"] == 2
        # The read it is known from was of another client (none): no address counts.
        assert counts["address_unverified_day"] == 0 and counts["address_hourly_threshold"] == 0
        # Another country is asked as before.
        a.send_begin("login", us()).succeeded()
        # B never asked: the store refuses it (one truth; B's own read).
        with pytest.raises(tickgate.PumpingSuspected) as on_b:
            b.send_begin("login", cn())
        assert "known from an earlier read" not in str(on_b.value)
        # B verifies one of A's codes: A hears and asks the store again,
        # which now has room for one.
        b.verified("login", first)
        granted: List[str] = []

        def a_sends() -> bool:
            try:
                a.send_begin("login", cn()).succeeded()
            except tickgate.PumpingSuspected:
                return False
            granted.append("yes")
            return True

        assert wait_until(a_sends), "A never asked the store again after B's verification"

        # A code given back on B (its send failed): A asks again. B makes
        # room and takes it, A learns the country is full again...
        b.verified("login", second)
        ticket = b.send_begin("login", cn())

        def a_knows() -> bool:
            try:
                a.send_begin("login", cn())
            except tickgate.PumpingSuspected as refused:
                return "known from an earlier read" in str(refused)
            granted.append("early")  # (B's verification noticed before B's send: A took the room)
            return False

        assert wait_until(a_knows) and granted == ["yes"], granted
        # ...and B's send fails: its code goes back, and A hears of it.
        ticket.failed()
        assert wait_until(a_sends), "A never asked the store again after B's code went back"
        assert granted == ["yes", "yes"]
    finally:
        store.close()


# -- the mode's forms (issue 41) --------------------------------------------------


@pytest.mark.parametrize("given, mode", [
    ("enforce", GuardMode.ENFORCE), ("ENFORCE", GuardMode.ENFORCE), ("Record_Only", GuardMode.RECORD_ONLY),
    ("record", GuardMode.RECORD_ONLY), ("off", GuardMode.OFF), (GuardMode.ENFORCE, GuardMode.ENFORCE),
    (2, GuardMode.ENFORCE),
])
def test_set_guard_takes_a_mode_or_its_name(given: object, mode: GuardMode) -> None:
    with tickgate.Engine(delivery="host", clock="manual") as engine:
        records = Records(engine)
        engine.set_guard("login", given)  # type: ignore[arg-type]
        engine.send_begin("login", cn(), client_address="203.0.113.7").failed()
        assert records.last().mode is mode


@pytest.mark.parametrize("given", ["bogus", "", "enforced", 7, -1, 1.0, True, b"enforce"])
def test_set_guard_refuses_other_modes_listing_them(given: object) -> None:
    with tickgate.Engine(delivery="host", clock="manual") as engine:
        with pytest.raises(ValueError) as refused:
            engine.set_guard("login", given)  # type: ignore[arg-type]
        message = str(refused.value)
        assert "guard mode" in message
        for name in ("'off'", "'record_only'", "'enforce'"):
            assert name in message, message
        # Refused: the scope stays unguarded (a subject that is no number passes).
        engine.send_begin("login", "alice").succeeded()
