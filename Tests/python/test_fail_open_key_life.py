"""A send granted while Redis was out of reach (store_fail_open) and written
back when it returned keeps its key as long as a send decided through the
store would (decide.lua's life: the countdown, the last send plus the quiet
reset, a year with none, and the newest send in the window plus the
window).

Regression: the write-back (merge.lua) gave the key the last send plus
max(quiet reset, a day) and ignored the window and "no quiet reset = a
year", so a week's history of a number (at most 3 codes a week) was gone
after a day and the number could be sent 3 more codes.

The server is the test's own (test_one_truth.py's fixture), stopped under
the engine and started again with its data (append-only file).
"""

from __future__ import annotations

from typing import Callable, Dict, List

import pytest

import tickgate
from test_one_truth import (  # noqa: F401  (own_redis: the fixture)
    RedisServer, hash_key, needs_server, own_redis, unique_prefix, wait_for,
)

DAY_MS = 86_400_000


@needs_server
@pytest.mark.parametrize("window_ms, window_max_sends, quiet_reset_ms, at_least_ms", [
    # A week's window, no quiet reset: a year, as decide.lua keeps it.
    pytest.param(7 * DAY_MS, 3, 0, 300 * DAY_MS, id="week-window-no-quiet-reset"),
    # No window, a 2-day quiet reset: the last send plus 2 days.
    pytest.param(0, 0, 2 * DAY_MS, 2 * DAY_MS, id="no-window-2-day-quiet-reset"),
])
def test_fail_open_write_back_keeps_the_key_as_long_as_the_store(
        own_redis: Callable[..., RedisServer], window_ms: int, window_max_sends: int, quiet_reset_ms: int,
        at_least_ms: int) -> None:
    server = own_redis(persist=True)
    prefix = unique_prefix("life")
    scope, through_store, while_down = "login", "+15550001", "+15550002"
    events: List[tickgate.Event] = []
    with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix, store_fail_open=True,
                         store_timeout_ms=500, delivery="host") as engine:
        engine.set_policy(scope, tickgate.Policy(window_max_sends=window_max_sends, window_ms=window_ms,
                                                 quiet_reset_ms=quiet_reset_ms))
        # A code sent through the store: its key's life is decide.lua's.
        engine.send_end(engine.send_begin(scope, through_store), True)
        engine.subscribe(scope, while_down, events.append)

        # Redis is down: the engine grants the other number by itself.
        server.stop()
        ticket = engine.send_begin(scope, while_down)
        engine.dispatch()
        sending = [e for e in events if e.kind == tickgate.EventKind.SENDING]
        assert len(sending) == 1 and sending[0].local_only, f"not a fail-open grant: {events}"
        assert engine.send_end(ticket, True).remaining_ms == 60_000

        # Redis is back: the engine writes back what it granted (merge.lua).
        server.start_again()
        client = server.client()
        try:
            def written_back() -> Dict[str, str]:
                reply = client("HGETALL", hash_key(prefix, scope, while_down))
                fields = dict(zip(reply[::2], reply[1::2]))
                return fields if fields.get("s", "-1") not in ("", "-1") else {}

            assert wait_for(written_back, 10.0), "the fail-open send was never written back"
            normal = client("PTTL", hash_key(prefix, scope, through_store))
            merged = client("PTTL", hash_key(prefix, scope, while_down))
        finally:
            client.close()

    print(f"PTTL through the store {normal} ms ({normal / DAY_MS:.2f} days), "
          f"written back {merged} ms ({merged / DAY_MS:.2f} days)")
    assert normal >= at_least_ms, f"a send through the store kept its key {normal} ms"
    assert merged >= max(window_ms, at_least_ms), (
        f"the written-back key lives {merged} ms ({merged / DAY_MS:.2f} days), "
        f"at least {max(window_ms, at_least_ms)} ms due")
    assert abs(normal - merged) <= 60_000, (
        f"the written-back key lives {merged} ms, one sent through the store {normal} ms")

