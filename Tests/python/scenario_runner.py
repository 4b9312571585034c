"""A Python runner for the shared scenario files (Tests/scenarios/*.scn).

It reads the format of Tests/scenarios/README.md exactly as the C runner
(Tests/c/scenario_runner.c) does, with the same syntax rules and the same
checks, but drives the library through the bindings' public
:class:`tickgate.Engine` API, so the same files prove the same behaviour from
Python. Like the C runner it can override each file's delivery mode (the
pytest suite runs every file in host and in thread mode, as the C runner's
``--both``), and it checks what the header promises on the way: every
event's subscription id, each destructor run exactly once (by unsubscribe or
close, never for a failed subscribe), no callback after close returned.

A few checks go further than the C runner, because the bindings add a layer
that must agree with the C call: ``remaining`` runs both the raw
``tg_countdown_remaining`` (whose output parameters the Python API does not
expose on failure) and ``Engine.remaining``; ``list`` runs both
``Engine.count`` (a NULL visitor, as the C runner) and ``Engine.list``.

Run files by hand with::

    TICKGATE_LIBRARY=build/libtickgate.so python3 Tests/python/scenario_runner.py [--delivery=host|thread|both] FILE...
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Tuple, TypeVar, Union

import tickgate
from tickgate import Engine, Event, EventKind, Status, TickgateError

T = TypeVar("T")
Token = Optional[str]

#: The id an `unsubscribe` uses for a name that was never subscribed, or
#: whose subscribe failed (as the C runner: UINT64_MAX, an id nobody has).
NEVER_ISSUED_ID = (1 << 64) - 1

DELIVERIES = ("host", "thread")


class ScenarioFailure(AssertionError):
    """A scenario line did not behave as the file says (or is malformed)."""


# ---------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------


def tokenize(line: str) -> List[Token]:
    """Split a line into tokens, as the C runner does.

    Tokens are separated by blanks; ``#`` at the start of a token begins a
    comment. ``""`` is the empty string and ``(null)`` a NULL pointer
    (None); every other token is taken literally.
    """
    tokens: List[Token] = []
    for word in line.split():
        if word.startswith("#"):
            break
        tokens.append("" if word == '""' else None if word == "(null)" else word)
    return tokens


def show(token: Token) -> str:
    return "(null)" if token is None else token if token else '""'


def call(fn: Callable[[], T]) -> Tuple[Status, Optional[T], Optional[TickgateError]]:
    """Run fn: (OK, result, None), or (its status, None, the exception)."""
    try:
        return Status.OK, fn(), None
    except TickgateError as exc:
        return Status(exc.status), None, exc


@dataclass
class SubRecord:
    name: str
    subscription: Optional[tickgate.Subscription] = None
    destroyed: int = 0

    @property
    def subscribed(self) -> bool:
        return self.subscription is not None


@dataclass(frozen=True)
class Received:
    sub: SubRecord
    event: Event
    after_close: bool


@dataclass
class Run:
    """One run of one file."""

    name: str
    override: Optional[str] = None  # None: as the file says
    lineno: int = 0
    text: str = ""
    thread_mode: bool = False
    engine: Optional[Engine] = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    events: List[Received] = field(default_factory=list)
    checked: int = 0
    subs: List[SubRecord] = field(default_factory=list)  # newest last
    closed: bool = False

    # -- reporting ---------------------------------------------------------------

    def fail(self, message: str) -> ScenarioFailure:
        mode = "thread" if self.thread_mode else "host"
        return ScenarioFailure(f"{self.name}:{self.lineno} ({mode}): {message}\n    line: {self.text}")

    def check_status(self, what: str, got: Status, want: Status, exc: Optional[BaseException] = None) -> None:
        if got != want:
            detail = f" ({exc})" if exc is not None else ""
            raise self.fail(f"{what}: expected {want.name}, got {got.name}{detail}")

    @staticmethod
    def parse_int(run: "Run", token: Token) -> int:
        try:
            if token is None or token.strip() != token or not token.lstrip("+-").isdigit():
                raise ValueError
            return int(token, 10)
        except ValueError:
            raise run.fail(f"syntax: not a number: {show(token)}") from None

    def status(self, token: Token) -> Status:
        if token is not None and token in Status.__members__:
            return Status[token]
        raise self.fail(f"syntax: unknown status: {show(token)}")

    def kind(self, token: Token) -> EventKind:
        if token is not None and token in EventKind.__members__:
            return EventKind[token]
        raise self.fail(f"syntax: unknown event kind: {show(token)}")

    @staticmethod
    def key(token: Token) -> Optional[bytes]:
        return None if token is None else token.encode("utf-8")

    # -- events ------------------------------------------------------------------

    def callback(self, sub: SubRecord) -> Callable[[Event], None]:
        def on_event(event: Event) -> None:
            with self.lock:
                self.events.append(Received(sub, event, self.closed))

        return on_event

    def destructor_hook(self, sub: SubRecord) -> Callable[[], None]:
        def on_end() -> None:
            with self.lock:
                sub.destroyed += 1

        return on_end

    def deliver(self) -> None:
        assert self.engine is not None
        if self.thread_mode:
            status, _, exc = call(lambda: self.engine.advance(ms=0))  # type: ignore[union-attr]
            self.check_status("tg_clock_advance(0)", status, Status.OK, exc)
        else:
            status, _, exc = call(self.engine.dispatch)
            self.check_status("tg_engine_dispatch", status, Status.OK, exc)

    @staticmethod
    def format_event(name: str, kind: Union[EventKind, int], scope: Token, subject: Token, rem: int, disp: int) -> str:
        kind_name = kind.name if isinstance(kind, EventKind) else "(unknown)"
        return f"event {name} {kind_name} {show(scope)} {show(subject)} {rem} {disp}"

    # -- commands ------------------------------------------------------------------

    def cmd_engine(self, tok: List[Token]) -> None:
        if self.engine is not None:
            raise self.fail("syntax: a second engine line")
        delivery = "host"
        tick = 0
        for t in tok[1:]:
            if t == "delivery=host":
                delivery = "host"
            elif t == "delivery=thread":
                delivery = "thread"
            elif t is not None and t.startswith("tick="):
                tick = self.parse_int(self, t[5:])
            else:
                raise self.fail(f"syntax: unknown engine option {show(t)}")
        if self.override is not None:
            delivery = self.override
        self.thread_mode = delivery == "thread"
        status, engine, exc = call(
            lambda: Engine(delivery=delivery, clock="manual", tick_interval_ms=tick)
        )
        self.check_status("tg_engine_open", status, Status.OK, exc)
        self.engine = engine

    def cmd_start(self, tok: List[Token]) -> None:
        a = tok.index("->") if "->" in tok else -1
        if a < 4 or a + 1 >= len(tok):
            raise self.fail("syntax: start SCOPE SUBJECT MS [tick=MS] [restart] -> STATUS [remaining=MS]")
        ms = self.parse_int(self, tok[3])
        tick, restart = 0, False
        for t in tok[4:a]:
            if t is not None and t.startswith("tick="):
                tick = self.parse_int(self, t[5:])
            elif t == "restart":
                restart = True
            else:
                raise self.fail(f"syntax: unknown start option {show(t)}")
        want = self.status(tok[a + 1])
        want_rem: Optional[int] = None
        for t in tok[a + 2 :]:
            if t is not None and t.startswith("remaining="):
                want_rem = self.parse_int(self, t[10:])
            else:
                raise self.fail(f"syntax: unknown start result {show(t)}")
        engine = self.engine
        assert engine is not None
        status, result, exc = call(
            lambda: engine.start(
                self.key(tok[1]), self.key(tok[2]),  # type: ignore[arg-type]
                duration_ms=ms, tick_interval_ms=tick, restart=restart,
            )
        )
        self.check_status("tg_countdown_start", status, want, exc)
        if want_rem is not None:
            if status == Status.OK:
                got = result.remaining_ms if result is not None else None
            else:
                got = getattr(exc, "remaining_ms", None)
            if got != want_rem:
                raise self.fail(f"tg_countdown_start: expected remaining={want_rem}, got {got}")

    def cmd_cancel(self, tok: List[Token]) -> None:
        if len(tok) != 5 or tok[3] != "->":
            raise self.fail("syntax: cancel SCOPE SUBJECT -> STATUS")
        want = self.status(tok[4])
        engine = self.engine
        assert engine is not None
        status, _, exc = call(lambda: engine.cancel(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_countdown_cancel", status, want, exc)

    def cmd_cancel_many(self, tok: List[Token], every: bool) -> None:
        a = 1 if every else 2
        if len(tok) != a + 2 or tok[a] != "->":
            raise self.fail("syntax: cancel-all -> COUNT" if every else "syntax: cancel-scope SCOPE -> COUNT")
        want = self.parse_int(self, tok[a + 1])
        engine = self.engine
        assert engine is not None
        if every:
            status, got, exc = call(engine.cancel_all)
        else:
            status, got, exc = call(lambda: engine.cancel_scope(self.key(tok[1])))  # type: ignore[arg-type]
        self.check_status("tg_countdown_cancel_all" if every else "tg_countdown_cancel_scope", status, Status.OK, exc)
        if got != want:
            raise self.fail(f"expected {want} cancelled, got {got}")

    def cmd_remaining(self, tok: List[Token]) -> None:
        if len(tok) != 7 or tok[3] != "->":
            raise self.fail("syntax: remaining SCOPE SUBJECT -> STATUS MS DISPLAY")
        want = self.status(tok[4])
        want_ms, want_disp = self.parse_int(self, tok[5]), self.parse_int(self, tok[6])
        engine = self.engine
        assert engine is not None
        scope, subject = self.key(tok[1]), self.key(tok[2])
        # The raw call, for its output parameters on TG_E_NOT_FOUND too.
        ms, disp = ctypes.c_int64(-12345), ctypes.c_int64(-12345)
        status, _, exc = call(
            lambda: engine._lib.tg_countdown_remaining(
                engine.handle, scope, subject, ctypes.byref(ms), ctypes.byref(disp)
            )
        )
        self.check_status("tg_countdown_remaining", status, want, exc)
        # The outputs are defined on success and on TG_E_NOT_FOUND (both 0).
        if status in (Status.OK, Status.E_NOT_FOUND) and (ms.value, disp.value) != (want_ms, want_disp):
            raise self.fail(
                f"tg_countdown_remaining: expected {want_ms} ms {want_disp} s, got {ms.value} ms {disp.value} s"
            )
        # Engine.remaining must agree with the C call.
        py_status, result, py_exc = call(lambda: engine.remaining(scope, subject))  # type: ignore[arg-type]
        self.check_status("Engine.remaining", py_status, status, py_exc)
        if result is not None and (result.remaining_ms, result.display_seconds) != (ms.value, disp.value):
            raise self.fail(f"Engine.remaining gave {result}, tg_countdown_remaining {ms.value} ms {disp.value} s")

    def cmd_list(self, tok: List[Token]) -> None:
        a = tok.index("->") if "->" in tok else -1
        if a not in (1, 2) or len(tok) != a + 2:
            raise self.fail("syntax: list [SCOPE] -> COUNT")
        want = self.parse_int(self, tok[a + 1])
        scope = self.key(tok[1]) if a == 2 else None
        engine = self.engine
        assert engine is not None
        status, got, exc = call(lambda: engine.count(scope))
        self.check_status("tg_countdown_list", status, Status.OK, exc)
        if got != want:
            raise self.fail(f"tg_countdown_list: expected {want}, got {got}")
        # Engine.list (a visitor) must see the same snapshot.
        status, items, exc = call(lambda: engine.list(scope))
        self.check_status("Engine.list", status, Status.OK, exc)
        assert items is not None
        if len(items) != want:
            raise self.fail(f"Engine.list: expected {want} items, got {items}")
        if scope is not None and any(i.scope.encode() != scope for i in items):
            raise self.fail(f"Engine.list of one scope gave other scopes: {items}")

    def cmd_subscribe(self, tok: List[Token]) -> None:
        a = tok.index("->") if "->" in tok else -1
        if a not in (3, 4) or len(tok) != a + 2:
            raise self.fail("syntax: subscribe NAME SCOPE [SUBJECT] -> STATUS")
        want = self.status(tok[a + 1])
        sub = SubRecord(str(tok[1]))
        with self.lock:
            self.subs.append(sub)
        engine = self.engine
        assert engine is not None
        status, handle, exc = call(
            lambda: engine._subscribe(
                self.key(tok[2]),
                self.key(tok[3]) if a == 4 else None,
                self.callback(sub),
                self.destructor_hook(sub),
            )
        )
        with self.lock:
            sub.subscription = handle
        self.check_status("tg_subscribe", status, want, exc)

    def find_sub(self, name: Token) -> Optional[SubRecord]:
        with self.lock:
            for sub in reversed(self.subs):  # newest first
                if sub.name == name:
                    return sub
        return None

    def cmd_unsubscribe(self, tok: List[Token]) -> None:
        if len(tok) != 4 or tok[2] != "->":
            raise self.fail("syntax: unsubscribe NAME -> STATUS")
        want = self.status(tok[3])
        sub = self.find_sub(tok[1])
        sid = sub.subscription.id if sub is not None and sub.subscription is not None else NEVER_ISSUED_ID
        engine = self.engine
        assert engine is not None
        status, _, exc = call(lambda: engine.unsubscribe(sid))
        self.check_status("tg_unsubscribe", status, want, exc)
        if status == Status.OK and sub is not None:
            with self.lock:
                destroyed = sub.destroyed
            if destroyed != 1:
                raise self.fail(
                    f"tg_unsubscribe returned, but the destructor of {sub.name} ran {destroyed} times (expected once)"
                )

    def cmd_advance(self, tok: List[Token]) -> None:
        if len(tok) != 2:
            raise self.fail("syntax: advance MS")
        ms = self.parse_int(self, tok[1])
        engine = self.engine
        assert engine is not None
        status, _, exc = call(lambda: engine.advance(ms=ms))
        self.check_status("tg_clock_advance", status, Status.OK, exc)
        if not self.thread_mode:
            self.deliver()

    def cmd_event(self, tok: List[Token]) -> None:
        if len(tok) != 7:
            raise self.fail("syntax: event NAME KIND SCOPE SUBJECT REMAINING_MS DISPLAY")
        kind = self.kind(tok[2])
        rem, disp = self.parse_int(self, tok[5]), self.parse_int(self, tok[6])
        want = self.format_event(str(tok[1]), kind, tok[3], tok[4], rem, disp)
        self.deliver()
        with self.lock:
            got = self.events[self.checked] if self.checked < len(self.events) else None
            if got is not None:
                self.checked += 1
        if got is None:
            raise self.fail(f"expected: {want}\n    got:      no event")
        e = got.event
        have = self.format_event(got.sub.name, e.kind, e.scope, e.subject, e.remaining_ms, e.display_seconds)
        if (got.sub.name, e.kind, e.scope, e.subject, e.remaining_ms, e.display_seconds) != (
            tok[1], kind, tok[3], tok[4], rem, disp
        ):
            raise self.fail(f"expected: {want}\n    got:      {have}")
        if got.sub.subscription is not None and e.subscription != got.sub.subscription.id:
            raise self.fail(
                f"event.subscription is {e.subscription}, but tg_subscribe gave {got.sub.name} "
                f"the id {got.sub.subscription.id}"
            )

    def cmd_no_events(self, tok: List[Token]) -> None:
        if len(tok) != 1:
            raise self.fail("syntax: no-events")
        self.deliver()
        with self.lock:
            got = self.events[self.checked] if self.checked < len(self.events) else None
        if got is not None:
            e = got.event
            have = self.format_event(got.sub.name, e.kind, e.scope, e.subject, e.remaining_ms, e.display_seconds)
            raise self.fail(f"expected: no more events\n    got:      {have}")

    # -- the file ------------------------------------------------------------------

    def run(self, text: str) -> None:
        last_line = 0
        try:
            for self.lineno, raw in enumerate(text.splitlines(), 1):
                last_line = self.lineno
                self.text = raw.rstrip("\r\n")
                tok = tokenize(raw)
                if not tok:
                    continue
                command = tok[0]
                if command == "engine":
                    self.cmd_engine(tok)
                    continue
                if self.engine is None:
                    raise self.fail("syntax: the first command must be `engine`")
                handler = {
                    "start": self.cmd_start,
                    "cancel": self.cmd_cancel,
                    "cancel-scope": lambda t: self.cmd_cancel_many(t, False),
                    "cancel-all": lambda t: self.cmd_cancel_many(t, True),
                    "remaining": self.cmd_remaining,
                    "list": self.cmd_list,
                    "subscribe": self.cmd_subscribe,
                    "unsubscribe": self.cmd_unsubscribe,
                    "advance": self.cmd_advance,
                    "event": self.cmd_event,
                    "no-events": self.cmd_no_events,
                }.get(str(command))
                if handler is None:
                    raise self.fail(f"syntax: unknown command {show(command)}")
                handler(tok)
            if self.engine is None:
                self.lineno = last_line
                raise self.fail("syntax: no engine line")
        finally:
            if self.engine is not None:
                self.engine.close()
                with self.lock:
                    self.closed = True
        # After close: every destructor ran once (never for a failed
        # subscribe), and no callback ran after close returned.
        self.lineno, self.text = last_line, "(end of file: tg_engine_close)"
        if self.thread_mode:
            time.sleep(0.02)
        with self.lock:
            for sub in self.subs:
                want = 1 if sub.subscribed else 0
                if sub.destroyed != want:
                    failed = "" if sub.subscribed else " (failed subscribe)"
                    raise self.fail(
                        f"after close the destructor of {sub.name}{failed} ran {sub.destroyed} times (expected {want})"
                    )
            late = sum(1 for r in self.events if r.after_close)
        if late:
            raise self.fail(f"{late} callbacks ran after tg_engine_close returned")


def run_text(text: str, name: str = "<scenario>", delivery: Optional[str] = None) -> Run:
    """Run scenario text; raises ScenarioFailure at its first mismatch."""
    run = Run(name, override=delivery)
    run.run(text)
    return run


def run_file(path: Union[str, "os.PathLike[str]"], delivery: Optional[str] = None) -> Run:
    p = Path(path)
    return run_text(p.read_text(encoding="utf-8"), p.name, delivery)


def main(argv: List[str]) -> int:
    modes: List[Optional[str]] = [None]
    files = []
    for arg in argv:
        if arg.startswith("--delivery="):
            value = arg.split("=", 1)[1]
            modes = list(DELIVERIES) if value == "both" else [value]
        else:
            files.append(arg)
    passed = failed = 0
    for f in files:
        for mode in modes:
            try:
                run_file(f, mode)
                passed += 1
                print(f"ok   {f} ({mode or 'as written'})")
            except ScenarioFailure as exc:
                failed += 1
                print(f"FAIL {exc}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not files else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
