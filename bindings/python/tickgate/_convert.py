"""Conversions of Python values for the C API: keys, durations, enums."""

from __future__ import annotations

import math
import numbers
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from collections.abc import Mapping
from typing import Any, Iterable, List, Optional, Tuple, Union

from ._enums import ClockKind, Delivery, GuardMode
from .errors import InvalidArgument, InvalidDuration, InvalidKey

__all__ = [
    "Key",
    "Seconds",
    "Budgets",
    "key",
    "budget_pairs",
    "clamp64",
    "to_ms",
    "wall_ms",
    "coerce",
    "guard_mode",
    "DELIVERY_NAMES",
    "CLOCK_NAMES",
    "GUARD_MODE_NAMES",
]

#: A scope or subject: ``str`` (encoded as UTF-8) or ``bytes`` (passed as is).
Key = Union[str, bytes]
#: A span of time in seconds (int, float, Decimal, Fraction) or a timedelta;
#: rounded half up to the millisecond.
Seconds = Union[float, int, Decimal, Fraction, timedelta]
#: The budgets a send is charged to: a mapping budget -> key
#: (``{"ip": "203.0.113.7"}``) or a sequence of (budget, key) pairs
#: (``[("ip", "203.0.113.7"), ("global", "sms")]``).
Budgets = Union[Mapping[Key, Key], Iterable[Tuple[Key, Key]]]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------


def key(value: Optional[Key], role: str) -> Optional[bytes]:
    """A key for C: UTF-8 bytes, or None for NULL (which the library rejects)."""
    if type(value) is str:  # the common case first: one encode, one scan
        if "\0" in value:
            raise InvalidKey(f"{role} contains a NUL byte")
        return value.encode("utf-8", "surrogatepass")
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


BUDGETS_FORMS = (
    "budgets= takes a mapping of budget to key ({'ip': '203.0.113.7'}) "
    "or a sequence of (budget, key) pairs ([('ip', '203.0.113.7')])"
)


def budget_pairs(budgets: Optional[Budgets]) -> List[Tuple[Optional[bytes], Optional[bytes]]]:
    """The (budget, key) pairs of ``budgets`` as bytes; TypeError, naming the
    forms it takes, for anything but a mapping or a sequence of pairs."""
    if budgets is None:
        return []
    if isinstance(budgets, Mapping):
        items: Iterable[Any] = budgets.items()
    elif isinstance(budgets, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{BUDGETS_FORMS}, not {type(budgets).__name__} {budgets!r}")
    else:
        try:
            items = iter(budgets)
        except TypeError:
            raise TypeError(f"{BUDGETS_FORMS}, not {type(budgets).__name__}") from None
    pairs = []
    for item in items:
        if (isinstance(item, (str, bytes, bytearray, memoryview, Mapping))
                or not isinstance(item, (tuple, list)) or len(item) != 2
                # None goes on, for the library's InvalidKey.
                or not all(part is None or isinstance(part, (str, bytes, bytearray, memoryview))
                           for part in item)):
            raise TypeError(f"{BUDGETS_FORMS}; {item!r} is not a (budget, key) pair of strings")
        pairs.append((key(item[0], "budget"), key(item[1], "budget key")))
    return pairs


def clamp64(value: int) -> int:
    # Out-of-range values reach the library as the nearest int64, which it
    # rejects with its own message (ctypes would silently wrap them).
    return max(INT64_MIN, min(INT64_MAX, value))


def to_ms(
    seconds: Optional[Seconds], ms: Optional[int], what: str, default: Optional[int] = None,
    *, ms_name: Optional[str] = None,
) -> Optional[int]:
    """Seconds (or a timedelta) or integer milliseconds -> int milliseconds.

    ``what`` names the seconds argument in messages, ``ms_name`` the
    milliseconds one (default ``what + "_ms"``)."""
    ms_name = ms_name or f"{what}_ms"
    if seconds is not None and ms is not None:
        raise TypeError(f"give {what} or {ms_name}, not both")
    if ms is not None:
        if isinstance(ms, bool) or not isinstance(ms, numbers.Integral):
            raise TypeError(f"{ms_name} must be an int, not {type(ms).__name__}")
        return clamp64(int(ms))
    if seconds is None:
        return default
    if isinstance(seconds, timedelta):
        whole = (seconds.days * 86400 + seconds.seconds) * 1000
        return clamp64(whole + (seconds.microseconds + 500) // 1000)
    if isinstance(seconds, bool) or not isinstance(seconds, (numbers.Real, Decimal)):
        raise TypeError(
            f"{what} must be seconds (a number) or a timedelta, not {type(seconds).__name__}"
        )
    if isinstance(seconds, numbers.Integral):
        return clamp64(int(seconds) * 1000)
    if isinstance(seconds, (float, Decimal)) and not math.isfinite(seconds):
        raise InvalidDuration(f"{what} {seconds!r} is not a finite number of seconds")
    # Exact arithmetic, rounded half up to the millisecond (0.3 s is 300 ms,
    # 0.0005 s is 1 ms).
    return clamp64(math.floor(Fraction(seconds) * 1000 + Fraction(1, 2)))


def wall_ms(
    value: Optional[Seconds | datetime], ms: Optional[int], what: str, default: Optional[int] = None,
    *, ms_name: Optional[str] = None,
) -> Optional[int]:
    """A wall-clock reading: an aware datetime, seconds since the epoch, or ms."""
    if isinstance(value, datetime):
        if ms is not None:
            raise TypeError(f"give {what} or {ms_name or what + '_ms'}, not both")
        if value.tzinfo is None:
            raise ValueError(f"{what} must be an aware datetime (with tzinfo)")
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return to_ms(delta, None, what)
    return to_ms(value, ms, what, default, ms_name=ms_name)


def coerce(enum: Any, value: Any, aliases: dict[str, Any]) -> int:
    """An enum's value from itself, its value or one of its names; for an
    unknown name :class:`tickgate.InvalidArgument` (a ValueError, as the
    library answers an unknown value) listing the names."""
    if isinstance(value, str):
        try:
            return int(aliases[value.lower().replace("-", "_")])
        except KeyError:
            raise InvalidArgument(
                f"unknown {enum.__name__} {value!r}; use one of {sorted(aliases)}"
            ) from None
    # Ints outside the enum go to the library, which answers InvalidArgument.
    return int(value)


GUARD_MODE_NAMES = {
    "off": GuardMode.OFF,
    "record_only": GuardMode.RECORD_ONLY,
    "record": GuardMode.RECORD_ONLY,
    "enforce": GuardMode.ENFORCE,
}


def guard_mode(value: Any) -> GuardMode:
    """A :class:`GuardMode` from itself, its value or its name (any case);
    for anything else :class:`tickgate.InvalidArgument` (a ValueError, as
    the library answers an unknown mode) listing the modes."""
    if isinstance(value, GuardMode):
        return value
    if isinstance(value, str):
        found = GUARD_MODE_NAMES.get(value.strip().lower().replace("-", "_").replace(" ", "_"))
        if found is not None:
            return found
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return GuardMode(value)
        except ValueError:
            pass
    modes = ", ".join(f"GuardMode.{mode.name} ({mode.name.lower()!r})" for mode in GuardMode)
    raise InvalidArgument(f"unknown guard mode {value!r}; use one of {modes} ('record' for 'record_only'), "
                     "or None to remove the guard")


DELIVERY_NAMES = {
    "engine_thread": Delivery.ENGINE_THREAD,
    "thread": Delivery.ENGINE_THREAD,
    "engine": Delivery.ENGINE_THREAD,
    "host_thread": Delivery.HOST_THREAD,
    "host": Delivery.HOST_THREAD,
}
CLOCK_NAMES = {"system": ClockKind.SYSTEM, "manual": ClockKind.MANUAL}
