"""Many threads of one engine, few connections: decisions issued at once
pipeline their requests on a shared connection (RedisPipeline.swift), and
each thread gets exactly its own answers.

Checked here: 64 threads deciding on the same keys grant each key exactly
once and refuse the rest as in flight, on fewer connections than threads; and a server SIGSTOPped while 16 threads have requests on one
connection ends every call within the store timeout, as UNKNOWN (written)
or not sent, and applies nothing late after SIGCONT, every key granted
exactly once afterwards.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest

import tickgate
from test_one_truth import (URL, RedisServer, evalsha_calls, hash_key, needs_fixture, needs_server, own_redis,
                            unique_prefix)

__all__ = ["own_redis"]   # the fixture, imported for pytest


def engine_clients(server_client: Any, me: int) -> int:
    """Connections to the server other than `me` (the watching client)."""
    lines = server_client("CLIENT", "LIST").strip().splitlines()
    return sum(1 for line in lines if f"id={me} " not in line)


def run_threads(count: int, work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a thread did not end"


@needs_fixture
def test_64_threads_grant_each_key_once_on_shared_connections() -> None:
    from test_one_truth import Resp
    assert URL is not None
    prefix = unique_prefix("pipe")
    watch = Resp(unix=URL.split("://", 1)[1])
    me = watch("CLIENT", "ID")
    threads, keys = 64, 150
    subjects = [f"+86{n:08d}" for n in range(keys)]
    granted: Dict[str, List[Any]] = {}
    in_flight = [0]
    failures: List[str] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)
    peak = [0]
    done = threading.Event()

    # Every refusal asks the server (none is made from what the engine
    # knows), so all 9 450 of them are pipelined too.
    with tickgate.Engine(store_url=URL, store_prefix=prefix, store_local_refusals=False) as engine:
        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], engine_clients(watch, me))
                time.sleep(0.002)

        # Every thread asks for every key, in an order of its own; the
        # tickets stay open, so every refusal is "in flight".
        def work(index: int) -> None:
            order = list(subjects)
            random.Random(index).shuffle(order)
            start.wait()
            for subject in order:
                try:
                    ticket = engine.send_begin("pipe", subject)
                except tickgate.InFlight:
                    with lock:
                        in_flight[0] += 1
                    continue
                except Exception as exc:   # noqa: BLE001 - every other outcome is a failure
                    with lock:
                        failures.append(f"{subject}: {exc!r}")
                    continue
                with lock:
                    granted.setdefault(subject, []).append(ticket)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            run_threads(threads, work)
        finally:
            done.set()
            sampler.join()
        print(f"{threads} threads, {keys} keys: {in_flight[0]} in flight, peak connections {peak[0]}")
        assert not failures, f"{len(failures)} calls failed, e.g. {failures[:3]}"
        assert sorted(granted) == subjects
        assert all(len(tickets) == 1 for tickets in granted.values()), "a key was granted twice"
        assert in_flight[0] == threads * keys - keys
        for subject in subjects:
            assert engine.button("pipe", subject).state == tickgate.ButtonState.SENDING
        # What the store holds: every key sending (another engine is refused).
        with tickgate.Engine(store_url=URL, store_prefix=prefix) as other:
            for subject in subjects:
                assert watch("EXISTS", hash_key(prefix, "pipe", subject)) == 1
                with pytest.raises(tickgate.InFlight):
                    other.send_begin("pipe", subject)
        # Every ticket ends: the refusals its key got meanwhile (each
        # re-reading the key, whose deadline a later round trip maps a
        # little differently) left the run and its ticket as they were.
        for subject in subjects:
            assert granted[subject][0].succeeded().remaining_ms > 0
    watch.close()
    # A connection per deciding thread would be 16 (the cap) and more.
    assert peak[0] < 16, f"the engine held {peak[0]} connections for {threads} threads"


@needs_server
def test_sigstop_with_16_pipelined_requests(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis()
    assert server.process is not None
    prefix = unique_prefix("pipestop")
    timeout_ms, threads = 500, 16
    outcomes: List[Tuple[str, float]] = [("", 0.0)] * threads
    with tickgate.Engine(store_url=server.unix_url, store_prefix=prefix, store_timeout_ms=timeout_ms) as engine:
        # Connections open and scripts loaded.
        run_threads(threads, lambda index: engine.button("stop", f"warm{index}") and None)
        client = server.client()
        connections_before = int(client("INFO", "stats").split("total_connections_received:", 1)[1].split()[0])
        scripts_before = evalsha_calls(server)
        client.close()
        start = threading.Barrier(threads + 1)

        def work(index: int) -> None:
            start.wait()
            began = time.monotonic()
            try:
                engine.send_begin("stop", f"s{index}")
                outcome = "granted"
            except tickgate.StoreUnknown:
                outcome = "unknown"
            except (tickgate.StoreUnreachable, tickgate.StoreTimeout):
                outcome = "not sent"
            except Exception as exc:   # noqa: BLE001
                outcome = repr(exc)
            outcomes[index] = (outcome, time.monotonic() - began)

        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
            for worker in workers:
                worker.start()
            start.wait()
            for worker in workers:
                worker.join(10)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        print("outcomes on the stopped server:", sorted((o, round(t * 1000)) for o, t in outcomes))
        for outcome, took in outcomes:
            assert outcome in ("unknown", "not sent"), outcome
            assert took < (timeout_ms + 400) / 1000, f"a call took {took * 1000:.0f} ms (store timeout {timeout_ms} ms)"
        assert any(outcome == "unknown" for outcome, _ in outcomes), "no request reached the server"
        # The server now runs what it had read while stopped: past its deadline.
        time.sleep(0.3)
        client = server.client()
        try:
            ran = evalsha_calls(server) - scripts_before
            stats = client("INFO", "stats")
            connections = int(stats.split("total_connections_received:", 1)[1].split()[0]) - connections_before
            print(f"the server ran {ran} late scripts; {connections} connections were opened meanwhile")
            assert ran >= sum(1 for outcome, _ in outcomes if outcome == "unknown")
            for index in range(threads):
                assert client("EXISTS", hash_key(prefix, "stop", f"s{index}")) == 0, f"s{index}: a late send applied"
        finally:
            client.close()
        # Each key is granted exactly once now: nothing was left half done.
        for index in range(threads):
            assert engine.button("stop", f"s{index}").state == tickgate.ButtonState.IDLE
        tickets: List[Any] = []
        for index in range(threads):
            tickets.append(engine.send_begin("stop", f"s{index}"))
            with pytest.raises(tickgate.InFlight):
                engine.send_begin("stop", f"s{index}")
        for ticket in tickets:
            ticket.succeeded()
        client = server.client()
        try:
            for index in range(threads):
                assert client("EXISTS", hash_key(prefix, "stop", f"s{index}")) == 1
        finally:
            client.close()
