"""The Python bindings on the tests' Redis server (TG_REDIS_URL, the CTest
fixture "redis"): engines sharing keys, fail open, and tickgate.aio, whose
event loop never waits for a round trip."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import time
from typing import Iterator

import pytest

import tickgate
import tickgate.aio
from conftest import refused_once_noticed

URL = os.environ.get("TG_REDIS_URL")
pytestmark = pytest.mark.skipif(not URL, reason="TG_REDIS_URL is not set (CTest's redis fixture sets it)")

_SERIAL = itertools.count(1)


@pytest.fixture
def prefix() -> str:
    return f"py:{os.getpid()}:{next(_SERIAL)}:"


def redis_cli(*args: str) -> str:
    assert URL is not None
    socket = URL.split("://", 1)[1]
    return subprocess.run(["redis-cli", "-s", socket, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_two_engines_share_one_truth(prefix: str) -> None:
    with tickgate.Engine(store_url=URL, store_prefix=prefix) as a, \
            tickgate.Engine(store_url=URL, store_prefix=prefix) as b:
        ticket = a.send_begin("login", "+8613800000000")
        with pytest.raises(tickgate.InFlight):
            b.send_begin("login", "+8613800000000")
        assert a.send_end(ticket, True).remaining_ms == 60_000
        # B refuses by what the server told it (in flight) until A's notice
        # arrives, then by the cooldown: refused throughout.
        refused = refused_once_noticed(lambda: b.send_begin("login", "+8613800000000"),
                                       tickgate.CoolingDown, tickgate.InFlight)
        assert 50_000 < refused.remaining_ms <= 60_000 + 10  # type: ignore[attr-defined]  (mapped late by at most a round trip)
        assert b.button("login", "+8613800000000").state == tickgate.ButtonState.COOLING
        # What the server holds is Tickgate's hash, with an expiry.
        key = f"{prefix}k{{5:login+8613800000000}}"
        assert redis_cli("TYPE", key) == "hash"
        assert 0 < int(redis_cli("PTTL", key))


def test_session_of_a_fresh_engine(prefix: str) -> None:
    # An engine's first call is a login: the session's end must be written on
    # the server's clock (it was written on the engine's own, and every engine
    # opened later dropped it as long expired). Found by the web example.
    with tickgate.Engine(store_url=URL, store_prefix=prefix) as a:
        a.gate("browser-1").login_succeeded(3600)
        a.gate("browser-2").login_succeeded()          # no expiry
    with tickgate.Engine(store_url=URL, store_prefix=prefix) as later:
        session = later.gate("browser-1").session()
        assert session.logged_in and 3_599_000 < session.remaining_ms <= 3_600_000, session
        assert later.gate("browser-2").session().logged_in
    end = int(redis_cli("GET", f"{prefix}s{{browser-1}}").split("|")[0])
    assert abs(end / 1e6 - 3600 - time.time()) < 60, end   # microseconds on the server's clock


def test_bad_url_and_unreachable_server(prefix: str) -> None:
    with pytest.raises(tickgate.InvalidArgument):
        tickgate.Engine(store_url="http://example.com")
    with pytest.raises(tickgate.StoreIO) as failed:
        tickgate.Engine(store_url="redis://127.0.0.1:1", store_timeout_ms=1000)
    assert "redis://127.0.0.1:1/0" in str(failed.value)


def test_hostile_data_raises_store_corrupt(prefix: str) -> None:
    redis_cli("SET", f"{prefix}k{{5:loginmallory}}", "not a hash")
    with tickgate.Engine(store_url=URL, store_prefix=prefix) as engine:
        with pytest.raises(tickgate.StoreCorrupt) as corrupt:
            engine.start("login", "mallory", 10)
        assert "k{5:loginmallory}" in str(corrupt.value)


def test_aio_never_blocks_the_loop_on_the_server(prefix: str) -> None:
    async def main() -> None:
        engine = await tickgate.aio.open_engine_async(store_url=URL, store_prefix=prefix,
                                                      store_timeout_ms=3000)
        gaps = []
        stop = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        # The server holds every command for 0.6 s: the awaited send waits
        # that long, the loop goes on ticking meanwhile.
        redis_cli("CLIENT", "PAUSE", "600", "ALL")
        started = time.monotonic()
        ticket = await engine.asend_begin("login", "aio")
        waited = time.monotonic() - started
        await engine.asend_end(ticket, True)
        button = await engine.abutton("login", "aio")
        stop.set()
        await task
        engine.close()
        assert waited >= 0.4
        assert button.state == tickgate.ButtonState.COOLING
        # The loop ran all along (each gap is one 5 ms sleep plus noise).
        assert len(gaps) > 40
        assert max(gaps) < 0.3, f"the loop stalled for {max(gaps):.3f} s"

    asyncio.run(main())


def test_fail_open_marks_its_events(tmp_path: "os.PathLike[str]") -> None:
    # A server of this test's own, stopped under the engines.
    socket = f"{tmp_path}/redis.sock"
    server = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", socket, "--save", "",
                               "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(socket) and time.monotonic() < deadline:
            time.sleep(0.02)
        url = f"redis+unix://{socket}"
        events: "list[tickgate.Event]" = []
        with tickgate.Engine(store_url=url, store_fail_open=True, store_timeout_ms=300,
                             delivery="host") as loose, \
                tickgate.Engine(store_url=url, store_timeout_ms=300) as strict:
            loose.subscribe("login", "down", events.append)
            server.terminate()
            server.wait()
            with pytest.raises(tickgate.StoreIO):
                strict.send_begin("login", "down")
            ticket = loose.send_begin("login", "down")
            loose.dispatch()
            sending = [e for e in events if e.kind == tickgate.EventKind.SENDING]
            assert len(sending) == 1 and sending[0].local_only
            assert loose.send_end(ticket, True).remaining_ms == 60_000
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
