"""Refusals without a round trip: an engine on Redis that already knows a
key is cooling down, in flight or locked, its window or a budget spent, or
its code dead, refuses again without asking the server, with the status
and remaining time the server would give; a change on another engine, a
budget's charges going back, a rule changed and a lost notice link each
drop what it knows, and it asks again.

Every comparison is with what the server itself answers at that moment: a
second app server (B) opened with ``store_local_refusals=False`` asks the
server every time. "Without a round trip" is counted on the server
(EVALSHA calls in INFO commandstats).
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest

from tcp_proxy import TcpProxy
from test_one_truth import (  # noqa: F401  (fixtures)
    REDIS_SERVER, Peer, RedisServer, evalsha_calls, own_redis, peers, proxies, unique_prefix, wait_for,
)

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="needs redis-server (Debian: redis-server)")


def pair(server: RedisServer, peers: Callable[..., Peer], tag: str, **options: Any) -> Tuple[Peer, Peer]:
    """A (refuses locally, the default) and B (asks the server every time)."""
    prefix = unique_prefix(tag)
    a = peers("A", store_url=server.unix_url, store_prefix=prefix, **options)
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_local_refusals=False, **options)
    return a, b


def shape(message: str) -> str:
    """A refusal's message with its figures taken out."""
    return re.sub(r"\d+", "N", message)


def same_refusal(local: Dict[str, Any], store: Dict[str, Any]) -> None:
    """A's local refusal is the server's: the same error, status, budget
    and message, and the same remaining time give or take the time between
    the two calls (and a millisecond of rounding each)."""
    assert "error" in local and "error" in store, (local, store)
    for field in ("error", "status", "budget", "budget_key", "budget_index"):
        assert local.get(field) == store.get(field), (field, local, store)
    assert shape(local["message"]) == shape(store["message"]), (local, store)
    if "remaining_ms" in store:
        between = abs(store["t1"] - local["t0"]) * 1000
        assert abs(local["remaining_ms"] - store["remaining_ms"]) <= between + 2, (local, store)


def refused_locally(server: RedisServer, a: Peer, op: str, times: int = 50, **arguments: Any) -> Dict[str, Any]:
    """Calls `op` on A `times` times: each is refused and none reaches the
    server. Returns the last refusal."""
    before = evalsha_calls(server)
    reply: Dict[str, Any] = {}
    for _ in range(times):
        reply = a.fails(op, **arguments)
    assert evalsha_calls(server) == before, f"A asked the server for a refusal it knew: {reply}"
    return reply


def test_a_known_cooldown_is_refused_with_no_round_trip(own_redis: Callable[..., RedisServer],
                                                        peers: Callable[..., Peer]) -> None:
    server = own_redis()
    a, b = pair(server, peers, "cool")
    a.ok("set_policy", scope="login", cooldowns_ms=[60_000])
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+1"))
    local = refused_locally(server, a, "send_begin", scope="login", subject="+1")
    before = evalsha_calls(server)
    store = b.fails("send_begin", scope="login", subject="+1")
    assert evalsha_calls(server) == before + 1, "B did not ask the server"
    assert local["error"] == "CoolingDown"
    same_refusal(local, store)
    # The same again, later: the remaining time moves as the server's does.
    time.sleep(0.2)
    same_refusal(a.fails("send_begin", scope="login", subject="+1"), b.fails("send_begin", scope="login", subject="+1"))


def test_a_send_in_flight_and_a_lock_are_refused_locally(own_redis: Callable[..., RedisServer],
                                                        peers: Callable[..., Peer]) -> None:
    server = own_redis()
    a, b = pair(server, peers, "flight")
    a.ok("set_policy", scope="login", cooldowns_ms=[100], window_max_sends=1, window_ms=60_000)
    ticket = a.ok("send_begin", scope="login", subject="+2")
    local = refused_locally(server, a, "send_begin", scope="login", subject="+2")
    assert local["error"] == "InFlight"
    same_refusal(local, b.fails("send_begin", scope="login", subject="+2"))
    # The end (one send of one per minute) locks the key for the window.
    a.ok("send_end", ticket=ticket)
    local = refused_locally(server, a, "send_begin", scope="login", subject="+2")
    assert local["error"] == "Locked"
    same_refusal(local, b.fails("send_begin", scope="login", subject="+2"))


def test_a_full_window_is_refused_locally(own_redis: Callable[..., RedisServer], peers: Callable[..., Peer]) -> None:
    server = own_redis()
    a, b = pair(server, peers, "window")
    a.ok("set_policy", scope="login", cooldowns_ms=[100], window_max_sends=1, window_ms=60_000)
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+3"))
    # The lock is cancelled; the window stays full: the server refuses by
    # the window, and so does A once it heard that from the server.
    a.ok("cancel", scope="login", subject="+3")
    first = a.fails("send_begin", scope="login", subject="+3")
    local = refused_locally(server, a, "send_begin", scope="login", subject="+3")
    assert first["error"] == local["error"] == "Locked" and "window" in local["message"]
    same_refusal(local, b.fails("send_begin", scope="login", subject="+3"))


def test_a_spent_budget_is_refused_locally_for_the_same_budgets(own_redis: Callable[..., RedisServer],
                                                                peers: Callable[..., Peer]) -> None:
    server = own_redis()
    a, b = pair(server, peers, "budget")
    a.ok("set_budget", name="ip", windows=[[1, 60_000]])
    assert wait_for(lambda: "error" not in b.call("budget_usage", name="ip", key="10.0.0.1"), 2.0)
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+4", budgets=[["ip", "10.0.0.1"]]))
    budgets = [["ip", "10.0.0.1"]]
    first = a.fails("send_begin", scope="login", subject="+5", budgets=budgets)
    local = refused_locally(server, a, "send_begin", scope="login", subject="+5", budgets=budgets)
    assert first["error"] == local["error"] == "Locked" and local["budget_index"] == 0
    same_refusal(local, b.fails("send_begin", scope="login", subject="+5", budgets=budgets))
    # Another list of budgets is another question: asked.
    a.ok("set_budget", name="day", windows=[[100, 86_400_000]])
    before = evalsha_calls(server)
    other = a.fails("send_begin", scope="login", subject="+5", budgets=[["day", "cn"], ["ip", "10.0.0.1"]])
    assert evalsha_calls(server) == before + 1 and other["budget_index"] == 1


def test_a_dead_code_is_refused_locally(own_redis: Callable[..., RedisServer], peers: Callable[..., Peer]) -> None:
    server = own_redis()
    a, b = pair(server, peers, "dead")
    a.ok("set_policy", scope="login", cooldowns_ms=[60_000], max_wrong_codes=1)
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+6"))
    assert a.ok("verify_failed", scope="login", subject="+6") == 0
    for op in ("verified", "verify_failed"):
        local = refused_locally(server, a, op, scope="login", subject="+6")
        assert local["error"] == "CodeDead"
        same_refusal(local, b.fails(op, scope="login", subject="+6"))


def test_a_query_teaches_what_another_engine_did(own_redis: Callable[..., RedisServer],
                                                 peers: Callable[..., Peer]) -> None:
    # B's grant is learned by A's button query (a read), then refused locally.
    server = own_redis()
    a, b = pair(server, peers, "query")
    b.ok("send_end", ticket=b.ok("send_begin", scope="login", subject="+7"))

    def learned() -> bool:
        # A read that B's notices (of its begin and end) crossed on their
        # way is not kept; the next read is.
        assert a.ok("button", scope="login", subject="+7")["state"] == "COOLING"
        before = evalsha_calls(server)
        a.fails("send_begin", scope="login", subject="+7")
        return evalsha_calls(server) == before

    assert wait_for(learned, 2.0), "A's query did not teach it B's cooldown"
    same_refusal(refused_locally(server, a, "send_begin", scope="login", subject="+7"),
                 b.fails("send_begin", scope="login", subject="+7"))


def lag_until_granted(a: Peer, change: Callable[[], None], **send: Any) -> float:
    """Runs `change` (on another engine) and returns how long A went on
    refusing `send` afterwards (seconds)."""
    change()
    changed_at = time.monotonic()

    def granted() -> bool:
        reply = a.call("send_begin", **send)
        return "error" not in reply

    assert wait_for(granted, 5.0, 0.0005), f"A still refuses {send} 5 s after another engine's change"
    return time.monotonic() - changed_at


def test_a_change_on_another_engine_drops_what_is_known(own_redis: Callable[..., RedisServer],
                                                        peers: Callable[..., Peer]) -> None:
    server = own_redis()
    a, b = pair(server, peers, "drop")
    a.ok("set_policy", scope="login", cooldowns_ms=[60_000], window_max_sends=2, window_ms=60_000)
    a.ok("set_budget", name="ip", windows=[[1, 60_000]])
    lags: List[Tuple[str, float]] = []

    # A cooldown that B cancels (a verified code).
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+10"))
    refused_locally(server, a, "send_begin", times=5, scope="login", subject="+10")
    lags.append(("verified on B", lag_until_granted(a, lambda: b.ok("verified", scope="login", subject="+10"),
                                                    scope="login", subject="+10")))

    # A window (two sends a minute) that B's new policy frees.
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+11"))
    a.ok("verified", scope="login", subject="+11")
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+11"))
    a.ok("cancel", scope="login", subject="+11")
    a.fails("send_begin", scope="login", subject="+11")   # learned from the server
    refused_locally(server, a, "send_begin", times=5, scope="login", subject="+11")
    lags.append(("policy on B", lag_until_granted(
        a, lambda: b.ok("set_policy", scope="login", cooldowns_ms=[60_000], window_max_sends=5, window_ms=60_000),
        scope="login", subject="+11")))

    # A budget that B's failed send gives back.
    budgets = [["ip", "10.1.1.1"]]
    held = b.ok("send_begin", scope="login", subject="+12", budgets=budgets)
    a.fails("send_begin", scope="login", subject="+13", budgets=budgets)
    refused_locally(server, a, "send_begin", times=5, scope="login", subject="+13", budgets=budgets)
    lags.append(("failed send on B", lag_until_granted(a, lambda: b.ok("send_end", ticket=held, ok=False),
                                                       scope="login", subject="+13", budgets=budgets)))

    # A budget that B resets.
    budgets = [["ip", "10.1.1.2"]]
    b.ok("send_end", ticket=b.ok("send_begin", scope="login", subject="+14", budgets=budgets))
    a.fails("send_begin", scope="login", subject="+15", budgets=budgets)
    refused_locally(server, a, "send_begin", times=5, scope="login", subject="+15", budgets=budgets)
    lags.append(("budget reset on B", lag_until_granted(a, lambda: b.ok("reset_budget", name="ip", key="10.1.1.2"),
                                                        scope="login", subject="+15", budgets=budgets)))
    # The window where a local refusal can be stale: the notice's way from
    # B's change to A (docs/redis.md, "Refusals without a round trip").
    print("stale local refusals after a change on another engine: "
          + ", ".join(f"{what} {lag * 1000:.1f} ms" for what, lag in lags))
    for what, lag in lags:
        assert lag < 2.0, f"A refused for {lag:.3f} s after {what}"


def test_a_lost_notice_link_drops_what_is_known(own_redis: Callable[..., RedisServer],
                                                proxies: Callable[[RedisServer], TcpProxy],
                                                peers: Callable[..., Peer]) -> None:
    # While A cannot hear notices, nothing it knew holds: it asks again.
    server = own_redis(tcp=True)
    proxy = proxies(server)
    prefix = unique_prefix("lost")
    a = peers("A", store_url=proxy.url, store_prefix=prefix, store_timeout_ms=400)
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+20"))
    refused_locally(server, a, "send_begin", times=5, scope="login", subject="+20")
    assert wait_for(lambda: proxy.open_links(subscribers=True) >= 1, 2.0)
    proxy.black_hole(only_subscribers=True)

    def asks() -> bool:
        before = evalsha_calls(server)
        a.fails("send_begin", scope="login", subject="+20")
        return evalsha_calls(server) > before

    assert wait_for(asks, 3.0, 0.02), "A kept refusing by what it knew with its notice link silent"


def test_the_host_can_ask_every_time(own_redis: Callable[..., RedisServer], peers: Callable[..., Peer]) -> None:
    server = own_redis()
    prefix = unique_prefix("ask")
    b = peers("B", store_url=server.unix_url, store_prefix=prefix, store_local_refusals=False)
    b.ok("send_end", ticket=b.ok("send_begin", scope="login", subject="+30"))
    before = evalsha_calls(server)
    for _ in range(10):
        b.fails("send_begin", scope="login", subject="+30")
    assert evalsha_calls(server) == before + 10


def test_an_unknown_outcome_of_its_own_drops_what_is_known(own_redis: Callable[..., RedisServer],
                                                            peers: Callable[..., Peer]) -> None:
    # A's cancel may or may not have run (the server stopped past the
    # timeout): A cannot know the key any more, so it asks again.
    import os
    import signal
    server = own_redis()
    prefix = unique_prefix("unknown")
    a = peers("A", store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=300)
    a.ok("send_end", ticket=a.ok("send_begin", scope="login", subject="+40"))
    refused_locally(server, a, "send_begin", times=5, scope="login", subject="+40")
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        reply = a.call("cancel", scope="login", subject="+40")
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert reply.get("error") == "StoreUnknown", reply
    time.sleep(0.3)   # the late script runs (and is refused) before the count
    before = evalsha_calls(server)
    # (The late cancel was refused by its deadline: the key still cools.)
    assert a.fails("send_begin", scope="login", subject="+40")["error"] == "CoolingDown"
    assert evalsha_calls(server) > before, "A refused by what it knew after a call of its own ended UNKNOWN"
