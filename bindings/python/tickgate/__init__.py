"""Tickgate for Python: resend countdowns ("Resend (59s)") keyed by (scope, subject).

A ctypes binding of libtickgate.so; nothing is compiled for Python. It covers
the whole C API: countdowns and their observers, the resend flow (send
tickets, policies, button state, titles), the login gate and the durable
store. The library is found on first use (see :func:`load_library`)::

    import tickgate

    with tickgate.Engine() as engine:
        engine.subscribe("login", "+8613800000000", print)
        try:
            engine.start("login", "+8613800000000", 60)
        except tickgate.CoolingDown as busy:
            print(f"wait {busy.remaining:.0f} s")

For asyncio, see :mod:`tickgate.aio`.
"""

from __future__ import annotations

import os
from typing import Optional

from . import _ffi
from ._engine import (
    CallbackErrorHook,
    Engine,
    EventCallback,
    Key,
    Seconds,
    SendTicket,
    Subscription,
    get_callback_error_hook,
    parse_number,
    set_callback_error_hook,
)
from ._enums import (
    ButtonState,
    CancelReason,
    ClockKind,
    Delivery,
    EventKind,
    GateEventKind,
    CodeOutcome,
    GuardMode,
    PumpingWarning,
    RequireResult,
    SendOutcome,
    Status,
    StoreFailure,
)
from ._gate import Gate, GateRequest
from ._loader import ENV_VAR, EXPECTED_MAJOR, LoadedLibrary
from ._stats import Histogram, Stats
from ._types import (
    Budget,
    BudgetUsage,
    Button,
    CountdownInfo,
    Event,
    GateEvent,
    GuardRecord,
    NumberInfo,
    Policy,
    Remaining,
    Session,
    Titles,
)
from .errors import (
    Busy,
    Closed,
    CoolingDown,
    Expired,
    InFlight,
    InvalidArgument,
    InvalidDuration,
    InvalidHandle,
    InvalidKey,
    InvalidTemplate,
    LibraryError,
    LibraryNotFound,
    LibraryVersionMismatch,
    Locked,
    CodeDead,
    NotFound,
    OSFailure,
    RequestCancelled,
    StoreCorrupt,
    StoreAuth,
    StoreBusy,
    StoreReadOnly,
    StoreIO,
    StoreTimeout,
    StoreUnknown,
    InvalidNumber,
    DestinationRefused,
    PumpingSuspected,
    OlderEnginesLive,
    ChallengeRequired,
    StoreUnreachable,
    StoreUnsupported,
    StoreVersion,
    TickgateError,
    VersionMismatch,
    WrongMode,
    error_for_status,
)

#: The version of these bindings: the C header's (tickgate_version.h).
__version__ = _ffi.TG_VERSION_STRING

#: Limits of the C API (tickgate.h).
POLICY_MAX_STEPS = _ffi.TG_POLICY_MAX_STEPS
WRONG_CODES_MAX = _ffi.TG_WRONG_CODES_MAX
BUDGET_MAX_WINDOWS = _ffi.TG_BUDGET_MAX_WINDOWS
BUDGET_MAX_SENDS = _ffi.TG_BUDGET_MAX_SENDS
SEND_MAX_BUDGETS = _ffi.TG_SEND_MAX_BUDGETS
TITLE_MAX_BYTES = _ffi.TG_TITLE_MAX_BYTES
KEY_MAX_BYTES = _ffi.TG_KEY_MAX_BYTES
DURATION_MAX_MS = _ffi.TG_DURATION_MAX_MS
TICK_INTERVAL_MIN_MS = _ffi.TG_TICK_INTERVAL_MIN_MS
TICK_INTERVAL_MAX_MS = _ffi.TG_TICK_INTERVAL_MAX_MS
TICK_INTERVAL_DEFAULT_MS = _ffi.TG_TICK_INTERVAL_DEFAULT_MS


def load_library(path: Optional[str | os.PathLike[str]] = None) -> LoadedLibrary:
    """Load libtickgate.so now (otherwise the first :class:`Engine` does).

    Tried in order: ``path``, ``$TICKGATE_LIBRARY``, a copy inside the
    package (``tickgate/_lib/libtickgate.so*``), the system loader. Raises
    :class:`LibraryNotFound` (an ImportError) listing every place tried, or
    :class:`LibraryVersionMismatch` if the library's major version is not
    the one these bindings were written for.
    """
    return _ffi.load_library(path)


def library_version() -> str:
    """``tg_version_string()`` of the loaded library (loading it if needed)."""
    return (_ffi.library().tg_version_string() or b"").decode()


def status_string(status: int) -> str:
    """``tg_status_string()``: static English text for a status."""
    return (_ffi.library().tg_status_string(int(status)) or b"").decode()


__all__ = [
    "__version__",
    "Engine",
    "Subscription",
    "SendTicket",
    "Gate",
    "GateRequest",
    "Event",
    "Remaining",
    "CountdownInfo",
    "Button",
    "Policy",
    "Titles",
    "Session",
    "GateEvent",
    "GuardRecord",
    "NumberInfo",
    "CodeOutcome",
    "GuardMode",
    "PumpingWarning",
    "parse_number",
    "Key",
    "Seconds",
    "EventCallback",
    "CallbackErrorHook",
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
    "CodeDead",
    "Budget",
    "BudgetUsage",
    "Stats",
    "Histogram",
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
    "InvalidNumber",
    "DestinationRefused",
    "PumpingSuspected",
    "OlderEnginesLive",
    "ChallengeRequired",
    "RequestCancelled",
    "LibraryError",
    "LibraryNotFound",
    "LibraryVersionMismatch",
    "LoadedLibrary",
    "error_for_status",
    "load_library",
    "library_version",
    "status_string",
    "set_callback_error_hook",
    "get_callback_error_hook",
    "ENV_VAR",
    "EXPECTED_MAJOR",
    "KEY_MAX_BYTES",
    "DURATION_MAX_MS",
    "TICK_INTERVAL_MIN_MS",
    "TICK_INTERVAL_MAX_MS",
    "TICK_INTERVAL_DEFAULT_MS",
    "POLICY_MAX_STEPS",
    "WRONG_CODES_MAX",
    "BUDGET_MAX_WINDOWS",
    "BUDGET_MAX_SENDS",
    "SEND_MAX_BUDGETS",
    "TITLE_MAX_BYTES",
]
