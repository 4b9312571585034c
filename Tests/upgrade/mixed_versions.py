#!/usr/bin/env python3
"""The previous release and this tree share one store (CTest: upgrade.mixed_versions).

A fleet is upgraded one server at a time, so for a while servers of the
previous release and of this one share the store. This test builds the
previous release from the repository's own history (previous.py; the
newest line of Tests/upgrade/releases, kept built in BUILD/previous/COMMIT),
then runs it and this tree as two engines, each in a Python process of its
own with its own release's bindings and library (peer.py), on one real
redis-server (started here in a temporary folder) and on one SQLite file.

In both directions (the previous release writes and this one reads and
decides, then the other way round) it checks: a policy and titles set by
one are what the other decides by; sends and the cooldown a read shows,
the escalation read from the other's record, a send in flight, a failed
send that counts nothing; the wrong-code cap (code dead); a verification
that resets the other's schedule; a window cap reached by both; a budget
shared by both, sequentially and by a concurrent burst, exact; a guard set
by one that the other enforces, its counts shared (a code of one verified
by the other), and its removal; login sessions (a login through one is the
other's, a logout too, and a request queued on one runs when the user
logs in through the other); key notices (an observer on one hears the
other's send and verification).

Then the upgrade is finished (Engine.finish_store_upgrade): on Redis it is
refused (OlderEnginesLive) while the previous release is live; once that
stopped, the store's format goes from 2 to 3, two engines of this tree run
the same checks on the finished store, and the previous release refuses to
open it (StoreVersion, naming format 3), never reads it as corrupt. On
SQLite nothing is left to finish (schema 4).

Every call on either side must succeed or be the refusal expected (no
StoreCorrupt, no store error); the calls made and failed are counted per
side and printed. Exit 0 when all passed, 1 otherwise, 77 (SKIP) when the
repository's history cannot give the previous release (a shallow clone).

    mixed_versions.py --source DIR --build DIR --library LIBTICKGATE [--cmake ...]
                      [--previous COMMIT]   (another commit than the newest release)
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import previous  # noqa: E402

SKIP = 77
PEER = HERE / "peer.py"
CALL_TIMEOUT = 60.0
_NUMBERS = itertools.count(1)
# Guard thresholds that keep every signal out of the way unless one is lowered.
QUIET = dict(country_daily_minimum=1000, country_hourly_minimum=1000, address_daily_minimum=1000,
             address_hourly_minimum=1000, address_countries_maximum=1000)


def number() -> str:
    """A fresh mainland China number: a key of its own."""
    return f"+86138{next(_NUMBERS):08d}"


def die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the test's process dies, even
    by SIGKILL (a CTest timeout), so no server or engine outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Results:
    """The checks' and the calls' counts, and the report."""

    def __init__(self) -> None:
        self.passed = self.failed = 0
        self.calls: Dict[str, Dict[str, int]] = {}

    def check(self, ok: bool, what: str) -> bool:
        if ok:
            self.passed += 1
            print(f"ok   {what}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {what}", flush=True)
        return ok

    def tally(self, side: str, made: int = 0, refused: int = 0, failed: int = 0, corrupt: int = 0) -> None:
        counts = self.calls.setdefault(side, {"made": 0, "refused": 0, "failed": 0, "corrupt": 0})
        counts["made"] += made
        counts["refused"] += refused
        counts["failed"] += failed
        counts["corrupt"] += corrupt


class Side:
    """One engine of one release in a process of its own (peer.py)."""

    def __init__(self, results: Results, label: str, store: str, tree: Path, library: Path,
                 options: Dict[str, Any], folder: Path) -> None:
        self.results = results
        self.label = label
        self.store = store
        self.name = f"{label}/{store}"
        self.stderr_path = folder / f"{label}-{store}.stderr"
        self.command = [sys.executable, str(PEER), str(tree / "bindings" / "python"), json.dumps(options)]
        self.env = dict(os.environ, TICKGATE_LIBRARY=str(library), PYTHONDONTWRITEBYTECODE="1")
        self.env.pop("PYTHONPATH", None)
        self._start()

    def _start(self) -> None:
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(self.stderr_path, "a"), text=True, env=self.env,
                                        preexec_fn=die_with_parent)
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, args=(self.process, self.lines), daemon=True).start()
        self.ready = self._reply(CALL_TIMEOUT)

    def reopen(self) -> bool:
        """The app server restarted: a new process opens the store again (a
        SQLite engine reads the settings and sessions at its open)."""
        self.close()
        self._start()
        self.results.tally(self.name, made=1, failed=0 if self.ready.get("ready") else 1)
        if not self.ready.get("ready"):
            print(f"FAIL {self.name} reopen: {self.ready}", flush=True)
            self.results.failed += 1
        return bool(self.ready.get("ready"))

    @staticmethod
    def _read(process: subprocess.Popen, lines: "queue.Queue[Optional[str]]") -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    def _reply(self, timeout: float) -> Dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return {"error": "Timeout", "message": f"no answer from {self.name} within {timeout:.0f} s"}
        if line is None:
            return {"error": "PeerExited", "message": f"{self.name} exited: "
                    + self.stderr_path.read_text(errors="replace")[-2000:]}
        return json.loads(line)

    def send(self, op: str, **args: Any) -> Dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
            self.process.stdin.flush()
        except OSError as exc:
            return {"error": "PeerExited", "message": f"{self.name}: {exc}"}
        return self._reply(CALL_TIMEOUT)

    def call(self, op: str, expect: Union[None, str, Tuple[str, ...]] = None, **args: Any) -> Dict[str, Any]:
        """One call that must succeed (expect None) or be refused with one of
        the errors named in expect; anything else is a failed call."""
        reply = self.send(op, **args)
        expected = (expect,) if isinstance(expect, str) else (expect or ())
        corrupt = 1 if reply.get("error") == "StoreCorrupt" else 0
        if expect is None and "error" not in reply:
            self.results.tally(self.name, made=1)
        elif expect is not None and reply.get("error") in expected:
            self.results.tally(self.name, made=1, refused=1)
        else:
            self.results.tally(self.name, made=1, failed=1, corrupt=corrupt)
            got = f"{reply['error']}: {reply.get('message')}" if "error" in reply else f"granted: {reply.get('ok')!r}"
            want = "success" if expect is None else " or ".join(expected)
            print(f"FAIL {self.name} {op}({json.dumps(args)[1:-1]}): {got} (expected {want})", flush=True)
            self.results.failed += 1
        return reply

    def ok(self, op: str, **args: Any) -> Any:
        """The result of a call that must succeed (None if it failed)."""
        return self.call(op, **args).get("ok")

    def poll(self, op: str, until: Callable[[Dict[str, Any]], bool], stale: Tuple[str, ...] = (),
             timeout: float = 10.0, **args: Any) -> Dict[str, Any]:
        """Calls op until until(reply) holds. Meanwhile a result that does
        not satisfy it, or one of the `stale` refusals (an engine refuses by
        what it last knew until the other's notice arrives), is expected;
        any other error is a failed call."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.send(op, **args)
            if "error" not in reply and until(reply):
                self.results.tally(self.name, made=1)
                return reply
            if "error" in reply and reply["error"] not in stale:
                self.results.tally(self.name, made=1, failed=1,
                                   corrupt=1 if reply["error"] == "StoreCorrupt" else 0)
                print(f"FAIL {self.name} {op}({json.dumps(args)[1:-1]}): {reply['error']}: {reply.get('message')}",
                      flush=True)
                self.results.failed += 1
                return reply
            self.results.tally(self.name, made=1, refused=1 if "error" in reply else 0)
            if time.monotonic() > deadline:
                return reply
            time.sleep(0.01)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


class RedisServer:
    """A redis-server of the test's own on a unix socket in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.socket = folder / "redis.sock"
        self.log = folder / "redis.log"
        self.process = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "yes", "--dir", str(folder)],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 10
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not start: " + self.log.read_text(errors="replace")[-2000:])
            time.sleep(0.02)

    def answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(str(self.socket))
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"redis+unix://{self.socket}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# -- the checks, one direction: W writes, R reads and decides ----------------------------


def scenario(t: Results, store: str, W: Side, R: Side, d: str) -> None:
    w, r = W.label, R.label
    print(f"---- {store}: {w} writes, {r} reads and decides", flush=True)
    redis = store == "redis"

    # Settings: a policy and titles set through W govern R. (On Redis R
    # hears them by notice; an open SQLite engine reads them at its open
    # only, so there R restarts, as an upgraded server does.)
    S, SW = f"login-{d}", f"window-{d}"
    W.ok("set_policy", scope=S, cooldowns_ms=[2000, 45000, 90000], max_wrong_codes=2)
    W.ok("set_policy", scope=SW, cooldowns_ms=[1], window_max_sends=3, window_ms=3_600_000)
    W.ok("set_titles", scope=S, idle="Send a code")
    if not redis:
        R.reopen()
    p = R.poll("policy", scope=S, until=lambda v: v["ok"]["cooldowns_ms"] == [2000, 45000, 90000]).get("ok")
    t.check(p is not None and p["cooldowns_ms"] == [2000, 45000, 90000] and p["max_wrong_codes"] == 2,
            f"{r} reads the policy {w} set: {p}")
    b = R.poll("button", scope=S, subject=number(), until=lambda v: v["ok"]["title"] == "Send a code").get("ok")
    t.check(bool(b) and b["title"] == "Send a code", f"{r} shows the titles {w} set: {b and b['title']!r}")

    # Sends and cooldowns.
    a = number()
    cooldown = W.ok("send", scope=S, subject=a)
    t.check(cooldown == 2000, f"{w} sends: its cooldown is the first step, {cooldown} ms")
    if redis:  # reads go to the store (SQLite: to memory, refreshed by the key's next decision)
        left = R.ok("remaining", scope=S, subject=a)
        t.check(left is not None and 0 < left <= 2010, f"{r} reads {w}'s cooldown before deciding: {left} ms")
    refused = R.call("send_begin", scope=S, subject=a, expect="CoolingDown")
    t.check(0 < refused.get("remaining_ms", 0) <= 2010,
            f"{r} refuses a send during {w}'s cooldown: CoolingDown, {refused.get('remaining_ms')} ms")
    b = R.ok("button", scope=S, subject=a)
    t.check(bool(b) and b["state"] == "COOLING" and 0 < b["remaining_ms"] <= 2010,
            f"{r}'s button of the key {w} sent to: {b}")
    time.sleep(2.05)
    cooldown = R.poll("send", scope=S, subject=a, stale=("CoolingDown",), until=lambda v: True).get("ok")
    t.check(cooldown == 45000, f"{r} sends after {w}'s cooldown: the second step, {cooldown} ms "
            f"(it read {w}'s send record)")
    refused = W.call("send_begin", scope=S, subject=a, expect="CoolingDown")
    t.check(44000 < refused.get("remaining_ms", 0) <= 45010,
            f"{w} refuses during {r}'s cooldown: {refused.get('remaining_ms')} ms")
    left = W.ok("remaining", scope=S, subject=a)
    t.check(left is not None and 44000 < left <= 45010, f"{w} reads {r}'s cooldown: {left} ms")
    # A verification through W starts R's schedule again.
    W.ok("verified", scope=S, subject=a)
    cooldown = R.poll("send", scope=S, subject=a, stale=("CoolingDown",), until=lambda v: True).get("ok")
    t.check(cooldown == 2000, f"{r} sends after {w} verified the code: the first step again, {cooldown} ms")

    # A send in flight on one; its failure counts nothing on the other.
    c = number()
    ticket = W.ok("send_begin", scope=S, subject=c)
    R.call("send_begin", scope=S, subject=c, expect="InFlight")
    t.check(W.ok("send_end", ticket=ticket, ok=False) == 0, f"{w}'s send fails: no cooldown")
    cooldown = R.poll("send", scope=S, subject=c, stale=("InFlight",), until=lambda v: True).get("ok")
    t.check(cooldown == 2000, f"{r} sends once {w}'s send failed: the first step, {cooldown} ms")

    # The wrong-code cap (2) of R's code, counted on both.
    left1 = W.ok("verify_failed", scope=S, subject=c)
    left2 = R.ok("verify_failed", scope=S, subject=c)
    t.check((left1, left2) == (1, 0), f"wrong codes on {w} then {r}: {left1} then {left2} left (the code is dead)")
    W.call("verify_failed", scope=S, subject=c, expect="CodeDead")
    W.call("verified", scope=S, subject=c, expect="CodeDead")
    R.call("verified", scope=S, subject=c, expect="CodeDead")
    b = W.poll("button", scope=S, subject=c, until=lambda v: v["ok"]["state"] == "CODE_DEAD").get("ok")
    t.check(bool(b) and b["state"] == "CODE_DEAD", f"{w}'s button of the code {r} sent and both killed: {b}")

    # A window cap (3 an hour) reached by sends of both.
    R.poll("policy", scope=SW, until=lambda v: v["ok"]["window_max_sends"] == 3)
    k = number()
    granted = []
    for side in (W, R, W):
        granted.append(side.poll("send", scope=SW, subject=k, stale=("CoolingDown",), until=lambda v: True).get("ok"))
        time.sleep(0.01)
    t.check(all(g is not None for g in granted), f"sends by {w}, {r}, {w} within the window: cooldowns {granted}")
    for side in (R, W):
        refused = side.call("send_begin", scope=SW, subject=k, expect=("Locked", "CoolingDown"))
        t.check(refused.get("error") == "Locked" and refused.get("remaining_ms", 0) > 3_500_000,
                f"{side.label} refuses the 4th send of the window: {refused.get('error')}, "
                f"{refused.get('remaining_ms')} ms")
    b = R.ok("button", scope=SW, subject=k)
    t.check(bool(b) and b["state"] == "LOCKED", f"{r}'s button of the spent window: {b and b['state']}")

    # A budget shared by both: 3 sends an hour per client address.
    SB, B, ip = f"budget-{d}", f"ip-{d}", "203.0.113.7"
    W.ok("set_budget", name=B, windows_ms=[[3, 3_600_000]])
    u = R.poll("budget_usage", name=B, key=ip, until=lambda v: v["ok"]["max_sends"] == 3).get("ok")
    t.check(bool(u) and (u["used"], u["max_sends"]) == (0, 3), f"{r} reads the budget {w} set: {u}")
    R.ok("send", scope=SB, subject=number(), budgets=[[B, ip]], ok=False)
    outcomes = []
    for i in range(6):
        side = (W, R)[i % 2]
        reply = side.call("send", scope=SB, subject=number(), budgets=[[B, ip]],
                          expect=None if i < 3 else "Locked")
        outcomes.append("granted" if "ok" in reply else f"{reply.get('error')}({reply.get('budget')})")
    t.check(outcomes == ["granted"] * 3 + [f"Locked({B})"] * 3,
            f"6 sends alternating {w}, {r} on a budget of 3 (after a failed send): {outcomes}")
    for side in (W, R):
        u = side.ok("budget_usage", name=B, key=ip)
        t.check(bool(u) and u["used"] == 3, f"{side.label} reads the budget's use: {u}")
    # ... and a burst from both at once: 24 sends on a cap of 10.
    G = f"global-{d}"
    W.ok("set_budget", name=G, windows_ms=[[10, 3_600_000]])
    R.poll("budget_usage", name=G, key="sms", until=lambda v: v["ok"]["max_sends"] == 10)
    # Keyed by the side itself: both may be of one release (after the finish).
    subjects = {id(side): [number() for _ in range(12)] for side in (W, R)}
    for side in (W, R):
        side.ok("burst_begin", scope=SB, subjects=subjects[id(side)], budgets=[[G, "sms"]], threads=3)
    bursts = {id(side): side.ok("burst_wait") or {} for side in (W, R)}
    for side in (W, R):
        outcome = bursts[id(side)]
        made = outcome.get("granted", 0) + outcome.get("refused", 0) + len(outcome.get("errors", []))
        # Each send of the burst counts as one call (begin, and end when granted).
        side.results.tally(side.name, made=made, refused=outcome.get("refused", 0),
                           failed=len(outcome.get("errors", [])),
                           corrupt=sum(1 for e in outcome.get("errors", []) if e.get("error") == "StoreCorrupt"))
        if outcome.get("errors"):
            print(f"FAIL {side.name} burst: {outcome['errors'][:3]}", flush=True)
    total = sum(o.get("granted", 0) for o in bursts.values())
    t.check(total == 10 and not any(o.get("errors") for o in bursts.values()),
            f"a burst of 12 + 12 sends from {w} and {r} at once on a budget of 10: "
            f"{bursts[id(W)].get('granted')} + {bursts[id(R)].get('granted')} granted")
    for side in (W, R):
        u = side.ok("budget_usage", name=G, key="sms")
        t.check(bool(u) and u["used"] == 10, f"{side.label} reads the burst's budget: {u and u['used']} of 10")

    # A guard set by W: R enforces it, and the two count codes together.
    SG, X = f"guard-{d}", "198.51.100.7"
    W.ok("set_guard", scope=SG, mode="ENFORCE", refused_destinations=["US"], unverified_after_seconds=0,
         **dict(QUIET, address_hourly_minimum=2))
    guarded = R.poll("guarded", scope=SG, until=lambda v: v["ok"] is True).get("ok")
    t.check(guarded is True, f"{r} guards the scope {w} set a guard on")
    R.call("send_begin", scope=SG, subject="+14155550100", address=X, expect="DestinationRefused")
    first = number()
    W.ok("send", scope=SG, subject=first, address=X)
    R.ok("send", scope=SG, subject=number(), address=X)
    W.call("send_begin", scope=SG, subject=number(), address=X, expect="PumpingSuspected")
    R.call("send_begin", scope=SG, subject=number(), address=X, expect="PumpingSuspected")
    R.ok("verified", scope=SG, subject=first)
    reply = W.poll("send", scope=SG, subject=number(), address=X, stale=("PumpingSuspected",), until=lambda v: True)
    t.check("ok" in reply, f"{w} sends again once {r} verified {w}'s code (the address's counts are shared)")
    R.call("send_begin", scope=SG, subject=number(), address=X, expect="PumpingSuspected")
    W.ok("set_guard", scope=SG, mode=None)
    if not redis:
        R.reopen()
    unguarded = R.poll("guarded", scope=SG, until=lambda v: v["ok"] is False).get("ok")
    t.check(unguarded is False, f"{r} drops the guard {w} removed")

    # Login sessions (an open SQLite engine reads them at its open only).
    RA, RB = f"account-{d}", f"orders-{d}"
    W.ok("login", realm=RA, ttl_ms=600_000)
    if not redis:
        R.reopen()
    s = R.poll("session", realm=RA, until=lambda v: v["ok"]["logged_in"]).get("ok")
    # Mapped from the server's clock, never early: late by at most a round trip.
    t.check(bool(s) and s["logged_in"] and 590_000 < s["remaining_ms"] <= 600_010,
            f"{r} reads the session {w} logged in: {s}")
    result = R.ok("require", realm=RA, tag=f"now-{d}")
    ran = R.poll("request", tag=f"now-{d}", until=lambda v: v["ok"]["ran"]).get("ok")
    t.check(result == "RUNS_NOW" and bool(ran) and ran["ran"], f"{r} runs an action behind {w}'s login: {result}")
    R.ok("logout", realm=RA)
    if not redis:
        W.reopen()
    s = W.poll("session", realm=RA, until=lambda v: not v["ok"]["logged_in"]).get("ok")
    t.check(bool(s) and not s["logged_in"], f"{w} reads {r}'s logout: {s}")
    if redis:  # sessions are announced on Redis only
        result = R.ok("require", realm=RB, tag=f"queued-{d}")
        W.ok("login", realm=RB, ttl_ms=600_000)
        ran = R.poll("request", tag=f"queued-{d}", until=lambda v: v["ok"]["ran"]).get("ok")
        t.check(result == "QUEUED" and bool(ran) and ran["ran"],
                f"{r}'s request queued for login runs when the user logs in through {w}: {result}, {ran}")
        W.ok("logout", realm=RB)

    # Key notices: an observer on R hears W's send and verification.
    e = number()
    R.ok("subscribe", scope=S, subject=e)
    W.ok("send", scope=S, subject=e)
    heard = R.poll("events", scope=S, subject=e,
                   until=lambda v: any(x["state"] == "COOLING" for x in v["ok"])).get("ok") or []
    t.check(any(x["state"] == "COOLING" for x in heard),
            f"{r}'s observer hears {w}'s send: {[x['kind'] for x in heard]}")
    W.ok("verified", scope=S, subject=e)
    # Another engine's verification reaches an observer as the cooldown's
    # end (today CANCELLED, state READY_AGAIN, in both releases and with
    # one release alone: only the engine that verified says RESET, IDLE).
    ended = ("CANCELLED", "RESET")
    heard = R.poll("events", scope=S, subject=e, until=lambda v: v["ok"][-1]["kind"] in ended).get("ok") or []
    t.check(bool(heard) and heard[-1]["kind"] in ended,
            f"{r}'s observer hears {w}'s verification: {[(x['kind'], x['state']) for x in heard]}")
    b = R.ok("button", scope=S, subject=e)
    t.check(bool(b) and b["state"] == "IDLE", f"{r}'s button after {w}'s verification: {b and b['state']}")


def run(t: Results, store: str, prev: previous.Release, current: Tuple[Path, Path], options: Dict[str, Any],
        folder: Path, version: str) -> None:
    old = Side(t, "previous", store, prev.tree, prev.library, options, folder)
    new = None
    try:
        new = Side(t, "current", store, current[0], current[1], options, folder)
        for side, want_version, want_library in ((old, prev.version, prev.library), (new, version, current[1])):
            ready = side.ready
            t.check(ready.get("ready") is True and ready.get("version") == want_version
                    and ready.get("library_version") == want_version
                    and ready.get("library") == os.path.realpath(want_library),
                    f"{side.name} runs {ready.get('version')} with libtickgate {ready.get('library_version')} "
                    f"({ready.get('library') or ready.get('message')})")
        if old.ready.get("ready") and new.ready.get("ready"):
            scenario(t, store, old, new, "p2c")
            scenario(t, store, new, old, "c2p")
            if store == "redis":
                finish(t, store, old, new, prev, current, options, folder)
            else:
                format_now = new.ok("finish_upgrade")
                t.check(format_now == 4, f"finishing on SQLite leaves schema 4 (nothing to finish): {format_now}")
                old.ok("send", scope="after-finish", subject=number())
    finally:
        if new is not None:
            new.close()
        old.close()


def finish(t: Results, store: str, old: Side, new: Side, prev: previous.Release, current: Tuple[Path, Path],
           options: Dict[str, Any], folder: Path) -> None:
    """Finishing the upgrade: refused while the previous release is live;
    once it stopped, the store's format is raised, engines of this tree go
    on deciding on it, and the previous release refuses to open it."""
    print(f"---- {store}: finishing the upgrade", flush=True)
    refused = new.call("finish_upgrade", expect="OlderEnginesLive")
    t.check(refused.get("error") == "OlderEnginesLive" and "stays at format 2" in refused.get("message", ""),
            f"current cannot finish while previous is live: {refused.get('error')}: {refused.get('message')}")
    old.ok("send", scope="unfinished", subject=number())
    old.close()
    finished = new.poll("finish_upgrade", stale=("OlderEnginesLive",), until=lambda v: v["ok"] == 3).get("ok")
    t.check(finished == 3, f"current finishes once previous stopped: format {finished}")
    t.check(new.ok("finish_upgrade") == 3, "finishing again changes nothing: format 3")
    other = Side(t, "current", store, current[0], current[1], options, folder)
    try:
        t.check(other.ready.get("ready") is True, f"another engine of current opens the finished store: "
                f"{other.ready.get('message') or 'ready'}")
        if other.ready.get("ready"):
            scenario(t, store, new, other, "fin")
    finally:
        other.close()
    downgrade = Side(t, "previous", store, prev.tree, prev.library, options, folder)
    try:
        ready = downgrade.ready
        t.check(ready.get("error") == "StoreVersion" and "format 3" in ready.get("message", ""),
                f"previous refuses to open the finished store: {ready.get('error')}: {ready.get('message')}")
    finally:
        downgrade.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--build", required=True, type=Path)
    parser.add_argument("--library", required=True, type=Path, help="this tree's libtickgate.so")
    for tool in ("cmake", "ninja", "c", "cxx", "swiftc", "swift"):
        parser.add_argument(f"--{tool}", default=shutil.which(tool) if tool in ("cmake", "ninja", "swift") else None)
    parser.add_argument("--previous", help="run this commit as the previous release (default: the newest "
                        "line of Tests/upgrade/releases)")
    args = parser.parse_args()
    source, build = args.source.resolve(), args.build.resolve()
    started = time.monotonic()
    if shutil.which("redis-server") is None:
        print("SKIP: the mixed-version test needs redis-server (Debian: apt-get install redis-server)")
        return SKIP
    try:
        prev = previous.prepare(source, build, {"cmake": args.cmake, "ninja": args.ninja, "c": args.c,
                                                "cxx": args.cxx, "swiftc": args.swiftc, "swift": args.swift},
                                args.previous)
    except previous.Missing as why:
        print(f"SKIP: {why}")
        return SKIP
    except previous.BuildFailed as why:
        print(f"FAIL {why}")
        return 1
    sys.path.insert(0, str(source / "bindings" / "python"))
    from tickgate import _ffi  # this tree's version, as its bindings state it (build.version checks them)
    version = _ffi.TG_VERSION_STRING
    print(f"     previous {prev.version} ({prev.commit[:10]}): {prev.library}", flush=True)
    print(f"     current  {version}: {args.library}", flush=True)

    t = Results()
    folder = Path(tempfile.mkdtemp(prefix="tg-upgrade-"))
    server: Optional[RedisServer] = None
    # CTest stops a test past its time with SIGTERM first: end through the finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        server = RedisServer(folder)
        run(t, "redis", prev, (source, args.library), {"store_url": server.url, "store_prefix": "upgrade:"},
            folder, version)
        run(t, "sqlite", prev, (source, args.library), {"store_path": str(folder / "upgrade.db")}, folder, version)
    finally:
        if server is not None:
            server.stop()
        if t.failed:
            for log in sorted(folder.glob("*.stderr")):
                text = log.read_text(errors="replace").strip()
                if text:
                    print(f"---- {log.name}:\n{text[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)

    print("---- calls per side (made, refused as expected, failed; StoreCorrupt among the failed)")
    for name, counts in sorted(t.calls.items()):
        print(f"     {name:17} {counts['made']:5} made, {counts['refused']:4} refused as expected, "
              f"{counts['failed']:3} failed, {counts['corrupt']} StoreCorrupt")
    for label in ("previous", "current"):
        made = sum(c["made"] for n, c in t.calls.items() if n.startswith(label + "/"))
        failed = sum(c["failed"] for n, c in t.calls.items() if n.startswith(label + "/"))
        t.check(made > 0 and failed == 0, f"every call of the {label} release succeeded or was the refusal expected: "
                f"{made} made, {failed} failed")
    built = "reused" if prev.built_s is None else f"built in {prev.built_s:.0f} s"
    print(f"     previous release {built}; the test took {time.monotonic() - started:.0f} s")
    print(f"{t.passed} passed, {t.failed} failed")
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
