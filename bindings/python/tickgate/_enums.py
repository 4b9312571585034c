"""The enumerations of tickgate.h as :class:`enum.IntEnum` (values match the C header).

:class:`Status` and :class:`StoreFailure` are generated from the header's
tables, in :mod:`tickgate._status`; the others are written here.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Tuple

from ._status import Status, StoreFailure

__all__ = [
    "Status",
    "StoreFailure",
    "Delivery",
    "ClockKind",
    "EventKind",
    "ButtonState",
    "SendOutcome",
    "CancelReason",
    "RequireResult",
    "GateEventKind",
    "GuardMode",
    "PumpingWarning",
]


class Delivery(IntEnum):
    """``tg_delivery``: where callbacks run."""

    #: On the engine's own thread (the default).
    ENGINE_THREAD = 0
    #: On the host's thread, inside :meth:`tickgate.Engine.dispatch`, when
    #: :meth:`tickgate.Engine.fileno` is readable (see :mod:`tickgate.aio`).
    HOST_THREAD = 1


class ClockKind(IntEnum):
    """``tg_clock_kind``: which clock measures remaining time."""

    #: CLOCK_BOOTTIME (the default).
    SYSTEM = 0
    #: Starts at 0 and moves only by :meth:`tickgate.Engine.advance` (tests).
    MANUAL = 1


class EventKind(IntEnum):
    """``tg_event_kind``: what an observer is told."""

    #: The key's state when the subscription began (always the first event).
    STATE = 1
    #: A countdown started or restarted.
    STARTED = 2
    #: The displayed value changed, or a tick interval passed.
    TICK = 3
    #: The countdown reached its deadline (remaining 0).
    FINISHED = 4
    #: The countdown was cancelled (remaining 0).
    CANCELLED = 5
    #: A send began (:meth:`tickgate.Engine.send_begin` granted a ticket).
    SENDING = 6
    #: A send failed, or its ticket expired or was cancelled: the key is free.
    SEND_FAILED = 7
    #: :meth:`tickgate.Engine.verified` reset the key.
    RESET = 8
    #: A wrong code (:meth:`tickgate.Engine.verify_failed`) killed the code.
    CODE_DEAD = 9
    #: The shared store (Redis) went out of reach: what is shown may be stale
    #: until STORE_BACK. A scope's subscription gets it once, with subject "".
    STORE_LOST = 10
    #: The shared store answers again; the key was read again first.
    STORE_BACK = 11


class ButtonState(IntEnum):
    """``tg_button_state``: the state of a key's "Get code" button."""

    #: Never sent (or reset): enabled, "Get code".
    IDLE = 0
    #: A send ticket is open: disabled, "Sending...".
    SENDING = 1
    #: Cooling down after a send: disabled, "Resend (42s)".
    COOLING = 2
    #: Cooled down after at least one send: enabled, "Resend code".
    READY_AGAIN = 3
    #: The window's cap of sends is reached: disabled, "Try again in 9 min".
    LOCKED = 4
    #: The code took too many wrong codes and no cooldown runs: enabled,
    #: "Too many attempts: get a new code".
    CODE_DEAD = 5


class SendOutcome(IntEnum):
    """``tg_send_outcome``: how a send ended."""

    SUCCEEDED = 1
    FAILED = 2


class CancelReason(IntEnum):
    """``tg_cancel_reason``: why a gate request was cancelled."""

    LOGIN_CANCELLED = 1
    TIMED_OUT = 2
    LOGGED_OUT = 3


class RequireResult(IntEnum):
    """``tg_require_result``: what :meth:`tickgate.Gate.require` did."""

    #: The action runs next (through the delivery mode).
    RUNS_NOW = 1
    #: Queued until login.
    QUEUED = 2
    #: A queued request with the same coalesce key exists: merged into it.
    COALESCED = 3


class GateEventKind(IntEnum):
    """``tg_gate_event_kind``: what a realm observer is told."""

    STATE = 1
    LOGIN_REQUIRED = 2
    LOGGED_IN = 3
    LOGGED_OUT = 4
    EXPIRED = 5
    QUEUE_CHANGED = 6


class GuardMode(IntEnum):
    """``tg_guard_mode``: how a guard treats its pumping signals."""

    #: Numbers and destination lists only; nothing is counted.
    OFF = 0
    #: Signals counted and judged; a send that crosses a threshold is
    #: granted and recorded with its warnings (a first rollout).
    RECORD_ONLY = 1
    #: A send that crosses a threshold raises :class:`tickgate.PumpingSuspected`.
    ENFORCE = 2


class CodeOutcome(IntEnum):
    """``tg_code_outcome``: what became of a guarded code after its send
    (:meth:`tickgate.Engine.subscribe_outcomes`)."""

    #: The code was verified.
    VERIFIED = 1
    #: A newer code of the number was sent before it was verified.
    REPLACED = 2
    #: Killed by wrong codes.
    KILLED = 3
    #: Not verified within the guard's ``unverified_after_seconds``.
    NEVER_VERIFIED = 4
    #: No code's: :meth:`tickgate.Engine.challenge_passed` was called.
    CHALLENGE_PASSED = 5


class PumpingWarning(IntFlag):
    """``TG_WARNING_*``: the pumping signals' warnings."""

    UNVERIFIED_BY_COUNTRY_DAILY = 0x1
    UNVERIFIED_BY_COUNTRY_HOURLY = 0x2
    UNVERIFIED_BY_ADDRESS_DAILY = 0x4
    UNVERIFIED_BY_ADDRESS_HOURLY = 0x8
    COUNTRIES_BY_ADDRESS_DAILY = 0x10
    UNVERIFIED_BY_RANGE_DAILY = 0x20
    UNVERIFIED_BY_RANGE_HOURLY = 0x40

    @property
    def names(self) -> Tuple[str, ...]:
        """The warnings set, by name in lower case, in bit order
        (``("unverified_by_country_hourly",)``), as a refusal's message and
        the Redis stream's records name them."""
        return tuple(str(w.name).lower() for w in PumpingWarning if w in self)
