"""Callbacks: lifetime of what C holds, exceptions, the engine thread, re-entrancy."""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from typing import Callable, List

import pytest

import tickgate
from tickgate import EventKind, _engine
from conftest import Collector, wait_until


def _closure(sink: List[tickgate.Event]) -> Callable[[tickgate.Event], None]:
    # A fresh function object that nothing but the subscription will hold.
    def on_event(event: tickgate.Event) -> None:
        sink.append(event)

    return on_event


@pytest.mark.parametrize("delivery", ["host", "thread"])
def test_callback_lives_while_c_may_call_it(delivery: str) -> None:
    sink: List[tickgate.Event] = []
    with tickgate.Engine(delivery=delivery, clock="manual") as engine:
        callback = _closure(sink)
        ref = weakref.ref(callback)
        engine.subscribe("s", "k", callback)  # the handle is dropped too
        del callback
        gc.collect()
        assert ref() is not None, "the package let go of a callback C still holds"
        assert _engine.live_slots() == 1
        engine.start("s", "k", 2)
        engine.advance(1)
        if delivery == "host":
            engine.dispatch()
        assert wait_until(lambda: [e.kind for e in sink] == [EventKind.STATE, EventKind.STARTED, EventKind.TICK])
        # The subscription ends: the library's destructor frees the slot and
        # with it the callback.
        (sub_id,) = {e.subscription for e in sink}
        engine.unsubscribe(sub_id)
        gc.collect()
        assert ref() is None
        assert _engine.live_slots() == 0


def test_lambda_with_no_other_reference_keeps_receiving() -> None:
    got: List[int] = []
    with tickgate.Engine(delivery="thread", clock="manual") as engine:
        engine.subscribe("s", "k", lambda e: got.append(e.remaining_ms))
        gc.collect()
        engine.start("s", "k", 3)
        for _ in range(3):
            gc.collect()
            engine.advance(1)
        engine.advance(ms=0)
        assert got == [0, 3000, 2000, 1000, 0]
    assert _engine.live_slots() == 0


def test_engine_close_frees_every_slot() -> None:
    refs = []
    engine = tickgate.Engine(delivery="host", clock="manual")
    for i in range(10):
        cb = _closure([])
        refs.append(weakref.ref(cb))
        engine.subscribe("s", str(i), cb)
        del cb
    engine.subscribe_scope("s", lambda e: None)
    assert _engine.live_slots() == 11
    engine.close()
    gc.collect()
    assert _engine.live_slots() == 0
    assert all(r() is None for r in refs)


def test_failed_subscribe_releases_the_slot_and_never_calls() -> None:
    called = []
    with tickgate.Engine(delivery="thread", clock="manual") as engine:
        with pytest.raises(tickgate.InvalidKey):
            engine.subscribe("", "k", called.append)
        assert _engine.live_slots() == 0
        engine.advance(1)
    assert called == []


def test_subscription_handle_does_not_keep_the_callback_after_it_ended(host_engine: tickgate.Engine) -> None:
    cb = _closure([])
    ref = weakref.ref(cb)
    sub = host_engine.subscribe("s", "k", cb)
    del cb
    sub.close()
    gc.collect()
    assert ref() is None and sub is not None


# ---------------------------------------------------------------------------
# Exceptions raised by callbacks
# ---------------------------------------------------------------------------


def _boom(event: tickgate.Event) -> None:
    raise RuntimeError(f"boom at {event.kind.name}")


def test_exception_is_logged_and_delivery_goes_on(
    host_engine: tickgate.Engine, caplog_tickgate: pytest.LogCaptureFixture, collector: Collector
) -> None:
    host_engine.subscribe("s", "k", _boom)
    host_engine.subscribe("s", "k", collector)
    host_engine.start("s", "k", 2)
    delivered = host_engine.dispatch()  # no exception escapes dispatch
    assert delivered == 4
    assert [e.kind for e in collector.snapshot()] == [EventKind.STATE, EventKind.STARTED]
    errors = [r for r in caplog_tickgate.records if r.name == "tickgate" and r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert errors[0].exc_info is not None and isinstance(errors[0].exc_info[1], RuntimeError)
    assert "boom at STATE" in str(errors[0].exc_info[1])
    host_engine.advance(1)
    host_engine.dispatch()
    assert [e.kind for e in collector.snapshot()][-1] == EventKind.TICK


def test_exception_on_the_engine_thread_does_not_kill_it(caplog_tickgate: pytest.LogCaptureFixture, collector: Collector) -> None:
    with tickgate.Engine(delivery="thread", clock="manual") as engine:
        engine.subscribe("s", "k", _boom)
        engine.subscribe("s", "k", collector)
        engine.start("s", "k", 3)
        for _ in range(3):
            engine.advance(1)
        assert [e.kind for e in collector.snapshot()] == [
            EventKind.STATE, EventKind.STARTED, EventKind.TICK, EventKind.TICK, EventKind.FINISHED
        ]
        assert len([r for r in caplog_tickgate.records if r.exc_info]) == 5
        # The engine still works afterwards.
        engine.start("s", "k", 1)
        engine.advance(ms=0)
        assert collector.kinds()[-1] == EventKind.STARTED


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt, MemoryError])
def test_base_exceptions_do_not_escape(exc_type: type, collector: Collector) -> None:
    caught = []
    tickgate.set_callback_error_hook(lambda exc, event: caught.append(type(exc)))

    def callback(event: tickgate.Event) -> None:
        raise exc_type()

    with tickgate.Engine(delivery="thread", clock="manual") as engine:
        engine.subscribe("s", "k", callback)
        engine.subscribe("s", "k", collector)
        engine.advance(ms=0)
        engine.start("s", "k", 1)
        engine.advance(ms=0)
    assert caught == [exc_type, exc_type]
    assert collector.kinds() == [EventKind.STATE, EventKind.STARTED]


def test_error_hook_receives_exception_and_event(host_engine: tickgate.Engine, caplog_tickgate: pytest.LogCaptureFixture) -> None:
    seen = []
    previous = tickgate.set_callback_error_hook(lambda exc, event: seen.append((exc, event)))
    assert tickgate.get_callback_error_hook() is not previous
    host_engine.subscribe("s", "k", _boom)
    host_engine.dispatch()
    assert len(seen) == 1
    exc, event = seen[0]
    assert isinstance(exc, RuntimeError) and event.kind == EventKind.STATE and event.subject == "k"
    assert not caplog_tickgate.records  # the hook replaced logging
    assert tickgate.set_callback_error_hook(None) is not None


def test_a_failing_hook_is_logged_with_the_original(host_engine: tickgate.Engine, caplog_tickgate: pytest.LogCaptureFixture) -> None:
    def hook(exc: BaseException, event: object) -> None:
        raise ValueError("the hook broke")

    tickgate.set_callback_error_hook(hook)
    host_engine.subscribe("s", "k", _boom)
    host_engine.dispatch()
    messages = [(r.getMessage(), r.exc_info[1] if r.exc_info else None) for r in caplog_tickgate.records]
    assert any(isinstance(e, ValueError) for _, e in messages)
    assert any(isinstance(e, RuntimeError) for _, e in messages)


# ---------------------------------------------------------------------------
# The engine thread and the real clock
# ---------------------------------------------------------------------------


def test_engine_thread_real_clock_short_countdown(collector: Collector) -> None:
    finished = threading.Event()

    def on_event(event: tickgate.Event) -> None:
        collector(event)
        if event.kind == EventKind.FINISHED:
            finished.set()

    with tickgate.Engine(tick_interval=0.1) as engine:
        engine.subscribe("login", "alice", on_event)
        engine.start("login", "alice", 0.3)
        assert finished.wait(10), f"no FINISHED within 10 s: {collector.kinds()}"
    events = collector.snapshot()
    kinds = [e.kind for e in events]
    assert kinds[0] == EventKind.STATE and kinds[1] == EventKind.STARTED and kinds[-1] == EventKind.FINISHED
    assert set(kinds[2:-1]) <= {EventKind.TICK}
    remaining = [e.remaining_ms for e in events[1:]]
    assert remaining == sorted(remaining, reverse=True) and remaining[-1] == 0 and remaining[0] == 300
    assert collector.threads and threading.get_ident() not in collector.threads


def test_unsubscribe_from_inside_its_own_callback() -> None:
    got: List[tickgate.Event] = []
    holder = {}

    def on_event(event: tickgate.Event) -> None:
        got.append(event)
        if event.kind == EventKind.STARTED:
            holder["sub"].close()
            holder["active_inside"] = holder["sub"].active  # destructor runs after return

    with tickgate.Engine(delivery="thread", clock="manual") as engine:
        holder["sub"] = engine.subscribe("s", "k", on_event)
        engine.start("s", "k", 3)
        engine.advance(1)
        engine.advance(1)
        assert [e.kind for e in got] == [EventKind.STATE, EventKind.STARTED]
        assert holder["active_inside"] is True
        assert holder["sub"].wait_ended(5) and not holder["sub"].active


def test_close_from_inside_a_callback() -> None:
    closed = threading.Event()
    engine = tickgate.Engine(delivery="thread", clock="manual")

    def on_event(event: tickgate.Event) -> None:
        if event.kind == EventKind.STARTED:
            engine.close()
            closed.set()

    engine.subscribe("s", "k", on_event)
    engine.start("s", "k", 1)
    assert closed.wait(10)
    assert engine.closed
    with pytest.raises(tickgate.Closed):
        engine.start("s", "k", 1)
    engine.close()
    # The close made inside the callback runs the subscription's destructor
    # on the engine thread after the callback returns: a second close from
    # here (TG_E_CLOSED) does not wait for it, so neither may this test.
    assert wait_until(lambda: _engine.live_slots() == 0)


def test_engine_released_inside_its_own_destructor_callback() -> None:
    # The last reference to the engine is the closure of its callback, and
    # the callback unsubscribes itself: when the destructor frees the slot
    # on the engine thread, the Engine is finalized there, and its close
    # runs from inside that destructor. It must neither deadlock nor crash.
    done = threading.Event()

    def make() -> None:
        engine = tickgate.Engine(delivery="thread", clock="manual")
        holder = {}

        def on_event(event: tickgate.Event) -> None:
            if event.kind == EventKind.STARTED:
                holder["sub"].close()
                done.set()

        holder["sub"] = engine.subscribe("s", "k", lambda e: (on_event(e), engine))
        engine.start("s", "k", 1)

    make()
    assert done.wait(10)
    assert wait_until(lambda: len(_engine._live_engines) == 0 and _engine.live_slots() == 0)


def test_callbacks_may_call_the_engine(collector: Collector) -> None:
    with tickgate.Engine(delivery="thread", clock="manual") as engine:

        def chain(event: tickgate.Event) -> None:
            if event.kind == EventKind.FINISHED and event.subject == "first":
                engine.start("s", "second", 1)

        engine.subscribe_scope("s", chain)
        engine.subscribe("s", "second", collector)
        engine.start("s", "first", 1)
        engine.advance(1)
        engine.advance(ms=0)
        assert EventKind.STARTED in collector.kinds()
        assert engine.is_counting("s", "second")


def test_no_callback_after_close_returns(collector: Collector) -> None:
    engine = tickgate.Engine(tick_interval_ms=10)
    engine.subscribe("s", "k", collector)
    engine.start("s", "k", 5)
    assert wait_until(lambda: len(collector) >= 3)
    engine.close()
    count = len(collector)
    threading.Event().wait(0.1)
    assert len(collector) == count


def test_interpreter_exit_with_an_open_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The engine thread is still calling into Python when the script ends:
    # the package closes open engines at exit, so the process ends cleanly.
    import os
    import subprocess
    import sys

    from conftest import BINDINGS, LIBRARY

    code = (
        "import sys, time, tickgate\n"
        "e = tickgate.Engine(tick_interval_ms=10)\n"
        "e.subscribe('s', 'k', lambda ev: sys.stdout.write(''))\n"
        "e.start('s', 'k', 100)\n"
        "e.gate('r').require(lambda: None)\n"
        "time.sleep(0.1)\n"
        "print('bye')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(BINDINGS), TICKGATE_LIBRARY=LIBRARY, PYTHONDONTWRITEBYTECODE="1")
    for _ in range(3):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                cwd=tmp_path, timeout=60)
        assert (result.returncode, result.stdout.strip(), result.stderr) == (0, "bye", "")


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
@pytest.mark.parametrize("call", ["cancel_all", "cancel"])
def test_a_cancel_inside_a_callback_while_the_host_cancels(store: str, call: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The host's cancel (or cancel_all) waits for the running callback of
    the key it cancelled; that callback cancels the key (or all) too.
    Regression: on a store the host waited holding the key's (or the
    scope's) lane, which the callback's call waited for: a cancel_all
    waited forever, and a cancel failed with a store timeout after 5 s and
    kept the host waiting as long."""
    import os
    import time

    options: dict = {"delivery": "thread"}
    if store == "sqlite":
        options["store_path"] = str(tmp_path / "cancel.db")
    elif store == "redis":
        url = os.environ.get("TG_REDIS_URL")
        if not url:
            pytest.skip("TG_REDIS_URL is not set (CTest's redis fixture sets it)")
        options.update(store_url=url, store_prefix=f"cancelinside:{os.getpid()}:{call}:")

    def cancel() -> object:
        if call == "cancel_all":
            return engine.cancel_all()
        try:
            engine.cancel("login", "alice")
            return 1
        except tickgate.NotFound:
            return 0

    with tickgate.Engine(**options) as engine:
        inside = threading.Event()
        answered: List[object] = []

        def on_event(event: tickgate.Event) -> None:
            if event.kind != EventKind.STARTED or inside.is_set():
                return
            inside.set()
            time.sleep(0.3)  # the host's call starts meanwhile
            # (A store timeout would raise here: nothing is answered.)
            answered.append(cancel())

        engine.subscribe_scope("login", on_event)
        engine.start("login", "alice", 60)
        assert inside.wait(10)
        host: List[object] = []
        caller = threading.Thread(target=lambda: host.append(cancel()), daemon=True)
        caller.start()
        caller.join(10)
        assert not caller.is_alive(), "the host's call and the callback's waited for each other"
        assert wait_until(lambda: len(answered) == 1, 10), "the callback's call failed"
        # One of the two ended alice's countdown, the other found none.
        assert sorted([host[0], answered[0]]) == [0, 1], (host, answered)


def test_a_group_commit_holds_no_file_while_callbacks_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An engine that groups its commits (store_commit_delay_ms) commits
    what it holds before it runs callbacks: another engine on the file,
    called from one of them, writes at once. Regression: the commit came
    after the callbacks, so the file stayed locked while they ran; the other
    engine's write waited for it and failed with a store error at its
    timeout."""
    path = str(tmp_path / "group.db")
    with tickgate.Engine(store_path=path, delivery="thread", store_commit_delay_ms=500) as grouped, \
            tickgate.Engine(store_path=path, store_timeout_ms=2000) as other:
        answered: List[object] = []

        def on_event(event: tickgate.Event) -> None:
            if event.kind != EventKind.STARTED or answered:
                return
            try:
                other.start("login", "bob", 60)
                answered.append("started")
            except tickgate.TickgateError as error:
                answered.append(error)

        grouped.subscribe_scope("login", on_event)
        grouped.start("login", "alice", 60)
        assert wait_until(lambda: len(answered) == 1, 10), "the callback's call did not return"
        assert answered == ["started"], answered
        # Both writes are on the file, for a third engine.
        with tickgate.Engine(store_path=path) as third:
            assert third.remaining("login", "alice").remaining_ms > 0
            assert third.remaining("login", "bob").remaining_ms > 0
