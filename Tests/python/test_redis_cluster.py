"""Tickgate on a real Redis Cluster: three primaries and their replicas
(cluster_fixture.py), one cluster for the whole module.

Engines open on redis+cluster://; a plain redis:// naming a cluster node is
refused at open. Every scenario file runs on the cluster. Four processes race
budgeted sends on budget keys that live on the three primaries while a
checker reads every charge set: no cap is ever exceeded, and at the end the
committed charges are exactly the grants kept. A reservation left by a crash
expires by itself. Resharding slots that hold the tests' keys while
decisions run breaks none of them. Notices cross engines on every primary.
cancel_scope / cancel_all end countdowns spread over every primary. Last, a
primary is SIGKILLed while decisions flow: its replica takes over, decisions
on every key go on within a bound (printed), the calls in between fail with
a store error within the store timeout, a granted cooldown is still there,
and notices flow again.

Tests that change the cluster's shape (reshard, failover) run last, in that
order; the others do not depend on which primary owns which slot beyond
what they read from the cluster when they start.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import scenario_runner
import tickgate
from cluster_fixture import (MISSING, Client, Cluster, ask, Node, charges_key, countdown_key, info, name,
                             key_slot, reservations_key, running_cluster, subjects_on, wait_for)
from conftest import SCENARIOS
from scenario_runner import run_file

pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

HERE = Path(__file__).resolve().parent
RACER = HERE / "cluster_racer.py"
BINDINGS = HERE.parent.parent / "bindings" / "python"
FILES = sorted(SCENARIOS.glob("*.scn"))
TIMEOUT_MS = 1000
#: A reservation left by a crash is gone after this (2 x the store timeout + 1 s).
RESERVATION_LIFE = 2 * TIMEOUT_MS / 1000 + 1.0
_SERIAL = itertools.count(1)
#: Store errors that say the engine sent a command to the wrong node.
REDIRECTION = re.compile(r"\b(CROSSSLOT|MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b")


def unique_prefix(tag: str) -> str:
    return f"cl:{os.getpid()}:{next(_SERIAL)}:{tag}:"


def engine(url: str, prefix: str, **options: Any) -> tickgate.Engine:
    return tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=TIMEOUT_MS, **options)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    t0 = time.monotonic()
    with running_cluster() as made:
        print(f"\ncluster formed in {time.monotonic() - t0:.1f} s: "
              + "; ".join(str(n) for n in made.primaries()))
        yield made


@pytest.fixture
def engines(cluster: Cluster) -> Iterator[Any]:
    """open(prefix, **options) -> an engine on the cluster, closed after the test."""
    opened: List[tickgate.Engine] = []

    def open_one(prefix: str, url: Optional[str] = None, **options: Any) -> tickgate.Engine:
        made = engine(url or cluster.url, prefix, **options)
        opened.append(made)
        return made

    try:
        yield open_one
    finally:
        for made in reversed(opened):
            made.close()


def owners_of(cluster: Cluster, keys: List[str]) -> List[int]:
    primaries = cluster.primaries()
    return [next(n.port for n in primaries if n.owns(key_slot(k))) for k in keys]


def scope_on_each_primary(cluster: Cluster, prefix: str, base: str) -> Dict[int, str]:
    """One guarded scope per primary (its guard's slot there): port -> scope."""
    scopes: Dict[int, str] = {}
    for index in range(200):
        scope = f"{base}{index}"
        scopes.setdefault(owners_of(cluster, [f"{prefix}u{{{name(scope)}}}guard"])[0], scope)
        if len(scopes) == 3:
            break
    assert len(scopes) == 3
    return scopes


def budget_keys_on_each_primary(cluster: Cluster, prefix: str, budget: str, base: str) -> List[str]:
    """One budget key per primary: the key's charges live on that primary."""
    found = subjects_on(cluster, lambda k: charges_key(prefix, budget, k), base, 1)
    keys = [v[0] for v in found.values()]
    assert len(set(owners_of(cluster, [charges_key(prefix, budget, k) for k in keys]))) == 3
    return keys


# ---------------------------------------------------------------------------
# Opening
# ---------------------------------------------------------------------------


def test_engine_opens_on_the_cluster_and_decides_on_every_primary(cluster: Cluster, engines: Any) -> None:
    prefix = unique_prefix("open")
    e = engines(prefix)
    per_primary = subjects_on(cluster, lambda s: countdown_key(prefix, "login", s), "+86138", 3)
    for port, subjects in per_primary.items():
        for subject in subjects:
            assert e.start("login", subject, duration=60).remaining > 0
            with pytest.raises(tickgate.CoolingDown):
                e.start("login", subject, duration=60)
            # The key's hash is on the primary that owns its slot.
            with Client(port) as c:
                assert c("EXISTS", countdown_key(prefix, "login", subject)) == 1, (port, subject)
    # One seed is enough: the engine finds the other nodes.
    one = engines(prefix, url=cluster.seed_url(cluster.primaries()[1].port))
    for subjects in per_primary.values():
        assert one.is_counting("login", subjects[0])


def test_guards_count_on_the_scopes_primary_for_every_engine(cluster: Cluster, engines: Any) -> None:
    # A guarded scope's guard and signals live in its one slot
    # ("P u{SCOPE}..."): one scope per primary, two engines, one count.
    prefix = unique_prefix("guard")
    a, b = engines(prefix), engines(prefix)
    scopes: Dict[int, str] = {}
    for index in range(200):
        scope = f"otp{index}"
        port = owners_of(cluster, [f"{prefix}u{{{name(scope)}}}guard"])[0]
        scopes.setdefault(port, scope)
        if len(scopes) == 3:
            break
    assert len(scopes) == 3
    for port, scope in scopes.items():
        a.set_guard(scope, tickgate.GuardMode.ENFORCE, country_daily_minimum=2, country_hourly_minimum=2,
                    unverified_after_seconds=0)
        # B hears the guard by the settings notice: then it refuses a
        # subject that is no number (an unguarded scope takes any).
        deadline = time.monotonic() + 10
        while True:
            try:
                b.send_begin(scope, "not-a-number").failed()
            except tickgate.InvalidNumber:
                break
            assert time.monotonic() < deadline, "B never heard of the guard"
            time.sleep(0.01)
        granted = [a.send_begin(scope, "+8613800000001", client_address="203.0.113.9"),
                   b.send_begin(scope, "+8613800000002", client_address="203.0.113.9")]
        for ticket in granted:
            ticket.succeeded()
        # The third unverified code to CN is refused on either engine, and the
        # counts sit on the scope's primary.
        for engine_ in (a, b):
            with pytest.raises(tickgate.PumpingSuspected):
                engine_.send_begin(scope, "+8613800000003", client_address="203.0.113.9")
        with Client(port) as c:
            assert c("ZCARD", f"{prefix}u{{{name(scope)}}}uc:CN") == 2, (port, scope)
        # A verification on B lets A send again (the count went down), once
        # A hears B's notice: until then A refuses the country by what the
        # store told it (docs/redis.md, "Refusals without a round trip"; the notice
        # crosses the cluster's bus).
        b.verified(scope, "+8613800000001")

        def a_sends() -> bool:
            try:
                a.send_begin(scope, "+8613800000004", client_address="203.0.113.9").succeeded()
            except tickgate.PumpingSuspected as refused:
                assert "known from an earlier read" in str(refused), refused
                return False
            return True

        assert wait_for(a_sends, 10, 0.005), "A never heard B's verification"


def test_outcomes_are_followed_on_the_scopes_primary(cluster: Cluster, engines: Any) -> None:
    # The codes followed for their outcome sit in the scope's slot, beside
    # its guard ("P u{SCOPE}due", dsub, dlast): one scope per primary.
    prefix = unique_prefix("outcomes")
    host = tickgate.Delivery.HOST_THREAD
    a, b = engines(prefix, delivery=host), engines(prefix, delivery=host)
    scopes = scope_on_each_primary(cluster, prefix, "otp")
    for port, scope in scopes.items():
        a.set_guard(scope, tickgate.GuardMode.ENFORCE, unverified_after_seconds=60)
        heard_a: List[Any] = []
        heard_b: List[Any] = []
        subscriptions = [a.subscribe_outcomes(scope, heard_a.append), b.subscribe_outcomes(scope, heard_b.append)]
        a.send_begin(scope, "+8613800000001", client_address="203.0.113.9").succeeded()
        a.send_begin(scope, "+8613800000002", client_address="203.0.113.9").succeeded()
        with Client(port) as c:
            assert c("ZCARD", f"{prefix}u{{{name(scope)}}}due") == 2, (port, scope)
        # B verifies A's code: B takes it off and reports it, once.
        deadline = time.monotonic() + 10
        while True:
            b.verified(scope, "+8613800000001")
            b.dispatch()
            if heard_b:
                break
            assert time.monotonic() < deadline, "B never took A's code off"
            time.sleep(0.05)
        assert [(r.number, r.outcome) for r in heard_b] == [("+8613800000001", tickgate.CodeOutcome.VERIFIED)]
        a.dispatch()
        assert heard_a == []
        with Client(port) as c:
            assert c("ZCARD", f"{prefix}u{{{name(scope)}}}due") == 1, (port, scope)
        for subscription in subscriptions:
            subscription.close()


def test_the_record_stream_is_on_the_scopes_primary(cluster: Cluster, engines: Any) -> None:
    """A guard's record stream sits in the scope's slot ("P u{SCOPE}records"):
    a send's record (the engine's own XADD, its screen being a step of its
    own here) and its code's outcome, which the outcomes' script appends
    in the step that decides it, whichever engine verified the code."""
    prefix = unique_prefix("stream")
    host = tickgate.Delivery.HOST_THREAD
    a, b = engines(prefix, delivery=host), engines(prefix, delivery=host)
    scopes = scope_on_each_primary(cluster, prefix, "rec")
    for port, scope in scopes.items():
        a.set_guard(scope, tickgate.GuardMode.ENFORCE, unverified_after_seconds=60, record_stream_length=100)
        a.send_begin(scope, "+8613800000001", client_address="203.0.113.9").succeeded()
        deadline = time.monotonic() + 10
        while True:
            b.verified(scope, "+8613800000001")
            with Client(port) as c:
                entries = c("XRANGE", f"{prefix}u{{{name(scope)}}}records", "-", "+")
            if len(entries) >= 2:
                break
            assert time.monotonic() < deadline, f"no outcome in the stream of {scope}: {entries}"
            time.sleep(0.05)
        records = []
        for _, flat in entries:
            values = [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
            records.append(dict(zip(values[::2], values[1::2])))
        assert [(r["scope"], r["number"], r["outcome"]) for r in records] == [
            (scope, "+8613800000001", "granted"), (scope, "+8613800000001", "verified")], records
        assert records[1]["address"] == "203.0.113.9" and int(records[1]["sent_ms"]) <= int(records[1]["time_ms"])


def test_finishing_an_upgrade_counts_the_engines_of_every_primary(cluster: Cluster, engines: Any) -> None:
    # Each engine's notice link is to one node, which alone counts it: the
    # finish sums PUBSUB NUMSUB over the primaries (docs/upgrading.md).
    prefix = unique_prefix("finish")
    primaries = cluster.primaries()
    first = engines(prefix, url=cluster.seed_url(primaries[0].port))
    engines(prefix, url=cluster.seed_url(primaries[2].port))
    owner = owners_of(cluster, [f"{prefix}format"])[0]
    assert ask(owner, "GET", f"{prefix}format") == "2"
    # A link subscribed to `P events` alone, as an engine of 0.1.0 holds it,
    # on a primary that does not own the format key.
    other = next(n.port for n in primaries if n.port != owner)
    older = Client(other)
    try:
        older("SUBSCRIBE", f"{prefix}events")
        with pytest.raises(tickgate.OlderEnginesLive) as refused:
            first.finish_store_upgrade()
        assert "1 engine that cannot read format 3 is live" in refused.value.message, refused.value.message
        assert ask(owner, "GET", f"{prefix}format") == "2"
    finally:
        older.close()
    assert wait_for(lambda: ask(other, "PUBSUB", "NUMSUB", f"{prefix}events")[1]
                    == ask(other, "PUBSUB", "NUMSUB", f"{prefix}reads:3")[1], 5.0)
    assert first.finish_store_upgrade() == 3
    assert ask(owner, "GET", f"{prefix}format") == "3"
    # Engines of this release open the finished cluster store.
    assert engines(prefix).finish_store_upgrade() == 3


def test_plain_url_to_a_cluster_node_is_refused_at_open(cluster: Cluster) -> None:
    prefix = unique_prefix("plain")
    for node in cluster.primaries():
        with pytest.raises(tickgate.StoreUnsupported) as caught:
            engine(f"redis://127.0.0.1:{node.port}", prefix)
        assert caught.value.failure == tickgate.StoreFailure.UNSUPPORTED
        assert "redis+cluster://" in caught.value.message, caught.value.message


# ---------------------------------------------------------------------------
# The scenario files
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("delivery", scenario_runner.DELIVERIES)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scenario_on_the_cluster(cluster: Cluster, path: Path, delivery: str) -> None:
    run_file(path, delivery, redis_url=cluster.url)


# ---------------------------------------------------------------------------
# Notices and cancellations across the primaries
# ---------------------------------------------------------------------------


def hear_changes_on_every_primary(cluster: Cluster, observer: tickgate.Engine, actor: tickgate.Engine,
                                  prefix: str, scope: str, base: str) -> None:
    """observer subscribes to one key per primary (and to the whole scope);
    actor starts and cancels each: observer hears every change."""
    per_primary = subjects_on(cluster, lambda s: countdown_key(prefix, scope, s), base, 1)
    subjects = [v[0] for v in per_primary.values()]
    heard: Dict[str, List[tickgate.EventKind]] = {s: [] for s in subjects}
    scope_heard: List[Tuple[str, tickgate.EventKind]] = []
    lock = threading.Lock()

    def on_key(event: tickgate.Event) -> None:
        with lock:
            heard[event.subject].append(event.kind)

    def on_scope(event: tickgate.Event) -> None:
        with lock:
            scope_heard.append((event.subject, event.kind))

    subscriptions = [observer.subscribe(scope, s, on_key) for s in subjects]
    subscriptions.append(observer.subscribe_scope(scope, on_scope))
    try:
        for subject in subjects:
            actor.start(scope, subject, duration=60)
        assert wait_for(lambda: all(tickgate.EventKind.STARTED in heard[s] for s in subjects), 5, 0.01), \
            f"the observer did not hear every start (primaries {list(per_primary)}): {heard}"
        assert wait_for(lambda: {s for s, k in list(scope_heard) if k == tickgate.EventKind.STARTED}
                        == set(subjects), 5, 0.01), f"the scope observer missed starts: {scope_heard}"
        for subject in subjects:
            actor.cancel(scope, subject)
        assert wait_for(lambda: all(tickgate.EventKind.CANCELLED in heard[s] for s in subjects), 5, 0.01), \
            f"the observer did not hear every cancel: {heard}"
        assert wait_for(lambda: {s for s, k in list(scope_heard) if k == tickgate.EventKind.CANCELLED}
                        == set(subjects), 5, 0.01), f"the scope observer missed cancels: {scope_heard}"
    finally:
        for subscription in subscriptions:
            subscription.close()


def test_notices_cross_engines_on_every_primary(cluster: Cluster, engines: Any) -> None:
    prefix = unique_prefix("notice")
    a, b = engines(prefix), engines(prefix)
    hear_changes_on_every_primary(cluster, a, b, prefix, "watch", "n")
    hear_changes_on_every_primary(cluster, b, a, prefix, "watch", "m")


def test_cancel_scope_and_cancel_all_on_every_primary(cluster: Cluster, engines: Any) -> None:
    prefix = unique_prefix("cancel")
    a, b = engines(prefix), engines(prefix)
    spread = {scope: subjects_on(cluster, lambda s, sc=scope: countdown_key(prefix, sc, s), f"{scope}-", 4)
              for scope in ("flow", "other", "third")}
    for scope, per_primary in spread.items():
        for subjects in per_primary.values():
            for subject in subjects:
                a.start(scope, subject, duration=120)

    def counting_in_redis(scope: str) -> Dict[int, int]:
        """Per primary: how many of the scope's keys hold a running countdown
        (a deadline field), read on the primary that owns each key."""
        counts: Dict[int, int] = {}
        for port, subjects in spread[scope].items():
            with Client(port) as c:
                counts[port] = sum(c("HEXISTS", countdown_key(prefix, scope, s), "d") for s in subjects)
        return counts

    assert all(n == 4 for n in counting_in_redis("flow").values()), counting_in_redis("flow")
    assert a.cancel_scope("flow") == 12
    assert all(n == 0 for n in counting_in_redis("flow").values()), counting_in_redis("flow")
    for subjects in spread["flow"].values():
        for subject in subjects:
            assert not b.is_counting("flow", subject)
    for scope in ("other", "third"):
        assert all(n == 4 for n in counting_in_redis(scope).values()), (scope, counting_in_redis(scope))
    assert a.cancel_all() == 24
    for scope in ("other", "third"):
        assert all(n == 0 for n in counting_in_redis(scope).values()), (scope, counting_in_redis(scope))
        for subjects in spread[scope].values():
            assert not any(b.is_counting(scope, s) for s in subjects)
    assert a.cancel_all() == 0


# ---------------------------------------------------------------------------
# Budgets: the race, and a reservation left by a crash
# ---------------------------------------------------------------------------


def start_racer(options: Dict[str, Any], log_dir: str) -> Tuple[subprocess.Popen, Any]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    log = open(os.path.join(log_dir, f"racer-{options['name']}.log"), "wb")
    process = subprocess.Popen([sys.executable, str(RACER), json.dumps(options)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=log, env=env)
    return process, log


def read_line(process: subprocess.Popen, what: str, timeout: float) -> Dict[str, Any]:
    assert process.stdout is not None
    result: List[bytes] = []
    reader = threading.Thread(target=lambda: result.append(process.stdout.readline()), daemon=True)  # type: ignore
    reader.start()
    reader.join(timeout)
    if not result or not result[0]:
        raise AssertionError(f"a racer gave no {what} within {timeout} s (exit {process.poll()})")
    return json.loads(result[0])


def committed(cluster: Cluster, prefix: str, budget: str, key: str, port: Optional[int] = None) -> Tuple[int, int]:
    """(members of b{} that are not in r{}, members of r{}), read on the
    owner (port: the owner, known beforehand)."""
    if port is None:
        port = cluster.owner_of_key(charges_key(prefix, budget, key)).port
    with Client(port) as c:
        charges = set(c("ZRANGE", charges_key(prefix, budget, key), 0, -1))
        reserved = set(c("ZRANGE", reservations_key(prefix, budget, key), 0, -1))
    return len(charges - reserved), len(reserved)


def test_racing_processes_never_exceed_a_budget_on_any_primary(cluster: Cluster, engines: Any,
                                                               tmp_path: Path) -> None:
    prefix = unique_prefix("race")
    cap, window_ms, seconds, racers = 20, 60_000, 8, 4
    keys = budget_keys_on_each_primary(cluster, prefix, "race", "203.0.113.")
    names = {k: charges_key(prefix, "race", k) for k in keys}
    owners = dict(zip(keys, owners_of(cluster, list(names.values()))))
    base = {"url": cluster.url, "prefix": prefix, "timeout_ms": TIMEOUT_MS, "budget": "race",
            "windows": [[cap, window_ms]], "keys": keys, "seconds": seconds, "fail_every": 3}
    started = [start_racer({**base, "name": f"r{i}", "seed": i + 1}, str(tmp_path)) for i in range(racers)]
    stop = threading.Event()
    readings = {k: 0 for k in keys}
    highest = {k: 0 for k in keys}
    over: List[str] = []

    def check() -> None:
        clients = {k: Client(owners[k]) for k in keys}
        try:
            while not stop.is_set():
                for k in keys:
                    # Every member is a charge or a reservation within the
                    # window (the run is far shorter than the window).
                    members = clients[k]("ZRANGE", names[k], 0, -1)
                    readings[k] += 1
                    highest[k] = max(highest[k], len(members))
                    if len(members) > cap:
                        over.append(f"{names[k]} held {len(members)} > {cap}: {members}")
        finally:
            for c in clients.values():
                c.close()

    checker = threading.Thread(target=check)
    try:
        for process, _ in started:
            ready = read_line(process, "ready line", 30)
            assert ready.get("ready"), f"a racer could not open its engine: {ready}"
        checker.start()
        for process, _ in started:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            process.stdin.flush()
        results = [read_line(process, "tally", seconds + 60) for process, _ in started]
    finally:
        stop.set()
        if checker.is_alive():
            checker.join()
        for process, log in started:
            if process.poll() is None:
                process.kill()
            process.wait()
            log.close()
    totals = {name: sum(r["tally"][name] for r in results) for name in results[0]["tally"]}
    print(f"\nrace: {racers} processes x {seconds} s on budget keys on primaries {list(owners.values())}: "
          f"{totals}; checker read each set {readings} times, highest {highest}; "
          f"slowest call {max(r['slowest'] for r in results):.3f} s")
    assert not over, f"a budget was exceeded: {over[:5]}"
    assert all(n >= 20 for n in readings.values()), f"the checker read too little: {readings}"
    errors = [e for r in results for e in r["errors"]]
    assert totals["store_errors"] == 0 and totals["end_errors"] == 0 and totals["other"] == 0, errors
    assert totals["granted"] >= cap and totals["locked"] > 0, f"no race happened: {totals}"
    # Reservations expire; one more send on each budget key purges them.
    time.sleep(RESERVATION_LIFE)
    late = engines(prefix)
    late.set_budget("race", windows_ms=[(cap, window_ms)])
    for k in keys:
        try:
            late.send_begin("race", f"purge-{k}", budgets=[("race", k)]).failed()
        except tickgate.Locked:
            pass
    for k in keys:
        kept = sum(r["kept"][k] for r in results)
        charges, reserved = committed(cluster, prefix, "race", k)
        assert reserved == 0, f"{k}: {reserved} reservations left after {RESERVATION_LIFE} s"
        assert charges == kept, f"{k}: {charges} committed charges, but the racers kept {kept} grants"
        assert charges <= cap
        assert late.budget_usage("race", k).used == charges


def test_a_reservation_left_by_a_crash_expires(cluster: Cluster, engines: Any, tmp_path: Path) -> None:
    """A process dies in the middle of a decision: its reservations (made
    first on the budgets' primaries) count against the caps until they
    expire, then the next reservation on each budget purges them."""
    from test_one_truth import Peer  # the app-server process of the multi-process tests

    primaries = cluster.primaries()
    # The prefix puts the store's keys of the whole prefix (settings, format,
    # clock, probe: no hash tag, so their slot depends on the prefix) on one
    # primary; the decided key lives on another, the one that stops; the
    # budgets charged are the two keys on the primaries that do not stop.
    while True:
        prefix = unique_prefix("crash")
        shared = set(owners_of(cluster, [prefix + k for k in ("settings", "format", "clock", "probe")]))
        if len(shared) == 1:
            break
    held = next(n for n in primaries if n.port not in shared)
    keys = budget_keys_on_each_primary(cluster, prefix, "ip", "198.51.100.")
    key_owner = dict(zip(keys, owners_of(cluster, [charges_key(prefix, "ip", k) for k in keys])))
    subject = subjects_on([held], lambda s: countdown_key(prefix, "login", s), "victim-", 1)[held.port][0]
    budgets = [k for k in keys if key_owner[k] != held.port]
    assert len(budgets) == 2
    observer = engines(prefix)
    observer.set_budget("ip", windows_ms=[(3, 600_000)])
    peer = Peer("crash", {"store_url": cluster.url, "store_prefix": prefix, "store_timeout_ms": TIMEOUT_MS},
                str(tmp_path))
    try:
        assert peer.wait_opened().get("ready"), peer.opened
        # A first decision on the same budgets, given back: the peer knows
        # the budget and has talked to every primary involved.
        warm = peer.ok("send_begin", scope="login", subject="warm-up", budgets=[["ip", k] for k in budgets])
        peer.ok("send_end", ticket=warm, ok=False)
        # The key's primary stops answering (for less than the node timeout,
        # so no failover starts): the decision reserves on the budgets'
        # primaries, then waits on the key's primary; the process dies there.
        cluster.pause(held)
        try:
            assert peer.process.stdin is not None
            peer.process.stdin.write((json.dumps({"op": "send_begin", "scope": "login", "subject": subject,
                                                  "budgets": [["ip", k] for k in budgets]}) + "\n").encode())
            peer.process.stdin.flush()
            # (Read on the owners found beforehand: asking the stopped node
            # for the cluster's shape would wait.)
            reserved = wait_for(lambda: all(committed(cluster, prefix, "ip", k, key_owner[k])[1] == 1
                                            for k in budgets), 0.7, 0.005)
            peer.process.kill()
            peer.process.wait()
        finally:
            cluster.resume(held)
        assert reserved, ("no reservation on the budgets' primaries while the key's primary was stopped: "
                          + str([committed(cluster, prefix, "ip", k, key_owner[k]) for k in budgets]))
    finally:
        if peer.process.poll() is None:
            peer.process.kill()
            peer.process.wait()
        peer.log.close()
    left_at = time.monotonic()
    # Until it expires, the reservation counts against the cap.
    for k in budgets:
        charges = cluster.on_owner(charges_key(prefix, "ip", k), "ZCARD", charges_key(prefix, "ip", k))
        assert charges == 1, (k, charges)
    time.sleep(max(0.0, RESERVATION_LIFE - (time.monotonic() - left_at)) + 0.2)
    for k in budgets:
        after = f"after-{k}"
        assert key_slot(countdown_key(prefix, "login", after)) != key_slot(charges_key(prefix, "ip", k))
        observer.send_begin("login", after, budgets=[("ip", k)]).succeeded()
        charges, reserved = committed(cluster, prefix, "ip", k)
        assert reserved == 0, f"{k}: the expired reservation was not purged"
        assert charges == 1, f"{k}: {charges} charges, expected only the new grant's"
        total = cluster.on_owner(charges_key(prefix, "ip", k), "ZCARD", charges_key(prefix, "ip", k))
        assert total == 1, f"{k}: the expired reservation still counts against the cap ({total} members)"
    # The crashed decision was never granted.
    assert not observer.is_counting("login", subject)


# ---------------------------------------------------------------------------
# Reshard while decisions run
# ---------------------------------------------------------------------------


def test_reshard_while_decisions_run(cluster: Cluster, engines: Any) -> None:
    prefix = unique_prefix("reshard")
    source, target = cluster.primaries()[0], cluster.primaries()[1]
    moving = Cluster.lowest_slots(source, 1500)
    in_moving = lambda scope: (lambda s: countdown_key(prefix, scope, s))  # noqa: E731
    # Cooldowns granted before the reshard, and subjects for fresh decisions,
    # all on slots that move; a budget key on a moving slot too.
    cooled = subjects_on([source], in_moving("login"), "c-", 300, moving)[source.port]
    fresh = subjects_on([source], in_moving("login"), "f-", 8000, moving)[source.port]
    budget_key = subjects_on([source], lambda k: charges_key(prefix, "ip", k), "10.0.0.", 1, moving)[source.port][0]
    e = engines(prefix)
    e.set_budget("ip", windows_ms=[(100_000, 600_000)])
    for subject in cooled:
        e.send_begin("login", subject).succeeded()
    outcomes = {"granted": 0, "refused": 0, "wrong": 0}
    failures: List[str] = []
    stop = threading.Event()

    def decide() -> None:
        n = 0
        while not stop.is_set() and n < len(fresh):
            subject = fresh[n]
            old = cooled[n % len(cooled)]
            n += 1
            try:
                e.send_begin("login", subject, budgets=[("ip", budget_key)] if n % 2 else None).succeeded()
                outcomes["granted"] += 1
            except tickgate.TickgateError as error:
                failures.append(f"{type(error).__name__}: {error.message}")
            try:
                e.send_begin("login", old)
                outcomes["wrong"] += 1
                failures.append(f"{old}: its cooldown was lost")
            except tickgate.CoolingDown:
                outcomes["refused"] += 1
            except tickgate.TickgateError as error:
                failures.append(f"{type(error).__name__}: {error.message}")

    worker = threading.Thread(target=decide)
    worker.start()
    try:
        assert wait_for(lambda: outcomes["granted"] >= 20, 10, 0.01), f"no decisions: {failures[:3]}"
        t0 = time.monotonic()
        before = dict(outcomes)
        moved = cluster.reshard(source, target, len(moving))
        took = time.monotonic() - t0
        during = dict(outcomes)
        wait_for(lambda: outcomes["granted"] >= during["granted"] + 20, 10, 0.01)
    finally:
        stop.set()
        worker.join()
    redirected = [f for f in failures if REDIRECTION.search(f)]
    print(f"\nreshard of {len(moved)} slots (with {len(cooled)} cooled keys) took {took:.2f} s; "
          f"decisions: {outcomes} ({during['granted'] - before['granted']} grants during the move), failed calls: {len(failures)}, redirection errors: {len(redirected)}")
    assert moved == moving, "the reshard did not move the slots the test chose"
    assert during["granted"] > before["granted"], "no decision was made while the slots moved"
    assert not redirected, f"the engine let a redirection through: {redirected[:5]}"
    assert not failures, f"decisions failed during the reshard: {failures[:5]}"
    # Everything is on the new owner now, and still refuses.
    for subject in cooled[:50]:
        assert cluster.owner_of_key(countdown_key(prefix, "login", subject)).port == target.port
        with pytest.raises(tickgate.CoolingDown):
            e.send_begin("login", subject)
    charges = cluster.on_owner(charges_key(prefix, "ip", budget_key), "ZCARD", charges_key(prefix, "ip", budget_key))
    assert charges == e.budget_usage("ip", budget_key).used > 0


# ---------------------------------------------------------------------------
# Failover (last: it leaves the cluster with a replica missing)
# ---------------------------------------------------------------------------


def replica_caught_up(cluster: Cluster, primary: Node) -> bool:
    """Every replica of primary has applied everything primary wrote so far."""
    offset = int(info(primary.port, "replication").get("master_repl_offset", "-1"))
    replicas = cluster.replicas_of(primary)
    return bool(replicas) and all(
        int(info(r.port, "replication").get("slave_repl_offset", "-1")) >= offset for r in replicas)


def test_failover_of_a_primary(cluster: Cluster, engines: Any) -> None:
    prefix = unique_prefix("failover")
    a, observer = engines(prefix), engines(prefix)
    primaries = cluster.primaries()
    victim = primaries[-1]
    pools = subjects_on(cluster, lambda s: countdown_key(prefix, "flow", s), "+86139", 300)
    # A cooldown granted on the victim's slots, on its replica before the kill.
    kept = subjects_on([victim], lambda s: countdown_key(prefix, "login", s), "kept-", 1)[victim.port][0]
    a.send_begin("login", kept).succeeded()
    assert wait_for(lambda: replica_caught_up(cluster, victim), 10), "the victim's replica did not catch up"
    done: Dict[int, List[Tuple[float, float]]] = {p.port: [] for p in primaries}   # (asked, took)
    failed: List[Tuple[int, float, float, tickgate.TickgateError]] = []          # (port, asked, took, error)
    stop = threading.Event()

    def stream() -> None:
        index = {port: 0 for port in pools}
        while not stop.is_set():
            for port, pool in pools.items():
                subject = pool[index[port] % len(pool)]
                index[port] += 1
                t0 = time.monotonic()
                try:
                    a.start("flow", subject, duration=300, restart=True)
                    done[port].append((t0, time.monotonic() - t0))
                except tickgate.TickgateError as error:
                    failed.append((port, t0, time.monotonic() - t0, error))
                    time.sleep(0.01)

    worker = threading.Thread(target=stream)
    worker.start()
    try:
        assert wait_for(lambda: all(len(v) >= 20 for v in done.values()), 15), f"no decisions: {failed[:3]}"
        killed = time.monotonic()
        cluster.kill(victim)
        promoted = cluster.wait_promoted(victim, 30)
        promoted_after = time.monotonic() - killed
        resumed = wait_for(lambda: all(any(t0 > killed for t0, _ in list(v)) for v in done.values()), 30, 0.01)
        gaps = {port: min((t0 + took for t0, took in list(v) if t0 > killed), default=float("inf")) - killed
                for port, v in done.items()}
        count = sum(len(v) for v in done.values())
        wait_for(lambda: sum(len(v) for v in done.values()) >= count + 60, 10, 0.01)
    finally:
        stop.set()
        worker.join()
    kinds: Dict[str, int] = {}
    per_port: Dict[int, int] = {}
    for port, _, _, error in failed:
        kinds[type(error).__name__] = kinds.get(type(error).__name__, 0) + 1
        per_port[port] = per_port.get(port, 0) + 1
    print(f"\nfailover: SIGKILL of {victim.port}, replica {promoted.port} promoted after {promoted_after:.2f} s; "
          f"first decision after the kill, per primary: "
          + ", ".join(f"{p}{' (killed)' if p == victim.port else ''} {g:.2f} s" for p, g in gaps.items())
          + f"; failed calls: {len(failed)} {kinds}, per primary {per_port}")
    assert resumed, f"decisions did not resume on every primary's keys within 30 s: {gaps}; {failed[-5:]}"
    assert gaps[victim.port] < promoted_after + 5, f"decisions on the promoted replica lagged: {gaps}"
    slowest = max([took for v in done.values() for _, took in v] + [took for _, _, took, _ in failed])
    assert slowest < TIMEOUT_MS / 1000 + 1.0, f"a call took {slowest:.2f} s (store timeout {TIMEOUT_MS} ms)"
    # The calls in between fail with a store error (a StoreIO, or a
    # StoreUnknown when the outcome of a call cut short cannot be known),
    # never with a redirection the engine should have followed. (While the
    # killed primary's slots have no owner every node answers CLUSTERDOWN,
    # so keys on the other primaries fail for a while too.)
    for port, asked, took, error in failed:
        what = f"{type(error).__name__}: {error.message}"
        assert isinstance(error, (tickgate.StoreIO, tickgate.StoreUnknown)), what
        assert not REDIRECTION.search(what) or "CLUSTERDOWN" in what, what
    # The cooldown granted before the kill is on the promoted replica.
    with pytest.raises(tickgate.CoolingDown):
        a.send_begin("login", kept)
    fresh = engines(prefix)
    with pytest.raises(tickgate.CoolingDown):
        fresh.send_begin("login", kept)
    assert cluster.owner_of_key(countdown_key(prefix, "login", kept)).port == promoted.port
    # Notices flow again on every primary, the promoted one included.
    hear_changes_on_every_primary(cluster, observer, a, prefix, "watch", "after-")
    hear_changes_on_every_primary(cluster, fresh, observer, prefix, "watch", "again-")
