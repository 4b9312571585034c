"""One engine used from several Python threads at once."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import tickgate
from tickgate import EventKind, _engine
from conftest import Collector, wait_until

THREADS = 8
ROUNDS = 40


def _run_threads(target, count: int = THREADS) -> List[BaseException]:  # type: ignore[no-untyped-def]
    errors: List[BaseException] = []
    barrier = threading.Barrier(count)

    def wrapper(i: int) -> None:
        try:
            barrier.wait(10)
            target(i)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=wrapper, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a thread hung"
    return errors


@pytest.mark.parametrize("delivery", ["thread", "host"])
def test_many_threads_start_and_cancel(delivery: str, collector: Collector) -> None:
    with tickgate.Engine(delivery=delivery, clock="manual") as engine:
        engine.subscribe_scope("load", collector)

        def work(i: int) -> None:
            subject = f"user{i}"
            for _ in range(ROUNDS):
                engine.start("load", subject, 60)
                with pytest.raises(tickgate.CoolingDown):
                    engine.start("load", subject, 60)
                assert engine.remaining("load", subject).remaining_ms == 60000
                engine.cancel("load", subject)

        assert _run_threads(work) == []
        if delivery == "host":
            engine.dispatch()
        else:
            engine.advance(ms=0)
        kinds = collector.kinds()
        # A cancel replaces the countdown before host-mode dispatch, so only
        # the CANCELLED events are certain in both modes.
        assert kinds.count(EventKind.CANCELLED) == THREADS * ROUNDS
        assert engine.count() == 0


def test_threads_subscribe_and_unsubscribe_while_events_flow() -> None:
    with tickgate.Engine(tick_interval_ms=10) as engine:
        engine.start("flow", "k", 30)

        def work(i: int) -> None:
            for _ in range(ROUNDS):
                seen = Collector()
                with engine.subscribe("flow", "k", seen):
                    wait_until(lambda: len(seen) >= 1, timeout=5)
                assert seen.kinds()[0] == EventKind.STATE

        assert _run_threads(work) == []
        engine.cancel_all()
    assert _engine.live_slots() == 0


def test_close_while_threads_call() -> None:
    engine = tickgate.Engine(clock="manual")
    deadline = time.monotonic() + 30
    closed_seen = []

    def work(i: int) -> None:
        while time.monotonic() < deadline:
            try:
                engine.start("c", f"k{i}", 1, restart=True)
                engine.subscribe("c", f"k{i}", lambda e: None).close()
                engine.advance(ms=1)
            except tickgate.Closed:
                closed_seen.append(i)
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    threading.Event().wait(0.2)
    engine.close()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert sorted(closed_seen) == [0, 1, 2, 3]
    assert _engine.live_slots() == 0


def test_callbacks_from_engine_thread_while_python_threads_hold_the_gil_briefly(collector: Collector) -> None:
    # Busy Python threads must not starve the engine thread's callbacks (ctypes
    # releases the GIL during foreign calls, and the callback takes it back).
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    spinners = [threading.Thread(target=spin) for _ in range(2)]
    for t in spinners:
        t.start()
    try:
        with tickgate.Engine(tick_interval=0.05) as engine:
            engine.subscribe("s", "k", collector)
            engine.start("s", "k", 0.3)
            assert wait_until(lambda: EventKind.FINISHED in collector.kinds(), timeout=20)
    finally:
        stop.set()
        for t in spinners:
            t.join()
