"""A Python runner for the shared scenario files (Tests/scenarios/*.scn).

The format is described in Tests/scenarios/README.md; the C harness runs the
same files. This runner drives the library through the public
:class:`tickgate.Engine` API (so the files test the bindings too), and for
``remaining`` also through the raw ctypes call, whose output parameters the
Python API does not expose on failure.

Run one file by hand with::

    TICKGATE_LIBRARY=build/libtickgate.so python3 Tests/python/scenario_runner.py FILE...
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

import tickgate
from tickgate import Engine, Event, EventKind, Status, TickgateError

T = TypeVar("T")

#: A key as the file gives it: bytes, or None for ``(null)``.
RawKey = Optional[bytes]

# An id no subscription ever gets: for `unsubscribe` of a name that was never
# subscribed (or whose subscribe failed).
_NEVER_ISSUED_ID = (1 << 64) - 1


class ScenarioFailure(AssertionError):
    """A scenario line did not behave as the file says."""


class ScenarioSyntaxError(ValueError):
    """A scenario line this runner cannot parse."""


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------


def tokenize(line: str) -> List[Union[str, bytes, None]]:
    """Split a line into tokens.

    Tokens are separated by blanks; ``#`` at the start of a token starts a
    comment. ``""`` is the empty string and ``(null)`` a NULL pointer (None).
    A token in double quotes may hold blanks and the escapes ``\\"``,
    ``\\\\``, ``\\n``, ``\\t`` and ``\\xHH`` (any byte); it comes back as
    bytes, so that it is never mistaken for a keyword.
    """
    tokens: List[Union[str, bytes, None]] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#":
            break
        if ch == '"':
            out = bytearray()
            i += 1
            while True:
                if i >= n:
                    raise ScenarioSyntaxError(f"unterminated quoted token in {line!r}")
                ch = line[i]
                if ch == '"':
                    i += 1
                    break
                if ch == "\\" and i + 1 < n:
                    nxt = line[i + 1]
                    if nxt == "x" and i + 4 <= n:
                        out.append(int(line[i + 2 : i + 4], 16))
                        i += 4
                        continue
                    out += {"n": b"\n", "t": b"\t"}.get(nxt, nxt.encode())
                    i += 2
                    continue
                out += ch.encode()
                i += 1
            tokens.append(bytes(out))
            continue
        j = i
        while j < n and not line[j].isspace():
            j += 1
        word = line[i:j]
        tokens.append(None if word == "(null)" else word)
        i = j
    return tokens


@dataclass
class Line:
    number: int
    text: str
    command: str
    args: List[Union[str, bytes, None]]
    expect: Optional[List[Union[str, bytes, None]]]


def parse(text: str) -> List[Line]:
    lines: List[Line] = []
    for number, raw in enumerate(text.splitlines(), 1):
        tokens = tokenize(raw)
        if not tokens:
            continue
        command = tokens[0]
        if not isinstance(command, str):
            raise ScenarioSyntaxError(f"line {number}: a command must be a bare word: {raw!r}")
        rest = tokens[1:]
        expect = None
        if "->" in rest:
            k = rest.index("->")
            rest, expect = rest[:k], rest[k + 1 :]
        lines.append(Line(number, raw.strip(), command, rest, expect))
    return lines


def key(token: Union[str, bytes, None]) -> RawKey:
    if token is None:
        return None
    return token if isinstance(token, bytes) else token.encode("utf-8")


def as_text(token: Union[str, bytes, None]) -> str:
    if token is None:
        return "(null)"
    return token.decode("utf-8", "surrogateescape") if isinstance(token, bytes) else token


def status_of(token: Union[str, bytes, None]) -> Status:
    text = as_text(token)
    name = text[3:] if text.startswith("TG_") else text
    try:
        return Status[name]
    except KeyError:
        raise ScenarioSyntaxError(f"unknown status {text!r}") from None


def is_status(token: Union[str, bytes, None]) -> bool:
    text = as_text(token)
    return text == "OK" or text.startswith("E_") or text.startswith("TG_")


def integer(token: Union[str, bytes, None]) -> int:
    try:
        return int(as_text(token), 0)
    except ValueError:
        raise ScenarioSyntaxError(f"not an integer: {as_text(token)!r}") from None


def options(tokens: Sequence[Union[str, bytes, None]]) -> Tuple[List[Union[str, bytes, None]], Dict[str, str]]:
    """Split ``name=value`` and bare flags (strings) from positional tokens."""
    positional: List[Union[str, bytes, None]] = []
    named: Dict[str, str] = {}
    for t in tokens:
        if isinstance(t, str) and "=" in t:
            name, _, value = t.partition("=")
            named[name] = value
        else:
            positional.append(t)
    return positional, named


def call(fn: Callable[[], T]) -> Tuple[Status, Optional[T], Optional[TickgateError]]:
    """Run fn; (OK, result, None) or (status, None, the exception)."""
    try:
        return Status.OK, fn(), None
    except TickgateError as exc:
        return Status(exc.status), None, exc


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    name: str
    event: Event


class Recorder:
    """Every event of every subscription, in the order they arrived."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: List[Received] = []
        self.checked = 0
        self.threads: set = set()

    def callback(self, name: str) -> Callable[[Event], None]:
        def on_event(event: Event) -> None:
            with self._lock:
                self.events.append(Received(name, event))
                self.threads.add(threading.get_ident())

        return on_event

    def next(self) -> Optional[Received]:
        with self._lock:
            if self.checked >= len(self.events):
                return None
            item = self.events[self.checked]
            self.checked += 1
            return item

    def unchecked(self) -> List[Received]:
        with self._lock:
            return self.events[self.checked :]


class Scenario:
    """Runs one scenario file."""

    def __init__(self, text: str, name: str = "<scenario>") -> None:
        self.name = name
        self.lines = parse(text)
        self.engine: Optional[Engine] = None
        self.delivery = "host"
        self.recorder = Recorder()
        self.subscriptions: Dict[str, tickgate.Subscription] = {}
        self.ids: Dict[str, int] = {}
        self.line: Optional[Line] = None

    # -- helpers -------------------------------------------------------------

    def fail(self, message: str) -> ScenarioFailure:
        line = self.line
        where = f"{self.name}:{line.number}: {line.text}" if line else self.name
        return ScenarioFailure(f"{where}\n  {message}")

    def check(self, what: str, expected: object, got: object) -> None:
        if expected != got:
            raise self.fail(f"{what}: expected {expected!r}, got {got!r}")

    def need_expect(self, count_min: int) -> List[Union[str, bytes, None]]:
        if self.line is None or self.line.expect is None or len(self.line.expect) < count_min:
            raise ScenarioSyntaxError(f"{self.name}:{self.line.number if self.line else 0}: "
                                      f"expected '-> ...' with {count_min} value(s)")
        return self.line.expect

    def eng(self) -> Engine:
        if self.engine is None:
            self.open([])
        assert self.engine is not None
        return self.engine

    def open(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if self.engine is not None:
            raise ScenarioSyntaxError(f"{self.name}: a second 'engine' line")
        _, named = options(args)
        self.delivery = named.get("delivery", "host")
        if self.delivery not in ("host", "thread"):
            raise ScenarioSyntaxError(f"{self.name}: unknown delivery {self.delivery!r}")
        tick = integer(named.get("tick", "0"))
        status, engine, _ = call(
            lambda: Engine(delivery=self.delivery, clock="manual", tick_interval_ms=tick)
        )
        expect = self.line.expect if self.line is not None else None
        self.check("engine status", status_of(expect[0]) if expect else Status.OK, status)
        if engine is None:
            raise self.fail("no engine to run the rest of the file on")
        self.engine = engine

    def deliver(self) -> None:
        engine = self.eng()
        if self.delivery == "host":
            engine.dispatch()
        else:
            engine.advance(ms=0)

    # -- commands ------------------------------------------------------------

    def cmd_engine(self, args: Sequence[Union[str, bytes, None]]) -> None:
        self.open(args)

    def cmd_start(self, args: Sequence[Union[str, bytes, None]]) -> None:
        positional, named = options(args)
        restart = "restart" in positional
        positional = [t for t in positional if t != "restart"]
        if len(positional) != 3:
            raise ScenarioSyntaxError(f"start needs SCOPE SUBJECT MS: {args!r}")
        scope, subject, ms = key(positional[0]), key(positional[1]), integer(positional[2])
        tick = integer(named.get("tick", "0"))
        engine = self.eng()
        status, result, exc = call(
            lambda: engine.start(scope, subject, duration_ms=ms, tick_interval_ms=tick, restart=restart)
        )
        expect = self.need_expect(1)
        self.check("status", status_of(expect[0]), status)
        _, want = options(expect[1:])
        if "remaining" in want:
            if status == Status.OK:
                got = result.remaining_ms if result is not None else None
            else:
                got = getattr(exc, "remaining_ms", None)
            self.check("remaining_ms", integer(want["remaining"]), got)

    def cmd_cancel(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) != 2:
            raise ScenarioSyntaxError(f"cancel needs SCOPE SUBJECT: {args!r}")
        engine = self.eng()
        status, _, _ = call(lambda: engine.cancel(key(args[0]), key(args[1])))
        self.check("status", status_of(self.need_expect(1)[0]), status)

    def _count_result(self, status: Status, count: Optional[int]) -> None:
        expect = self.need_expect(1)
        if is_status(expect[0]):
            self.check("status", status_of(expect[0]), status)
            if len(expect) > 1:
                self.check("count", integer(expect[1]), count)
        else:
            self.check("status", Status.OK, status)
            self.check("count", integer(expect[0]), count)

    def cmd_cancel_scope(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) != 1:
            raise ScenarioSyntaxError(f"cancel-scope needs SCOPE: {args!r}")
        engine = self.eng()
        status, count, _ = call(lambda: engine.cancel_scope(key(args[0])))
        self._count_result(status, count)

    def cmd_cancel_all(self, args: Sequence[Union[str, bytes, None]]) -> None:
        engine = self.eng()
        status, count, _ = call(engine.cancel_all)
        self._count_result(status, count)

    def cmd_remaining(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) != 2:
            raise ScenarioSyntaxError(f"remaining needs SCOPE SUBJECT: {args!r}")
        engine = self.eng()
        scope, subject = key(args[0]), key(args[1])
        # The raw call, for the output parameters on failure too.
        ms = ctypes.c_int64(-12345)
        display = ctypes.c_int64(-12345)
        raw_status, _, _ = call(
            lambda: engine._lib.tg_countdown_remaining(
                engine.handle, scope, subject, ctypes.byref(ms), ctypes.byref(display)
            )
        )
        # And the Python API, which must agree.
        status, result, _ = call(lambda: engine.remaining(scope, subject))
        self.check("status of Engine.remaining vs tg_countdown_remaining", raw_status, status)
        if result is not None:
            self.check("Engine.remaining vs tg_countdown_remaining",
                       (ms.value, display.value), (result.remaining_ms, result.display_seconds))
        expect = self.need_expect(3)
        self.check("status", status_of(expect[0]), status)
        self.check("remaining_ms", integer(expect[1]), ms.value)
        self.check("display_seconds", integer(expect[2]), display.value)

    def cmd_list(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) > 1:
            raise ScenarioSyntaxError(f"list takes at most SCOPE: {args!r}")
        scope = key(args[0]) if args else None
        engine = self.eng()
        status, items, _ = call(lambda: engine.list(scope))
        count_status, count, _ = call(lambda: engine.count(scope))
        self.check("status of Engine.count vs Engine.list", status, count_status)
        if items is not None:
            self.check("Engine.count vs len(Engine.list)", len(items), count)
            if scope is not None:
                wrong = [i for i in items if i.scope.encode("utf-8", "surrogateescape") != scope]
                if wrong:
                    raise self.fail(f"list of one scope returned other scopes: {wrong!r}")
        self._count_result(status, None if items is None else len(items))

    def cmd_subscribe(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) not in (2, 3):
            raise ScenarioSyntaxError(f"subscribe needs NAME SCOPE [SUBJECT]: {args!r}")
        name = as_text(args[0])
        scope = key(args[1])
        subject = key(args[2]) if len(args) == 3 else None
        engine = self.eng()
        status, sub, _ = call(lambda: engine.subscribe(scope, subject, self.recorder.callback(name)))
        self.check("status", status_of(self.need_expect(1)[0]), status)
        if sub is not None:
            self.subscriptions[name] = sub
            self.ids[name] = sub.id

    def cmd_unsubscribe(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) != 1:
            raise ScenarioSyntaxError(f"unsubscribe needs NAME: {args!r}")
        name = as_text(args[0])
        sid = self.ids.get(name, _NEVER_ISSUED_ID)
        engine = self.eng()
        status, _, _ = call(lambda: engine.unsubscribe(sid))
        self.check("status", status_of(self.need_expect(1)[0]), status)
        if status == Status.OK and name in self.subscriptions:
            sub = self.subscriptions[name]
            if sub.active:
                raise self.fail(f"after unsubscribe returned, the destructor of {name} has not run")

    def cmd_advance(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) != 1:
            raise ScenarioSyntaxError(f"advance needs MS: {args!r}")
        engine = self.eng()
        step = integer(args[0])
        status, _, _ = call(lambda: engine.advance(ms=step))
        expect = self.line.expect if self.line is not None else None
        self.check("status", status_of(expect[0]) if expect else Status.OK, status)
        self.deliver()

    def cmd_event(self, args: Sequence[Union[str, bytes, None]]) -> None:
        if len(args) != 6:
            raise ScenarioSyntaxError(
                f"event needs NAME KIND SCOPE SUBJECT REMAINING_MS DISPLAY: {args!r}"
            )
        self.deliver()
        got = self.recorder.next()
        name, kind = as_text(args[0]), as_text(args[1])
        want = (name, kind, as_text(args[2]), as_text(args[3]), integer(args[4]), integer(args[5]))
        if got is None:
            raise self.fail(f"expected event {' '.join(map(str, want))}, got no event")
        e = got.event
        kind_name = e.kind.name if isinstance(e.kind, EventKind) else str(int(e.kind))
        have = (got.name, kind_name, e.scope, e.subject, e.remaining_ms, e.display_seconds)
        if have != want:
            raise self.fail(
                f"expected event {' '.join(map(str, want))}\n"
                f"  got      event {' '.join(map(str, have))}"
            )
        # Invariants every event keeps (as the C recorder checks them).
        if e.display_seconds != -(-e.remaining_ms // 1000) or e.remaining_ms < 0:
            raise self.fail(f"display_seconds is not the ceiling of remaining_ms: {e!r}")
        if e.kind in (EventKind.FINISHED, EventKind.CANCELLED) and e.remaining_ms != 0:
            raise self.fail(f"{kind_name} with remaining_ms {e.remaining_ms}")
        if name in self.ids and e.subscription != self.ids[name]:
            raise self.fail(f"event.subscription {e.subscription} is not {name}'s id {self.ids[name]}")

    def cmd_no_events(self, args: Sequence[Union[str, bytes, None]]) -> None:
        self.deliver()
        left = self.recorder.unchecked()
        if left:
            shown = "\n    ".join(
                f"{r.name} {r.event.kind!r} {r.event.scope} {r.event.subject} "
                f"{r.event.remaining_ms} {r.event.display_seconds}"
                for r in left
            )
            raise self.fail(f"expected no more events, got {len(left)}:\n    {shown}")

    # -- main loop -------------------------------------------------------------

    COMMANDS = {
        "engine": cmd_engine,
        "start": cmd_start,
        "cancel": cmd_cancel,
        "cancel-scope": cmd_cancel_scope,
        "cancel-all": cmd_cancel_all,
        "remaining": cmd_remaining,
        "list": cmd_list,
        "subscribe": cmd_subscribe,
        "unsubscribe": cmd_unsubscribe,
        "advance": cmd_advance,
        "event": cmd_event,
        "no-events": cmd_no_events,
    }

    def run(self) -> None:
        try:
            for index, line in enumerate(self.lines):
                self.line = line
                if line.command == "engine" and index != 0:
                    raise ScenarioSyntaxError(f"{self.name}:{line.number}: 'engine' must come first")
                handler = self.COMMANDS.get(line.command)
                if handler is None:
                    raise ScenarioSyntaxError(
                        f"{self.name}:{line.number}: unknown command {line.command!r}"
                    )
                handler(self, line.args)
            self.line = None
        finally:
            if self.engine is not None:
                self.engine.close()
        # The engine's close ran every remaining destructor.
        still = [n for n, s in self.subscriptions.items() if s.active]
        if still:
            raise self.fail(f"after close, subscriptions without destructor: {still}")


def run_file(path: Union[str, "os.PathLike[str]"]) -> Scenario:
    p = Path(path)
    scenario = Scenario(p.read_text(encoding="utf-8"), p.name)
    scenario.run()
    return scenario


def run_text(text: str, name: str = "<scenario>") -> Scenario:
    scenario = Scenario(text, name)
    scenario.run()
    return scenario


if __name__ == "__main__":
    failed = 0
    for arg in sys.argv[1:]:
        try:
            run_file(arg)
            print(f"ok   {arg}")
        except (ScenarioFailure, ScenarioSyntaxError) as exc:
            failed += 1
            print(f"FAIL {exc}")
    sys.exit(1 if failed else 0)
