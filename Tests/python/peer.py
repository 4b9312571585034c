"""One app server for the multi-process tests (test_one_truth.py): one
tickgate engine in this process, driven by JSON lines on stdin.

    python3 peer.py '{"store_url": "...", "store_prefix": "p:", "store_timeout_ms": 300}'

The argument is the keyword options of ``tickgate.Engine``. The first line
written is the open's outcome: ``{"ready": true, "pid": N}`` or the error
(below), after which the process exits. Then every line read is one command
``{"op": NAME, ...arguments}`` and gets one line back:

    {"ok": RESULT, "t0": START, "t1": END}
    {"error": "CoolingDown", "status": 3, "message": "...", "failure": 0,
     "remaining_ms": ..., "budget": ..., "t0": START, "t1": END}

t0 and t1 are ``time.monotonic()`` around the call (CLOCK_MONOTONIC, the
same clock in every process of the machine, so the test can compare them
with its own readings). Events of subscriptions and gate requests are kept
with the moment they arrived and read back with "events" / "requests".
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
BINDINGS = HERE.parent.parent / "bindings" / "python"
if str(BINDINGS) not in sys.path:
    sys.path.insert(0, str(BINDINGS))
os.environ.setdefault("TICKGATE_LIBRARY", str(HERE.parent.parent / "build" / "libtickgate.so"))

import tickgate  # noqa: E402


def error_reply(exc: BaseException) -> Dict[str, Any]:
    reply: Dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, tickgate.TickgateError):
        reply["status"] = int(exc.status)
        reply["message"] = exc.message
        failure = getattr(exc, "failure", None)
        if failure is not None:
            reply["failure"] = int(failure)
        for name in ("remaining_ms", "budget", "budget_key", "budget_index"):
            value = getattr(exc, name, None)
            if value is not None:
                reply[name] = value
        # The class names of the whole hierarchy, so the test can ask
        # "is it a StoreIO" without importing anything.
        reply["classes"] = [c.__name__ for c in type(exc).__mro__]
    else:
        reply["traceback"] = traceback.format_exc()
    return reply


class Peer:
    def __init__(self, options: Dict[str, Any]) -> None:
        self.engine = tickgate.Engine(**options)
        self.tickets: Dict[int, tickgate.SendTicket] = {}
        self.lock = threading.Lock()
        self.events: List[Dict[str, Any]] = []        # countdown events, in order
        self.requests: Dict[str, Dict[str, Any]] = {}  # gate requests by the test's tag
        self.subscriptions: Dict[int, tickgate.Subscription] = {}
        self.load_threads: List[threading.Thread] = []
        self.load_results: List[Dict[str, Any]] = []

    # -- countdowns --------------------------------------------------------

    def op_start(self, scope: str, subject: str, duration_ms: int, restart: bool = False) -> Any:
        return self.engine.start(scope, subject, duration_ms=duration_ms, restart=restart).remaining_ms

    def op_cancel(self, scope: str, subject: str) -> None:
        self.engine.cancel(scope, subject)

    def op_remaining(self, scope: str, subject: str) -> int:
        return self.engine.remaining(scope, subject).remaining_ms

    def op_is_counting(self, scope: str, subject: str) -> bool:
        return self.engine.is_counting(scope, subject)

    # -- the resend flow -----------------------------------------------------

    def op_send_begin(self, scope: str, subject: str, budgets: Optional[List[List[str]]] = None) -> int:
        ticket = self.engine.send_begin(scope, subject, budgets=[tuple(b) for b in budgets] if budgets else None)
        self.tickets[ticket.id] = ticket
        return ticket.id

    def op_send_end(self, ticket: int, ok: bool = True, retry_after_ms: Optional[int] = None) -> int:
        outcome = tickgate.SendOutcome.SUCCEEDED if ok else tickgate.SendOutcome.FAILED
        return self.engine.send_end(ticket, outcome, retry_after_ms=retry_after_ms).remaining_ms

    def op_set_policy(self, scope: str, **fields: Any) -> None:
        if "cooldowns_ms" in fields:
            fields["cooldowns_ms"] = tuple(fields["cooldowns_ms"])
        self.engine.set_policy(scope, tickgate.Policy(**fields))

    def op_policy(self, scope: str) -> Dict[str, Any]:
        p = self.engine.policy(scope)
        return {"cooldowns_ms": list(p.cooldowns_ms), "window_max_sends": p.window_max_sends,
                "window_ms": p.window_ms, "quiet_reset_ms": p.quiet_reset_ms,
                "ticket_timeout_ms": p.ticket_timeout_ms, "max_wrong_codes": p.max_wrong_codes}

    def op_set_budget(self, name: str, windows: List[List[int]]) -> None:
        self.engine.set_budget(name, windows_ms=[tuple(w) for w in windows])

    def op_budget_usage(self, name: str, key: str) -> Dict[str, Any]:
        u = self.engine.budget_usage(name, key)
        return {"used": u.used, "max_sends": u.max_sends, "window_ms": u.window_ms, "frees_in_ms": u.frees_in_ms}

    def op_reset_budget(self, name: str, key: str) -> None:
        self.engine.reset_budget(name, key)

    def op_set_titles(self, scope: str, **titles: Optional[str]) -> None:
        self.engine.set_titles(scope, **titles)

    def op_button(self, scope: str, subject: str) -> Dict[str, Any]:
        b = self.engine.button(scope, subject)
        state = b.state.name if isinstance(b.state, tickgate.ButtonState) else int(b.state)
        return {"state": state, "enabled": b.enabled, "remaining_ms": b.remaining_ms, "title": b.title}

    def op_verify_failed(self, scope: str, subject: str) -> Optional[int]:
        return self.engine.verify_failed(scope, subject)

    def op_verified(self, scope: str, subject: str) -> None:
        self.engine.verified(scope, subject)

    # -- observers -----------------------------------------------------------

    def op_subscribe(self, scope: str, subject: str) -> int:
        def seen(event: tickgate.Event) -> None:
            kind = event.kind.name if isinstance(event.kind, tickgate.EventKind) else int(event.kind)
            state = event.state.name if isinstance(event.state, tickgate.ButtonState) else int(event.state)
            with self.lock:
                self.events.append({"at": time.monotonic(), "kind": kind, "scope": event.scope,
                                    "subject": event.subject, "remaining_ms": event.remaining_ms,
                                    "state": state, "title": event.title})

        subscription = self.engine.subscribe(scope, subject, seen)
        self.subscriptions[subscription.id] = subscription
        return subscription.id

    def op_events(self) -> List[Dict[str, Any]]:
        with self.lock:
            return list(self.events)

    # -- the login gate --------------------------------------------------------

    def op_login(self, realm: str, ttl_ms: Optional[int] = None) -> None:
        self.engine.gate(realm).login_succeeded(session_ttl_ms=ttl_ms)

    def op_logout(self, realm: str) -> None:
        self.engine.gate(realm).logout()

    def op_session(self, realm: str) -> Dict[str, Any]:
        s = self.engine.gate(realm).session()
        return {"logged_in": s.logged_in, "remaining_ms": s.remaining_ms}

    def op_require(self, realm: str, tag: str) -> str:
        record: Dict[str, Any] = {"ran": None, "cancelled": None, "reason": None}

        def action() -> None:
            with self.lock:
                record["ran"] = time.monotonic()

        def on_cancel(reason: Any) -> None:
            with self.lock:
                record["cancelled"] = time.monotonic()
                record["reason"] = getattr(reason, "name", str(reason))

        with self.lock:
            self.requests[tag] = record
        request = self.engine.gate(realm).require(action, on_cancel=on_cancel)
        return request.result.name if hasattr(request.result, "name") else str(request.result)

    def op_requests(self) -> Dict[str, Dict[str, Any]]:
        with self.lock:
            return {tag: dict(record) for tag, record in self.requests.items()}

    def op_users(self, first: int, count: int, ttl_ms: int, threads: int = 4) -> int:
        """Users first .. first+count-1 each log in (realm "user-N") with a
        session of ttl_ms, and every other one logs out at once: each session
        ends, by logout or by expiry. Returns how many logged in."""
        def work(index: int) -> int:
            done = 0
            for n in range(first + index, first + count, threads):
                gate = self.engine.gate(f"user-{n}")
                gate.login_succeeded(session_ttl_ms=ttl_ms)
                if n % 2 == 0:
                    gate.logout()
                done += 1
            return done
        results: List[int] = []
        pool = [threading.Thread(target=lambda i=i: results.append(work(i))) for i in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return sum(results)

    def op_rss_kb(self) -> int:
        """This process's resident memory (VmRSS), in KiB."""
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc/self/status")

    # -- many threads at once (the connection cap) -------------------------------

    def op_load_begin(self, threads: int, per_thread: int, scope: str) -> int:
        """Starts `threads` threads, each making `per_thread` decisions (a
        start, then a cancel) on keys of its own; returns at once."""
        barrier = threading.Barrier(threads)

        def work(index: int) -> None:
            done, failures = 0, []
            barrier.wait()
            for j in range(per_thread):
                subject = f"t{index}-{j}"
                for call in (lambda: self.engine.start(scope, subject, duration_ms=60_000),
                             lambda: self.engine.cancel(scope, subject)):
                    try:
                        call()
                        done += 1
                    except Exception as exc:  # noqa: BLE001 - reported to the test
                        failures.append(error_reply(exc))
            with self.lock:
                self.load_results.append({"thread": index, "done": done, "failures": failures[:5],
                                          "failed": len(failures)})

        self.load_threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
        for thread in self.load_threads:
            thread.start()
        return len(self.load_threads)

    def op_load_wait(self, timeout: float = 30.0) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + timeout
        for thread in self.load_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            return sorted(self.load_results, key=lambda r: r["thread"])

    # -- plumbing ---------------------------------------------------------------

    def op_ping(self) -> str:
        return "pong"

    def op_close(self) -> None:
        self.engine.close()


def main() -> int:
    options = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    out = sys.stdout

    def send(reply: Dict[str, Any]) -> None:
        out.write(json.dumps(reply) + "\n")
        out.flush()

    try:
        peer = Peer(options)
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        send(error_reply(exc))
        return 1
    send({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        command = json.loads(line)
        op = command.pop("op")
        if op == "exit":
            send({"ok": None})
            break
        handler: Optional[Callable[..., Any]] = getattr(peer, "op_" + op, None)
        t0 = time.monotonic()
        if handler is None:
            send({"error": "UnknownOp", "message": op, "t0": t0, "t1": t0})
            continue
        try:
            result = handler(**command)
            reply = {"ok": result}
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            reply = error_reply(exc)
        reply["t0"], reply["t1"] = t0, time.monotonic()
        send(reply)
    peer.engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
