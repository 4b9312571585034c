"""The Engine API: options, countdowns, queries, keys, durations, close."""

from __future__ import annotations

import gc
import re
import time
import weakref
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

import tickgate
from tickgate import ClockKind, Delivery, EventKind, _engine
from conftest import Collector


def test_defaults_are_engine_thread_and_system_clock() -> None:
    with tickgate.Engine() as engine:
        assert engine.delivery is Delivery.ENGINE_THREAD
        assert engine.clock is ClockKind.SYSTEM
        before = time.clock_gettime(time.CLOCK_BOOTTIME)
        now = engine.now()
        after = time.clock_gettime(time.CLOCK_BOOTTIME)
        assert before - 0.01 <= now <= after + 0.01
        assert isinstance(engine.now_ms(), int)


@pytest.mark.parametrize(
    "delivery, expected",
    [("host", Delivery.HOST_THREAD), ("thread", Delivery.ENGINE_THREAD), ("host-thread", Delivery.HOST_THREAD),
     (Delivery.HOST_THREAD, Delivery.HOST_THREAD), (0, Delivery.ENGINE_THREAD)],
)
def test_delivery_option(delivery: object, expected: Delivery) -> None:
    with tickgate.Engine(delivery=delivery, clock="manual") as engine:  # type: ignore[arg-type]
        assert engine.delivery is expected
        if expected is Delivery.HOST_THREAD:
            assert engine.fileno() >= 0
        else:
            with pytest.raises(tickgate.WrongMode):
                engine.fileno()


def test_unknown_option_names() -> None:
    with pytest.raises(ValueError, match="unknown Delivery"):
        tickgate.Engine(delivery="sideways")
    with pytest.raises(ValueError, match="unknown ClockKind"):
        tickgate.Engine(clock="sundial")


def test_manual_clock_starts_at_zero_and_advances() -> None:
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        assert engine.now_ms() == 0
        engine.advance(1.5)
        assert engine.now_ms() == 1500
        engine.advance(ms=7)
        assert engine.now() == pytest.approx(1.507)
        engine.advance(timedelta(milliseconds=3))
        assert engine.now_ms() == 1510


def test_manual_boot_option() -> None:
    with tickgate.Engine(clock="manual", delivery="host", manual_boot_ms=5000) as engine:
        assert engine.now_ms() == 5000


@pytest.mark.parametrize("kwargs", [{"tick_interval": 0.1}, {"tick_interval_ms": 100}, {"tick_interval": timedelta(milliseconds=100)}])
def test_default_tick_interval(kwargs: dict, collector: Collector) -> None:
    with tickgate.Engine(clock="manual", delivery="host", **kwargs) as engine:
        engine.subscribe("s", "k", collector)
        engine.start("s", "k", 1)
        engine.advance(ms=100)
        engine.dispatch()
    ticks = [e for e in collector.snapshot() if e.kind == EventKind.TICK]
    assert [e.remaining_ms for e in ticks] == [900]


def test_tick_interval_out_of_range() -> None:
    with pytest.raises(tickgate.InvalidDuration):
        tickgate.Engine(tick_interval_ms=5)


def test_start_remaining_cancel(host_engine: tickgate.Engine) -> None:
    r = host_engine.start("login", "alice", 60)
    assert (r.remaining_ms, r.display_seconds, r.remaining) == (60000, 60, 60.0)
    host_engine.advance(ms=1)
    left = host_engine.remaining("login", "alice")
    assert (left.remaining_ms, left.display_seconds) == (59999, 60)
    assert host_engine.is_counting("login", "alice")
    assert not host_engine.is_counting("login", "bob")
    host_engine.cancel("login", "alice")
    assert not host_engine.is_counting("login", "alice")
    with pytest.raises(tickgate.NotFound):
        host_engine.cancel("login", "alice")


def test_restart(host_engine: tickgate.Engine) -> None:
    host_engine.start("login", "alice", 60)
    with pytest.raises(tickgate.CoolingDown):
        host_engine.start("login", "alice", 10)
    r = host_engine.start("login", "alice", 10, restart=True)
    assert r.remaining_ms == 10000
    assert host_engine.remaining("login", "alice").remaining_ms == 10000


def test_finish_frees_the_key(host_engine: tickgate.Engine) -> None:
    host_engine.start("login", "alice", 2)
    host_engine.advance(2)
    host_engine.dispatch()
    assert not host_engine.is_counting("login", "alice")
    assert host_engine.start("login", "alice", 2).remaining_ms == 2000


@pytest.mark.parametrize(
    "duration, ms",
    [(1, 1000), (1.5, 1500), (0.001, 1), (Decimal("2.25"), 2250), (Fraction(1, 4), 250), (timedelta(seconds=3), 3000),
     (timedelta(minutes=1, microseconds=500), 60001)],
)
def test_duration_conversions(host_engine: tickgate.Engine, duration: object, ms: int) -> None:
    assert host_engine.start("s", "k", duration).remaining_ms == ms  # type: ignore[arg-type]


def test_duration_ms_is_exact(host_engine: tickgate.Engine) -> None:
    assert host_engine.start("s", "k", duration_ms=123457).remaining_ms == 123457


@pytest.mark.parametrize("bad", [-1, 0, 0.0001, 10**30, 365 * 86400 + 1, timedelta(days=-1)])
def test_durations_out_of_range(host_engine: tickgate.Engine, bad: object) -> None:
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.start("s", "k", bad)  # type: ignore[arg-type]


def test_longest_duration(host_engine: tickgate.Engine) -> None:
    assert host_engine.start("s", "k", duration_ms=tickgate.DURATION_MAX_MS).remaining_ms == tickgate.DURATION_MAX_MS


def test_out_of_int64_milliseconds_are_clamped_not_wrapped(host_engine: tickgate.Engine) -> None:
    # 2**64 + 1000 would wrap to 1000 ms in a plain ctypes conversion.
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.start("s", "k", duration_ms=2**64 + 1000)
    with pytest.raises(tickgate.InvalidDuration):
        host_engine.advance(ms=-(2**64) + 5)


def test_keys_str_and_bytes_are_the_same(host_engine: tickgate.Engine) -> None:
    host_engine.start("登录", "+8613800000000", 5)
    assert host_engine.remaining("登录".encode(), b"+8613800000000").remaining_ms == 5000
    assert host_engine.list() == [
        tickgate.CountdownInfo("登录", "+8613800000000", 5000, 5, 5000)
    ]


def test_key_length_limit(host_engine: tickgate.Engine) -> None:
    host_engine.start("s" * 256, "é" * 128, 1)  # 256 bytes each
    with pytest.raises(tickgate.InvalidKey):
        host_engine.start("s", "é" * 128 + "x", 1)  # 257 bytes


def test_lone_surrogate_is_an_invalid_key(host_engine: tickgate.Engine) -> None:
    with pytest.raises(tickgate.InvalidKey):
        host_engine.start("s", "\ud800", 1)


def test_cancel_scope_and_all(host_engine: tickgate.Engine) -> None:
    for subject in ("a", "b", "c"):
        host_engine.start("login", subject, 10)
    host_engine.start("register", "a", 10)
    assert host_engine.count() == 4
    assert host_engine.count("login") == 3
    assert host_engine.cancel_scope("login") == 3
    assert host_engine.cancel_scope("login") == 0
    assert host_engine.cancel_all() == 1
    assert host_engine.count() == 0


def test_list_is_ordered_and_filtered(host_engine: tickgate.Engine) -> None:
    host_engine.start("b", "2", 20)
    host_engine.start("a", "9", 9)
    host_engine.start("b", "1", 10)
    host_engine.advance(ms=500)
    items = host_engine.list()
    assert [(i.scope, i.subject) for i in items] == [("a", "9"), ("b", "1"), ("b", "2")]
    assert items[1].remaining_ms == 9500 and items[1].display_seconds == 10
    assert items[1].duration_ms == 10000 and items[1].duration == 10.0
    assert [(i.scope, i.subject) for i in host_engine.list("b")] == [("b", "1"), ("b", "2")]
    assert host_engine.list("nothing") == []


def test_list_from_inside_a_callback(host_engine: tickgate.Engine) -> None:
    seen = []
    host_engine.start("a", "1", 5)
    with host_engine.subscribe("a", "1", lambda e: seen.append(host_engine.list())):
        host_engine.dispatch()
    assert seen == [[tickgate.CountdownInfo("a", "1", 5000, 5, 5000)]]


def test_events_carry_everything(host_engine: tickgate.Engine, collector: Collector) -> None:
    sub = host_engine.subscribe("login", "alice", collector)
    host_engine.start("login", "alice", 3)
    host_engine.advance(ms=1000)
    host_engine.dispatch()
    host_engine.cancel("login", "alice")
    host_engine.dispatch()
    events = collector.snapshot()
    assert [e.kind for e in events] == [EventKind.STATE, EventKind.STARTED, EventKind.TICK, EventKind.CANCELLED]
    state, started, tick, cancelled = events
    assert (state.remaining_ms, state.counting, state.ends_countdown) == (0, False, True)
    assert (started.scope, started.subject, started.remaining_ms, started.display_seconds, started.duration_ms) == (
        "login", "alice", 3000, 3, 3000)
    assert started.counting and not started.ends_countdown
    assert started.state is tickgate.ButtonState.COOLING and not started.enabled
    assert started.title == "Resend (3s)"
    assert tick.remaining == 2.0 and tick.duration == 3.0 and tick.title == "Resend (2s)"
    assert cancelled.remaining_ms == 0 and cancelled.ends_countdown
    assert all(e.subscription == sub.id for e in events)
    assert all(isinstance(e.kind, EventKind) for e in events)
    with pytest.raises(AttributeError):
        state.kind = EventKind.TICK  # type: ignore[misc]  # frozen
    sub.close()


def test_scope_subscription(host_engine: tickgate.Engine, collector: Collector) -> None:
    host_engine.start("login", "a", 5)
    with host_engine.subscribe_scope("login", collector) as sub:
        assert sub.subject is None and sub.scope == "login"
        host_engine.start("login", "b", 5)
        host_engine.start("register", "c", 5)
        host_engine.dispatch()
    got = [(e.kind, e.subject) for e in collector.snapshot()]
    assert got == [(EventKind.STATE, "a"), (EventKind.STARTED, "b")]


def test_subscription_handle(host_engine: tickgate.Engine, collector: Collector) -> None:
    sub = host_engine.subscribe("login", "alice", collector)
    assert sub.active and sub.id > 0 and sub.engine is host_engine
    assert "active" in repr(sub)
    sub.close()
    assert not sub.active and sub.wait_ended(0)
    sub.close()  # idempotent
    sub.unsubscribe()
    with pytest.raises(tickgate.NotFound):
        host_engine.unsubscribe(sub)
    host_engine.start("login", "alice", 1)
    host_engine.dispatch()
    assert len(collector) == 0  # STATE was pending at unsubscribe: never delivered


def test_subscription_ids_are_never_reused(host_engine: tickgate.Engine) -> None:
    ids = []
    for _ in range(5):
        with host_engine.subscribe("s", "k", lambda e: None) as sub:
            ids.append(sub.id)
    assert len(set(ids)) == 5 and ids == sorted(ids)


def test_close_is_idempotent_and_use_after_close_raises_closed() -> None:
    engine = tickgate.Engine(clock="manual", delivery="host")
    sub = engine.subscribe("s", "k", lambda e: None)
    assert not engine.closed
    engine.close()
    assert engine.closed and "closed" in repr(engine)
    engine.close()
    engine.close()
    assert not sub.active  # close ran the destructor
    sub.close()  # quiet after the engine closed
    calls = [
        lambda: engine.start("s", "k", 1),
        lambda: engine.cancel("s", "k"),
        lambda: engine.cancel_scope("s"),
        lambda: engine.cancel_all(),
        lambda: engine.remaining("s", "k"),
        lambda: engine.list(),
        lambda: engine.count(),
        lambda: engine.subscribe("s", "k", print),
        lambda: engine.unsubscribe(1),
        lambda: engine.fileno(),
        lambda: engine.dispatch(),
        lambda: engine.advance(1),
        lambda: engine.now(),
        lambda: engine.send_begin("s", "k"),
        lambda: engine.policy("s"),
        lambda: engine.button("s", "k"),
        lambda: engine.gate("r").session(),
        lambda: engine.flush(),
    ]
    for call in calls:
        with pytest.raises(tickgate.Closed):
            call()
    assert _engine.live_slots() == 0


def test_context_manager_closes() -> None:
    with tickgate.Engine(clock="manual") as engine:
        engine.start("s", "k", 1)
    assert engine.closed
    with pytest.raises(tickgate.Closed):
        engine.now()


def test_unreferenced_engine_is_closed_by_its_finalizer() -> None:
    engine = tickgate.Engine(clock="manual", delivery="host")
    engine.subscribe("s", "k", lambda e: None)  # the callback does not hold the engine
    assert _engine.live_slots() == 1
    ref = weakref.ref(engine)
    del engine
    gc.collect()
    assert ref() is None
    assert _engine.live_slots() == 0  # tg_engine_close ran the destructor


def test_failed_open_leaves_a_harmless_object() -> None:
    with pytest.raises(tickgate.InvalidArgument):
        tickgate.Engine(clock=9)
    gc.collect()  # its __del__ must not raise or crash


def test_handle_is_an_int(host_engine: tickgate.Engine) -> None:
    assert isinstance(host_engine.handle, int) and host_engine.handle & 0xF == 0x8


def test_help_lists_every_store_url_form() -> None:
    # Issue 41: help(tickgate.Engine) named two of the seven forms the
    # header's tg_engine_options.store_url takes.
    import pydoc

    text = pydoc.render_doc(tickgate.Engine, renderer=pydoc.plaintext)
    for scheme in ("redis://", "rediss://", "redis+unix://", "redis+sentinel://", "rediss+sentinel://",
                   "redis+cluster://", "rediss+cluster://"):
        assert f"``{scheme}" in text, f"{scheme} is missing from help(tickgate.Engine)"
    header = (Path(__file__).resolve().parents[2] / "include" / "tickgate.h").read_text()
    options = header[header.index("const char *store_path;"):header.index("const char *store_url;")]
    assert set(re.findall(r"\brediss?(?:\+\w+)?://", options)) <= set(re.findall(r"\brediss?(?:\+\w+)?://", text))
