"""Engine.stats() and tg_stats_read: the counters move exactly as the calls
made, on memory, SQLite and Redis (the local refusals, the store's calls
and their histogram, a store error by its kind, fail open and its
write-back, notices and their lag), tg_stats follows the struct_size rule,
and tickgate.prometheus turns them into metrics.

The Redis tests use the tests' server (TG_REDIS_URL, CTest's fixture), and
a server of their own where they stop it (redis-server)."""

from __future__ import annotations

import ctypes
import math
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import tickgate
from conftest import HEADER, wait_until
from tickgate import Status, StoreFailure, _ffi
from test_one_truth import REDIS_SERVER, RedisServer, own_redis, unique_prefix  # noqa: F401  (fixture)

URL = os.environ.get("TG_REDIS_URL")
needs_fixture = pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set (CTest's redis fixture sets it)")
needs_server = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")

PHONES = [f"+86138000000{i:02d}" for i in range(10)]


def grant(engine: tickgate.Engine, phone: str) -> None:
    engine.send_begin("login", phone).succeeded()


def cooling(engine: tickgate.Engine, phone: str, times: int) -> None:
    for _ in range(times):
        with pytest.raises(tickgate.CoolingDown):
            engine.send_begin("login", phone)


def check_histogram(histogram: tickgate.Histogram, count: int) -> None:
    """Prometheus's shape: the header's bounds in seconds, running totals,
    +Inf last holding the count."""
    assert [bound for bound, _ in histogram] == [us / 1e6 for us in _ffi.TG_STATS_LATENCY_BOUNDS_US[:-1]] + [math.inf]
    totals = [total for _, total in histogram]
    assert totals == sorted(totals) and totals[-1] == count


# -- memory and SQLite -----------------------------------------------------------------


def test_memory_counts_every_send_by_outcome() -> None:
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        assert engine.stats() == tickgate.Stats(store_latency=engine.stats().store_latency,
                                                notice_lag=engine.stats().notice_lag)
        for phone in PHONES[:3]:
            grant(engine, phone)
        cooling(engine, PHONES[0], 4)
        engine.send_begin("login", PHONES[5])
        with pytest.raises(tickgate.InFlight):
            engine.send_begin("login", PHONES[5])
        engine.set_budget("ip", [(1, 60)])
        engine.send_begin("login", PHONES[6], budgets=[("ip", "203.0.113.7")])
        with pytest.raises(tickgate.Locked):
            engine.send_begin("login", PHONES[7], budgets=[("ip", "203.0.113.7")])
        with pytest.raises(tickgate.InvalidKey):   # refused before the engine: not a decision
            engine.send_begin("login", "")
        stats = engine.stats()
    assert stats.sends_granted == 5
    assert dict(stats.sends_refused) == {Status.E_COOLING_DOWN: 4, Status.E_IN_FLIGHT: 1, Status.E_LOCKED: 1}
    assert stats.refused(Status.E_COOLING_DOWN) == 4 and stats.refused(Status.E_STORE_IO) == 0
    assert stats.sends_refused_total == 6
    assert stats.sends_refused_locally == 0 and stats.fail_open_grants == 0
    # Memory asks no store and hears no notice.
    assert stats.store_calls == 0 and stats.store_latency_sum == 0 and not stats.store_errors
    check_histogram(stats.store_latency, 0)
    assert stats.notices == 0 and stats.notices_timed == 0
    assert (stats.countdowns_now, stats.send_records_now, stats.local_refusals_now) == (5, 3, 0)


def test_memory_counts_verifications() -> None:
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        engine.set_policy("login", tickgate.Policy(max_wrong_codes=2))
        grant(engine, "a")
        grant(engine, "b")
        assert engine.verify_failed("login", "a") == 1
        assert engine.verify_failed("login", "a") == 0
        with pytest.raises(tickgate.CodeDead):
            engine.verified("login", "a")
        with pytest.raises(tickgate.CodeDead):
            engine.verify_failed("login", "a")
        engine.verified("login", "b")
        stats = engine.stats()
    assert (stats.verified, stats.wrong_codes, stats.codes_killed, stats.verifies_refused_dead) == (1, 2, 1, 2)


def test_sqlite_times_every_store_call(tmp_path: Path) -> None:
    with tickgate.Engine(clock="manual", delivery="host", store_path=tmp_path / "store.db") as engine:
        assert engine.stats().store_calls == 0          # the open's load is not a call of its own
        engine.set_policy("login", tickgate.Policy())   # 1 write
        for phone in PHONES[:3]:
            grant(engine, phone)                        # 2 decisions each
        cooling(engine, PHONES[0], 2)                   # 1 decision each
        engine.verified("login", PHONES[1])             # 1 decision
        engine.button("login", PHONES[2])               # memory's: SQLite is not read through
        stats = engine.stats()
    assert stats.store_calls == 1 + 6 + 2 + 1
    check_histogram(stats.store_latency, stats.store_calls)
    assert 0 < stats.store_latency_sum < 10
    assert not stats.store_errors
    assert stats.sends_granted == 3 and stats.refused(Status.E_COOLING_DOWN) == 2 and stats.verified == 1


def test_counters_never_go_back() -> None:
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        grant(engine, "a")
        first = engine.stats()
        assert engine.stats() == first            # a read changes nothing
        cooling(engine, "a", 1)
        later = engine.stats()
    assert later.sends_granted == first.sends_granted and later.sends_refused_total == first.sends_refused_total + 1


# -- tg_stats_read itself ---------------------------------------------------------------


def read_raw(engine: tickgate.Engine, size: int, tail: int = 64) -> "tuple[int, bytes]":
    """tg_stats_read into a buffer of ``size`` bytes (struct_size) and a
    canary ``tail`` after it; returns the status and the whole buffer."""
    # The function without the bindings' errcheck, to see the status.
    read = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(("tg_stats_read", _ffi.library()))
    buffer = ctypes.create_string_buffer(b"\x5a" * (max(size, 4) + tail), max(size, 4) + tail)
    ctypes.memmove(buffer, ctypes.byref(ctypes.c_uint32(size)), 4)
    return read(engine.handle, buffer), buffer.raw


def test_struct_size_rule() -> None:
    size = ctypes.sizeof(_ffi.tg_stats)
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        grant(engine, "a")
        cooling(engine, "a", 2)
        # Exact: the fields, nothing past them.
        status, data = read_raw(engine, size)
        assert status == Status.OK and data[size:] == b"\x5a" * 64
        stats = _ffi.tg_stats.from_buffer_copy(data[:size])
        assert stats.struct_size == size and stats.sends_granted == 1
        assert stats.sends_refused[Status.E_COOLING_DOWN] == 2
        # A later header's larger struct: the fields this library knows,
        # zeros up to its struct_size, struct_size as the caller set it.
        status, data = read_raw(engine, size + 48)
        assert status == Status.OK
        assert _ffi.tg_stats.from_buffer_copy(data[:size]).sends_granted == 1
        assert int.from_bytes(data[:4], "little") == size + 48
        assert data[size:size + 48] == bytes(48) and data[size + 48:] == b"\x5a" * 64
        # Smaller: tg_stats has one layout, so a smaller size is no layout
        # of it: TG_E_VERSION, and nothing is written.
        for bad in (size - 8, 8, 0, _ffi.TG_STRUCT_SIZE_MAX + 1):
            status, data = read_raw(engine, bad)
            assert status == Status.E_VERSION, bad
            assert data[4:] == b"\x5a" * (len(data) - 4), bad
        # Through the bindings' errcheck: the typed errors.
        small = _ffi.tg_stats()
        small.struct_size = size - 8
        with pytest.raises(tickgate.VersionMismatch):
            _ffi.library().tg_stats_read(engine.handle, ctypes.byref(small))
        with pytest.raises(tickgate.InvalidArgument):
            _ffi.library().tg_stats_read(engine.handle, None)
    with pytest.raises(tickgate.Closed):
        engine.stats()


def test_bounds_are_the_headers() -> None:
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    macro = re.search(r"#define\s+TG_STATS_LATENCY_BOUNDS_US\s+((?:[^\n]*\\\n)*[^\n]*)", text)
    assert macro, "TG_STATS_LATENCY_BOUNDS_US is not in tickgate.h"
    values = [v.strip() for v in macro.group(1).replace("\\\n", " ").split(",")]
    assert [2**63 - 1 if v == "INT64_MAX" else int(v) for v in values] == list(_ffi.TG_STATS_LATENCY_BOUNDS_US)
    assert len(values) == _ffi.TG_STATS_LATENCY_BUCKETS
    assert len(Status) <= _ffi.TG_STATS_STATUS_SLOTS and len(StoreFailure) <= _ffi.TG_STATS_STORE_FAILURE_SLOTS


# -- Redis ------------------------------------------------------------------------------------


@needs_fixture
def test_redis_counts_calls_local_refusals_and_notices() -> None:
    prefix = unique_prefix("stats")
    with tickgate.Engine(store_url=URL, store_prefix=prefix) as a, \
            tickgate.Engine(store_url=URL, store_prefix=prefix) as b:
        # Both hear the keys' notices (an open waits for that, for at most
        # its timeout): A refuses a key of its own without asking, B has
        # heard A's two decisions on it.
        grant(a, "+8613900000000")

        def refused_locally() -> bool:
            before = a.stats().sends_refused_locally
            cooling(a, "+8613900000000", 1)
            return a.stats().sends_refused_locally > before

        assert wait_until(refused_locally, timeout=5)
        assert wait_until(lambda: b.stats().notices >= 2, timeout=5)
        a0, b0 = a.stats(), b.stats()
        n, m = 4, 5
        for phone in PHONES[:n]:
            grant(a, phone)                     # 2 store calls each
        # A knows each of them is cooling down (from its own decisions):
        # every refusal is made without a round trip.
        cooling(a, PHONES[0], m)
        stats = a.stats()
        assert stats.sends_granted - a0.sends_granted == n
        assert stats.refused(Status.E_COOLING_DOWN) - a0.refused(Status.E_COOLING_DOWN) == m
        assert stats.sends_refused_locally - a0.sends_refused_locally == m
        assert stats.store_calls - a0.store_calls == 2 * n
        check_histogram(stats.store_latency, stats.store_calls)
        assert stats.store_latency_sum > 0 and not stats.store_errors
        assert stats.local_refusals_now >= n
        assert stats.notices == a0.notices     # its own notices are not heard
        # B hears each of A's decisions, each saying when it was sent.
        assert wait_until(lambda: b.stats().notices - b0.notices >= 2 * n, timeout=5)
        time.sleep(0.05)
        heard = b.stats()
        assert heard.notices - b0.notices == 2 * n
        assert heard.notices_timed - b0.notices_timed == 2 * n
        check_histogram(heard.notice_lag, heard.notices_timed)
        # Never overstated, and here well within the 100 ms promise.
        assert 0 <= heard.notice_lag_sum / heard.notices_timed < 0.1
        # B asks the store the first time (a round trip), then knows.
        cooling(b, PHONES[1], 3)
        refused = b.stats()
        assert refused.refused(Status.E_COOLING_DOWN) == 3
        assert refused.sends_refused_locally == 2
        assert refused.store_calls - heard.store_calls == 1


@needs_fixture
def test_redis_counts_verifies_refused_locally() -> None:
    prefix = unique_prefix("stats-verify")
    with tickgate.Engine(store_url=URL, store_prefix=prefix) as engine:
        engine.set_policy("login", tickgate.Policy(max_wrong_codes=1))
        grant(engine, PHONES[0])
        assert engine.verify_failed("login", PHONES[0]) == 0
        for _ in range(3):
            with pytest.raises(tickgate.CodeDead):
                engine.verified("login", PHONES[0])
        stats = engine.stats()
    assert (stats.wrong_codes, stats.codes_killed, stats.verifies_refused_dead) == (1, 1, 3)
    assert stats.verifies_refused_locally == 3


@needs_server
def test_redis_store_error_counted_by_kind(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis()
    with tickgate.Engine(store_url=server.unix_url, store_prefix="stats:", store_timeout_ms=300) as engine:
        grant(engine, PHONES[0])
        before = engine.stats()
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            with pytest.raises((tickgate.StoreTimeout, tickgate.StoreUnknown)) as failed:
                engine.send_begin("login", PHONES[1])
            stats = engine.stats()               # read while the server still sleeps
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
    assert failed.value.failure == StoreFailure.TIMEOUT
    status = Status.E_STORE_UNKNOWN if isinstance(failed.value, tickgate.StoreUnknown) else Status.E_STORE_IO
    assert stats.refused(status) == 1 and stats.sends_refused_total == 1
    assert dict(stats.store_errors) == {StoreFailure.TIMEOUT: 1}
    assert stats.store_calls - before.store_calls == 1
    # The failed call waited the timeout: in the 250-500 ms bucket or above.
    assert stats.store_latency_sum - before.store_latency_sum >= 0.25


@needs_server
def test_redis_fail_open_and_write_back(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis(persist=True)
    with tickgate.Engine(store_url=server.unix_url, store_prefix="stats:", store_timeout_ms=500,
                         store_fail_open=True) as engine:
        grant(engine, PHONES[0])
        server.stop()
        grant(engine, PHONES[1])               # granted by this engine alone
        alone = engine.stats()
        assert alone.sends_granted == 2 and alone.fail_open_grants == 1
        assert alone.local_grants_now == 1
        assert alone.store_errors.get(StoreFailure.UNREACHABLE, 0) >= 1
        server.start_again()
        # Written back once Redis answers (the notice link's return, or the
        # next call).
        assert wait_until(lambda: engine.stats().write_backs == 1, timeout=10)
        with pytest.raises(tickgate.CoolingDown):
            engine.send_begin("login", PHONES[1])
        stats = engine.stats()
    assert stats.local_grants_now == 0 and stats.fail_open_grants == 1
    assert stats.notice_links_lost >= 1


# -- tickgate.prometheus ----------------------------------------------------------------------


def test_collector_names_its_package_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from tickgate.prometheus import TickgateCollector

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setitem(sys.modules, "prometheus_client.core", None)
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        with pytest.raises(ImportError, match="prometheus_client"):
            TickgateCollector(engine)


def test_collector_text_format() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from tickgate.prometheus import TickgateCollector, reason_of

    assert reason_of(Status.E_COOLING_DOWN) == "cooling_down" and reason_of(Status.OK) == "ok"
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        registry = prometheus_client.CollectorRegistry()
        registry.register(TickgateCollector(engine, labels={"server": "A"}))
        grant(engine, "a")
        cooling(engine, "a", 2)
        text = prometheus_client.generate_latest(registry).decode()
    assert 'tickgate_send_decisions_total{outcome="granted",reason="ok",server="A"} 1.0' in text \
        or 'tickgate_send_decisions_total{server="A",outcome="granted",reason="ok"} 1.0' in text
    assert re.search(r'tickgate_send_decisions_total\{[^}]*reason="cooling_down"[^}]*\} 2\.0', text)
    assert re.search(r'tickgate_send_decisions_total\{[^}]*reason="in_flight"[^}]*\} 0\.0', text)
    assert re.search(r'tickgate_store_round_trip_seconds_bucket\{le="\+Inf"[^}]*\} 0\.0', text)
    assert "tickgate_notice_lag_seconds_count" in text and "# TYPE tickgate_countdowns gauge" in text
