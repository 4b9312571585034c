"""The enumerations of tickgate.h as :class:`enum.IntEnum` (values match the C header)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Status", "Delivery", "ClockKind", "EventKind"]


class Status(IntEnum):
    """``tg_status``: what every C function returns."""

    OK = 0
    E_INVALID_ARGUMENT = 1
    E_INVALID_KEY = 2
    E_INVALID_DURATION = 3
    E_NOT_FOUND = 4
    E_COOLING_DOWN = 5
    E_CLOSED = 6
    E_INVALID_HANDLE = 7
    E_WRONG_MODE = 8
    E_BUSY = 9
    E_VERSION = 10
    E_SYSTEM = 11


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
