#!/usr/bin/env python3
"""python_exit.py - the Python interpreter exits with Tickgate timers pending.

Each scenario is a small program run in a fresh interpreter, several times
(the interesting moments are races): engines on the engine thread with
Python callbacks subscribed and countdowns of 1-50 ms about to fire, never
closed, when the interpreter exits. The engine thread may be calling into
Python while the interpreter finalizes. Each run must exit on its own within
a timeout (no hang), with the expected status, and without a crash
("Fatal Python error", a signal) or an unexpected traceback.

    python3 Tests/stress/python_exit.py [--runs N] [--timeout S]

The library: $TICKGATE_LIBRARY (default build/libtickgate.so), the package:
bindings/python (put on PYTHONPATH for the children).
"""
import argparse
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMMON = """
import os, sys, threading, time
import tickgate
"""

SCENARIOS = {
    # countdowns about to fire, observers on the engine thread, no close
    "pending_timers": """
e = tickgate.Engine()
hits = []
for i in range(20):
    e.subscribe("login", f"u{i}", lambda ev: hits.append(ev.kind))
    e.start("login", f"u{i}", duration_ms=1 + i % 5, tick_interval_ms=10)
e.subscribe_scope("login", lambda ev: hits.append(ev.title))
time.sleep(0.001)
""",
    # the engine thread is inside a slow Python callback at exit
    "callback_running_at_exit": """
e = tickgate.Engine()
started = threading.Event()
def slow(ev):
    started.set()
    time.sleep(0.05)
e.subscribe("login", "alice", slow)
e.start("login", "alice", duration_ms=1)
started.wait(2)
""",
    # a callback that calls back into the engine while the interpreter exits
    "reentrant_callbacks": """
e = tickgate.Engine()
def again(ev):
    try:
        e.start("login", "bob", duration_ms=1, restart=True)
    except tickgate.TickgateError:
        pass
e.subscribe("login", "bob", again)
e.start("login", "bob", duration_ms=1, restart=True)
time.sleep(0.003)
""",
    # engines only reachable through a reference cycle (finalizer at GC)
    "cycle_finalizer": """
class Holder:
    pass
for i in range(5):
    h = Holder()
    h.me = h
    h.engine = tickgate.Engine()
    h.engine.subscribe("s", "k", lambda ev, h=h: None)
    h.engine.start("s", "k", duration_ms=2)
del h
""",
    # gate requests queued and running, a session about to expire
    "gate_pending": """
e = tickgate.Engine()
ran = []
g = e.gate("account")
g.subscribe(lambda ev: ran.append(ev))
g.set_request_timeout(timeout_ms=5)
for i in range(10):
    g.require(lambda: ran.append(1), needs_login=(i % 2 == 0),
              on_cancel=lambda reason: ran.append(reason))
e.gate("payment").login_succeeded(session_ttl_ms=3)
time.sleep(0.001)
""",
    # a daemon thread keeps calling the engine while the interpreter exits
    "daemon_thread_calling": """
e = tickgate.Engine()
e.subscribe("login", "dan", lambda ev: None)
def spin():
    while True:
        try:
            e.start("login", "dan", duration_ms=1, restart=True)
            e.remaining("login", "dan")
        except tickgate.TickgateError:
            pass
threading.Thread(target=spin, daemon=True).start()
time.sleep(0.01)
""",
    # a callback raises, and one calls sys.exit (SystemExit must not escape
    # into the engine thread)
    "callback_raises": """
e = tickgate.Engine()
def boom(ev):
    raise RuntimeError("boom")
def leave(ev):
    sys.exit(3)
e.subscribe("login", "eve", boom)
e.subscribe("login", "eve", leave)
e.start("login", "eve", duration_ms=1)
time.sleep(0.005)
""",
    # the main thread leaves through an exception with timers pending
    "exit_by_exception": """
e = tickgate.Engine()
e.subscribe("login", "fay", lambda ev: None)
e.start("login", "fay", duration_ms=2)
raise SystemExit(7)
""",
    # asyncio: AsyncEngine with timers pending when the loop ends unclosed
    "asyncio_unclosed": """
import asyncio
from tickgate.aio import AsyncEngine
async def main():
    e = AsyncEngine()
    e.subscribe("login", "gus", lambda ev: None)
    e.start("login", "gus", duration_ms=2)
    await asyncio.sleep(0.001)
    return e
keep = asyncio.run(main())
""",
    # many engines (threads) alive at exit
    "many_engines": """
engines = []
for i in range(16):
    e = tickgate.Engine()
    e.subscribe("s", "k", lambda ev: None)
    e.start("s", "k", duration_ms=1 + i % 3)
    engines.append(e)
""",
}

# expected exit status of each scenario (default 0)
EXPECTED = {"exit_by_exception": 7}
# scenarios whose stderr may carry tracebacks (logged callback errors)
NOISY = {"callback_raises"}


def run(name, body, timeout, env):
    code = COMMON + body
    start = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code],
                           env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return False, "HANG (no exit within %.0f s)" % timeout, timeout
    took = time.monotonic() - start
    want = EXPECTED.get(name, 0)
    err = p.stderr or ""
    if p.returncode < 0:
        return False, "killed by %s\n%s" % (signal.Signals(-p.returncode).name,
                                            err[-2000:]), took
    if "Fatal Python error" in err or "Segmentation fault" in err:
        return False, "crash:\n" + err[-2000:], took
    if p.returncode != want:
        return False, "exit %d, wanted %d\n%s" % (p.returncode, want,
                                                   err[-2000:]), took
    if name not in NOISY and "Traceback" in err and want == 0:
        return False, "unexpected traceback:\n" + err[-2000:], took
    return True, "", took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("scenario", nargs="*")
    args = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("TICKGATE_LIBRARY", os.path.join(ROOT, "build", "libtickgate.so"))
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if not os.path.exists(env["TICKGATE_LIBRARY"]):
        print("no library at %s (make build, or set TICKGATE_LIBRARY)"
              % env["TICKGATE_LIBRARY"], file=sys.stderr)
        return 2
    names = args.scenario or list(SCENARIOS)
    failures = 0
    for name in names:
        worst = 0.0
        bad = None
        for _ in range(args.runs):
            ok, why, took = run(name, SCENARIOS[name], args.timeout, env)
            worst = max(worst, took)
            if not ok:
                bad = why
                break
        if bad:
            failures += 1
            print("FAIL %s: %s" % (name, bad))
        else:
            print("ok   %s (%d runs, slowest exit %.2f s)" % (name, args.runs, worst))
        sys.stdout.flush()
    print("python_exit: %s" % ("FAILED" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
