"""A Python runner for the shared scenario files (Tests/scenarios/*.scn).

It reads the format of Tests/scenarios/README.md exactly as the C runner
(Tests/c/scenario_runner.c) does, with the same syntax rules (tokens,
quoting, escapes) and the same checks, but drives the library through the
bindings' public API (:class:`tickgate.Engine`, :class:`tickgate.Gate`), so
the same files prove the same behaviour from Python. Like the C runner it can
override each file's delivery mode (the pytest suite runs every file in host
and in thread mode, as the C runner's ``--both``), and run every engine on
Redis (``redis_url``, as ``--redis=URL``) or on a SQLite file of its own in a
new directory under ``sqlite_dir`` (as ``--sqlite``). A file that says
``skip-on STORE REASON`` for the store of the run is not run: the run raises
:class:`ScenarioSkipped` (a ``unittest.SkipTest``, so pytest reports it as
skipped, with the reason).

What the callbacks receive is recorded in three FIFOs, in the order the
callbacks ran: countdown events, gate events, and request outcomes (actions
and cancels). ``event``, ``gate-event``, ``action`` and ``cancelled`` take the
oldest unchecked record of their FIFO; inside an ``any-order`` block they take
the next records of each FIFO in any order.

Besides the file's own checks it checks what the header promises on the way:
every event's subscription id (and a gate event's realm), an event's enabled
flag against its state, at most one of action and cancel per request and
none after its destructor or for a withdrawn or coalesced request, each
destructor exactly once (before withdraw returns, before require returns
COALESCED, at the latest by close; never after a failed subscribe or
require), in host mode no callback outside ``dispatch`` (never inside the
call that caused it), in thread mode none on the runner's thread, and no
callback after close returned.

A few checks go further than the C runner, because the bindings add a layer
that must agree with the C call: ``remaining`` runs both the raw
``tg_countdown_remaining`` (whose output parameters the Python API does not
expose on failure) and ``Engine.remaining``; ``list`` runs both
``Engine.count`` (a NULL visitor, as the C runner) and ``Engine.list``. A few
go less far, because the bindings do not expose the detail: the request id a
callback receives, an event's struct_size, and that a failed
``tg_send_begin`` leaves its ticket output unwritten are checked by the C
runner only.

Run files by hand with::

    TICKGATE_LIBRARY=build/libtickgate.so python3 Tests/python/scenario_runner.py [--delivery=host|thread|both] [--sqlite] FILE...
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
from ctypes import byref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

import tickgate
from tickgate import (
    ButtonState,
    CancelReason,
    Engine,
    EventKind,
    GateEventKind,
    Policy,
    RequireResult,
    Status,
    TickgateError,
    Titles,
)

T = TypeVar("T")
Token = Optional[str]

#: The id an `unsubscribe` or `withdraw` uses for a name that never got one
#: (as the C runner: UINT64_MAX, an id nobody has).
NEVER_ISSUED_ID = (1 << 64) - 1
UINT32_MAX = (1 << 32) - 1

DELIVERIES = ("host", "thread")

MAX_TOKENS = 32
MAX_GROUP = 32
MAX_STEPS = 16

# The three FIFOs.
EVENT, GATE, REQUEST = 0, 1, 2
STREAMS = (EVENT, GATE, REQUEST)
ACTION, CANCEL = 1, 2


class ScenarioFailure(AssertionError):
    """A scenario line did not behave as the file says (or is malformed)."""


class ScenarioSkipped(unittest.SkipTest):
    """The file says `skip-on STORE REASON` for the store of this run."""

#: The stores `skip-on` names.
STORES = ("memory", "sqlite", "redis")


# ---------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------


class _Arrow(str):
    """The unquoted ``->`` token (a quoted "->" is plain text)."""


#: The unquoted ``->``; compare with ``is``.
ARROW = _Arrow("->")


class TokenError(ValueError):
    """A line that cannot be split into tokens."""


_BLANKS = b" \t\r\n"
_HEX = b"0123456789abcdefABCDEF"


def tokenize(line: str) -> List[Token]:
    """Split a line into tokens, byte for byte as the C runner does.

    Tokens are separated by blanks (space, tab, CR, LF); ``#`` at the start
    of a token begins a comment. Inside a token, double quotes start and end
    a quoted part, which may hold blanks and ``#`` and the escapes ``\\"``,
    ``\\\\`` and ``\\xHH`` (a byte, not 00); the quotes are dropped. An
    unquoted ``(null)`` is None (a NULL pointer) and an unquoted ``->`` is
    :data:`ARROW`; quoted, both are plain text (``""`` is the empty string).
    Bytes that are not UTF-8 come back as surrogate escapes.
    """
    data = line.encode("utf-8", "surrogateescape")
    tokens: List[Token] = []
    i, n = 0, len(data)
    while True:
        while i < n and data[i] in _BLANKS:
            i += 1
        if i >= n or data[i] == ord("#"):
            break
        if len(tokens) == MAX_TOKENS:
            raise TokenError("too many tokens")
        out = bytearray()
        quoted = in_quotes = False
        while i < n and (in_quotes or data[i] not in _BLANKS):
            c = data[i]
            if c == ord('"'):
                in_quotes = not in_quotes
                quoted = True
                i += 1
            elif in_quotes and c == ord("\\"):
                nxt = data[i + 1 : i + 2]
                if nxt in (b'"', b"\\"):
                    out += nxt
                    i += 2
                elif (
                    nxt == b"x"
                    and i + 3 < n
                    and data[i + 2] in _HEX
                    and data[i + 3] in _HEX
                    and data[i + 2 : i + 4] != b"00"
                ):
                    out.append(int(data[i + 2 : i + 4], 16))
                    i += 4
                else:
                    raise TokenError('bad escape in quotes (use \\" \\\\ or \\xHH)')
            else:
                out.append(c)
                i += 1
        if in_quotes:
            raise TokenError("unterminated quote")
        text = bytes(out).decode("utf-8", "surrogateescape")
        if not quoted and text == "(null)":
            tokens.append(None)
        elif not quoted and text == "->":
            tokens.append(ARROW)
        else:
            tokens.append(text)
    return tokens


def show(token: Token) -> str:
    return "(null)" if token is None else token if token else '""'


def arrow(tok: List[Token]) -> int:
    """Index of the unquoted ``->``, or -1."""
    for i, t in enumerate(tok):
        if t is ARROW:
            return i
    return -1


def opt(token: Token, key: str) -> Optional[str]:
    """The value of a ``key=value`` token, or None."""
    if token is not None and token.startswith(key + "="):
        return token[len(key) + 1 :]
    return None


def call(fn: Callable[[], T]) -> Tuple[Status, Optional[T], Optional[TickgateError]]:
    """Run fn: (OK, result, None), or (its status, None, the exception)."""
    try:
        return Status.OK, fn(), None
    except TickgateError as exc:
        return Status(exc.status), None, exc


def _b(token: Token) -> Optional[bytes]:
    """A key or template for C: the token's bytes (None stays NULL)."""
    return None if token is None else token.encode("utf-8", "surrogateescape")


def _dec(raw: Optional[bytes]) -> str:
    return "" if raw is None else raw.decode("utf-8", "surrogateescape")


def _name(enum: Any, value: Any) -> str:
    return value.name if isinstance(value, enum) else "(unknown)"


def _enabled_in(state: Any) -> bool:
    return state in (ButtonState.IDLE, ButtonState.READY_AGAIN, ButtonState.CODE_DEAD)


def _ceil_s(ms: int) -> int:
    return 0 if ms <= 0 else (ms + 999) // 1000


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


@dataclass(eq=False)
class SubRecord:
    name: str
    gate: bool = False
    realm: Optional[str] = None
    subscription: Optional[tickgate.Subscription] = None
    destroyed: int = 0

    @property
    def subscribed(self) -> bool:
        return self.subscription is not None


@dataclass(eq=False)
class ReqRecord:
    name: str
    id: int = 0
    required: bool = False
    coalesced: bool = False
    withdrawn: bool = False
    actions: int = 0
    cancels: int = 0
    destroyed: int = 0
    bad: int = 0


@dataclass(frozen=True)
class Received:
    """One callback: an Event (EVENT), a GateEvent (GATE), or (ACTION|CANCEL, reason) (REQUEST)."""

    owner: Union[SubRecord, ReqRecord]
    payload: Any
    after_close: bool

    @property
    def sub(self) -> SubRecord:
        assert isinstance(self.owner, SubRecord)
        return self.owner

    @property
    def event(self) -> Any:
        return self.payload


@dataclass
class Check:
    """A check command, parsed."""

    stream: int
    line: int
    name: str
    kind: Any
    fields: Dict[str, Any] = field(default_factory=dict)

    def format(self) -> str:
        f = self.fields
        if self.stream == EVENT:
            text = (
                f"event {self.name} {_name(EventKind, self.kind)} {show(f['scope'])} {show(f['subject'])} "
                f"{f['rem']} {f['disp']}"
            )
            if "state" in f:
                text += f" state={f['state'].name}"
            if "enabled" in f:
                text += f" enabled={int(f['enabled'])}"
            if "title" in f:
                text += f' title="{f["title"]}"'
            if "duration" in f:
                text += f" duration={f['duration']}"
            return text
        if self.stream == GATE:
            text = f"gate-event {self.name} {_name(GateEventKind, self.kind)}"
            if "logged_in" in f:
                text += f" logged_in={int(f['logged_in'])}"
            if "queued" in f:
                text += f" queued={f['queued']}"
            if "remaining" in f:
                text += f" remaining={f['remaining']}"
            return text
        if self.kind == ACTION:
            return f"action {self.name}"
        return f"cancelled {self.name} {f['reason'].name}"

    def matches(self, r: Received) -> bool:
        f = self.fields
        if r.owner.name != self.name:
            return False
        if self.stream == EVENT:
            e = r.payload
            return (
                e.kind == self.kind
                and (e.scope, e.subject, e.remaining_ms, e.display_seconds)
                == (f["scope"], f["subject"], f["rem"], f["disp"])
                and ("state" not in f or e.state == f["state"])
                and ("enabled" not in f or e.enabled == f["enabled"])
                and ("title" not in f or e.title == f["title"])
                and ("duration" not in f or e.duration_ms == f["duration"])
            )
        if self.stream == GATE:
            e = r.payload
            return (
                e.kind == self.kind
                and ("logged_in" not in f or e.logged_in == f["logged_in"])
                and ("queued" not in f or e.queued == f["queued"])
                and ("remaining" not in f or e.session_remaining_ms == f["remaining"])
            )
        kind, reason = r.payload
        return kind == self.kind and (kind == ACTION or reason == f["reason"])


def format_received(stream: int, r: Received) -> str:
    if stream == EVENT:
        e = r.payload
        return (
            f"event {r.owner.name} {_name(EventKind, e.kind)} {show(e.scope)} {show(e.subject)} "
            f"{e.remaining_ms} {e.display_seconds} state={_name(ButtonState, e.state)} "
            f'enabled={int(e.enabled)} title="{e.title}" duration={e.duration_ms}'
        )
    if stream == GATE:
        e = r.payload
        return (
            f"gate-event {r.owner.name} {_name(GateEventKind, e.kind)} logged_in={int(e.logged_in)} "
            f"queued={e.queued} remaining={e.session_remaining_ms}"
        )
    kind, reason = r.payload
    if kind == ACTION:
        return f"action {r.owner.name}"
    return f"cancelled {r.owner.name} {_name(CancelReason, reason)}"


# ---------------------------------------------------------------------------
# One run of one file
# ---------------------------------------------------------------------------


@dataclass
class Run:
    """One run of one file."""

    name: str
    override: Optional[str] = None  # None: as the file says
    #: A Redis server for every engine (on the engine's manual clock,
    #: under a prefix of this run's own), as the C runner's --redis=URL.
    redis_url: Optional[str] = None
    #: The prefix on that server (None: one of this run's own).
    redis_prefix: Optional[str] = None
    #: Every engine on a SQLite file in a new directory under this one (as
    #: the C runner's --sqlite); `engine store` and `reopen` use that file.
    sqlite_dir: Optional[str] = None
    reopenable: bool = False  # engine ... store
    lineno: int = 0
    text: str = ""
    thread_mode: bool = False
    engine: Optional[Engine] = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    streams: List[List[Received]] = field(default_factory=lambda: [[], [], []])
    checked: List[int] = field(default_factory=lambda: [0, 0, 0])
    subs: List[SubRecord] = field(default_factory=list)  # newest last
    reqs: List[ReqRecord] = field(default_factory=list)  # newest last
    tickets: Dict[str, int] = field(default_factory=dict)
    main_thread: int = field(default_factory=threading.get_ident)
    dispatching: bool = False
    outside: int = 0
    on_main: int = 0
    closed: bool = False
    store_dir: Optional[str] = None  # engine ... store: its temporary directory
    engine_options: Dict[str, Any] = field(default_factory=dict)
    advanced_ms: int = 0  # the manual clock's advances since the engine opened
    group: Optional[List[Check]] = None  # an any-order block being read
    group_line: int = 0

    @property
    def store(self) -> str:
        """The store of this run's engines, as `skip-on` names it."""
        return "redis" if self.redis_url is not None else "sqlite" if self.sqlite_dir is not None else "memory"

    @property
    def events(self) -> List[Received]:
        """The countdown events received (the EVENT FIFO)."""
        return self.streams[EVENT]

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
            if not token.lstrip("+-").isascii() or token.count("-") + token.count("+") > 1:
                raise ValueError
            value = int(token, 10)
            if not -(1 << 63) <= value < (1 << 63):
                raise ValueError
            return value
        except ValueError:
            raise run.fail(f"syntax: not a number: {show(token)}") from None

    def parse_id(self, token: str) -> int:
        if not (token.isascii() and token.isdigit()) or int(token) > NEVER_ISSUED_ID:
            raise self.fail(f"syntax: not an id: {token}")
        return int(token)

    def parse_flag(self, token: Token) -> bool:
        if token not in ("0", "1"):
            raise self.fail(f"syntax: not 0 or 1: {show(token)}")
        return token == "1"

    def status(self, token: Token) -> Status:
        if token is not None and token in Status.__members__:
            return Status[token]
        raise self.fail(f"syntax: unknown status: {show(token)}")

    def enum(self, enum: Any, what: str, token: Token) -> Any:
        if token is not None and token in enum.__members__:
            return enum[token]
        raise self.fail(f"syntax: unknown {what}: {show(token)}")

    def kind(self, token: Token) -> EventKind:
        return self.enum(EventKind, "event kind", token)

    @staticmethod
    def key(token: Token) -> Optional[bytes]:
        return _b(token)

    # -- callbacks ---------------------------------------------------------------

    def _push(self, stream: int, owner: Union[SubRecord, ReqRecord], payload: Any) -> None:
        # Call with self.lock held.
        if not self.thread_mode and not self.dispatching:
            self.outside += 1
        if self.thread_mode and threading.get_ident() == self.main_thread:
            self.on_main += 1
        self.streams[stream].append(Received(owner, payload, self.closed))

    def callback(self, sub: SubRecord, stream: int = EVENT) -> Callable[[Any], None]:
        def on_event(event: Any) -> None:
            with self.lock:
                self._push(stream, sub, event)

        return on_event

    def destructor_hook(self, rec: Union[SubRecord, ReqRecord]) -> Callable[[], None]:
        def on_end() -> None:
            with self.lock:
                rec.destroyed += 1

        return on_end

    def request_hook(self, q: ReqRecord, kind: int) -> Callable[..., None]:
        def on_callback(reason: Any = None) -> None:
            with self.lock:
                if q.actions or q.cancels or q.destroyed:
                    q.bad += 1
                if kind == ACTION:
                    q.actions += 1
                else:
                    q.cancels += 1
                self._push(REQUEST, q, (kind, reason))

        return on_callback

    def deliver(self) -> None:
        """Run what is pending: dispatch (host) or advance(0) (thread); nothing after close."""
        engine = self.engine
        if engine is None or self.closed:
            return
        if self.thread_mode:
            status, _, exc = call(lambda: engine.advance(ms=0))
            self.check_status("tg_clock_advance(0)", status, Status.OK, exc)
        else:
            with self.lock:
                self.dispatching = True
            try:
                status, _, exc = call(engine.dispatch)
            finally:
                with self.lock:
                    self.dispatching = False
            self.check_status("tg_engine_dispatch", status, Status.OK, exc)

    def check_invariants(self) -> None:
        with self.lock:
            outside, on_main = self.outside, self.on_main
            bad = next(
                (
                    q.name
                    for q in reversed(self.reqs)
                    if q.bad or ((q.withdrawn or q.coalesced) and (q.actions or q.cancels)) or q.destroyed > 1
                ),
                None,
            )
        if outside:
            raise self.fail(
                f"{outside} callbacks ran outside tg_engine_dispatch (host delivery: they must never run "
                "inside the call that caused them)"
            )
        if on_main:
            raise self.fail(f"{on_main} callbacks ran on the runner's thread (engine-thread delivery)")
        if bad is not None:
            raise self.fail(
                f"request {bad}: more than one callback, a callback after its destructor or after it was "
                "withdrawn or coalesced, or the destructor twice"
            )

    # -- lookups ---------------------------------------------------------------

    def find_sub(self, name: Token) -> Optional[SubRecord]:
        with self.lock:
            for sub in reversed(self.subs):  # newest first
                if sub.name == name:
                    return sub
        return None

    def find_req(self, name: Token) -> Optional[ReqRecord]:
        with self.lock:
            for q in reversed(self.reqs):  # newest first
                if q.name == name:
                    return q
        return None

    @property
    def eng(self) -> Engine:
        assert self.engine is not None
        return self.engine

    # -- commands: the engine and countdowns ------------------------------------------

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
            elif opt(t, "tick") is not None:
                tick = self.parse_int(self, opt(t, "tick"))
            elif t == "store" and self.redis_url is not None:
                self.reopenable = True
            elif t == "store":
                if self.store_dir is None:
                    self.store_dir = tempfile.mkdtemp(prefix="tg-scn-")
                self.reopenable = True
            else:
                raise self.fail(f"syntax: unknown engine option {show(t)}")
        if self.override is not None:
            delivery = self.override
        if self.sqlite_dir is not None and self.store_dir is None:
            self.store_dir = tempfile.mkdtemp(prefix="tg-scn-", dir=self.sqlite_dir)
        self.thread_mode = delivery == "thread"
        self.engine_options = dict(delivery=delivery, clock="manual", tick_interval_ms=tick)
        if self.store_dir is not None:
            self.engine_options["store_path"] = os.path.join(self.store_dir, "store.db")
        if self.redis_url is not None:
            self.engine_options.update(
                store_url=self.redis_url,
                store_prefix=self.redis_prefix or f"pyscn:{os.getpid()}:{next(_PREFIXES)}:",
                store_engine_clock=True,
            )
        status, engine, exc = call(lambda: Engine(**self.engine_options))
        self.check_status("tg_engine_open", status, Status.OK, exc)
        self.engine = engine

    def cmd_start(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 4 or a + 1 >= len(tok):
            raise self.fail("syntax: start SCOPE SUBJECT MS [tick=MS] [restart] -> STATUS [remaining=MS]")
        ms = self.parse_int(self, tok[3])
        tick, restart = 0, False
        for t in tok[4:a]:
            if opt(t, "tick") is not None:
                tick = self.parse_int(self, opt(t, "tick"))
            elif t == "restart":
                restart = True
            else:
                raise self.fail(f"syntax: unknown start option {show(t)}")
        want = self.status(tok[a + 1])
        want_rem: Optional[int] = None
        for t in tok[a + 2 :]:
            if opt(t, "remaining") is not None:
                want_rem = self.parse_int(self, opt(t, "remaining"))
            else:
                raise self.fail(f"syntax: unknown start result {show(t)}")
        engine = self.eng
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
        if len(tok) != 5 or tok[3] is not ARROW:
            raise self.fail("syntax: cancel SCOPE SUBJECT -> STATUS")
        want = self.status(tok[4])
        engine = self.eng
        status, _, exc = call(lambda: engine.cancel(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_countdown_cancel", status, want, exc)

    def cmd_cancel_many(self, tok: List[Token], every: bool) -> None:
        a = 1 if every else 2
        if len(tok) != a + 2 or tok[a] is not ARROW:
            raise self.fail("syntax: cancel-all -> COUNT" if every else "syntax: cancel-scope SCOPE -> COUNT")
        want = self.parse_int(self, tok[a + 1])
        engine = self.eng
        if every:
            status, got, exc = call(engine.cancel_all)
        else:
            status, got, exc = call(lambda: engine.cancel_scope(self.key(tok[1])))  # type: ignore[arg-type]
        self.check_status("tg_countdown_cancel_all" if every else "tg_countdown_cancel_scope", status, Status.OK, exc)
        if got != want:
            raise self.fail(f"expected {want} cancelled, got {got}")

    def cmd_remaining(self, tok: List[Token]) -> None:
        if len(tok) != 7 or tok[3] is not ARROW:
            raise self.fail("syntax: remaining SCOPE SUBJECT -> STATUS MS DISPLAY")
        want = self.status(tok[4])
        want_ms, want_disp = self.parse_int(self, tok[5]), self.parse_int(self, tok[6])
        engine = self.eng
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
        a = arrow(tok)
        if a not in (1, 2) or len(tok) != a + 2:
            raise self.fail("syntax: list [SCOPE] -> COUNT")
        want = self.parse_int(self, tok[a + 1])
        scope = self.key(tok[1]) if a == 2 else None
        engine = self.eng
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
        a = arrow(tok)
        if a not in (3, 4) or len(tok) != a + 2:
            raise self.fail("syntax: subscribe NAME SCOPE [SUBJECT] -> STATUS")
        want = self.status(tok[a + 1])
        sub = SubRecord(str(tok[1]))
        with self.lock:
            self.subs.append(sub)
        engine = self.eng
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

    def cmd_gate_subscribe(self, tok: List[Token]) -> None:
        if len(tok) != 5 or tok[3] is not ARROW:
            raise self.fail("syntax: gate-subscribe NAME REALM -> STATUS")
        want = self.status(tok[4])
        sub = SubRecord(str(tok[1]), gate=True, realm=tok[2])
        with self.lock:
            self.subs.append(sub)
        engine = self.eng
        status, handle, exc = call(
            lambda: engine.gate(self.key(tok[2])).subscribe(  # type: ignore[arg-type]
                self.callback(sub, GATE), _on_end=self.destructor_hook(sub)
            )
        )
        with self.lock:
            sub.subscription = handle
        self.check_status("tg_gate_subscribe", status, want, exc)

    def cmd_unsubscribe(self, tok: List[Token]) -> None:
        if len(tok) != 4 or tok[2] is not ARROW:
            raise self.fail("syntax: unsubscribe NAME -> STATUS")
        want = self.status(tok[3])
        sub = self.find_sub(tok[1])
        sid = sub.subscription.id if sub is not None and sub.subscription is not None else NEVER_ISSUED_ID
        engine = self.eng
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
        engine = self.eng
        status, _, exc = call(lambda: engine.advance(ms=ms))
        self.check_status("tg_clock_advance", status, Status.OK, exc)
        self.advanced_ms += ms
        if not self.thread_mode:
            self.deliver()

    # -- commands: the resend flow ----------------------------------------------------

    def cmd_policy(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 2 or len(tok) != a + 2:
            raise self.fail(
                "syntax: policy SCOPE [cooldowns=MS,MS...] [window=N/MS] [quiet=MS] [ticket=MS] -> STATUS"
            )
        want = self.status(tok[a + 1])
        p: Dict[str, Any] = {}
        for t in tok[2:a]:
            if opt(t, "cooldowns") is not None:
                v = str(opt(t, "cooldowns"))
                items = v.split(",") if v else []
                steps = []
                for item in items:
                    if not item:
                        raise self.fail(f"syntax: empty cooldown in {t}")
                    steps.append(self.parse_int(self, item))
                    if len(steps) > MAX_STEPS:
                        raise self.fail(f"syntax: more than {MAX_STEPS} cooldowns")
                p["cooldowns_ms"] = tuple(steps)
            elif opt(t, "window") is not None:
                v = str(opt(t, "window"))
                if "/" not in v:
                    raise self.fail("syntax: window=N/MS")
                cap_text, ms_text = v.split("/", 1)
                cap = self.parse_int(self, cap_text)
                ms = self.parse_int(self, ms_text)
                if not 0 <= cap <= UINT32_MAX:
                    raise self.fail(f"syntax: window cap out of range: {cap_text}")
                p["window_max_sends"], p["window_ms"] = cap, ms
            elif opt(t, "quiet") is not None:
                p["quiet_reset_ms"] = self.parse_int(self, opt(t, "quiet"))
            elif opt(t, "ticket") is not None:
                p["ticket_timeout_ms"] = self.parse_int(self, opt(t, "ticket"))
            elif opt(t, "wrong") is not None:
                p["max_wrong_codes"] = self.parse_int(self, opt(t, "wrong"))
                if not 0 <= p["max_wrong_codes"] <= UINT32_MAX:
                    raise self.fail(f"syntax: wrong= out of range: {opt(t, 'wrong')}")
            else:
                raise self.fail(f"syntax: unknown policy option {show(t)}")
        engine = self.eng
        status, _, exc = call(lambda: engine.set_policy(self.key(tok[1]), Policy(**p)))  # type: ignore[arg-type]
        self.check_status("tg_policy_set", status, want, exc)

    def cmd_titles(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 2 or len(tok) != a + 2:
            raise self.fail(
                "syntax: titles SCOPE [idle=T] [sending=T] [cooling=T] [ready_again=T] [locked=T] -> STATUS"
            )
        want = self.status(tok[a + 1])
        templates: Dict[str, Any] = {}
        for t in tok[2:a]:
            for role in ("idle", "sending", "cooling", "ready_again", "locked", "code_dead"):
                if opt(t, role) is not None:
                    templates[role] = _b(opt(t, role))
                    break
            else:
                raise self.fail(f"syntax: unknown titles option {show(t)}")
        engine = self.eng
        status, _, exc = call(lambda: engine.set_titles(self.key(tok[1]), Titles(**templates)))  # type: ignore[arg-type]
        self.check_status("tg_titles_set", status, want, exc)

    def cmd_send_begin(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 3 or len(tok) < a + 2:
            raise self.fail(
                "syntax: send-begin SCOPE SUBJECT [budget=NAME:KEY]... [null-budgets=N] -> STATUS "
                "[ticket=NAME] [wait=MS] [budget=INDEX|none]"
            )
        want = self.status(tok[a + 1])
        label: Optional[str] = None
        want_wait: Optional[int] = None
        budgets: Optional[List[Tuple[Optional[bytes], Optional[bytes]]]] = None
        null_budgets: Optional[int] = None
        want_index: Any = False  # False: not checked; None: no budget refused
        for t in tok[3:a]:
            if opt(t, "budget") is not None:
                v = str(opt(t, "budget"))
                if ":" not in v:
                    raise self.fail("syntax: budget=NAME:KEY")
                name, key = v.split(":", 1)
                budgets = (budgets or []) + [
                    (None if name == "(null)" else _b(name), None if key == "(null)" else _b(key))
                ]
            elif opt(t, "null-budgets") is not None:
                null_budgets = self.parse_int(self, opt(t, "null-budgets"))
            else:
                raise self.fail(f"syntax: unknown send-begin option {show(t)}")
        for t in tok[a + 2 :]:
            if opt(t, "ticket") is not None:
                label = opt(t, "ticket")
                if not label or (label.isascii() and label.isdigit()):
                    raise self.fail("syntax: a ticket NAME must not be a number")
            elif opt(t, "wait") is not None:
                want_wait = self.parse_int(self, opt(t, "wait"))
            elif opt(t, "budget") is not None:
                v = str(opt(t, "budget"))
                want_index = None if v == "none" else self.parse_int(self, v)
            else:
                raise self.fail(f"syntax: unknown send-begin result {show(t)}")
        engine = self.eng
        if null_budgets is not None:
            # A NULL array: only the raw C call can pass one.
            def raw_call() -> None:
                engine._lib.tg_send_begin_budgeted(
                    engine._h, self.key(tok[1]), self.key(tok[2]), None, null_budgets,
                    byref(ctypes.c_uint64()), byref(ctypes.c_int64()), byref(ctypes.c_size_t()))
            status, ticket, exc = call(raw_call)
        else:
            status, ticket, exc = call(
                lambda: engine.send_begin(self.key(tok[1]), self.key(tok[2]), budgets=budgets))  # type: ignore[arg-type]
        self.check_status("tg_send_begin", status, want, exc)
        if want_wait is not None:
            got = getattr(exc, "remaining_ms", None)
            if got != want_wait:
                raise self.fail(f"tg_send_begin: expected wait={want_wait}, got {got}")
        if want_index is not False:
            got_index = getattr(exc, "budget_index", None)
            if got_index != want_index:
                raise self.fail(f"tg_send_begin_budgeted: expected budget={want_index}, got {got_index}")
            if got_index is not None and budgets is not None:
                name, key = budgets[got_index]
                if (exc.budget, exc.budget_key) != (_dec(name), _dec(key)):  # type: ignore[union-attr]
                    raise self.fail(f"the Locked error names {exc.budget!r}/{exc.budget_key!r}")  # type: ignore[union-attr]
        if ticket is not None and label is not None:
            self.tickets[label] = ticket.id

    def cmd_send_end(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 3 or len(tok) < a + 2:
            raise self.fail("syntax: send-end TICKET ok|fail [retry=MS] -> STATUS [cooldown=MS]")
        want = self.status(tok[a + 1])
        name = str(tok[1]) if tok[1] is not None else "(null)"
        if name.isascii() and name.isdigit():
            tid = self.parse_id(name)
        elif name in self.tickets:
            tid = self.tickets[name]
        else:
            raise self.fail(f"syntax: no ticket named {name} (label one with send-begin ... -> OK ticket={name})")
        if tok[2] == "ok":
            outcome = int(tickgate.SendOutcome.SUCCEEDED)
        elif tok[2] == "fail":
            outcome = int(tickgate.SendOutcome.FAILED)
        else:
            outcome = self.parse_int(self, tok[2])
        retry = 0
        for t in tok[3:a]:
            if opt(t, "retry") is not None:
                retry = self.parse_int(self, opt(t, "retry"))
            else:
                raise self.fail(f"syntax: unknown send-end option {show(t)}")
        want_cd: Optional[int] = None
        for t in tok[a + 2 :]:
            if opt(t, "cooldown") is not None:
                want_cd = self.parse_int(self, opt(t, "cooldown"))
            else:
                raise self.fail(f"syntax: unknown send-end result {show(t)}")
        engine = self.eng
        status, result, exc = call(lambda: engine.send_end(tid, outcome, retry_after_ms=retry))
        self.check_status("tg_send_end", status, want, exc)
        if want_cd is not None:
            got = result.remaining_ms if result is not None else None
            if got != want_cd:
                raise self.fail(f"tg_send_end: expected cooldown={want_cd}, got {got}")

    def cmd_verified(self, tok: List[Token]) -> None:
        if len(tok) != 5 or tok[3] is not ARROW:
            raise self.fail("syntax: verified SCOPE SUBJECT -> STATUS")
        want = self.status(tok[4])
        engine = self.eng
        status, _, exc = call(lambda: engine.verified(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_verified", status, want, exc)

    def cmd_verify_failed(self, tok: List[Token]) -> None:
        if arrow(tok) != 3 or len(tok) not in (5, 6) or (len(tok) == 6 and opt(tok[5], "left") is None):
            raise self.fail("syntax: verify-failed SCOPE SUBJECT -> STATUS [left=N|none]")
        want = self.status(tok[4])
        engine = self.eng
        status, left, exc = call(lambda: engine.verify_failed(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_verify_failed", status, want, exc)
        if len(tok) == 6 and status == Status.OK:
            v = str(opt(tok[5], "left"))
            want_left = None if v == "none" else self.parse_int(self, v)
            if left != want_left:
                raise self.fail(f"tg_verify_failed: expected left={v}, got {left}")

    def cmd_budget(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 2 or len(tok) != a + 2:
            raise self.fail("syntax: budget NAME N/MS [N/MS]... -> STATUS")
        want = self.status(tok[a + 1])
        windows = []
        for t in tok[2:a]:
            if t is None or "/" not in t:
                raise self.fail("syntax: a window is N/MS")
            cap_text, ms_text = t.split("/", 1)
            cap, ms = self.parse_int(self, cap_text), self.parse_int(self, ms_text)
            if not 0 <= cap <= UINT32_MAX:
                raise self.fail(f"syntax: window cap out of range: {cap_text}")
            windows.append((cap, ms))
        engine = self.eng
        status, _, exc = call(lambda: engine.set_budget(self.key(tok[1]), windows_ms=windows))  # type: ignore[arg-type]
        self.check_status("tg_budget_set", status, want, exc)

    def cmd_budget_read(self, tok: List[Token]) -> None:
        if arrow(tok) != 3 or len(tok) < 5:
            raise self.fail("syntax: budget-read NAME KEY -> STATUS [used=N] [max=N] [window=MS] [frees=MS]")
        want = self.status(tok[4])
        engine = self.eng
        status, usage, exc = call(lambda: engine.budget_usage(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_budget_read", status, want, exc)
        fields = {"used": "used", "max": "max_sends", "window": "window_ms", "frees": "frees_in_ms"}
        for t in tok[5:]:
            name = str(t).split("=", 1)[0]
            if name not in fields or opt(t, name) is None:
                raise self.fail(f"syntax: unknown budget-read result {show(t)}")
            want_v = self.parse_int(self, opt(t, name))
            got = getattr(usage, fields[name], None)
            if got != want_v:
                raise self.fail(f"tg_budget_read: expected {name}={want_v}, got {got}")

    def cmd_budget_reset(self, tok: List[Token]) -> None:
        if len(tok) != 5 or tok[3] is not ARROW:
            raise self.fail("syntax: budget-reset NAME KEY -> STATUS")
        want = self.status(tok[4])
        engine = self.eng
        status, _, exc = call(lambda: engine.reset_budget(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_budget_reset", status, want, exc)

    def cmd_reopen(self, tok: List[Token]) -> None:
        if len(tok) != 1 or not self.reopenable:
            raise self.fail("syntax: reopen (on an engine opened with `store`)")
        if self.closed:
            raise self.fail("syntax: the engine is closed")
        self.deliver()
        status, _, exc = call(self.eng.close)
        self.check_status("tg_engine_close", status, Status.OK, exc)
        options = self.engine_options
        options["manual_boot_ms"] = options.get("manual_boot_ms", 0) + self.advanced_ms
        options["manual_wall_ms"] = options.get("manual_wall_ms", 0) + self.advanced_ms
        self.advanced_ms = 0
        status, engine, exc = call(lambda: Engine(**options))
        self.check_status("tg_engine_open (reopen)", status, Status.OK, exc)
        self.engine = engine

    def cmd_button(self, tok: List[Token]) -> None:
        if arrow(tok) != 3 or len(tok) not in (5, 7):
            raise self.fail("syntax: button SCOPE SUBJECT -> STATE MS TITLE (or -> E_STATUS)")
        want = Status.OK
        if len(tok) == 5:
            want = self.status(tok[4])
            if want == Status.OK:
                raise self.fail("syntax: button ... -> STATE MS TITLE for success")
        else:
            state = self.enum(ButtonState, "button state", tok[4])
            ms = self.parse_int(self, tok[5])
            title = tok[6]
        engine = self.eng
        status, b, exc = call(lambda: engine.button(self.key(tok[1]), self.key(tok[2])))  # type: ignore[arg-type]
        self.check_status("tg_button_get", status, want, exc)
        if b is None:
            return
        if (b.state, b.remaining_ms, b.display_seconds, b.enabled, b.title) != (
            state, ms, _ceil_s(ms), _enabled_in(state), title
        ):
            raise self.fail(
                f'tg_button_get: expected {state.name} {ms} ms ({_ceil_s(ms)} s) enabled={int(_enabled_in(state))} "{title}"\n'
                f"    got:      {_name(ButtonState, b.state)} {b.remaining_ms} ms ({b.display_seconds} s) "
                f'enabled={int(b.enabled)} "{b.title}"'
            )

    # -- commands: the login gate ---------------------------------------------------------

    def cmd_require(self, tok: List[Token]) -> None:
        a = arrow(tok)
        if a < 3 or len(tok) < a + 2:
            raise self.fail(
                "syntax: require NAME REALM needs_login=0|1 [coalesce=KEY] [no-cancel] -> RESULT [same=NAME]"
            )
        needs: Optional[bool] = None
        key: Optional[str] = None
        no_cancel = False
        for t in tok[3:a]:
            if opt(t, "needs_login") is not None:
                needs = self.parse_flag(opt(t, "needs_login"))
            elif opt(t, "coalesce") is not None:
                key = opt(t, "coalesce")
            elif t == "no-cancel":
                no_cancel = True
            else:
                raise self.fail(f"syntax: unknown require option {show(t)}")
        if needs is None:
            raise self.fail("syntax: require needs needs_login=0|1")
        result_token = tok[a + 1]
        want_result: Optional[RequireResult] = None
        if result_token is not None and result_token in RequireResult.__members__:
            want_result = RequireResult[result_token]
            want = Status.OK
        else:
            want = self.status(result_token)
            if want == Status.OK:
                raise self.fail("syntax: require ... -> RUNS_NOW|QUEUED|COALESCED for success")
        other: Optional[ReqRecord] = None
        for t in tok[a + 2 :]:
            if opt(t, "same") is not None:
                other = self.find_req(opt(t, "same"))
                if other is None:
                    raise self.fail(f"syntax: no request named {opt(t, 'same')}")
            else:
                raise self.fail(f"syntax: unknown require result {show(t)}")
        q = ReqRecord(str(tok[1]))
        with self.lock:
            self.reqs.append(q)
        engine = self.eng
        status, request, exc = call(
            lambda: engine.gate(self.key(tok[2])).require(  # type: ignore[arg-type]
                self.request_hook(q, ACTION),
                needs_login=needs,
                coalesce_key=_b(key),
                on_cancel=None if no_cancel else self.request_hook(q, CANCEL),
                _on_end=self.destructor_hook(q),
            )
        )
        with self.lock:
            if request is not None:
                q.required = True
                q.coalesced = request.result == RequireResult.COALESCED
                q.id = request.id
            destroyed = q.destroyed
        self.check_status("tg_gate_require", status, want, exc)
        if request is None:
            return
        if request.result != want_result:
            assert want_result is not None
            raise self.fail(
                f"tg_gate_require: expected {want_result.name}, got {_name(RequireResult, request.result)}"
            )
        if request.result == RequireResult.COALESCED and destroyed != 1:
            raise self.fail(
                f"tg_gate_require returned COALESCED, but the destructor of {q.name} ran {destroyed} times "
                "(expected once, before it returned)"
            )
        if request.result != RequireResult.COALESCED and not self.thread_mode and destroyed != 0:
            raise self.fail(f"tg_gate_require: the destructor of {q.name} ran inside the call")
        if other is not None and (not other.required or request.id != other.id):
            raise self.fail(f"tg_gate_require: expected the id of {other.name} ({other.id}), got {request.id}")

    def cmd_withdraw(self, tok: List[Token]) -> None:
        if len(tok) != 4 or tok[2] is not ARROW:
            raise self.fail("syntax: withdraw NAME -> STATUS")
        want = self.status(tok[3])
        name = tok[1]
        if name is not None and name.isascii() and name.isdigit():
            rid = self.parse_id(name)
        else:
            q = self.find_req(name)
            rid = q.id if q is not None and q.required else NEVER_ISSUED_ID
        engine = self.eng
        status, _, exc = call(lambda: engine.gate(b"-").withdraw(rid))
        self.check_status("tg_gate_withdraw", status, want, exc)
        if status != Status.OK:
            return
        with self.lock:
            owner = next((p for p in self.reqs if p.required and not p.coalesced and p.id == rid), None)
            if owner is not None:
                owner.withdrawn = True
                destroyed = owner.destroyed
        if owner is not None and destroyed != 1:
            raise self.fail(
                f"tg_gate_withdraw returned, but the destructor of {owner.name} ran {destroyed} times (expected once)"
            )

    def cmd_realm_call(self, tok: List[Token], command: str) -> None:
        a = arrow(tok)
        end = len(tok) if a < 0 else a
        is_login = command == "login"
        is_timeout = command == "request-timeout"
        if (
            end < 2
            or (a >= 0 and len(tok) != a + 2)
            or (is_timeout and end != 3)
            or (not is_login and not is_timeout and end != 2)
        ):
            extra = " [ttl=MS]" if is_login else " MS" if is_timeout else ""
            raise self.fail(f"syntax: {command} REALM{extra} [-> STATUS]")
        want = self.status(tok[a + 1]) if a >= 0 else Status.OK
        gate = self.eng.gate(self.key(tok[1]))  # type: ignore[arg-type]
        fn: Callable[[], Any]
        if is_timeout:
            ms = self.parse_int(self, tok[2])
            what, fn = "tg_gate_set_request_timeout", lambda: gate.set_request_timeout(timeout_ms=ms)
        elif is_login:
            ttl = 0
            for t in tok[2:end]:
                if opt(t, "ttl") is not None:
                    ttl = self.parse_int(self, opt(t, "ttl"))
                else:
                    raise self.fail(f"syntax: unknown login option {show(t)}")
            what, fn = "tg_gate_login_succeeded", lambda: gate.login_succeeded(session_ttl_ms=ttl)
        elif command == "logout":
            what, fn = "tg_gate_logout", gate.logout
        else:
            what, fn = "tg_gate_login_cancelled", gate.login_cancelled
        status, _, exc = call(fn)
        self.check_status(what, status, want, exc)

    def cmd_session(self, tok: List[Token]) -> None:
        if arrow(tok) != 2 or len(tok) not in (4, 5):
            raise self.fail("syntax: session REALM -> 0|1 MS (or -> E_STATUS)")
        want = Status.OK
        if len(tok) == 4:
            want = self.status(tok[3])
            if want == Status.OK:
                raise self.fail("syntax: session REALM -> 0|1 MS for success")
        else:
            want_in = self.parse_flag(tok[3])
            want_ms = self.parse_int(self, tok[4])
        engine = self.eng
        status, s, exc = call(lambda: engine.gate(self.key(tok[1])).session())  # type: ignore[arg-type]
        self.check_status("tg_gate_session", status, want, exc)
        if s is not None and (s.logged_in, s.remaining_ms) != (want_in, want_ms):
            raise self.fail(
                f"tg_gate_session: expected {int(want_in)} {want_ms}, got {int(s.logged_in)} {s.remaining_ms}"
            )

    def cmd_destroyed(self, tok: List[Token]) -> None:
        if len(tok) not in (2, 3):
            raise self.fail("syntax: destroyed NAME [COUNT]")
        want = self.parse_int(self, tok[2]) if len(tok) == 3 else 1
        q = self.find_req(tok[1])
        if q is None:
            raise self.fail(f"syntax: no request named {show(tok[1])}")
        self.deliver()
        with self.lock:
            got = q.destroyed
        if got != want:
            raise self.fail(f"the destructor of request {q.name} ran {got} times (expected {want})")

    def cmd_close(self, tok: List[Token]) -> None:
        if len(tok) != 1:
            raise self.fail("syntax: close")
        if self.closed:
            raise self.fail("syntax: the engine is already closed")
        status, _, exc = call(self.eng.close)
        with self.lock:
            self.closed = True
        self.check_status("tg_engine_close", status, Status.OK, exc)

    # -- checks of what the callbacks received ----------------------------------------------

    def parse_check(self, tok: List[Token]) -> Optional[Check]:
        """A check command (event, gate-event, action, cancelled), or None for any other command."""
        command = tok[0]
        if command == "event":
            if len(tok) < 7:
                raise self.fail(
                    "syntax: event NAME KIND SCOPE SUBJECT REMAINING_MS DISPLAY [state=S] [enabled=0|1] "
                    "[title=T] [duration=MS]"
                )
            fields: Dict[str, Any] = {
                "scope": tok[3],
                "subject": tok[4],
            }
            kind = self.kind(tok[2])
            fields["rem"] = self.parse_int(self, tok[5])
            fields["disp"] = self.parse_int(self, tok[6])
            for t in tok[7:]:
                if opt(t, "state") is not None:
                    fields["state"] = self.enum(ButtonState, "button state", opt(t, "state"))
                elif opt(t, "enabled") is not None:
                    fields["enabled"] = self.parse_flag(opt(t, "enabled"))
                elif opt(t, "title") is not None:
                    fields["title"] = opt(t, "title")
                elif opt(t, "duration") is not None:
                    fields["duration"] = self.parse_int(self, opt(t, "duration"))
                else:
                    raise self.fail(f"syntax: unknown event field {show(t)}")
            return Check(EVENT, self.lineno, str(tok[1]), kind, fields)
        if command == "gate-event":
            if len(tok) < 3:
                raise self.fail("syntax: gate-event NAME KIND [logged_in=0|1] [queued=N] [remaining=MS]")
            kind = self.enum(GateEventKind, "gate event kind", tok[2])
            fields = {}
            for t in tok[3:]:
                if opt(t, "logged_in") is not None:
                    fields["logged_in"] = self.parse_flag(opt(t, "logged_in"))
                elif opt(t, "queued") is not None:
                    fields["queued"] = self.parse_int(self, opt(t, "queued"))
                elif opt(t, "remaining") is not None:
                    fields["remaining"] = self.parse_int(self, opt(t, "remaining"))
                else:
                    raise self.fail(f"syntax: unknown gate-event field {show(t)}")
            return Check(GATE, self.lineno, str(tok[1]), kind, fields)
        if command in ("action", "cancelled"):
            is_action = command == "action"
            if len(tok) != (2 if is_action else 3):
                raise self.fail("syntax: action NAME" if is_action else "syntax: cancelled NAME REASON")
            fields = {} if is_action else {"reason": self.enum(CancelReason, "cancel reason", tok[2])}
            return Check(REQUEST, self.lineno, str(tok[1]), ACTION if is_action else CANCEL, fields)
        return None

    def check_record(self, stream: int, r: Received) -> None:
        """What every record must be, whatever the file checks."""
        if stream == REQUEST:
            return  # the bindings do not pass the request id on
        sub = r.sub
        e = r.payload
        if sub.subscription is not None and e.subscription != sub.subscription.id:
            what = "gate event" if stream == GATE else "event"
            raise self.fail(
                f"{what}.subscription is {e.subscription}, but the subscribe call gave {sub.name} "
                f"the id {sub.subscription.id}"
            )
        if stream == EVENT and e.enabled != _enabled_in(e.state):
            raise self.fail(f"event of {sub.name}: enabled={int(e.enabled)} with state {_name(ButtonState, e.state)}")
        if stream == GATE and e.realm != sub.realm:
            raise self.fail(f"gate event of {sub.name}: realm {show(e.realm)}, subscribed to {show(sub.realm)}")

    def check_next(self, check: Check) -> None:
        self.deliver()
        s = check.stream
        with self.lock:
            got = self.streams[s][self.checked[s]] if self.checked[s] < len(self.streams[s]) else None
            if got is not None:
                self.checked[s] += 1
        if got is None:
            raise self.fail(f"expected: {check.format()}\n    got:      nothing")
        if not check.matches(got):
            raise self.fail(f"expected: {check.format()}\n    got:      {format_received(s, got)}")
        self.check_record(s, got)

    def check_group(self, group: List[Check]) -> None:
        """The end of an any-order block: for each FIFO, its next K records are
        the block's K checks of that FIFO, in some order."""
        self.deliver()
        for s in STREAMS:
            checks = [c for c in group if c.stream == s]
            k = len(checks)
            if k == 0:
                continue
            with self.lock:
                window = self.streams[s][self.checked[s] : self.checked[s] + k]
            used = [False] * k

            def assign(i: int) -> bool:
                if i == k:
                    return True
                for j in range(k):
                    if not used[j] and checks[i].matches(window[j]):
                        used[j] = True
                        if assign(i + 1):
                            return True
                        used[j] = False
                return False

            if len(window) == k and assign(0):
                for r in window:
                    self.check_record(s, r)
                self.checked[s] += k
                continue
            expected = "\n".join(f"      {c.format()}" for c in checks)
            got = "\n".join(f"      {format_received(s, r)}" for r in window)
            if len(window) < k:
                got += ("\n" if got else "") + f"      (only {len(window)})"
            raise self.fail(
                f"any-order block (line {self.group_line}) did not match: expected, in any order:\n"
                f"{expected}\n    got:\n{got}"
            )

    def cmd_no_events(self, tok: List[Token]) -> None:
        if len(tok) != 1:
            raise self.fail("syntax: no-events")
        self.deliver()
        with self.lock:
            pending = [
                (s, self.streams[s][self.checked[s]]) for s in STREAMS if self.checked[s] < len(self.streams[s])
            ]
        if pending:
            s, r = pending[0]
            raise self.fail(f"expected: no more events\n    got:      {format_received(s, r)}")

    # -- the file ------------------------------------------------------------------

    def cmd_skip_on(self, tok: List[Token]) -> None:
        """skip-on STORE REASON: before `engine`; on that store the file is
        not run (it cannot mean the same thing there), REASON says why."""
        if len(tok) != 3 or arrow(tok) >= 0 or tok[2] is None or tok[2] == "":
            raise self.fail("syntax: skip-on memory|sqlite|redis REASON")
        if self.engine is not None:
            raise self.fail("syntax: skip-on comes before the engine line")
        if tok[1] not in STORES:
            raise self.fail(f"syntax: unknown store {show(tok[1])} (memory, sqlite or redis)")
        if tok[1] == self.store:
            mode = self.override or "as written"
            raise ScenarioSkipped(f"{self.name} ({mode}, {self.store}): {tok[2]}")

    def command(self, tok: List[Token]) -> None:
        command = tok[0]
        if command == "engine":
            self.cmd_engine(tok)
            return
        if command == "skip-on":
            self.cmd_skip_on(tok)
            return
        if self.engine is None:
            raise self.fail("syntax: the first command must be `engine`")
        check = self.parse_check(tok)
        if self.group is not None:
            if check is None and command == "end" and len(tok) == 1:
                group, self.group = self.group, None
                self.check_group(group)
            elif check is None:
                raise self.fail("syntax: only event, gate-event, action and cancelled (and end) in an any-order block")
            elif len(self.group) == MAX_GROUP:
                raise self.fail(f"syntax: more than {MAX_GROUP} checks in an any-order block")
            else:
                self.group.append(check)
            return
        if check is not None:
            self.check_next(check)
            return
        if command == "any-order" and len(tok) == 1:
            self.group, self.group_line = [], self.lineno
            return
        handlers: Dict[str, Callable[[List[Token]], None]] = {
            "start": self.cmd_start,
            "cancel": self.cmd_cancel,
            "cancel-scope": lambda t: self.cmd_cancel_many(t, False),
            "cancel-all": lambda t: self.cmd_cancel_many(t, True),
            "remaining": self.cmd_remaining,
            "list": self.cmd_list,
            "subscribe": self.cmd_subscribe,
            "unsubscribe": self.cmd_unsubscribe,
            "advance": self.cmd_advance,
            "no-events": self.cmd_no_events,
            "policy": self.cmd_policy,
            "titles": self.cmd_titles,
            "send-begin": self.cmd_send_begin,
            "send-end": self.cmd_send_end,
            "verified": self.cmd_verified,
            "verify-failed": self.cmd_verify_failed,
            "budget": self.cmd_budget,
            "budget-read": self.cmd_budget_read,
            "budget-reset": self.cmd_budget_reset,
            "reopen": self.cmd_reopen,
            "button": self.cmd_button,
            "gate-subscribe": self.cmd_gate_subscribe,
            "require": self.cmd_require,
            "withdraw": self.cmd_withdraw,
            "login": lambda t: self.cmd_realm_call(t, "login"),
            "login-cancelled": lambda t: self.cmd_realm_call(t, "login-cancelled"),
            "logout": lambda t: self.cmd_realm_call(t, "logout"),
            "request-timeout": lambda t: self.cmd_realm_call(t, "request-timeout"),
            "session": self.cmd_session,
            "destroyed": self.cmd_destroyed,
            "close": self.cmd_close,
        }
        handler = handlers.get(str(command)) if command is not ARROW else None
        if handler is None:
            raise self.fail(f"syntax: unknown command {show(command)}")
        handler(tok)

    def run(self, text: str) -> None:
        last_line = 0
        try:
            for self.lineno, raw in enumerate(text.split("\n"), 1):
                last_line = self.lineno
                self.text = raw.rstrip("\r\n")
                try:
                    tok = tokenize(raw)
                except TokenError as exc:
                    raise self.fail(f"syntax: {exc}") from None
                if not tok:
                    continue
                self.command(tok)
                self.check_invariants()
            if text.endswith("\n"):
                last_line -= 1  # the empty piece after the final newline
            self.lineno = last_line
            if self.engine is None:
                raise self.fail("syntax: no engine line")
            if self.group is not None:
                raise self.fail("syntax: any-order block without `end`")
        finally:
            if self.engine is not None and not self.closed:
                self.engine.close()
                with self.lock:
                    self.closed = True
            if self.store_dir is not None:
                shutil.rmtree(self.store_dir, ignore_errors=True)
        # After close: every destructor ran once (never for a failed
        # subscribe or require), and no callback ran after close returned.
        self.lineno, self.text = last_line, "(end of file, after tg_engine_close)"
        if self.thread_mode:
            time.sleep(0.02)
        self.check_invariants()
        with self.lock:
            for sub in self.subs:
                want = 1 if sub.subscribed else 0
                if sub.destroyed != want:
                    failed = "" if sub.subscribed else " (failed subscribe)"
                    raise self.fail(
                        f"after close the destructor of {sub.name}{failed} ran {sub.destroyed} times (expected {want})"
                    )
            for q in self.reqs:
                want = 1 if q.required else 0
                if q.destroyed != want:
                    failed = "" if q.required else " (failed require)"
                    raise self.fail(
                        f"after close the destructor of request {q.name}{failed} ran {q.destroyed} times "
                        f"(expected {want})"
                    )
            late = sum(1 for s in STREAMS for r in self.streams[s] if r.after_close)
        if late:
            raise self.fail(f"{late} callbacks ran after tg_engine_close returned")


_PREFIXES = itertools.count(1)


def run_text(text: str, name: str = "<scenario>", delivery: Optional[str] = None,
             redis_url: Optional[str] = None, redis_prefix: Optional[str] = None,
             sqlite_dir: Union[None, str, "os.PathLike[str]"] = None) -> Run:
    """Run scenario text; raises ScenarioFailure at its first mismatch, and
    ScenarioSkipped if the text says `skip-on` this run's store."""
    if redis_url is not None and sqlite_dir is not None:
        raise ValueError("redis_url or sqlite_dir, not both")
    run = Run(name, override=delivery, redis_url=redis_url, redis_prefix=redis_prefix,
              sqlite_dir=None if sqlite_dir is None else os.fspath(sqlite_dir))
    run.run(text)
    return run


def run_file(path: Union[str, "os.PathLike[str]"], delivery: Optional[str] = None,
             redis_url: Optional[str] = None, redis_prefix: Optional[str] = None,
             sqlite_dir: Union[None, str, "os.PathLike[str]"] = None) -> Run:
    p = Path(path)
    return run_text(p.read_text(encoding="utf-8"), p.name, delivery, redis_url, redis_prefix, sqlite_dir)


def main(argv: List[str]) -> int:
    modes: List[Optional[str]] = [None]
    files = []
    sqlite_dir: Optional[str] = None
    for arg in argv:
        if arg.startswith("--delivery="):
            value = arg.split("=", 1)[1]
            modes = list(DELIVERIES) if value == "both" else [value]
        elif arg == "--sqlite":
            sqlite_dir = tempfile.gettempdir()
        else:
            files.append(arg)
    passed = failed = skipped = 0
    for f in files:
        for mode in modes:
            try:
                run_file(f, mode, sqlite_dir=sqlite_dir)
                passed += 1
                print(f"ok   {f} ({mode or 'as written'})")
            except ScenarioSkipped as exc:
                skipped += 1
                print(f"SKIP {exc}")
            except ScenarioFailure as exc:
                failed += 1
                print(f"FAIL {exc}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or not files else 77 if skipped and not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
