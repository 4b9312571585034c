"""pytest setup: import tickgate from <repo>/bindings/python, load <repo>/build/libtickgate.so.

TICKGATE_LIBRARY (set by CTest to the built target) wins; without it the
library of the default build folder is used.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BINDINGS = REPO / "bindings" / "python"
HEADER = REPO / "include" / "tickgate.h"
SCENARIOS = REPO / "Tests" / "scenarios"

if str(BINDINGS) not in sys.path:
    sys.path.insert(0, str(BINDINGS))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

os.environ.setdefault("TICKGATE_LIBRARY", str(REPO / "build" / "libtickgate.so"))
LIBRARY = os.environ["TICKGATE_LIBRARY"]

import tickgate  # noqa: E402
from tickgate import _engine  # noqa: E402


def pytest_report_header(config: pytest.Config) -> str:
    return f"tickgate bindings: {BINDINGS}\nlibtickgate: {LIBRARY}"


@pytest.fixture(scope="session", autouse=True)
def loaded_library() -> tickgate.LoadedLibrary:
    """Fail the whole run at once, with the loader's list, if the library is missing."""
    try:
        return tickgate.load_library()
    except tickgate.LibraryError as exc:
        pytest.exit(f"cannot load libtickgate for the tests: {exc}", returncode=2)


@pytest.fixture(autouse=True)
def no_leaked_slots() -> Iterator[None]:
    """After every test: no callback slot is still held for C (every engine
    closed or subscription ended), and C never called a freed slot (no
    callback after its destructor, no destructor twice)."""
    previous_hook = tickgate.get_callback_error_hook()
    stray_before = _engine.stray_calls()
    yield
    tickgate.set_callback_error_hook(previous_hook)
    gc.collect()
    assert _engine.live_slots() == 0, "a test left callback slots held for C"
    assert _engine.stray_calls() == stray_before, (
        "C broke a callback promise: a callback or destructor for a freed slot, or an undersized event "
        f"(events, destructors, undersized): before {stray_before}, after {_engine.stray_calls()}"
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.005) -> bool:
    """Poll predicate until it is true or timeout passes (generous: tests never assert timing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def refused_once_noticed(call: Callable[[], object], expected: type, stale: type,
                         timeout: float = 10.0) -> BaseException:
    """Calls `call` until it raises `expected` and returns that error.

    An engine on Redis refuses locally by what the server last told it
    until another engine's change reaches it as a notice (docs/redis.md,
    "Refusals without a round trip", the one stale window): meanwhile `call` may raise
    the `stale` error. Anything else, a grant included, fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = call()
        except expected as error:
            return error
        except stale:
            if time.monotonic() > deadline:
                pytest.fail(f"still {stale.__name__} after {timeout} s: the notice never arrived")
            continue
        pytest.fail(f"granted where {expected.__name__} was due: {result!r}")


class Collector:
    """A thread-safe event list for callbacks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list = []
        self.threads: set = set()

    def __call__(self, event: tickgate.Event) -> None:
        with self.lock:
            self.events.append(event)
            self.threads.add(threading.get_ident())

    def kinds(self) -> list:
        with self.lock:
            return [e.kind for e in self.events]

    def snapshot(self) -> list:
        with self.lock:
            return list(self.events)

    def __len__(self) -> int:
        with self.lock:
            return len(self.events)


@pytest.fixture
def collector() -> Collector:
    return Collector()


@pytest.fixture
def host_engine() -> Iterator[tickgate.Engine]:
    """Manual clock, host-thread delivery: fully deterministic."""
    with tickgate.Engine(delivery=tickgate.Delivery.HOST_THREAD, clock=tickgate.ClockKind.MANUAL) as e:
        yield e


@pytest.fixture
def thread_engine() -> Iterator[tickgate.Engine]:
    """Manual clock, engine-thread delivery."""
    with tickgate.Engine(delivery=tickgate.Delivery.ENGINE_THREAD, clock=tickgate.ClockKind.MANUAL) as e:
        yield e


@pytest.fixture
def caplog_tickgate(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.ERROR, logger="tickgate")
    return caplog
