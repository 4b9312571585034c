"""One app server of the mixed-version test (mixed_versions.py): one engine
of one release in this process, driven by JSON lines on stdin.

    TICKGATE_LIBRARY=.../libtickgate.so python3 peer.py BINDINGS OPTIONS

BINDINGS is the bindings/python folder of the release's own tree (imported
before anything else, so each process runs its release's bindings with its
release's library); OPTIONS is the JSON of tickgate.Engine's keyword
options. It uses only what every release since 0.1.0 has, so it drives the
previous release and the current one alike (but for finish_upgrade, which
only the current one is asked).

The first line written is {"ready": true, "version": ..., "library": ...}
or the open's error. Then each line read is one command {"op": NAME, ...}
and gets one line back: {"ok": RESULT} or {"error": CLASS, "status": N,
"message": ..., "remaining_ms": ..., "budget": ...}.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Optional

BINDINGS = os.path.abspath(sys.argv[1])
sys.path.insert(0, BINDINGS)

import tickgate  # noqa: E402


def error_reply(exc: BaseException) -> Dict[str, Any]:
    reply: Dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, tickgate.TickgateError):
        reply["status"] = int(exc.status)
        reply["message"] = exc.message
        for name in ("remaining_ms", "budget", "budget_key"):
            value = getattr(exc, name, None)
            if value is not None:
                reply[name] = value
    else:
        reply["traceback"] = traceback.format_exc()
    return reply


def name_of(value: Any) -> Any:
    return value.name if hasattr(value, "name") else int(value)


class Peer:
    def __init__(self, options: Dict[str, Any]) -> None:
        self.engine = tickgate.Engine(**options)
        self.tickets: Dict[int, tickgate.SendTicket] = {}
        self.lock = threading.Lock()
        self.events: List[Dict[str, Any]] = []
        self.subscriptions: List[Any] = []
        self.requests: Dict[str, Dict[str, Any]] = {}
        self.burst_threads: List[threading.Thread] = []
        self.burst_results: List[Dict[str, Any]] = []

    # -- the clock (ClockKind.MANUAL) -------------------------------------------

    def op_advance(self, ms: int) -> None:
        self.engine.advance(ms=ms)

    # -- the store's format (this release on: the previous one lacks it) -------

    def op_finish_upgrade(self) -> int:
        return self.engine.finish_store_upgrade()

    # -- settings ------------------------------------------------------------

    def op_set_policy(self, scope: str, **fields: Any) -> None:
        if "cooldowns_ms" in fields:
            fields["cooldowns_ms"] = tuple(fields["cooldowns_ms"])
        self.engine.set_policy(scope, tickgate.Policy(**fields))

    def op_policy(self, scope: str) -> Dict[str, Any]:
        p = self.engine.policy(scope)
        return {"cooldowns_ms": list(p.cooldowns_ms), "window_max_sends": p.window_max_sends,
                "window_ms": p.window_ms, "quiet_reset_ms": p.quiet_reset_ms,
                "ticket_timeout_ms": p.ticket_timeout_ms, "max_wrong_codes": p.max_wrong_codes}

    def op_set_titles(self, scope: str, **titles: Optional[str]) -> None:
        self.engine.set_titles(scope, **titles)

    def op_set_budget(self, name: str, windows_ms: List[List[int]]) -> None:
        self.engine.set_budget(name, windows_ms=[tuple(w) for w in windows_ms])

    def op_budget_usage(self, name: str, key: str) -> Dict[str, Any]:
        u = self.engine.budget_usage(name, key)
        return {"used": u.used, "max_sends": u.max_sends, "window_ms": u.window_ms}

    def op_set_guard(self, scope: str, mode: Optional[str], **options: Any) -> None:
        self.engine.set_guard(scope, None if mode is None else tickgate.GuardMode[mode], **options)

    # -- sends ---------------------------------------------------------------

    def op_send_begin(self, scope: str, subject: str, budgets: Optional[List[List[str]]] = None,
                      address: Optional[str] = None) -> int:
        extra: Dict[str, Any] = {} if address is None else {"client_address": address}  # guards came later
        ticket = self.engine.send_begin(scope, subject, budgets=[tuple(b) for b in budgets] if budgets else None,
                                        **extra)
        self.tickets[ticket.id] = ticket
        return ticket.id

    def op_send_end(self, ticket: int, ok: bool = True) -> int:
        outcome = tickgate.SendOutcome.SUCCEEDED if ok else tickgate.SendOutcome.FAILED
        return self.engine.send_end(self.tickets.pop(ticket), outcome).remaining_ms

    def op_send(self, scope: str, subject: str, budgets: Optional[List[List[str]]] = None,
                address: Optional[str] = None, ok: bool = True) -> int:
        """A whole send: granted, then ended; returns the cooldown that starts."""
        ticket = self.op_send_begin(scope, subject, budgets, address)
        return self.op_send_end(ticket, ok)

    def op_guarded(self, scope: str) -> bool:
        """Whether the engine guards scope now: a subject that is no number
        is refused only by a guard (granted, its send fails at once)."""
        try:
            self.engine.send_begin(scope, f"no-number-{time.monotonic_ns()}").failed()
            return False
        except tickgate.InvalidNumber:
            return True

    def op_remaining(self, scope: str, subject: str) -> int:
        return self.engine.remaining(scope, subject).remaining_ms

    def op_button(self, scope: str, subject: str) -> Dict[str, Any]:
        b = self.engine.button(scope, subject)
        return {"state": name_of(b.state), "remaining_ms": b.remaining_ms, "title": b.title}

    def op_verify_failed(self, scope: str, subject: str) -> Optional[int]:
        return self.engine.verify_failed(scope, subject)

    def op_verified(self, scope: str, subject: str) -> None:
        self.engine.verified(scope, subject)

    # -- many sends at once (budgets) --------------------------------------------

    def op_burst_begin(self, scope: str, subjects: List[str], budgets: List[List[str]], threads: int) -> int:
        """Sends to every subject from `threads` threads at once; returns at
        once (burst_wait gives the outcomes)."""
        barrier = threading.Barrier(threads)
        self.burst_results = []

        def work(index: int) -> None:
            outcome: Dict[str, Any] = {"granted": 0, "refused": 0, "errors": []}
            barrier.wait()
            for subject in subjects[index::threads]:
                try:
                    self.op_send(scope, subject, budgets)
                    outcome["granted"] += 1
                except tickgate.Locked as refused:
                    if refused.budget == budgets[0][0]:
                        outcome["refused"] += 1
                    else:
                        outcome["errors"].append(error_reply(refused))
                except Exception as exc:  # noqa: BLE001 - reported to the test
                    outcome["errors"].append(error_reply(exc))
            with self.lock:
                self.burst_results.append(outcome)

        self.burst_threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
        for thread in self.burst_threads:
            thread.start()
        return threads

    def op_burst_wait(self, timeout: float = 60.0) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        for thread in self.burst_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            results = list(self.burst_results)
        return {"granted": sum(r["granted"] for r in results), "refused": sum(r["refused"] for r in results),
                "errors": [e for r in results for e in r["errors"]], "threads": len(results)}

    # -- observers -------------------------------------------------------------

    def op_subscribe(self, scope: str, subject: str) -> int:
        def seen(event: tickgate.Event) -> None:
            with self.lock:
                self.events.append({"kind": name_of(event.kind), "scope": event.scope, "subject": event.subject,
                                    "state": name_of(event.state), "remaining_ms": event.remaining_ms})

        subscription = self.engine.subscribe(scope, subject, seen)
        self.subscriptions.append(subscription)
        return subscription.id

    def op_events(self, scope: str, subject: str) -> List[Dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["scope"] == scope and e["subject"] == subject]

    # -- the login gate ------------------------------------------------------------

    def op_login(self, realm: str, ttl_ms: Optional[int] = None) -> None:
        self.engine.gate(realm).login_succeeded(session_ttl_ms=ttl_ms)

    def op_logout(self, realm: str) -> None:
        self.engine.gate(realm).logout()

    def op_session(self, realm: str) -> Dict[str, Any]:
        s = self.engine.gate(realm).session()
        return {"logged_in": s.logged_in, "remaining_ms": s.remaining_ms}

    def op_require(self, realm: str, tag: str) -> str:
        record: Dict[str, Any] = {"ran": False, "cancelled": None}

        def action() -> None:
            with self.lock:
                record["ran"] = True

        def on_cancel(reason: Any) -> None:
            with self.lock:
                record["cancelled"] = name_of(reason)

        with self.lock:
            self.requests[tag] = record
        return name_of(self.engine.gate(realm).require(action, on_cancel=on_cancel).result)

    def op_request(self, tag: str) -> Dict[str, Any]:
        with self.lock:
            return dict(self.requests[tag])


def main() -> int:
    options = json.loads(sys.argv[2])
    out = sys.stdout

    def send(reply: Dict[str, Any]) -> None:
        out.write(json.dumps(reply) + "\n")
        out.flush()

    try:
        peer = Peer(options)
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        send(error_reply(exc))
        return 1
    loaded = tickgate.load_library()
    send({"ready": True, "pid": os.getpid(), "version": tickgate.__version__,
          "bindings": os.path.dirname(os.path.dirname(os.path.abspath(tickgate.__file__))),
          "library": os.path.realpath(loaded.path), "library_version": loaded.version_string})
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        op = command.pop("op")
        if op == "exit":
            break
        handler = getattr(peer, "op_" + op, None)
        if handler is None:
            send({"error": "UnknownOp", "message": op})
            continue
        try:
            reply = {"ok": handler(**command)}
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            reply = error_reply(exc)
        send(reply)
    for subscription in peer.subscriptions:
        subscription.close()
    peer.engine.close()
    send({"ok": "closed"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
