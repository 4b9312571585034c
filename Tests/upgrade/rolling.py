#!/usr/bin/env python3
"""A fleet rolls from the previous release to this one (CTest: upgrade.rolling).

On one real redis-server (started here in a temporary folder), two app
servers of the previous release (built from the repository's history by
previous.py, reused from BUILD/previous/COMMIT) run under traffic; then
they are upgraded one at a time: an old engine stops and a new one (this
tree) starts in its place, until two new engines run. Each engine is a
Python process of its own driven as mixed_versions.py drives one
(peer.py), and each has a traffic thread that keeps calling it from the
moment it is ready until it stops: sends begun and ended with budgets
(shared numbers and fresh ones), reads (remaining, button, a budget's
use), wrong codes and verifications, guarded sends on a guarded scope
(one to a refused destination), login sessions.

Every call must succeed or be a refusal the traffic expects (CoolingDown,
InFlight, Locked, NotFound, CodeDead, DestinationRefused,
PumpingSuspected); none may be StoreCorrupt or anything else. The calls
made and failed are printed per side (old, new) and per phase:

    2 old            both engines of the previous release
    1 old + 1 new    from the first old engine's stop (the new one starts meanwhile)
    2 new            from the second old engine's stop
    2 new, finished  from the upgrade's finish (Engine.finish_store_upgrade)

The upgrade is finished by an operator's engine of this tree (a process of
its own, as an operator's script is): in phase 1 old + 1 new it must be
refused (OlderEnginesLive: the old server is live), after phase 2 new it
must raise the store's format from 2 to 3 while both new servers keep being
called.

Exit 0 when none failed, 1 otherwise, 77 (SKIP) without redis-server or
when the repository's history cannot give the previous release.

    rolling.py --source DIR --build DIR --library LIBTICKGATE [--cmake ...] [--phase-seconds N]
               [--previous COMMIT]   (another commit than the newest release)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import previous  # noqa: E402
from mixed_versions import QUIET, SKIP, RedisServer, Results, Side, number  # noqa: E402

PHASES = ("2 old", "1 old + 1 new", "2 new", "2 new, finished")
RELEASES = ("old", "new")
# The refusals traffic on shared keys meets, by call.
SEND = ("CoolingDown", "InFlight", "Locked")
SCOPE, GUARDED, BUDGET = "roll-login", "roll-guarded", "roll-ip"
SHARED = [number() for _ in range(12)]       # numbers every engine sends to
ADDRESSES = ["203.0.113.%d" % i for i in range(1, 5)]


class Counts(Results):
    """Results whose calls are counted per (phase, release), under a lock:
    the traffic threads of all live engines tally at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.phase = PHASES[0]
        self.by_phase: Dict[str, Dict[str, Dict[str, int]]] = {
            p: {r: {"made": 0, "refused": 0, "failed": 0, "corrupt": 0} for r in RELEASES} for p in PHASES}
        self.refusals: Dict[str, Dict[str, int]] = {r: {} for r in RELEASES}   # by kind, all phases

    def refused(self, side: str, error: str) -> None:
        with self.lock:
            kinds = self.refusals[side.split("/", 1)[0]]
            kinds[error] = kinds.get(error, 0) + 1

    def tally(self, side: str, made: int = 0, refused: int = 0, failed: int = 0, corrupt: int = 0) -> None:
        release = side.split("/", 1)[0]
        with self.lock:
            counts = self.by_phase[self.phase][release]
            counts["made"] += made
            counts["refused"] += refused
            counts["failed"] += failed
            counts["corrupt"] += corrupt

    def failures(self) -> int:
        with self.lock:
            return sum(c["failed"] for p in self.by_phase.values() for c in p.values())


class Server:
    """One app server of the fleet: an engine (Side) and its traffic thread."""

    def __init__(self, t: Counts, release: str, slot: int, tree: Path, library: Path,
                 options: Dict[str, object], folder: Path) -> None:
        self.side = Side(t, release, f"{slot}", tree, library, options, folder)
        self.slot = slot
        self.realm = f"roll-account-{release}-{slot}"
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.rounds = 0

    def start_traffic(self) -> None:
        self.thread = threading.Thread(target=self.traffic, daemon=True)
        self.thread.start()

    def call(self, op: str, refusals: Tuple[str, ...] = (), **args: object) -> Dict[str, object]:
        """One call that may succeed or be one of `refusals` (traffic on
        shared keys meets them); anything else is a failed call."""
        s = self.side
        reply = s.send(op, **args)
        error = reply.get("error")
        if error is None:
            s.results.tally(s.name, made=1)
        elif error in refusals:
            s.results.tally(s.name, made=1, refused=1)
            s.results.refused(s.name, str(error))
        else:
            s.results.tally(s.name, made=1, failed=1, corrupt=1 if error == "StoreCorrupt" else 0)
            print(f"FAIL {s.name} {op}({json.dumps(args)[1:-1]}): {error}: {reply.get('message')}", flush=True)
        return reply

    def traffic(self) -> None:
        call, rng = self.call, random.Random(self.slot * 1000 + len(self.side.label))
        while not self.stop.is_set():
            self.rounds += 1
            shared, ip = rng.choice(SHARED), rng.choice(ADDRESSES)
            budgets = [[BUDGET, ip]]
            # A send begun and ended with a budget, on a number the others send to too.
            reply = call("send_begin", SEND, scope=SCOPE, subject=shared, budgets=budgets)
            if "ok" in reply:
                call("send_end", ticket=reply["ok"], ok=rng.random() > 0.1)
            # A whole send to a number of its own (only the budget may refuse it).
            call("send", ("Locked",), scope=SCOPE, subject=number(), budgets=budgets)
            # Reads (NotFound: no countdown runs on the key now).
            call("remaining", ("NotFound",), scope=SCOPE, subject=shared)
            call("button", scope=SCOPE, subject=rng.choice(SHARED))
            call("budget_usage", name=BUDGET, key=ip)
            # Wrong codes, and now and then a verification.
            call("verify_failed", ("NotFound", "CodeDead"), scope=SCOPE, subject=rng.choice(SHARED))
            if self.rounds % 3 == 0:
                call("verified", ("CodeDead",), scope=SCOPE, subject=rng.choice(SHARED))
            # Guarded sends: one granted (or refused by the guard's counts),
            # one that the guard must refuse by its destination.
            call("send", ("PumpingSuspected",), scope=GUARDED, subject=number(), address=ip)
            reply = call("send_begin", ("DestinationRefused",), scope=GUARDED, subject="+14155550100", address=ip)
            if "ok" in reply:
                call("send_end", ticket=reply["ok"], ok=False)
                self.side.results.tally(self.side.name, failed=1)
                print(f"FAIL {self.side.name}: a send to a refused destination was granted", flush=True)
            # Sessions: a realm of this server's own, and one every server shares.
            call("login", realm=self.realm, ttl_ms=600_000)
            call("session", realm=self.realm)
            call("logout", realm=self.realm)
            call("session", realm="roll-shared")
            if self.rounds % 8 == 0:
                call("login", realm="roll-shared", ttl_ms=600_000)
            elif self.rounds % 4 == 0:
                call("logout", realm="roll-shared")

    def shutdown(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(60)
        self.side.close()


def finish(t: Counts, source: Path, library: Path, options: Dict[str, object], folder: Path,
           expect: Optional[str] = None) -> Dict[str, object]:
    """The operator finishes the upgrade through an engine of this tree of
    its own (a process that opens the store, calls, and closes)."""
    operator = Side(t, "new", "operator", source, library, options, folder)
    try:
        t.tally("new", made=1, failed=0 if operator.ready.get("ready") else 1)
        if not operator.ready.get("ready"):
            return operator.ready
        if expect is not None:
            return operator.call("finish_upgrade", expect=expect)
        # The old servers' links close with their processes: at once, but
        # the server may not have seen the last one go yet.
        return operator.poll("finish_upgrade", stale=("OlderEnginesLive",), until=lambda v: True)
    finally:
        operator.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--build", required=True, type=Path)
    parser.add_argument("--library", required=True, type=Path, help="this tree's libtickgate.so")
    for tool in ("cmake", "ninja", "c", "cxx", "swiftc", "swift"):
        parser.add_argument(f"--{tool}", default=shutil.which(tool) if tool in ("cmake", "ninja", "swift") else None)
    parser.add_argument("--previous", help="run this commit as the old release (default: the newest "
                        "line of Tests/upgrade/releases)")
    parser.add_argument("--phase-seconds", type=float, default=8.0, help="traffic time of each phase")
    args = parser.parse_args()
    source, build = args.source.resolve(), args.build.resolve()
    started = time.monotonic()
    if shutil.which("redis-server") is None:
        print("SKIP: the rolling-upgrade test needs redis-server (Debian: apt-get install redis-server)")
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
    from tickgate import _ffi
    version = _ffi.TG_VERSION_STRING
    trees = {"old": (prev.tree, prev.library, prev.version), "new": (source, args.library, version)}
    print(f"     old {prev.version} ({prev.commit[:10]}): {prev.library}", flush=True)
    print(f"     new {version}: {args.library}", flush=True)

    t = Counts()
    folder = Path(tempfile.mkdtemp(prefix="tg-rolling-"))
    server: Optional[RedisServer] = None
    fleet: List[Server] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    def launch(release: str, slot: int) -> Server:
        tree, library, want = trees[release]
        s = Server(t, release, slot, tree, library, options, folder)
        ready = s.side.ready
        t.check(ready.get("ready") is True and ready.get("version") == want
                and ready.get("library_version") == want,
                f"server {slot} runs {release} {ready.get('version')} "
                f"(libtickgate {ready.get('library_version') or ready.get('message')})")
        t.tally(release, made=1, failed=0 if ready.get("ready") else 1)
        return s

    try:
        server = RedisServer(folder)
        options = {"store_url": server.url, "store_prefix": "rolling:"}
        print(f"---- phase {PHASES[0]}", flush=True)
        fleet = [launch("old", 1), launch("old", 2)]
        if all(s.side.ready.get("ready") for s in fleet):
            # The settings the traffic runs on, set by an old server as the fleet has them today.
            first = fleet[0].side
            first.ok("set_policy", scope=SCOPE, cooldowns_ms=[300, 600], max_wrong_codes=2)
            first.ok("set_budget", name=BUDGET, windows_ms=[[40, 5_000]])
            first.ok("set_guard", scope=GUARDED, mode="ENFORCE", refused_destinations=["US"], **QUIET)
            fleet[1].side.poll("guarded", scope=GUARDED, until=lambda v: v["ok"] is True)
            for s in fleet:
                s.start_traffic()
            time.sleep(args.phase_seconds)
            for index, phase in ((0, PHASES[1]), (1, PHASES[2])):
                old = fleet[index]
                old.shutdown()
                with t.lock:
                    t.phase = phase
                print(f"---- phase {phase}: server {old.slot} stopped after {old.rounds} rounds of traffic; "
                      f"it restarts as new", flush=True)
                fleet[index] = launch("new", old.slot)
                if not fleet[index].side.ready.get("ready"):
                    break
                fleet[index].side.poll("guarded", scope=GUARDED, until=lambda v: v["ok"] is True)
                fleet[index].start_traffic()
                if index == 0:
                    refused = finish(t, source, args.library, options, folder, expect="OlderEnginesLive")
                    t.check(refused.get("error") == "OlderEnginesLive",
                            f"the upgrade cannot be finished while an old server runs: {refused.get('error')}: "
                            f"{refused.get('message')}")
                time.sleep(args.phase_seconds)
            else:
                with t.lock:
                    t.phase = PHASES[3]
                print(f"---- phase {PHASES[3]}", flush=True)
                finished = finish(t, source, args.library, options, folder)
                t.check(finished.get("ok") == 3, f"the operator finished the upgrade under traffic: format "
                        f"{finished.get('ok')}" + (f" ({finished['message']})" if "message" in finished else ""))
                time.sleep(args.phase_seconds)
    finally:
        for s in fleet:
            s.shutdown()
        if server is not None:
            server.stop()
        if t.failures() or t.failed:
            for log in sorted(folder.glob("*.stderr")):
                text = log.read_text(errors="replace").strip()
                if text:
                    print(f"---- {log.name}:\n{text[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)

    print("---- calls per phase and side (made, refused as expected, failed; StoreCorrupt among the failed)")
    for phase in PHASES:
        for release in RELEASES:
            c = t.by_phase[phase][release]
            if c["made"]:
                print(f"     {phase:14} {release}: {c['made']:5} made, {c['refused']:4} refused as expected, "
                      f"{c['failed']:3} failed, {c['corrupt']} StoreCorrupt")
    for release in RELEASES:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(t.refusals[release].items()))
        print(f"     refusals of the {release} servers: {kinds}")
    for phase, sides in zip(PHASES, (("old",), ("old", "new"), ("new",), ("new",))):
        for release in sides:
            c = t.by_phase[phase][release]
            t.check(c["made"] > 0 and c["failed"] == 0,
                    f"{phase}: every call of the {release} servers succeeded or was the refusal expected "
                    f"({c['made']} made, {c['failed']} failed)")
    print(f"     the test took {time.monotonic() - started:.0f} s")
    print(f"{t.passed} passed, {t.failed} failed")
    return 1 if t.failed or t.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
