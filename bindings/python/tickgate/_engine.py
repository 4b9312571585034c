"""The Engine, its subscriptions, and the callback machinery behind them."""

from __future__ import annotations

import atexit
import ctypes
import logging
import math
import numbers
import os
import threading
import weakref
from ctypes import byref, c_int, c_int64, c_size_t
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    List,
    Optional,
    Tuple,
    Union,
)

from . import _ffi
from ._enums import (
    ButtonState,
    CancelReason,
    ClockKind,
    Delivery,
    EventKind,
    GateEventKind,
    SendOutcome,
)
from ._managed import Managed
from ._slab import Slab
from ._types import (
    Button,
    CountdownInfo,
    Event,
    GateEvent,
    Policy,
    Remaining,
    Titles,
    display_seconds_of,
)
from .errors import (
    Closed,
    Expired,
    InvalidArgument,
    InvalidDuration,
    InvalidKey,
    InvalidTemplate,
    NotFound,
)

__all__ = [
    "Engine",
    "Subscription",
    "SendTicket",
    "Key",
    "Seconds",
    "EventCallback",
    "CallbackErrorHook",
    "set_callback_error_hook",
    "get_callback_error_hook",
]

if TYPE_CHECKING:
    from ._gate import Gate

_log = logging.getLogger("tickgate")

#: A scope or subject: ``str`` (encoded as UTF-8) or ``bytes`` (passed as is).
Key = Union[str, bytes]
#: A span of time in seconds (int, float, Decimal, Fraction) or a timedelta;
#: rounded half up to the millisecond.
Seconds = Union[float, int, Decimal, Fraction, timedelta]
#: An observer: called with each :class:`Event`.
EventCallback = Callable[[Event], Any]
#: Receives an exception raised by a callback, and the event (None if the
#: event itself could not be built).
CallbackErrorHook = Callable[[BaseException, Optional[Event]], Any]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# ---------------------------------------------------------------------------
# Reporting exceptions raised by callbacks
# ---------------------------------------------------------------------------

_error_hook: Optional[CallbackErrorHook] = None


def set_callback_error_hook(hook: Optional[CallbackErrorHook]) -> Optional[CallbackErrorHook]:
    """Route exceptions raised inside event callbacks to ``hook(exception, event)``.

    By default (``hook=None``) they are logged on the ``"tickgate"`` logger at
    ERROR level with their traceback. Either way they never propagate into
    the library: the engine thread and the process carry on, and the
    remaining callbacks run. The hook runs on the thread of the callback. If
    the hook itself raises, both exceptions are logged. Returns the previous
    hook.
    """
    global _error_hook
    previous, _error_hook = _error_hook, hook
    return previous


def get_callback_error_hook() -> Optional[CallbackErrorHook]:
    """The hook set by :func:`set_callback_error_hook`, or None."""
    return _error_hook


def _report(exc: BaseException, event: Optional[Event], callback: object) -> None:
    hook = _error_hook
    if hook is not None:
        try:
            hook(exc, event)
            return
        except BaseException as hook_exc:  # noqa: BLE001
            _log.error("tickgate: the callback error hook raised", exc_info=hook_exc)
    _log.error(
        "tickgate: exception in callback %r for %r", callback, event, exc_info=exc
    )


# ---------------------------------------------------------------------------
# Slots and the module-level trampolines
# ---------------------------------------------------------------------------


class _SubscriptionSlot:
    """What a subscription's slot holds: the user's callback, and its end."""

    __slots__ = ("callback", "ended", "on_end", "id", "__weakref__")

    def __init__(self, callback: EventCallback) -> None:
        self.callback: Optional[EventCallback] = callback
        self.ended = threading.Event()
        #: Internal hooks run when the library's destructor frees the slot.
        self.on_end: List[Callable[[], None]] = []
        self.id: Optional[int] = None

    def finish(self) -> None:
        # Drop the user's callback: the library will not call it again, and
        # a handle kept on the Subscription must not keep its closure alive.
        self.callback = None
        self.ended.set()
        hooks, self.on_end = self.on_end, []
        for hook in hooks:
            try:
                hook()
            except BaseException as exc:  # noqa: BLE001
                _log.error("tickgate: error in an end-of-subscription hook", exc_info=exc)


class _RequestSlot:
    """What a gate request's slot holds: its action and cancel callbacks."""

    __slots__ = ("action", "on_cancel", "outcome", "reason", "ended", "on_end", "id", "__weakref__")

    def __init__(
        self, action: Callable[[], Any], on_cancel: Optional[Callable[[Any], Any]]
    ) -> None:
        self.action: Optional[Callable[[], Any]] = action
        self.on_cancel = on_cancel
        #: "ran", "cancelled", or None (withdrawn, coalesced, dropped by close).
        self.outcome: Optional[str] = None
        self.reason: Optional[Any] = None
        self.ended = threading.Event()
        self.on_end: List[Callable[[], None]] = []
        self.id: Optional[int] = None

    def run(self) -> None:
        self.outcome = "ran"
        action = self.action
        if action is not None:
            try:
                action()
            except BaseException as exc:  # noqa: BLE001
                _report(exc, None, action)

    def cancel(self, reason: Any) -> None:
        self.outcome = "cancelled"
        self.reason = reason
        on_cancel = self.on_cancel
        if on_cancel is not None:
            try:
                on_cancel(reason)
            except BaseException as exc:  # noqa: BLE001
                _report(exc, None, on_cancel)

    def finish(self) -> None:
        self.action = self.on_cancel = None
        self.ended.set()
        hooks, self.on_end = self.on_end, []
        for hook in hooks:
            try:
                hook()
            except BaseException as exc:  # noqa: BLE001
                _log.error("tickgate: error in an end-of-request hook", exc_info=exc)


#: Every slot C holds as user_data (subscriptions, realm subscriptions, gate
#: requests), freed by the library's destructor. One table, so that the one
#: destructor trampoline finds any of them.
_slots: "Slab[Any]" = Slab()
#: Visit slots: user_data of tg_countdown_list, freed when the call returns.
_visit_slots: "Slab[List[CountdownInfo]]" = Slab()

class _Stray:
    """Calls from C that found no slot: a destructor run twice, or a callback
    after its destructor. The library promises neither happens; tests check
    these stay 0."""

    events = 0
    destroys = 0
    #: Events whose struct_size was smaller than this package's tg_event.
    undersized = 0


def _decode(raw: Optional[bytes]) -> str:
    return "" if raw is None else raw.decode("utf-8", "surrogateescape")


def _enum_or_int(enum: Any, value: int) -> Any:
    try:
        return enum(value)
    except ValueError:
        return int(value)


_EVENT_SIZE = ctypes.sizeof(_ffi.tg_event)
_GATE_EVENT_SIZE = ctypes.sizeof(_ffi.tg_gate_event)


def _event_from_c(ev: _ffi.tg_event) -> Event:
    if ev.struct_size < _EVENT_SIZE:
        _Stray.undersized += 1
    return Event(
        kind=_enum_or_int(EventKind, ev.kind),
        scope=_decode(ev.scope),
        subject=_decode(ev.subject),
        remaining_ms=int(ev.remaining_ms),
        display_seconds=int(ev.display_seconds),
        duration_ms=int(ev.duration_ms),
        subscription=int(ev.subscription),
        state=_enum_or_int(ButtonState, ev.state),
        enabled=bool(ev.enabled),
        title=_decode(ev.title),
    )


def _gate_event_from_c(ev: _ffi.tg_gate_event) -> GateEvent:
    if ev.struct_size < _GATE_EVENT_SIZE:
        _Stray.undersized += 1
    return GateEvent(
        kind=_enum_or_int(GateEventKind, ev.kind),
        realm=_decode(ev.realm),
        logged_in=bool(ev.logged_in),
        session_remaining_ms=int(ev.session_remaining_ms),
        queued=int(ev.queued),
        subscription=int(ev.subscription),
    )


def _run_callback(user_data: Optional[int], make: Callable[[], Any]) -> None:
    """Call the slot's callback with make(); report whatever it raises."""
    slot = _slots.get(user_data)
    callback = getattr(slot, "callback", None)
    if callback is None:
        _Stray.events += 1
        return
    event = None
    try:
        event = make()
        callback(event)
    except BaseException as exc:  # noqa: BLE001
        _report(exc, event, callback)


def _event_entry(event_p: Any, user_data: Optional[int]) -> None:
    # Runs on the engine thread or inside tg_engine_dispatch. ctypes holds
    # the GIL for us; nothing may escape into C.
    try:
        _run_callback(user_data, lambda: _event_from_c(event_p.contents))
    except BaseException:  # noqa: BLE001 - last resort (e.g. at shutdown)
        pass


def _gate_event_entry(event_p: Any, user_data: Optional[int]) -> None:
    try:
        _run_callback(user_data, lambda: _gate_event_from_c(event_p.contents))
    except BaseException:  # noqa: BLE001
        pass


def _action_entry(request: int, user_data: Optional[int]) -> None:
    try:
        slot = _slots.get(user_data)
        if not isinstance(slot, _RequestSlot):
            _Stray.events += 1
            return
        slot.run()
    except BaseException:  # noqa: BLE001
        pass


def _cancel_entry(request: int, reason: int, user_data: Optional[int]) -> None:
    try:
        slot = _slots.get(user_data)
        if not isinstance(slot, _RequestSlot):
            _Stray.events += 1
            return
        slot.cancel(_enum_or_int(CancelReason, reason))
    except BaseException:  # noqa: BLE001
        pass


def _destroy_entry(user_data: Optional[int]) -> None:
    try:
        slot = _slots.deallocate(user_data)
        if slot is None:
            _Stray.destroys += 1
        else:
            slot.finish()
    except BaseException:  # noqa: BLE001
        pass


def _visit_entry(info_p: Any, user_data: Optional[int]) -> int:
    try:
        items = _visit_slots.get(user_data)
        if items is None:
            return 1
        info = info_p.contents
        items.append(
            CountdownInfo(
                scope=_decode(info.scope),
                subject=_decode(info.subject),
                remaining_ms=int(info.remaining_ms),
                display_seconds=int(info.display_seconds),
                duration_ms=int(info.duration_ms),
            )
        )
        return 0
    except BaseException:  # noqa: BLE001
        return 1


# One trampoline of each kind for the whole process: module globals, never
# collected while the module lives.
_on_event = _ffi.tg_event_fn(_event_entry)
_on_gate_event = _ffi.tg_gate_event_fn(_gate_event_entry)
_on_action = _ffi.tg_action_fn(_action_entry)
_on_cancel = _ffi.tg_cancel_fn(_cancel_entry)
_on_destroy = _ffi.tg_destroy_fn(_destroy_entry)
_on_visit = _ffi.tg_countdown_visit_fn(_visit_entry)
# A NULL visit function (ctypes refuses None for a CFUNCTYPE argument).
_no_visit = _ffi.tg_countdown_visit_fn()


def live_slots() -> int:
    """How many subscription slots are held for C right now (for tests and leak checks)."""
    return len(_slots)


def stray_calls() -> Tuple[int, int, int]:
    """Broken promises seen by the trampolines, all 0 when the library keeps
    them: (callbacks for a slot already freed, destructors for a slot already
    freed, events whose struct_size is smaller than the header's struct)."""
    return _Stray.events, _Stray.destroys, _Stray.undersized


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------


def _key(value: Optional[Key], role: str) -> Optional[bytes]:
    """A key for C: UTF-8 bytes, or None for NULL (which the library rejects)."""
    if value is None:
        return None
    if isinstance(value, str):
        # surrogatepass: lone surrogates become bytes the library rejects as
        # invalid UTF-8, with its own message, instead of a UnicodeError here.
        data = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"{role} must be str or bytes, not {type(value).__name__}")
    if b"\0" in data:
        raise InvalidKey(f"{role} contains a NUL byte")
    return data


def _clamp64(value: int) -> int:
    # Out-of-range values reach the library as the nearest int64, which it
    # rejects with its own message (ctypes would silently wrap them).
    return max(_INT64_MIN, min(_INT64_MAX, value))


def _to_ms(
    seconds: Optional[Seconds], ms: Optional[int], what: str, default: Optional[int] = None
) -> Optional[int]:
    """Seconds (or a timedelta) or integer milliseconds -> int milliseconds."""
    if seconds is not None and ms is not None:
        raise TypeError(f"give {what} or {what}_ms, not both")
    if ms is not None:
        if isinstance(ms, bool) or not isinstance(ms, numbers.Integral):
            raise TypeError(f"{what}_ms must be an int, not {type(ms).__name__}")
        return _clamp64(int(ms))
    if seconds is None:
        return default
    if isinstance(seconds, timedelta):
        whole = (seconds.days * 86400 + seconds.seconds) * 1000
        return _clamp64(whole + (seconds.microseconds + 500) // 1000)
    if isinstance(seconds, bool) or not isinstance(seconds, (numbers.Real, Decimal)):
        raise TypeError(
            f"{what} must be seconds (a number) or a timedelta, not {type(seconds).__name__}"
        )
    if isinstance(seconds, numbers.Integral):
        return _clamp64(int(seconds) * 1000)
    if isinstance(seconds, (float, Decimal)) and not math.isfinite(seconds):
        raise InvalidDuration(f"{what} {seconds!r} is not a finite number of seconds")
    # Exact arithmetic, rounded half up to the millisecond (0.3 s is 300 ms,
    # 0.0005 s is 1 ms).
    return _clamp64(math.floor(Fraction(seconds) * 1000 + Fraction(1, 2)))


def _wall_ms(
    value: "Optional[Seconds | datetime]", ms: Optional[int], what: str, default: Optional[int] = None
) -> Optional[int]:
    """A wall-clock reading: an aware datetime, seconds since the epoch, or ms."""
    if isinstance(value, datetime):
        if ms is not None:
            raise TypeError(f"give {what} or {what}_ms, not both")
        if value.tzinfo is None:
            raise ValueError(f"{what} must be an aware datetime (with tzinfo)")
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return _to_ms(delta, None, what)
    return _to_ms(value, ms, what, default)


def _coerce(enum: Any, value: Any, aliases: "dict[str, Any]") -> int:
    if isinstance(value, str):
        try:
            return int(aliases[value.lower().replace("-", "_")])
        except KeyError:
            raise ValueError(
                f"unknown {enum.__name__} {value!r}; use one of {sorted(aliases)}"
            ) from None
    # Ints outside the enum go to the library, which answers InvalidArgument.
    return int(value)


_DELIVERY_NAMES = {
    "engine_thread": Delivery.ENGINE_THREAD,
    "thread": Delivery.ENGINE_THREAD,
    "engine": Delivery.ENGINE_THREAD,
    "host_thread": Delivery.HOST_THREAD,
    "host": Delivery.HOST_THREAD,
}
_CLOCK_NAMES = {"system": ClockKind.SYSTEM, "manual": ClockKind.MANUAL}


# ---------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------

_live_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()


class Engine(Managed[int]):
    """A Tickgate engine: countdowns keyed by (scope, subject), and their observers.

    ``Engine()`` opens an in-memory engine with the library's defaults: the
    real clock (CLOCK_BOOTTIME) and callbacks on the engine's own thread.

    Keyword options:

    ``delivery``
        :class:`Delivery` (or ``"thread"`` / ``"host"``). With
        ``HOST_THREAD`` the engine starts no thread: poll :meth:`fileno` and
        call :meth:`dispatch` (or use :class:`tickgate.aio.AsyncEngine`).
    ``clock``
        :class:`ClockKind` (or ``"system"`` / ``"manual"``). The manual
        clock moves only by :meth:`advance`.
    ``tick_interval`` / ``tick_interval_ms``
        Default tick interval of countdowns, in seconds or in integer
        milliseconds (default: one tick per second).
    ``store_path``
        A SQLite file that keeps cooldowns, send history, policies, titles
        and sessions across restarts (None: memory only).
        ``store_commit_delay`` / ``_ms`` group commits (default: commit each
        change before its call returns; see :meth:`flush`);
        ``store_start_fresh_if_corrupt`` moves a corrupt store aside instead
        of raising :class:`tickgate.StoreCorrupt`; ``store_full_sync`` syncs
        every commit to disk.
    ``manual_boot`` / ``manual_wall`` / ``manual_boot_id``
        MANUAL clock only: the first readings of its boot clock and its wall
        clock (seconds, or ``_ms``; the wall clock also takes an aware
        ``datetime``), and its boot id.
    ``library``
        Path of libtickgate.so, tried before ``$TICKGATE_LIBRARY`` (see
        :func:`tickgate.load_library`).

    Durations: every method takes seconds (``int``, ``float``, ``Decimal``
    or a ``timedelta``, rounded to the millisecond) or, through a ``*_ms``
    keyword, exact integer milliseconds. Keys are ``str`` (UTF-8) or
    ``bytes``, 1 to 256 bytes.

    Every method may be called from any thread, and from inside a callback.
    Failures raise :class:`tickgate.TickgateError` subclasses; use after
    :meth:`close` raises :class:`tickgate.Closed`.
    """

    def __init__(
        self,
        *,
        delivery: Union[Delivery, int, str] = Delivery.ENGINE_THREAD,
        clock: Union[ClockKind, int, str] = ClockKind.SYSTEM,
        tick_interval: Optional[Seconds] = None,
        tick_interval_ms: Optional[int] = None,
        store_path: "Optional[str | os.PathLike[str]]" = None,
        store_commit_delay: Optional[Seconds] = None,
        store_commit_delay_ms: Optional[int] = None,
        store_start_fresh_if_corrupt: bool = False,
        store_full_sync: bool = False,
        manual_boot: Optional[Seconds] = None,
        manual_boot_ms: Optional[int] = None,
        manual_wall: "Optional[Seconds | datetime]" = None,
        manual_wall_ms: Optional[int] = None,
        manual_boot_id: Optional[str] = None,
        library: "Optional[str | os.PathLike[str]]" = None,
    ) -> None:
        self._lib = (
            _ffi.load_library(library).cdll if library is not None else _ffi.library()
        )
        options = _ffi.tg_engine_options()
        self._lib.tg_engine_options_init(byref(options), ctypes.sizeof(options))
        options.delivery = _coerce(Delivery, delivery, _DELIVERY_NAMES)
        options.clock = _coerce(ClockKind, clock, _CLOCK_NAMES)
        options.tick_interval_ms = _to_ms(tick_interval, tick_interval_ms, "tick_interval", 0)
        # The struct holds these bytes objects (ctypes keeps them alive)
        # until tg_engine_open has copied them.
        if store_path is not None:
            options.store_path = os.fsencode(store_path)
        options.store_commit_delay_ms = _to_ms(
            store_commit_delay, store_commit_delay_ms, "store_commit_delay", 0
        )
        options.store_flags = (
            (_ffi.TG_STORE_START_FRESH_IF_CORRUPT if store_start_fresh_if_corrupt else 0)
            | (_ffi.TG_STORE_FULL_SYNC if store_full_sync else 0)
        )
        options.manual_boot_ms = _to_ms(manual_boot, manual_boot_ms, "manual_boot", 0)
        options.manual_wall_ms = _wall_ms(manual_wall, manual_wall_ms, "manual_wall", 0)
        if manual_boot_id is not None:
            options.manual_boot_id = manual_boot_id.encode("utf-8")
        handle = _ffi.tg_engine_p()
        self._lib.tg_engine_open(byref(options), byref(handle))
        self._delivery = Delivery(options.delivery)
        self._clock = ClockKind(options.clock)
        self._set_handle(int(handle.value or 0))
        _live_engines.add(self)

    # -- plumbing ----------------------------------------------------------

    @property
    def _h(self) -> int:
        handle = self._handle_or_none()
        if handle is None:
            raise Closed("the engine was never opened")
        # After close the handle stays: the library keeps a tombstone and
        # answers TG_E_CLOSED, which errcheck turns into Closed.
        return handle

    def _delete(self, handle: int) -> None:
        _live_engines.discard(self)
        try:
            self._lib.tg_engine_close(handle)
        except Closed:
            pass

    @property
    def handle(self) -> int:
        """The raw ``tg_engine *`` value (for ctypes interop)."""
        return self._h

    @property
    def delivery(self) -> Delivery:
        return self._delivery

    @property
    def clock(self) -> ClockKind:
        return self._clock

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<tickgate.Engine {state} delivery={self._delivery.name} "
            f"clock={self._clock.name}>"
        )

    # -- countdowns --------------------------------------------------------

    def start(
        self,
        scope: Key,
        subject: Key,
        duration: Optional[Seconds] = None,
        *,
        duration_ms: Optional[int] = None,
        tick_interval: Optional[Seconds] = None,
        tick_interval_ms: Optional[int] = None,
        restart: bool = False,
    ) -> Remaining:
        """Start a countdown of ``duration`` for (scope, subject).

        Observers get a tick every ``tick_interval`` (default: the engine's)
        and a FINISHED at the deadline. If the key is already counting down,
        raises :class:`tickgate.CoolingDown` with ``remaining`` /
        ``remaining_ms``, unless ``restart=True`` replaces it.
        Returns the remaining time (the full duration).
        """
        ms = _to_ms(duration, duration_ms, "duration")
        if ms is None:
            raise TypeError("start() needs duration (seconds) or duration_ms")
        tick = _to_ms(tick_interval, tick_interval_ms, "tick_interval", 0)
        out = c_int64(0)
        self._lib.tg_countdown_start(
            self._h,
            _key(scope, "scope"),
            _key(subject, "subject"),
            ms,
            tick,
            _ffi.TG_START_RESTART if restart else 0,
            ctypes.pointer(out),
        )
        return Remaining(int(out.value), display_seconds_of(int(out.value)))

    def cancel(self, scope: Key, subject: Key) -> None:
        """Cancel the countdown of (scope, subject); observers get CANCELLED.

        Raises :class:`tickgate.NotFound` if it is not counting down.
        """
        self._lib.tg_countdown_cancel(self._h, _key(scope, "scope"), _key(subject, "subject"))

    def cancel_scope(self, scope: Key) -> int:
        """Cancel every countdown of a scope; returns how many."""
        out = c_size_t(0)
        self._lib.tg_countdown_cancel_scope(self._h, _key(scope, "scope"), byref(out))
        return int(out.value)

    def cancel_all(self) -> int:
        """Cancel every countdown of the engine; returns how many."""
        out = c_size_t(0)
        self._lib.tg_countdown_cancel_all(self._h, byref(out))
        return int(out.value)

    def remaining(self, scope: Key, subject: Key) -> Remaining:
        """How long (scope, subject) still counts down.

        Raises :class:`tickgate.NotFound` if it is not counting down (see
        :meth:`is_counting` for a plain bool).
        """
        ms = c_int64(0)
        display = c_int64(0)
        self._lib.tg_countdown_remaining(
            self._h, _key(scope, "scope"), _key(subject, "subject"), byref(ms), byref(display)
        )
        return Remaining(int(ms.value), int(display.value))

    def is_counting(self, scope: Key, subject: Key) -> bool:
        """True if (scope, subject) is counting down."""
        try:
            self.remaining(scope, subject)
        except NotFound:
            return False
        return True

    def list(self, scope: Optional[Key] = None) -> List[CountdownInfo]:
        """The running countdowns of ``scope`` (all scopes if None), by scope then subject."""
        items: List[CountdownInfo] = []
        index = _visit_slots.allocate(items)
        try:
            self._lib.tg_countdown_list(
                self._h, _key(scope, "scope"), _on_visit, index, None
            )
        finally:
            _visit_slots.deallocate(index)
        return items

    def count(self, scope: Optional[Key] = None) -> int:
        """How many countdowns run in ``scope`` (all scopes if None)."""
        out = c_size_t(0)
        self._lib.tg_countdown_list(self._h, _key(scope, "scope"), _no_visit, None, byref(out))
        return int(out.value)

    # -- observers ---------------------------------------------------------

    def subscribe(
        self, scope: Key, subject: Optional[Key], callback: EventCallback
    ) -> "Subscription":
        """Call ``callback(event)`` for the key (scope, subject), or for every
        key of ``scope`` when ``subject`` is None.

        The first event is the current state (STATE); then STARTED, TICK,
        FINISHED, CANCELLED as they happen, one at a time and in order, on the
        engine thread (or inside :meth:`dispatch` in host mode). The
        subscription lasts until :meth:`Subscription.close` or
        :meth:`close`, whether or not the returned handle is kept: the
        package keeps ``callback`` alive until the library says it is done
        with it. Exceptions raised by ``callback`` are reported (see
        :func:`tickgate.set_callback_error_hook`), never propagated.
        """
        return self._subscribe(scope, subject, callback)

    def subscribe_scope(self, scope: Key, callback: EventCallback) -> "Subscription":
        """Same as ``subscribe(scope, None, callback)``: every key of ``scope``."""
        return self._subscribe(scope, None, callback)

    def _subscribe(
        self,
        scope: Optional[Key],
        subject: Optional[Key],
        callback: EventCallback,
        on_end: Optional[Callable[[], None]] = None,
    ) -> "Subscription":
        if not callable(callback):
            raise TypeError("callback must be callable")
        scope_b = _key(scope, "scope")
        subject_b = _key(subject, "subject")
        handle = self._h
        slot = _SubscriptionSlot(callback)
        if on_end is not None:
            slot.on_end.append(on_end)
        index = _slots.allocate(slot)
        out = _ffi.tg_subscription(0)
        try:
            self._lib.tg_subscribe(
                handle, scope_b, subject_b, _on_event, index, _on_destroy, byref(out)
            )
        except BaseException:
            # On error the library calls neither callback nor destructor:
            # the slot is still ours to free.
            _slots.deallocate(index)
            raise
        slot.id = int(out.value)
        return Subscription(self, slot, scope_b, subject_b)

    def unsubscribe(self, subscription: Union["Subscription", int]) -> None:
        """End a subscription (by handle or id).

        Raises :class:`tickgate.NotFound` if it already ended;
        :meth:`Subscription.close` is the idempotent variant. When this returns
        (outside the subscription's own callback) the callback will not run
        again.
        """
        sid = subscription.id if isinstance(subscription, Subscription) else int(subscription)
        self._lib.tg_unsubscribe(self._h, sid)

    # -- host-thread delivery ----------------------------------------------

    def fileno(self) -> int:
        """HOST_THREAD only: a descriptor that is readable when events are due.

        Poll it for reading and call :meth:`dispatch`. The engine owns it: do
        not read, write or close it, and stop polling it before :meth:`close`.
        Raises :class:`tickgate.WrongMode` on an engine-thread engine.
        """
        out = c_int(-1)
        self._lib.tg_engine_fd(self._h, byref(out))
        return int(out.value)

    def dispatch(self) -> int:
        """HOST_THREAD only: run the due callbacks on this thread; returns how many ran.

        Never waits for time to pass. Raises :class:`tickgate.Busy` if a
        dispatch of this engine is already running.
        """
        out = c_size_t(0)
        self._lib.tg_engine_dispatch(self._h, byref(out))
        return int(out.value)

    # -- clock ---------------------------------------------------------------

    def advance(self, seconds: Optional[Seconds] = None, *, ms: Optional[int] = None) -> None:
        """MANUAL clock only: move the clock forward.

        On an engine-thread engine this returns after the engine thread ran
        the callbacks that became due; in host mode they wait for
        :meth:`dispatch`.
        """
        step = _to_ms(seconds, ms, "seconds")
        if step is None:
            raise TypeError("advance() needs seconds or ms")
        self._lib.tg_clock_advance(self._h, step)

    def now_ms(self) -> int:
        """The engine's clock in milliseconds (CLOCK_BOOTTIME, or the manual clock)."""
        out = c_int64(0)
        self._lib.tg_clock_now(self._h, byref(out))
        return int(out.value)

    def now(self) -> float:
        """The engine's clock in seconds."""
        return self.now_ms() / 1000.0

    def set_wall(self, wall: "Optional[Seconds | datetime]" = None, *, ms: Optional[int] = None) -> None:
        """MANUAL clock only: set the wall part of the clock (seconds since the
        epoch, an aware ``datetime``, or ``ms``), as a user changing the date would."""
        value = _wall_ms(wall, ms, "wall")
        if value is None:
            raise TypeError("set_wall() needs wall or ms")
        self._lib.tg_clock_set_wall(self._h, value)

    # -- the store --------------------------------------------------------------

    def flush(self) -> None:
        """Commit what a group commit holds now (no-op without a store or pending changes).

        Raises :class:`tickgate.StoreIO` if the store cannot be written.
        """
        self._lib.tg_store_flush(self._h)

    # -- the resend flow -------------------------------------------------------

    def set_policy(self, scope: Key, policy: Policy) -> None:
        """Set the send policy of ``scope`` (see :class:`tickgate.Policy`).

        It applies to the next send of every key of the scope; a running
        cooldown keeps its length.
        """
        raw = _ffi.tg_policy()
        self._lib.tg_policy_init(byref(raw), ctypes.sizeof(raw))
        steps = [int(x) for x in policy.cooldowns_ms]
        raw.step_count = len(steps)  # the library checks 1 ... TG_POLICY_MAX_STEPS
        for i, ms in enumerate(steps[: _ffi.TG_POLICY_MAX_STEPS]):
            raw.cooldown_ms[i] = _clamp64(ms)
        if not 0 <= int(policy.window_max_sends) <= 0xFFFFFFFF:
            raise InvalidArgument(f"window_max_sends {policy.window_max_sends} is out of range")
        raw.window_max_sends = int(policy.window_max_sends)
        raw.window_ms = _clamp64(int(policy.window_ms))
        raw.quiet_reset_ms = _clamp64(int(policy.quiet_reset_ms))
        raw.ticket_timeout_ms = _clamp64(int(policy.ticket_timeout_ms))
        self._lib.tg_policy_set(self._h, _key(scope, "scope"), byref(raw))

    def policy(self, scope: Key) -> Policy:
        """The send policy of ``scope`` (the defaults if none was set)."""
        raw = _ffi.tg_policy()
        self._lib.tg_policy_init(byref(raw), ctypes.sizeof(raw))
        self._lib.tg_policy_get(self._h, _key(scope, "scope"), byref(raw))
        count = min(int(raw.step_count), _ffi.TG_POLICY_MAX_STEPS)
        return Policy(
            cooldowns_ms=tuple(int(raw.cooldown_ms[i]) for i in range(count)),
            window_max_sends=int(raw.window_max_sends),
            window_ms=int(raw.window_ms),
            quiet_reset_ms=int(raw.quiet_reset_ms),
            ticket_timeout_ms=int(raw.ticket_timeout_ms),
        )

    def send_begin(self, scope: Key, subject: Key) -> "SendTicket":
        """The user tapped "Get code": ask whether the host may send now.

        Returns a :class:`SendTicket` (the key's state becomes SENDING); the
        host then calls its SMS or e-mail API and ends the ticket with
        :meth:`SendTicket.succeeded` or :meth:`SendTicket.failed` (or uses it
        as a context manager). Otherwise raises :class:`tickgate.CoolingDown`,
        :class:`tickgate.InFlight` or :class:`tickgate.Locked`, whose
        ``remaining`` says how long until a send may be granted.
        """
        ticket = _ffi.tg_ticket(0)
        wait = c_int64(0)
        scope_b, subject_b = _key(scope, "scope"), _key(subject, "subject")
        self._lib.tg_send_begin(self._h, scope_b, subject_b, byref(ticket), byref(wait))
        return SendTicket(self, int(ticket.value), _decode(scope_b), _decode(subject_b))

    def send_end(
        self,
        ticket: Union["SendTicket", int],
        outcome: Union[SendOutcome, int],
        retry_after: Optional[Seconds] = None,
        *,
        retry_after_ms: Optional[int] = None,
    ) -> Remaining:
        """Close a send ticket; returns the cooldown that starts (0 after a failure).

        ``retry_after`` is how long the server asked to wait (None: it said
        nothing); the cooldown is the longest of that, the policy's next step
        and the time until the window frees a send. Raises
        :class:`tickgate.Expired` if the ticket timed out first, and
        :class:`tickgate.NotFound` for an unknown or already ended ticket.
        """
        tid = ticket.id if isinstance(ticket, SendTicket) else int(ticket)
        retry = _to_ms(retry_after, retry_after_ms, "retry_after", 0)
        out = c_int64(0)
        self._lib.tg_send_end(self._h, tid, int(outcome), retry, byref(out))
        return Remaining(int(out.value), display_seconds_of(int(out.value)))

    def verified(self, scope: Key, subject: Key) -> None:
        """The host verified the code: the key's escalation starts again and it becomes IDLE."""
        self._lib.tg_verified(self._h, _key(scope, "scope"), _key(subject, "subject"))

    def set_titles(self, scope: Key, titles: Optional[Titles] = None, **templates: Optional[str]) -> None:
        """Set the title templates of ``scope``: a :class:`tickgate.Titles`, or
        keywords ``idle``, ``sending``, ``cooling``, ``ready_again``, ``locked``.

        Templates left out (None) keep the English default. Raises
        :class:`tickgate.InvalidTemplate` for a malformed one (then nothing changes).
        """
        if titles is None:
            titles = Titles(**templates)
        elif templates:
            raise TypeError("give a Titles or keywords, not both")
        raw = _ffi.tg_titles()
        raw.struct_size = ctypes.sizeof(_ffi.tg_titles)
        for name in ("idle", "sending", "cooling", "ready_again", "locked"):
            text = getattr(titles, name)
            if text is None:
                continue
            data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
            if b"\0" in data:
                raise InvalidTemplate(f"{name} title contains a NUL byte")
            setattr(raw, name, data)  # the struct keeps the bytes alive
        self._lib.tg_titles_set(self._h, _key(scope, "scope"), byref(raw))

    def button(self, scope: Key, subject: Key) -> Button:
        """The button of (scope, subject) now: state, enabled, remaining time, title."""
        raw = _ffi.tg_button()
        raw.struct_size = ctypes.sizeof(_ffi.tg_button)
        self._lib.tg_button_get(self._h, _key(scope, "scope"), _key(subject, "subject"), byref(raw))
        return Button(
            state=_enum_or_int(ButtonState, raw.state),
            enabled=bool(raw.enabled),
            remaining_ms=int(raw.remaining_ms),
            display_seconds=int(raw.display_seconds),
            title=_decode(raw.title),
        )

    # -- the login gate -------------------------------------------------------------

    def gate(self, realm: Key) -> "Gate":
        """The login gate of ``realm`` ("account", "payment-pin"): see :class:`tickgate.Gate`."""
        from ._gate import Gate

        return Gate(self, realm)


# ---------------------------------------------------------------------------
# Subscription
# ---------------------------------------------------------------------------


class Subscription:
    """A handle on one subscription; ``with`` or :meth:`close` ends it.

    Dropping the handle does not end the subscription (it lives until
    :meth:`close` or the engine's close). :meth:`close` is idempotent and
    quiet when the subscription already ended.
    """

    def __init__(
        self,
        engine: Engine,
        slot: _SubscriptionSlot,
        scope: Optional[bytes],
        subject: Optional[bytes],
    ) -> None:
        self._engine = engine
        self._slot = slot
        self._id = int(slot.id or 0)
        self.scope: Optional[str] = None if scope is None else _decode(scope)
        #: None for a subscription to a whole scope.
        self.subject: Optional[str] = None if subject is None else _decode(subject)

    @property
    def id(self) -> int:
        """The ``tg_subscription`` id (also in each :attr:`Event.subscription`)."""
        return self._id

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def active(self) -> bool:
        """False once the library ran its destructor (unsubscribed or engine closed)."""
        return not self._slot.ended.is_set()

    def wait_ended(self, timeout: Optional[float] = None) -> bool:
        """Wait until the subscription ended; True if it did."""
        return self._slot.ended.wait(timeout)

    def close(self) -> None:
        """End the subscription; does nothing if it already ended."""
        if self._slot.ended.is_set():
            return
        try:
            self._engine.unsubscribe(self._id)
        except (NotFound, Closed):
            pass

    unsubscribe = close

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        what = self.scope if self.subject is None else f"{self.scope}/{self.subject}"
        return f"<tickgate.Subscription {self._id} {what} {'active' if self.active else 'ended'}>"


class SendTicket:
    """A send in flight (from :meth:`Engine.send_begin`).

    End it once: :meth:`succeeded` (the cooldown starts) or :meth:`failed`
    (the key is free again). As a context manager it ends itself: failed if
    the block raised, succeeded otherwise (unless the block ended it)::

        with engine.send_begin("login", phone):
            sms_api.send_code(phone)
    """

    def __init__(self, engine: Engine, ticket: int, scope: str, subject: str) -> None:
        self._engine = engine
        self.id = ticket
        self.scope = scope
        self.subject = subject
        #: None while open, else the outcome it was ended with.
        self.outcome: Optional[SendOutcome] = None

    def succeeded(self, retry_after: Optional[Seconds] = None, *, retry_after_ms: Optional[int] = None) -> Remaining:
        """The server accepted the send: the cooldown starts; returns its length."""
        cooldown = self._engine.send_end(
            self.id, SendOutcome.SUCCEEDED, retry_after, retry_after_ms=retry_after_ms
        )
        self.outcome = SendOutcome.SUCCEEDED
        return cooldown

    def failed(self) -> None:
        """The send failed: no cooldown, the key is free again."""
        self._engine.send_end(self.id, SendOutcome.FAILED)
        self.outcome = SendOutcome.FAILED

    def __enter__(self) -> "SendTicket":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.outcome is not None:
            return
        if exc_type is None:
            self.succeeded()
        else:
            try:
                self.failed()
            except (Expired, NotFound, Closed):
                pass  # the block's own exception is the one to see

    def __repr__(self) -> str:
        state = "open" if self.outcome is None else self.outcome.name.lower()
        return f"<tickgate.SendTicket {self.id} {self.scope}/{self.subject} {state}>"


@atexit.register
def _close_engines_at_exit() -> None:
    # Join engine threads before the interpreter tears down the objects their
    # callbacks use.
    for engine in list(_live_engines):
        try:
            engine.close()
        except Exception:  # noqa: BLE001
            pass

