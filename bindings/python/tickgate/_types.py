"""Plain data the engine hands out: events, remaining times, listed countdowns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ._enums import EventKind

__all__ = ["Event", "Remaining", "CountdownInfo", "display_seconds_of"]


def display_seconds_of(remaining_ms: int) -> int:
    """The ceiling of the remaining seconds: what a "Resend (Ns)" button shows."""
    return -(-remaining_ms // 1000)


@dataclass(frozen=True)
class Event:
    """What an observer receives (a copy: valid after the callback returns).

    Times are integer milliseconds as the engine reports them;
    :attr:`remaining` and :attr:`duration` give them in seconds.
    """

    #: STATE, STARTED, TICK, FINISHED or CANCELLED (a plain int for a kind
    #: these bindings do not know).
    kind: Union[EventKind, int]
    scope: str
    subject: str
    #: Rounded up to the millisecond; 0 for FINISHED, CANCELLED and an idle STATE.
    remaining_ms: int
    #: The ceiling of the remaining seconds.
    display_seconds: int
    #: The length the countdown was started with; 0 if idle.
    duration_ms: int
    #: The id of the subscription this event is for.
    subscription: int

    @property
    def remaining(self) -> float:
        """Remaining time in seconds."""
        return self.remaining_ms / 1000.0

    @property
    def duration(self) -> float:
        """Length of the countdown in seconds (0 if idle)."""
        return self.duration_ms / 1000.0

    @property
    def counting(self) -> bool:
        """True while the key counts down (the button is disabled)."""
        return self.remaining_ms > 0

    @property
    def ends_countdown(self) -> bool:
        """True if the key is idle after this event: FINISHED, CANCELLED, or an idle STATE."""
        return self.kind in (EventKind.FINISHED, EventKind.CANCELLED) or (
            self.kind == EventKind.STATE and self.remaining_ms == 0
        )


@dataclass(frozen=True)
class Remaining:
    """How long a countdown still runs."""

    #: Rounded up to the millisecond.
    remaining_ms: int
    #: The ceiling of the remaining seconds: what a button shows.
    display_seconds: int

    @property
    def remaining(self) -> float:
        """Remaining time in seconds."""
        return self.remaining_ms / 1000.0


@dataclass(frozen=True)
class CountdownInfo:
    """One running countdown, as listed by :meth:`tickgate.Engine.list`."""

    scope: str
    subject: str
    remaining_ms: int
    display_seconds: int
    duration_ms: int

    @property
    def remaining(self) -> float:
        """Remaining time in seconds."""
        return self.remaining_ms / 1000.0

    @property
    def duration(self) -> float:
        """Length of the countdown in seconds."""
        return self.duration_ms / 1000.0
