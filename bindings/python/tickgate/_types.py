"""Plain data the engine hands out: events, remaining times, listed countdowns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

from . import _convert
from ._convert import Seconds
from ._enums import ButtonState, CodeOutcome, EventKind, GateEventKind, GuardMode, PumpingWarning

__all__ = [
    "GuardRecord",
    "NumberInfo",
    "Event",
    "Remaining",
    "CountdownInfo",
    "Button",
    "Policy",
    "Titles",
    "Session",
    "GateEvent",
    "display_seconds_of",
]


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
    #: The key's button state after the event.
    state: Union[ButtonState, int] = ButtonState.IDLE
    #: True if the button may be tapped.
    enabled: bool = True
    #: The state's title, rendered ("Resend (42s)").
    title: str = ""
    #: Decided by this engine alone while its Redis store was unreachable
    #: (a send granted with ``store_fail_open``).
    local_only: bool = False

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
    def kind_name(self) -> str:
        """The kind's name ("TICK"), or its number as text for a kind these
        bindings do not know (``kind`` is then a plain int)."""
        return self.kind.name if isinstance(self.kind, EventKind) else str(int(self.kind))

    @property
    def ends_countdown(self) -> bool:
        """True if the key is not counting down after this event: FINISHED,
        CANCELLED, RESET, or a STATE with nothing remaining."""
        return self.kind in (EventKind.FINISHED, EventKind.CANCELLED, EventKind.RESET) or (
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


@dataclass(frozen=True)
class Button:
    """A key's "Get code" button, as :meth:`tickgate.Engine.button` reports it."""

    state: Union[ButtonState, int]
    #: True if the button may be tapped.
    enabled: bool
    #: COOLING, LOCKED: time left; else 0.
    remaining_ms: int
    display_seconds: int
    #: The rendered title ("Resend (42s)").
    title: str

    @property
    def remaining(self) -> float:
        """:attr:`remaining_ms` in seconds."""
        return self.remaining_ms / 1000.0


@dataclass(frozen=True, init=False)
class Policy:
    """The send policy of a scope (``tg_policy``), kept in integer milliseconds.

    Give the times in seconds, as every duration of the package, with
    ``cooldowns``, ``window``, ``quiet_reset`` and ``ticket_timeout``
    (``Policy(cooldowns=(60, 90, 120), window_max_sends=3, window=600)``), or
    exactly with the ``_ms`` fields; both read back (``policy.window`` is
    600.0, ``policy.window_ms`` 600000). Seconds are rounded half up to the
    millisecond; each replaces its ``_ms`` field, which must then be left at
    its default. The defaults are the library's: a 60 s cooldown, no window
    cap, escalation reset after an hour of quiet, a 30 s ticket timeout.
    """

    #: The cooldown after the 1st, 2nd, ... consecutive send (1 to 8 steps;
    #: the last one repeats).
    cooldowns_ms: Tuple[int, ...]
    #: At most this many sends per key in any ``window_ms``; 0: no cap.
    window_max_sends: int
    window_ms: int
    #: A send this long after the previous one restarts the schedule; 0: only
    #: :meth:`tickgate.Engine.verified` does.
    quiet_reset_ms: int
    #: A ticket not ended within this time expires and frees the key.
    ticket_timeout_ms: int
    #: Wrong codes one sent code survives (:meth:`tickgate.Engine.verify_failed`);
    #: the last kills it until a new send. 0: no cap.
    max_wrong_codes: int

    def __init__(
        self,
        cooldowns_ms: Tuple[int, ...] = (60000,),
        window_max_sends: int = 0,
        window_ms: int = 0,
        quiet_reset_ms: int = 3600000,
        ticket_timeout_ms: int = 30000,
        max_wrong_codes: int = 5,
        cooldowns: Optional[Sequence[Seconds]] = None,
        window: Optional[Seconds] = None,
        quiet_reset: Optional[Seconds] = None,
        ticket_timeout: Optional[Seconds] = None,
    ) -> None:
        # The seconds are arguments only, not fields (the properties below
        # read them back), so dataclasses.replace() passes the _ms fields alone.
        values = {"cooldowns_ms": cooldowns_ms, "window_max_sends": window_max_sends, "window_ms": window_ms,
                  "quiet_reset_ms": quiet_reset_ms, "ticket_timeout_ms": ticket_timeout_ms,
                  "max_wrong_codes": max_wrong_codes}
        given = {"cooldowns": None if cooldowns is None else tuple(
                     _convert.to_ms(step, None, "cooldown") for step in cooldowns),
                 "window": _convert.to_ms(window, None, "window"),
                 "quiet_reset": _convert.to_ms(quiet_reset, None, "quiet_reset"),
                 "ticket_timeout": _convert.to_ms(ticket_timeout, None, "ticket_timeout")}
        for name, ms in given.items():
            if ms is None:
                continue
            field_name = f"{name}_ms"
            if values[field_name] != _POLICY_DEFAULTS[field_name]:
                raise TypeError(f"give {name} or {field_name}, not both")
            values[field_name] = ms
        for field_name, value in values.items():
            object.__setattr__(self, field_name, value)

    @property
    def cooldowns(self) -> Tuple[float, ...]:
        """:attr:`cooldowns_ms` in seconds."""
        return tuple(ms / 1000.0 for ms in self.cooldowns_ms)

    @property
    def window(self) -> float:
        """:attr:`window_ms` in seconds (0: no window cap)."""
        return self.window_ms / 1000.0

    @property
    def quiet_reset(self) -> float:
        """:attr:`quiet_reset_ms` in seconds."""
        return self.quiet_reset_ms / 1000.0

    @property
    def ticket_timeout(self) -> float:
        """:attr:`ticket_timeout_ms` in seconds."""
        return self.ticket_timeout_ms / 1000.0


_POLICY_DEFAULTS = {"cooldowns_ms": (60000,), "window_ms": 0, "quiet_reset_ms": 3600000, "ticket_timeout_ms": 30000}


@dataclass(frozen=True)
class Titles:
    """Title templates of a scope (``tg_titles``); None keeps the English default.

    Placeholders: ``{s}`` display seconds, ``{m}`` whole minutes rounded up,
    ``{m:ss}`` minutes and seconds; ``{{`` and ``}}`` are literal braces.
    """

    idle: Optional[str] = None
    sending: Optional[str] = None
    cooling: Optional[str] = None
    ready_again: Optional[str] = None
    locked: Optional[str] = None
    code_dead: Optional[str] = None


@dataclass(frozen=True, init=False)
class Budget:
    """A budget (``tg_budget``): at most N sends per window in each of its
    windows, as (N, seconds) pairs, for example ``Budget([(10, 3600), (50, 86400)])``
    (10 per hour and 50 per day), or in integer milliseconds with
    ``Budget(windows_ms=[(10, 3600000)])``. Seconds are rounded half up to
    the millisecond, as every duration of the package is."""

    #: (max_sends, window_ms) pairs, 1 to 4 of them.
    windows_ms: Tuple[Tuple[int, int], ...]

    def __init__(
        self,
        windows: Optional[Sequence[Tuple[int, Seconds]]] = None,
        *,
        windows_ms: Optional[Sequence[Tuple[int, int]]] = None,
    ) -> None:
        if (windows is None) == (windows_ms is None):
            raise TypeError("give windows (seconds) or windows_ms, not both")
        if windows is not None:
            converted: List[Tuple[int, int]] = []
            for n, seconds in windows:
                ms = _convert.to_ms(seconds, None, "window")
                if ms is None:
                    raise TypeError("a window's seconds must be a number or a timedelta, not None")
                converted.append((n, ms))
            windows_ms = converted
        object.__setattr__(self, "windows_ms", tuple((int(n), int(ms)) for n, ms in windows_ms or ()))

    @property
    def windows(self) -> Tuple[Tuple[int, float], ...]:
        """(max_sends, seconds) pairs."""
        return tuple((n, ms / 1000.0) for n, ms in self.windows_ms)


@dataclass(frozen=True)
class BudgetUsage:
    """What a budget key has used (:meth:`tickgate.Engine.budget_usage`), in
    the window that binds it most."""

    used: int
    max_sends: int
    window_ms: int
    #: 0 if a send may be charged now, else the wait.
    frees_in_ms: int

    @property
    def window(self) -> float:
        """``window_ms`` in seconds."""
        return self.window_ms / 1000.0

    @property
    def frees_in(self) -> float:
        """:attr:`frees_in_ms` in seconds."""
        return self.frees_in_ms / 1000.0


@dataclass(frozen=True)
class Session:
    """A realm's login session (:meth:`tickgate.Gate.session`)."""

    logged_in: bool
    #: Time to expiry; 0 for no expiry or logged out.
    remaining_ms: int

    @property
    def remaining(self) -> float:
        """:attr:`remaining_ms` in seconds."""
        return self.remaining_ms / 1000.0


@dataclass(frozen=True)
class GateEvent:
    """What a realm observer receives (a copy)."""

    kind: Union[GateEventKind, int]
    realm: str
    logged_in: bool
    #: Time to the session's expiry; 0 for none or logged out.
    session_remaining_ms: int
    #: Requests waiting for login.
    queued: int
    subscription: int

    @property
    def session_remaining(self) -> float:
        """:attr:`session_remaining_ms` in seconds."""
        return self.session_remaining_ms / 1000.0

    @property
    def kind_name(self) -> str:
        """The kind's name ("LOGGED_IN"), or its number as text for a kind
        these bindings do not know (``kind`` is then a plain int)."""
        return self.kind.name if isinstance(self.kind, GateEventKind) else str(int(self.kind))


@dataclass(frozen=True)
class GuardRecord:
    """The decision record of one send of a guarded scope (a copy)."""

    scope: str
    number: str
    #: "CN", "+800" (non-geographic), or "" if the subject is no E.164 number.
    country: str
    #: The client's address (canonical text), or "" if none was given.
    client_address: str
    #: When, in ms since 1970.
    wall_ms: int
    #: ``Status.OK`` (granted) or why it was refused.
    status: int
    message: str
    #: The ticket when granted, else 0.
    ticket: int
    mode: Union[GuardMode, int]
    warnings: PumpingWarning
    #: The always-allow entry matched, or None.
    bypass: Optional[str]
    #: The destination rule that refused it, or None.
    rule: Optional[str]
    #: The counts it was judged by (this send not counted) and the
    #: thresholds: ``country_unverified_day`` ... ``address_hourly_threshold``.
    counts: Tuple[Tuple[str, int], ...]
    #: True when the signals judged the send with no ``client_address``:
    #: the address signals were skipped, only the country's counted, and
    #: :attr:`message` says so ("no client address: the address signals were
    #: skipped"). Informational: it refuses nothing.
    address_signals_skipped: bool = False
    #: The narrowest range of the number whose signal warned ("+447520"),
    #: or "" when none did (``range_signals`` of :meth:`Engine.set_guard`).
    range: str = ""
    #: :attr:`range`'s counts and thresholds: ``range_unverified_day``,
    #: ``range_unverified_hour``, ``range_daily_threshold``,
    #: ``range_hourly_threshold`` (zeros when no range warned).
    range_counts: Tuple[Tuple[str, int], ...] = ()
    #: True when a passed challenge (:meth:`Engine.challenge_passed`) let
    #: the send through its warnings (the pass is used up).
    challenge_passed: bool = False
    #: None in a decision's record. In an outcome's record
    #: (:meth:`Engine.subscribe_outcomes`): what became of the code sent to
    #: :attr:`number` (:attr:`country` and :attr:`client_address` are the
    #: send's; the counts are zeros).
    outcome: Optional[Union[CodeOutcome, int]] = None
    #: In an outcome's record: when its code was sent, in ms since 1970
    #: (0 for ``CodeOutcome.CHALLENGE_PASSED``).
    code_sent_wall_ms: int = 0

    @property
    def code_sent_wall(self) -> float:
        """:attr:`code_sent_wall_ms` in seconds since 1970."""
        return self.code_sent_wall_ms / 1000.0

    @property
    def outcome_name(self) -> str:
        """The outcome's name ("VERIFIED"), its number as text for one these
        bindings do not know (``outcome`` is then a plain int), or "" in a
        decision's record."""
        if self.outcome is None:
            return ""
        return self.outcome.name if isinstance(self.outcome, CodeOutcome) else str(int(self.outcome))

    @property
    def granted(self) -> bool:
        """True if the send was granted (:attr:`status` is ``Status.OK``;
        False in an outcome's record)."""
        return self.status == 0 and self.outcome is None

    @property
    def wall(self) -> float:
        """:attr:`wall_ms` in seconds since 1970, as ``time.time()`` gives."""
        return self.wall_ms / 1000.0

    def count(self, name: str) -> int:
        """One of :attr:`counts` or :attr:`range_counts` by name."""
        return dict(self.counts + self.range_counts)[name]


@dataclass(frozen=True)
class NumberInfo:
    """An E.164 number as :func:`tickgate.parse_number` reads it."""

    calling_code: str
    #: ISO 3166-1 alpha-2 ("CN"), or "" for a non-geographic code.
    region: str
    digits: int
