"""Finishing a rolling upgrade (issue 43, item 2): Engine.finish_store_upgrade
raises a Redis store's format (`P format`) from 2 to 3 once no engine that
cannot read format 3 is live, and refuses with OlderEnginesLive while one is.

An engine is live while its notice link is subscribed to `P events`; an
engine of this release is also subscribed to `P reads:3`. A link subscribed
to `P events` alone is what an engine of 0.1.0 holds: the tests make one by
hand (Tests/upgrade/mixed_versions.py runs the real previous release).
"""

from __future__ import annotations

from typing import Callable

import pytest

import tickgate
from test_one_truth import (  # noqa: F401  (own_redis: the fixture)
    RedisServer, Resp, needs_server, own_redis, unique_prefix, wait_for,
)


def subscribers(client: Resp, prefix: str) -> dict:
    reply = client("PUBSUB", "NUMSUB", f"{prefix}events", f"{prefix}reads:3")
    return {"events": int(reply[1]), "reads:3": int(reply[3])}


@needs_server
def test_finish_raises_the_format_once_every_live_engine_reads_it(
        own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis()
    prefix = unique_prefix("finish")
    client = server.client()
    try:
        with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix) as a, \
                tickgate.Engine(store_url=server.unix_url, store_prefix=prefix) as b:
            # Until finished, a store is written in format 2 (what 0.1.0 reads).
            assert client("GET", f"{prefix}format") == "2"
            assert subscribers(client, prefix) == {"events": 2, "reads:3": 2}
            b.send_end(b.send_begin("login", "+8613800000001"), True)

            assert a.finish_store_upgrade() == 3
            assert client("GET", f"{prefix}format") == "3"
            # Again: nothing to do.
            assert b.finish_store_upgrade() == 3

            # Both keep deciding on what was written before and after.
            with pytest.raises(tickgate.CoolingDown):
                a.send_begin("login", "+8613800000001")
            assert a.send_end(a.send_begin("login", "+8613800000002"), True).remaining_ms == 60_000
            with pytest.raises(tickgate.CoolingDown):
                b.send_begin("login", "+8613800000002")
            # An engine of this release opens the finished store.
            with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix) as c:
                assert c.remaining("login", "+8613800000002").remaining_ms > 0
    finally:
        client.close()


@needs_server
def test_an_engine_of_an_older_release_keeps_the_store_as_it_is(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis()
    prefix = unique_prefix("older")
    client = server.client()
    older = server.client()
    try:
        with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix) as engine:
            # A notice link as an engine of 0.1.0 holds it: `P events` alone.
            older("SUBSCRIBE", f"{prefix}events")
            assert subscribers(client, prefix) == {"events": 2, "reads:3": 1}
            with pytest.raises(tickgate.OlderEnginesLive) as refused:
                engine.finish_store_upgrade()
            message = refused.value.message
            assert "stays at format 2" in message and "1 engine that cannot read format 3 is live" in message, message
            assert client("GET", f"{prefix}format") == "2"
            # The engine goes on as before.
            engine.send_end(engine.send_begin("login", "+8613800000003"), True)

            # The older engine stops: the upgrade can be finished.
            older.close()
            assert wait_for(lambda: subscribers(client, prefix)["events"] == 1, 5.0)
            assert engine.finish_store_upgrade() == 3
            assert client("GET", f"{prefix}format") == "3"
    finally:
        older.close()
        client.close()


@needs_server
def test_a_store_of_a_newer_format_is_refused_at_the_open(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis()
    prefix = unique_prefix("newer")
    client = server.client()
    try:
        client("SET", f"{prefix}format", "4")
        with pytest.raises(tickgate.StoreVersion) as refused:
            tickgate.Engine(store_url=server.unix_url, store_prefix=prefix)
        assert "holds data of format 4" in refused.value.message
        assert "reads formats up to 3" in refused.value.message
        assert client("GET", f"{prefix}format") == "4"
    finally:
        client.close()


def test_sqlite_and_memory_have_nothing_to_finish(tmp_path) -> None:
    with tickgate.Engine(store_path=str(tmp_path / "store.db")) as engine:
        assert engine.finish_store_upgrade() == 4
    with tickgate.Engine() as engine:
        assert engine.finish_store_upgrade() == 0
