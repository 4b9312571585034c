"""Exceptions: one class per ``tg_status`` error, under :class:`TickgateError`.

Errors that come from the library carry the library's detail message
(``tg_last_error_message()``); a few are raised by the bindings themselves
before calling C (a key with a NUL byte, a duration that is not a finite
number) and carry the same status the library would have given.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from ._enums import Status
from ._loader import (
    LibraryError,
    LibraryNotFound,
    LibraryVersionMismatch,
)

__all__ = [
    "TickgateError",
    "InvalidArgument",
    "InvalidKey",
    "InvalidDuration",
    "NotFound",
    "CoolingDown",
    "Closed",
    "InvalidHandle",
    "WrongMode",
    "Busy",
    "VersionMismatch",
    "OSFailure",
    "LibraryError",
    "LibraryNotFound",
    "LibraryVersionMismatch",
    "error_for_status",
]

# The library's tg_status_string() texts; _ffi refreshes them from the
# library when it loads it.
_STATUS_TEXT = {
    Status.OK: "ok",
    Status.E_INVALID_ARGUMENT: "invalid argument",
    Status.E_INVALID_KEY: "invalid key",
    Status.E_INVALID_DURATION: "invalid duration",
    Status.E_NOT_FOUND: "not found",
    Status.E_COOLING_DOWN: "cooling down",
    Status.E_CLOSED: "engine closed",
    Status.E_INVALID_HANDLE: "invalid handle",
    Status.E_WRONG_MODE: "wrong mode",
    Status.E_BUSY: "busy",
    Status.E_VERSION: "unsupported struct version",
    Status.E_SYSTEM: "system error",
}


class TickgateError(Exception):
    """A Tickgate call failed.

    ``status`` is the :class:`~tickgate.Status` (an ``int`` if the library
    returned a value these bindings do not know) and ``message`` the detail
    from ``tg_last_error_message()``.
    """

    #: The status this class stands for (the base class: none in particular).
    STATUS: Optional[Status] = None

    def __init__(self, message: str = "", *, status: Optional[int] = None) -> None:
        if status is None:
            status = self.STATUS if self.STATUS is not None else -1
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        text = _STATUS_TEXT.get(status, f"status {int(status)}")  # type: ignore[call-overload]
        super().__init__(f"{text}: {message}" if message else text)


class InvalidArgument(TickgateError, ValueError):
    """``TG_E_INVALID_ARGUMENT``: a NULL pointer, or an unknown flag, enum or option value."""

    STATUS = Status.E_INVALID_ARGUMENT


class InvalidKey(TickgateError, ValueError):
    """``TG_E_INVALID_KEY``: scope or subject empty, longer than 256 bytes, or not UTF-8."""

    STATUS = Status.E_INVALID_KEY


class InvalidDuration(TickgateError, ValueError):
    """``TG_E_INVALID_DURATION``: duration, tick interval or clock step out of range."""

    STATUS = Status.E_INVALID_DURATION


class NotFound(TickgateError, LookupError):
    """``TG_E_NOT_FOUND``: the key is not counting down, or no subscription has that id."""

    STATUS = Status.E_NOT_FOUND


class CoolingDown(TickgateError):
    """``TG_E_COOLING_DOWN``: the key is already counting down.

    ``remaining_ms`` is how long it still runs (``None`` only if the call that
    failed does not report it), ``remaining`` the same in seconds and
    ``display_seconds`` what a button shows.
    """

    STATUS = Status.E_COOLING_DOWN

    def __init__(
        self,
        message: str = "",
        *,
        status: Optional[int] = None,
        remaining_ms: Optional[int] = None,
    ) -> None:
        super().__init__(message, status=status)
        self.remaining_ms = remaining_ms

    @property
    def remaining(self) -> Optional[float]:
        """Seconds the countdown still runs."""
        return None if self.remaining_ms is None else self.remaining_ms / 1000.0

    @property
    def display_seconds(self) -> Optional[int]:
        """The ceiling of :attr:`remaining`: what a "Resend (Ns)" button shows."""
        return None if self.remaining_ms is None else -(-self.remaining_ms // 1000)


class Closed(TickgateError):
    """``TG_E_CLOSED``: the engine was closed."""

    STATUS = Status.E_CLOSED


class InvalidHandle(TickgateError):
    """``TG_E_INVALID_HANDLE``: the pointer is not an engine handle."""

    STATUS = Status.E_INVALID_HANDLE


class WrongMode(TickgateError):
    """``TG_E_WRONG_MODE``: needs the other delivery mode or clock."""

    STATUS = Status.E_WRONG_MODE


class Busy(TickgateError):
    """``TG_E_BUSY``: a dispatch of this engine is already running."""

    STATUS = Status.E_BUSY


class VersionMismatch(TickgateError):
    """``TG_E_VERSION``: an options struct with a ``struct_size`` the library cannot accept."""

    STATUS = Status.E_VERSION


class OSFailure(TickgateError):
    """``TG_E_SYSTEM``: an operating-system call failed; the message names it and its errno."""

    STATUS = Status.E_SYSTEM


_BY_STATUS: Dict[int, Type[TickgateError]] = {
    cls.STATUS: cls  # type: ignore[misc]
    for cls in (
        InvalidArgument,
        InvalidKey,
        InvalidDuration,
        NotFound,
        CoolingDown,
        Closed,
        InvalidHandle,
        WrongMode,
        Busy,
        VersionMismatch,
        OSFailure,
    )
}


def error_for_status(status: int, message: str = "") -> TickgateError:
    """The exception for a non-OK status (the base class for unknown values)."""
    cls = _BY_STATUS.get(int(status), TickgateError)
    return cls(message, status=status)
