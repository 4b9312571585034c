"""The callback machinery: slots that C holds as user_data, the one
trampoline of each kind, and how exceptions raised in callbacks are reported.

user_data passed to C is an integer index into :data:`slots` (after
wasmtime-py's ``_slab.py``), freed by the library's destructor callback, so no
Python object that C may call can be collected while C holds it.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any, Callable, List, Optional, Tuple

from . import _ffi
from ._enums import ButtonState, CancelReason, CodeOutcome, EventKind, GateEventKind, GuardMode, PumpingWarning
from ._slab import Slab
from ._types import CountdownInfo, Event, GateEvent, GuardRecord

__all__ = [
    "EventCallback",
    "CallbackErrorHook",
    "set_callback_error_hook",
    "get_callback_error_hook",
    "report",
    "SubscriptionSlot",
    "RequestSlot",
    "slots",
    "visit_slots",
    "Stray",
    "decode",
    "enum_or_int",
    "event_from_c",
    "gate_event_from_c",
    "on_event",
    "on_gate_event",
    "on_guard_record",
    "on_action",
    "on_cancel",
    "on_destroy",
    "on_visit",
    "no_visit",
    "live_slots",
    "stray_calls",
]

_log = logging.getLogger("tickgate")

#: An observer: called with each :class:`Event`.
EventCallback = Callable[[Event], Any]
#: Receives an exception raised by a callback, and the event (None if the
#: event itself could not be built).
CallbackErrorHook = Callable[[BaseException, Optional[Event]], Any]

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


def report(exc: BaseException, event: Optional[Event], callback: object) -> None:
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


class SubscriptionSlot:
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


class RequestSlot:
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
                report(exc, None, action)

    def cancel(self, reason: Any) -> None:
        self.outcome = "cancelled"
        self.reason = reason
        on_cancel = self.on_cancel
        if on_cancel is not None:
            try:
                on_cancel(reason)
            except BaseException as exc:  # noqa: BLE001
                report(exc, None, on_cancel)

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
slots: Slab[Any] = Slab()
#: Visit slots: user_data of tg_countdown_list, freed when the call returns.
visit_slots: Slab[List[CountdownInfo]] = Slab()

class Stray:
    """Calls from C that found no slot: a destructor run twice, or a callback
    after its destructor. The library promises neither happens; tests check
    these stay 0."""

    events = 0
    destroys = 0
    #: Events whose struct_size was smaller than this package's tg_event.
    undersized = 0


def decode(raw: Optional[bytes]) -> str:
    return "" if raw is None else raw.decode("utf-8", "surrogateescape")


def enum_or_int(enum: Any, value: int) -> Any:
    try:
        return enum(value)
    except ValueError:
        return int(value)


EVENT_SIZE = ctypes.sizeof(_ffi.tg_event)
GATE_EVENT_SIZE = ctypes.sizeof(_ffi.tg_gate_event)


def event_from_c(ev: _ffi.tg_event) -> Event:
    if ev.struct_size < EVENT_SIZE:
        Stray.undersized += 1
    return Event(
        kind=enum_or_int(EventKind, ev.kind),
        scope=decode(ev.scope),
        subject=decode(ev.subject),
        remaining_ms=int(ev.remaining_ms),
        display_seconds=int(ev.display_seconds),
        duration_ms=int(ev.duration_ms),
        subscription=int(ev.subscription),
        state=enum_or_int(ButtonState, ev.state),
        enabled=bool(ev.enabled),
        title=decode(ev.title),
        local_only=ev.struct_size >= EVENT_SIZE and bool(ev.flags & _ffi.TG_EVENT_FLAG_LOCAL_ONLY),
    )


def gate_event_from_c(ev: _ffi.tg_gate_event) -> GateEvent:
    if ev.struct_size < GATE_EVENT_SIZE:
        Stray.undersized += 1
    return GateEvent(
        kind=enum_or_int(GateEventKind, ev.kind),
        realm=decode(ev.realm),
        logged_in=bool(ev.logged_in),
        session_remaining_ms=int(ev.session_remaining_ms),
        queued=int(ev.queued),
        subscription=int(ev.subscription),
    )


def run_callback(user_data: Optional[int], make: Callable[[], Any]) -> None:
    """Call the slot's callback with make(); report whatever it raises."""
    slot = slots.get(user_data)
    callback = getattr(slot, "callback", None)
    if callback is None:
        Stray.events += 1
        return
    event = None
    try:
        event = make()
        callback(event)
    except BaseException as exc:  # noqa: BLE001
        report(exc, event, callback)


def _event_entry(event_p: Any, user_data: Optional[int]) -> None:
    # Runs on the engine thread or inside tg_engine_dispatch. ctypes holds
    # the GIL for us; nothing may escape into C.
    try:
        run_callback(user_data, lambda: event_from_c(event_p.contents))
    except BaseException:  # noqa: BLE001 - last resort (e.g. at shutdown)
        pass


def _gate_event_entry(event_p: Any, user_data: Optional[int]) -> None:
    try:
        run_callback(user_data, lambda: gate_event_from_c(event_p.contents))
    except BaseException:  # noqa: BLE001
        pass


def guard_record_from_c(r: _ffi.tg_guard_record) -> GuardRecord:
    return GuardRecord(
        scope=decode(r.scope),
        number=decode(r.number),
        country=decode(r.country),
        client_address=decode(r.client_address),
        wall_ms=int(r.wall_ms),
        status=int(r.status),
        message=decode(r.message),
        ticket=int(r.ticket),
        mode=enum_or_int(GuardMode, r.mode),
        warnings=PumpingWarning(int(r.warnings) & 0x7F),
        bypass=None if r.bypass is None else decode(r.bypass),
        rule=None if r.rule is None else decode(r.rule),
        counts=tuple((name, int(getattr(r, name))) for name in _ffi.GUARD_RECORD_COUNTS),
        range_counts=tuple((name, int(getattr(r, name))) for name in _ffi.GUARD_RECORD_RANGE_COUNTS),
        address_signals_skipped=bool(r.address_skipped),
        range=decode(r.range) if r.range is not None else "",
        challenge_passed=bool(r.challenge_passed),
        outcome=enum_or_int(CodeOutcome, r.outcome) if r.outcome else None,
        code_sent_wall_ms=int(r.code_sent_wall_ms),
    )


def _guard_record_entry(record_p: Any, user_data: Optional[int]) -> None:
    try:
        run_callback(user_data, lambda: guard_record_from_c(record_p.contents))
    except BaseException:  # noqa: BLE001
        pass


def _action_entry(request: int, user_data: Optional[int]) -> None:
    try:
        slot = slots.get(user_data)
        if not isinstance(slot, RequestSlot):
            Stray.events += 1
            return
        slot.run()
    except BaseException:  # noqa: BLE001
        pass


def _cancel_entry(request: int, reason: int, user_data: Optional[int]) -> None:
    try:
        slot = slots.get(user_data)
        if not isinstance(slot, RequestSlot):
            Stray.events += 1
            return
        slot.cancel(enum_or_int(CancelReason, reason))
    except BaseException:  # noqa: BLE001
        pass


def _destroy_entry(user_data: Optional[int]) -> None:
    try:
        slot = slots.deallocate(user_data)
        if slot is None:
            Stray.destroys += 1
        else:
            slot.finish()
    except BaseException:  # noqa: BLE001
        pass


def _visit_entry(info_p: Any, user_data: Optional[int]) -> int:
    try:
        items = visit_slots.get(user_data)
        if items is None:
            return 1
        info = info_p.contents
        items.append(
            CountdownInfo(
                scope=decode(info.scope),
                subject=decode(info.subject),
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
on_event = _ffi.tg_event_fn(_event_entry)
on_gate_event = _ffi.tg_gate_event_fn(_gate_event_entry)
on_guard_record = _ffi.tg_guard_record_fn(_guard_record_entry)
on_action = _ffi.tg_action_fn(_action_entry)
on_cancel = _ffi.tg_cancel_fn(_cancel_entry)
on_destroy = _ffi.tg_destroy_fn(_destroy_entry)
on_visit = _ffi.tg_countdown_visit_fn(_visit_entry)
# A NULL visit function (ctypes refuses None for a CFUNCTYPE argument).
no_visit = _ffi.tg_countdown_visit_fn()


def live_slots() -> int:
    """How many subscription slots are held for C right now (for tests and leak checks)."""
    return len(slots)


def stray_calls() -> Tuple[int, int, int]:
    """Broken promises seen by the trampolines, all 0 when the library keeps
    them: (callbacks for a slot already freed, destructors for a slot already
    freed, events whose struct_size is smaller than the header's struct)."""
    return Stray.events, Stray.destroys, Stray.undersized
