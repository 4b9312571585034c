"""Exceptions: one class per ``tg_status`` error, under :class:`TickgateError`.

Errors that come from the library carry the library's detail message
(``tg_last_error_message()``); a few are raised by the bindings themselves
before calling C (a key with a NUL byte, a duration that is not a finite
number) and carry the same status the library would have given.

Store errors (:class:`StoreIO`, :class:`StoreUnknown`, :class:`StoreCorrupt`,
:class:`StoreVersion`) also carry ``failure``, the kind of the failure
(``tg_last_store_failure()``, a :class:`~tickgate.StoreFailure`), and a
``TG_E_STORE_IO`` of a known kind raises the subclass of :class:`StoreIO`
for it (:class:`StoreUnreachable`, :class:`StoreTimeout`, :class:`StoreAuth`,
:class:`StoreBusy`, :class:`StoreReadOnly`, :class:`StoreUnsupported`).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Optional, Tuple, Type

from ._enums import Status, StoreFailure
from ._status import STATUS_TEXT
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
    "InFlight",
    "Locked",
    "Expired",
    "InvalidTemplate",
    "StoreCorrupt",
    "StoreVersion",
    "StoreIO",
    "StoreUnreachable",
    "StoreTimeout",
    "StoreAuth",
    "StoreBusy",
    "StoreReadOnly",
    "StoreUnsupported",
    "StoreUnknown",
    "CodeDead",
    "InvalidNumber",
    "DestinationRefused",
    "PumpingSuspected",
    "OlderEnginesLive",
    "ChallengeRequired",
    "RequestCancelled",
    "LibraryError",
    "LibraryNotFound",
    "LibraryVersionMismatch",
    "error_for_status",
    "STORE_STATUSES",
]

# The library's tg_status_string() texts (the header's table until _ffi
# refreshes them from the library when it loads it).
_STATUSES: Dict[int, Status] = {int(s): s for s in Status}
_FAILURES: Dict[int, StoreFailure] = {int(f): f for f in StoreFailure}

_STATUS_TEXT: Dict[Status, str] = dict(STATUS_TEXT)


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
        # A dict lookup, not Status(status): errors are raised on hot paths
        # (a refused send), and an unknown value stays an int.
        status = _STATUSES.get(status, status)
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


class _Waiting(TickgateError):
    """An error that says how long to wait: ``remaining_ms`` (None when the
    call that failed does not report it), ``remaining`` in seconds, and
    ``display_seconds`` (what a button shows)."""

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
        """Seconds to wait."""
        return None if self.remaining_ms is None else self.remaining_ms / 1000.0

    @property
    def display_seconds(self) -> Optional[int]:
        """The ceiling of :attr:`remaining`: what a "Resend (Ns)" button shows."""
        return None if self.remaining_ms is None else -(-self.remaining_ms // 1000)


class CoolingDown(_Waiting):
    """``TG_E_COOLING_DOWN``: the key is already counting down.

    ``remaining`` / ``remaining_ms`` say how long it still runs (from
    :meth:`~tickgate.Engine.start` and :meth:`~tickgate.Engine.send_begin`).
    """

    STATUS = Status.E_COOLING_DOWN


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
    """``TG_E_BUSY``: try again. A dispatch of this engine is already running,
    a guarded send's guard changed three times during it (nothing charged), or
    an engine with no store holds 100 000 challenge passes of the scope."""

    STATUS = Status.E_BUSY


class VersionMismatch(TickgateError):
    """``TG_E_VERSION``: an options struct with a ``struct_size`` the library cannot accept."""

    STATUS = Status.E_VERSION


class OSFailure(TickgateError):
    """``TG_E_SYSTEM``: an operating-system call failed; the message names it and its errno."""

    STATUS = Status.E_SYSTEM


class InFlight(_Waiting):
    """``TG_E_IN_FLIGHT``: a send for this key is under way; ``remaining`` is
    the time until its ticket expires."""

    STATUS = Status.E_IN_FLIGHT


class Locked(_Waiting):
    """``TG_E_LOCKED``: the key reached its policy's cap of sends per window,
    or a budget the send named is spent; ``remaining`` is the time until a
    send is free again. For a budget, ``budget`` and ``budget_key`` name it
    (and ``budget_index`` is its place in the send's list); otherwise all
    three are None."""

    STATUS = Status.E_LOCKED
    budget: Optional[str] = None
    budget_key: Optional[str] = None
    budget_index: Optional[int] = None


class CodeDead(TickgateError):
    """``TG_E_CODE_DEAD``: the key's code took too many wrong codes; only a
    new send revives the key (and the login must be refused)."""

    STATUS = Status.E_CODE_DEAD


class Expired(TickgateError):
    """``TG_E_EXPIRED``: the send ticket expired before it was ended."""

    STATUS = Status.E_EXPIRED


class InvalidTemplate(TickgateError, ValueError):
    """``TG_E_INVALID_TEMPLATE``: a title template is malformed."""

    STATUS = Status.E_INVALID_TEMPLATE


class _StoreError(TickgateError):
    """A store error: ``failure`` is the kind of the failure, a
    :class:`~tickgate.StoreFailure` from ``tg_last_store_failure()``
    (``StoreFailure.NONE`` when the store told no kind, such as a SQLite
    file's error; an ``int`` if the library returned a kind these bindings
    do not know)."""

    #: The kind this class stands for (``NONE``: none in particular).
    FAILURE: StoreFailure = StoreFailure.NONE

    def __init__(
        self,
        message: str = "",
        *,
        status: Optional[int] = None,
        failure: Optional[int] = None,
    ) -> None:
        super().__init__(message, status=status)
        if failure is None:
            failure = self.FAILURE
        self.failure = _FAILURES.get(failure, failure)


class StoreCorrupt(_StoreError):
    """``TG_E_STORE_CORRUPT``: the store file is corrupt or not a database,
    or a row or Redis key holds something Tickgate did not write."""

    STATUS = Status.E_STORE_CORRUPT


class StoreVersion(_StoreError):
    """``TG_E_STORE_VERSION``: the store was written by a newer Tickgate."""

    STATUS = Status.E_STORE_VERSION


class StoreIO(_StoreError, OSError):
    """``TG_E_STORE_IO``: the store cannot be created, opened, read or
    written, or the Redis server could not be reached or refused; the change
    was not made. A known ``failure`` raises one of the subclasses below."""

    STATUS = Status.E_STORE_IO


class StoreUnreachable(StoreIO, ConnectionError):
    """``TG_E_STORE_IO`` with ``TG_STORE_FAILURE_UNREACHABLE``: the store
    cannot be reached (connection refused or lost and not made again in time)."""

    FAILURE = StoreFailure.UNREACHABLE


class StoreTimeout(StoreIO, TimeoutError):
    """``TG_E_STORE_IO`` with ``TG_STORE_FAILURE_TIMEOUT``: the store did not
    answer within ``store_timeout_ms``, and the change was not made."""

    FAILURE = StoreFailure.TIMEOUT


class StoreAuth(StoreIO):
    """``TG_E_STORE_IO`` with ``TG_STORE_FAILURE_AUTH``: the server refused the
    login or a command for want of rights."""

    FAILURE = StoreFailure.AUTH


class StoreBusy(StoreIO):
    """``TG_E_STORE_IO`` with ``TG_STORE_FAILURE_BUSY``: the server cannot
    serve now (loading its data, busy with a script)."""

    FAILURE = StoreFailure.BUSY


class StoreReadOnly(StoreIO):
    """``TG_E_STORE_IO`` with ``TG_STORE_FAILURE_READ_ONLY``: the server is a
    read-only replica (a failover is under way, or the URL names a replica);
    the change was not made."""

    FAILURE = StoreFailure.READ_ONLY


class StoreUnsupported(StoreIO):
    """``TG_E_STORE_IO`` with ``TG_STORE_FAILURE_UNSUPPORTED``: the server, its
    topology or the data's format is not supported."""

    FAILURE = StoreFailure.UNSUPPORTED


class StoreUnknown(_StoreError):
    """``TG_E_STORE_UNKNOWN``: the store may or may not have made the change
    (the request went out and no answer came back in time, or the connection
    was lost). Nothing will apply later: read the key to learn what holds.
    Not a :class:`StoreIO`, whose change surely was not made."""

    STATUS = Status.E_STORE_UNKNOWN


class InvalidNumber(TickgateError, ValueError):
    """``TG_E_INVALID_NUMBER``: the subject of a guarded scope is not a phone
    number in E.164 form ("+", a country calling code, at most 15 digits)."""

    STATUS = Status.E_INVALID_NUMBER


class DestinationRefused(TickgateError):
    """``TG_E_DESTINATION_REFUSED``: the scope's guard does not send codes to
    the number's country or prefix; the message names the rule."""

    STATUS = Status.E_DESTINATION_REFUSED


class PumpingSuspected(TickgateError):
    """``TG_E_PUMPING_SUSPECTED``: a pumping signal of the scope's guard
    crossed its threshold (enforce mode); ``warnings`` names them."""

    STATUS = Status.E_PUMPING_SUSPECTED
    warnings: Tuple[str, ...] = ()


class OlderEnginesLive(TickgateError):
    """``TG_E_OLDER_ENGINES_LIVE``: :meth:`tickgate.Engine.finish_store_upgrade`
    was refused because engines that cannot read the store's next format
    (engines of an older release) are still live on it; nothing changed."""

    STATUS = Status.E_OLDER_ENGINES_LIVE


class ChallengeRequired(TickgateError):
    """``TG_E_CHALLENGE_REQUIRED``: every pumping signal the send crossed
    answers with a challenge (``challenge_signals`` of
    :meth:`tickgate.Engine.set_guard`); the message names them. Show the
    person a challenge, call :meth:`tickgate.Engine.challenge_passed` once
    it is passed, and send again."""

    STATUS = Status.E_CHALLENGE_REQUIRED


class RequestCancelled(Exception):
    """A gate request was cancelled instead of run (raised by
    :meth:`tickgate.aio.AsyncGate.require`); ``reason`` is the
    :class:`~tickgate.CancelReason`."""

    def __init__(self, reason: object, realm: str = "") -> None:
        name = getattr(reason, "name", str(reason))
        super().__init__(f"request of realm {realm!r} cancelled: {name}" if realm else f"request cancelled: {name}")
        self.reason = reason
        self.realm = realm


_BY_STATUS: Dict[int, Type[TickgateError]] = {
    cls.STATUS: cls
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
        InFlight,
        Locked,
        Expired,
        InvalidTemplate,
        StoreCorrupt,
        StoreVersion,
        StoreIO,
        CodeDead,
        StoreUnknown,
        InvalidNumber,
        DestinationRefused,
        PumpingSuspected,
        OlderEnginesLive,
        ChallengeRequired,
    )
}
# TG_E_STORE_IO by the kind of its failure (any other kind: StoreIO itself).
_STORE_IO_BY_FAILURE: Dict[int, Type[StoreIO]] = {
    cls.FAILURE: cls
    for cls in (StoreUnreachable, StoreTimeout, StoreAuth, StoreBusy, StoreReadOnly, StoreUnsupported)
}

#: The statuses whose errors carry the kind of a store failure
#: (``tg_last_store_failure()`` is worth reading after them).
STORE_STATUSES: FrozenSet[Status] = frozenset(
    cls.STATUS for cls in _BY_STATUS.values() if issubclass(cls, _StoreError) and cls.STATUS is not None
)


def error_for_status(status: int, message: str = "", failure: int = StoreFailure.NONE) -> TickgateError:
    """The exception for a non-OK status (the base class for unknown values).

    ``failure`` is ``tg_last_store_failure()``: store errors carry it, and a
    ``TG_E_STORE_IO`` of a known kind gives the subclass of :class:`StoreIO`
    for it. Other errors ignore it.
    """
    cls = _BY_STATUS.get(int(status), TickgateError)
    if issubclass(cls, _StoreError):
        if cls is StoreIO:
            cls = _STORE_IO_BY_FAILURE.get(int(failure), StoreIO)
        return cls(message, status=status, failure=failure)
    return cls(message, status=status)
