"""ctypes declarations of tickgate.h: structs, callback types, and every function.

Every ``tg_`` function of the header is listed in :data:`FUNCTIONS` with its
``restype`` and ``argtypes``; :func:`declare` applies them to an opened
library, and functions that return a ``tg_status`` get an ``errcheck`` that
raises the matching :class:`tickgate.TickgateError` subclass with the
thread's ``tg_last_error_message()``. The test suite parses the header and
checks that nothing is missing, and compares the struct sizes with a C
compiler's.

The library is opened lazily, on first use, by :func:`library` (or
explicitly by :func:`load_library`), so that ``import tickgate`` works before
the library is found and an explicit path can still be given.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import errors as _errors
from ._enums import Status, StoreFailure
from ._loader import LibraryError, LoadedLibrary, open_library

# ---------------------------------------------------------------------------
# Constants of the header
# ---------------------------------------------------------------------------

# The numbers of include/tickgate_version.h (build.version and test_ffi.py
# check that they agree).
TG_VERSION_MAJOR = 0
TG_VERSION_MINOR = 2
TG_VERSION_PATCH = 0
TG_VERSION_STRING = f"{TG_VERSION_MAJOR}.{TG_VERSION_MINOR}.{TG_VERSION_PATCH}"
TG_VERSION_HEX = (TG_VERSION_MAJOR << 16) | (TG_VERSION_MINOR << 8) | TG_VERSION_PATCH

#: The default of tg_engine_options.store_timeout_ms.
TG_STORE_TIMEOUT_DEFAULT_MS = 5000
#: Largest struct_size any versioned struct may declare.
TG_STRUCT_SIZE_MAX = 4096
TG_KEY_MAX_BYTES = 256
TG_DURATION_MAX_MS = 31536000000
TG_TICK_INTERVAL_MIN_MS = 10
TG_TICK_INTERVAL_MAX_MS = 86400000
TG_TICK_INTERVAL_DEFAULT_MS = 1000

TG_START_RESTART = 0x1
TG_STORE_START_FRESH_IF_CORRUPT = 0x1
TG_STORE_FULL_SYNC = 0x2
TG_STORE_ENGINE_CLOCK = 0x4
TG_STORE_FAIL_OPEN = 0x8
TG_STORE_NO_LOCAL_REFUSALS = 0x10
TG_EVENT_FLAG_LOCAL_ONLY = 0x1

TG_POLICY_MAX_STEPS = 8
TG_WRONG_CODES_MAX = 1000
TG_BUDGET_MAX_WINDOWS = 4
TG_BUDGET_MAX_SENDS = 100000
TG_SEND_MAX_BUDGETS = 8
TG_BUDGET_NONE = ctypes.c_size_t(-1).value
TG_GUARD_LIST_MAX_BYTES = 65536
TG_WARNING_UNVERIFIED_BY_COUNTRY_DAILY = 0x1
TG_WARNING_UNVERIFIED_BY_COUNTRY_HOURLY = 0x2
TG_WARNING_UNVERIFIED_BY_ADDRESS_DAILY = 0x4
TG_WARNING_UNVERIFIED_BY_ADDRESS_HOURLY = 0x8
TG_WARNING_COUNTRIES_BY_ADDRESS_DAILY = 0x10
TG_WARNING_UNVERIFIED_BY_RANGE_DAILY = 0x20
TG_WARNING_UNVERIFIED_BY_RANGE_HOURLY = 0x40
TG_TITLE_MAX_BYTES = 128
TG_TITLE_MAX_PLACEHOLDERS = 8
TG_TITLE_BUFFER_BYTES = 512
TG_STATS_STATUS_SLOTS = 32
TG_STATS_STORE_FAILURE_SLOTS = 16
TG_STATS_LATENCY_BUCKETS = 16
#: TG_STATS_LATENCY_BOUNDS_US: the buckets' upper bounds in µs, the last
#: (INT64_MAX) standing for none.
TG_STATS_LATENCY_BOUNDS_US = (100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
                              500000, 1000000, 2500000, 5000000, 2**63 - 1)

# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------

#: ``tg_status`` (a C enum: int-sized).
tg_status = c_int
#: ``tg_store_failure`` (a C enum of small non-negative values, which C
#: compilers make an unsigned int). A type other than ``tg_status``'s, so
#: that :func:`declare` gives ``tg_last_store_failure`` no errcheck.
tg_store_failure = c_uint
#: The other C enums (int-sized).
tg_delivery = c_int
tg_clock_kind = c_int
tg_event_kind = c_int
tg_button_state = c_int
tg_send_outcome = c_int
tg_cancel_reason = c_int
tg_require_result = c_int
tg_gate_event_kind = c_int
#: Ids: ``tg_subscription``, ``tg_ticket``, ``tg_request``.
tg_subscription = c_uint64
tg_ticket = c_uint64
tg_request = c_uint64
#: ``tg_engine *``: an opaque handle (an id in disguise, never dereferenced).
tg_engine_p = c_void_p


class tg_engine_options(Structure):
    """``struct tg_engine_options``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("delivery", tg_delivery),
        ("clock", tg_clock_kind),
        ("tick_interval_ms", c_int64),
        ("store_path", c_char_p),
        ("store_commit_delay_ms", c_int64),
        ("store_flags", c_uint32),
        ("manual_boot_ms", c_int64),
        ("manual_wall_ms", c_int64),
        ("manual_boot_id", c_char_p),
        ("store_timeout_ms", c_int64),
        ("store_url", c_char_p),
        ("store_prefix", c_char_p),
    ]


class tg_event(Structure):
    """``struct tg_event`` (valid only during the callback)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", tg_event_kind),
        ("scope", c_char_p),
        ("subject", c_char_p),
        ("remaining_ms", c_int64),
        ("display_seconds", c_int64),
        ("duration_ms", c_int64),
        ("subscription", tg_subscription),
        ("state", tg_button_state),
        ("enabled", c_int),
        ("title", c_char_p),
        ("flags", c_uint32),
    ]


class tg_countdown_info(Structure):
    """``struct tg_countdown_info`` (valid only during the visit callback)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("scope", c_char_p),
        ("subject", c_char_p),
        ("remaining_ms", c_int64),
        ("display_seconds", c_int64),
        ("duration_ms", c_int64),
    ]


class tg_policy(Structure):
    """``struct tg_policy``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("step_count", c_uint32),
        ("cooldown_ms", c_int64 * TG_POLICY_MAX_STEPS),
        ("window_max_sends", c_uint32),
        ("window_ms", c_int64),
        ("quiet_reset_ms", c_int64),
        ("ticket_timeout_ms", c_int64),
        ("max_wrong_codes", c_uint32),
    ]


class tg_titles(Structure):
    """``struct tg_titles`` (NULL fields keep the English default)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("idle", c_char_p),
        ("sending", c_char_p),
        ("cooling", c_char_p),
        ("ready_again", c_char_p),
        ("locked", c_char_p),
        ("code_dead", c_char_p),
    ]


class tg_button(Structure):
    """``struct tg_button``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("state", tg_button_state),
        ("enabled", c_int),
        ("remaining_ms", c_int64),
        ("display_seconds", c_int64),
        ("title", c_char * TG_TITLE_BUFFER_BYTES),
    ]


class tg_budget(Structure):
    """``struct tg_budget``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("window_count", c_uint32),
        ("max_sends", c_uint32 * TG_BUDGET_MAX_WINDOWS),
        ("window_ms", c_int64 * TG_BUDGET_MAX_WINDOWS),
    ]


class tg_budget_key(Structure):
    """``struct tg_budget_key`` (no struct_size: it never grows)."""

    _fields_ = [
        ("budget", c_char_p),
        ("key", c_char_p),
    ]


class tg_budget_usage(Structure):
    """``struct tg_budget_usage``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("used", c_uint32),
        ("max_sends", c_uint32),
        ("window_ms", c_int64),
        ("frees_in_ms", c_int64),
    ]


class tg_gate_event(Structure):
    """``struct tg_gate_event`` (valid only during the callback)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", tg_gate_event_kind),
        ("realm", c_char_p),
        ("logged_in", c_int),
        ("session_remaining_ms", c_int64),
        ("queued", c_size_t),
        ("subscription", tg_subscription),
    ]


class tg_guard(Structure):
    """``struct tg_guard``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("mode", c_uint32),
        ("allowed_destinations", c_char_p),
        ("refused_destinations", c_char_p),
        ("always_allow_numbers", c_char_p),
        ("always_allow_addresses", c_char_p),
        ("always_allow_countries", c_char_p),
        ("always_allow_skips_budgets", c_int),
        *[(name, c_uint32) for name in (
            "country_daily_minimum", "country_history_percent", "country_day_percent", "country_hourly_minimum",
            "country_hourly_divisor", "country_hour_percent", "address_daily_minimum", "address_day_percent",
            "address_hourly_minimum", "address_hourly_divisor", "address_countries_maximum", "history_days",
            "record_stream_length", "unverified_after_seconds", "range_signals", "range_daily_minimum",
            "range_hourly_minimum", "challenge_signals", "challenge_pass_seconds", "range_new_daily_minimum",
            "range_new_hourly_minimum",
        )],
    ]


class tg_number_info(Structure):
    """``struct tg_number_info``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("calling_code", ctypes.c_char * 4),
        ("region", ctypes.c_char * 4),
        ("digits", c_uint32),
    ]


#: The counts and thresholds of a ``tg_guard_record``, in order.
GUARD_RECORD_COUNTS = (
    "country_unverified_day", "country_unverified_hour", "country_verified_day", "country_verified_hour",
    "country_verified_daily_max", "address_unverified_day", "address_unverified_hour", "address_verified_day",
    "address_countries_day", "country_daily_threshold", "country_hourly_threshold", "address_daily_threshold",
    "address_hourly_threshold",
)

#: The range counts of a ``tg_guard_record`` (0.2.0 on), in order.
GUARD_RECORD_RANGE_COUNTS = (
    "range_unverified_day", "range_unverified_hour", "range_daily_threshold", "range_hourly_threshold",
)


class tg_guard_record(Structure):
    """``struct tg_guard_record`` (valid only during the callback)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("scope", c_char_p),
        ("number", c_char_p),
        ("country", c_char_p),
        ("client_address", c_char_p),
        ("wall_ms", c_int64),
        ("status", tg_status),
        ("message", c_char_p),
        ("ticket", tg_ticket),
        ("mode", c_uint32),
        ("warnings", c_uint32),
        ("bypass", c_char_p),
        ("rule", c_char_p),
        *[(name, c_uint32) for name in GUARD_RECORD_COUNTS],
        ("address_skipped", ctypes.c_int),
        ("range", c_char_p),
        *[(name, c_uint32) for name in GUARD_RECORD_RANGE_COUNTS],
        ("challenge_passed", ctypes.c_int),
        ("outcome", c_uint32),
        ("code_sent_wall_ms", c_int64),
    ]


#: ``void (*tg_guard_record_fn)(const tg_guard_record *, void *)``
tg_guard_record_fn = CFUNCTYPE(None, POINTER(tg_guard_record), c_void_p)

class tg_stats(Structure):
    """``struct tg_stats``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("sends_granted", c_uint64),
        ("sends_refused", c_uint64 * TG_STATS_STATUS_SLOTS),
        ("sends_refused_locally", c_uint64),
        ("fail_open_grants", c_uint64),
        ("write_backs", c_uint64),
        ("write_back_failures", c_uint64),
        ("verified", c_uint64),
        ("wrong_codes", c_uint64),
        ("codes_killed", c_uint64),
        ("verifies_refused_dead", c_uint64),
        ("verifies_refused_locally", c_uint64),
        ("store_calls", c_uint64),
        ("store_latency", c_uint64 * TG_STATS_LATENCY_BUCKETS),
        ("store_latency_sum_ns", c_uint64),
        ("store_errors", c_uint64 * TG_STATS_STORE_FAILURE_SLOTS),
        ("notices", c_uint64),
        ("notices_timed", c_uint64),
        ("notice_lag", c_uint64 * TG_STATS_LATENCY_BUCKETS),
        ("notice_lag_sum_ns", c_uint64),
        ("notice_links_lost", c_uint64),
        ("local_refusals_now", c_uint64),
        ("countdowns_now", c_uint64),
        ("send_records_now", c_uint64),
        ("local_grants_now", c_uint64),
    ]


#: ``void (*tg_event_fn)(const tg_event *, void *)``
tg_event_fn = CFUNCTYPE(None, POINTER(tg_event), c_void_p)
#: ``void (*tg_destroy_fn)(void *)``
tg_destroy_fn = CFUNCTYPE(None, c_void_p)
#: ``int (*tg_countdown_visit_fn)(const tg_countdown_info *, void *)``
tg_countdown_visit_fn = CFUNCTYPE(c_int, POINTER(tg_countdown_info), c_void_p)
#: ``void (*tg_action_fn)(tg_request, void *)``
tg_action_fn = CFUNCTYPE(None, tg_request, c_void_p)
#: ``void (*tg_cancel_fn)(tg_request, tg_cancel_reason, void *)``
tg_cancel_fn = CFUNCTYPE(None, tg_request, tg_cancel_reason, c_void_p)
#: ``void (*tg_gate_event_fn)(const tg_gate_event *, void *)``
tg_gate_event_fn = CFUNCTYPE(None, POINTER(tg_gate_event), c_void_p)

# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------

#: name -> (restype, argtypes). Every function of tickgate.h, in header order.
FUNCTIONS: Dict[str, Tuple[Any, Sequence[Any]]] = {
    "tg_version": (c_uint32, ()),
    "tg_version_string": (c_char_p, ()),
    "tg_status_string": (c_char_p, (tg_status,)),
    "tg_last_error_message": (c_char_p, ()),
    "tg_last_store_failure": (tg_store_failure, ()),
    "tg_engine_options_init": (tg_status, (POINTER(tg_engine_options), c_size_t)),
    "tg_engine_open": (tg_status, (POINTER(tg_engine_options), POINTER(tg_engine_p))),
    "tg_engine_close": (tg_status, (tg_engine_p,)),
    "tg_engine_fd": (tg_status, (tg_engine_p, POINTER(c_int))),
    "tg_engine_dispatch": (tg_status, (tg_engine_p, POINTER(c_size_t))),
    "tg_engine_store_warning": (tg_status, (tg_engine_p, c_char_p, c_size_t, POINTER(c_size_t))),
    "tg_clock_advance": (tg_status, (tg_engine_p, c_int64)),
    "tg_clock_now": (tg_status, (tg_engine_p, POINTER(c_int64))),
    "tg_clock_set_wall": (tg_status, (tg_engine_p, c_int64)),
    "tg_store_flush": (tg_status, (tg_engine_p,)),
    "tg_store_finish_upgrade": (tg_status, (tg_engine_p, POINTER(c_int))),
    "tg_countdown_start": (
        tg_status,
        (tg_engine_p, c_char_p, c_char_p, c_int64, c_int64, c_uint32, POINTER(c_int64)),
    ),
    "tg_countdown_cancel": (tg_status, (tg_engine_p, c_char_p, c_char_p)),
    "tg_countdown_cancel_scope": (tg_status, (tg_engine_p, c_char_p, POINTER(c_size_t))),
    "tg_countdown_cancel_all": (tg_status, (tg_engine_p, POINTER(c_size_t))),
    "tg_countdown_remaining": (
        tg_status,
        (tg_engine_p, c_char_p, c_char_p, POINTER(c_int64), POINTER(c_int64)),
    ),
    "tg_countdown_list": (
        tg_status,
        (tg_engine_p, c_char_p, tg_countdown_visit_fn, c_void_p, POINTER(c_size_t)),
    ),
    "tg_subscribe": (
        tg_status,
        (
            tg_engine_p,
            c_char_p,
            c_char_p,
            tg_event_fn,
            c_void_p,
            tg_destroy_fn,
            POINTER(tg_subscription),
        ),
    ),
    "tg_unsubscribe": (tg_status, (tg_engine_p, tg_subscription)),
    "tg_policy_init": (tg_status, (POINTER(tg_policy), c_size_t)),
    "tg_policy_set": (tg_status, (tg_engine_p, c_char_p, POINTER(tg_policy))),
    "tg_policy_get": (tg_status, (tg_engine_p, c_char_p, POINTER(tg_policy))),
    "tg_send_begin": (
        tg_status,
        (tg_engine_p, c_char_p, c_char_p, POINTER(tg_ticket), POINTER(c_int64)),
    ),
    "tg_send_end": (
        tg_status,
        (tg_engine_p, tg_ticket, tg_send_outcome, c_int64, POINTER(c_int64)),
    ),
    "tg_verified": (tg_status, (tg_engine_p, c_char_p, c_char_p)),
    "tg_verify_failed": (tg_status, (tg_engine_p, c_char_p, c_char_p, POINTER(c_uint32))),
    "tg_titles_set": (tg_status, (tg_engine_p, c_char_p, POINTER(tg_titles))),
    "tg_button_get": (tg_status, (tg_engine_p, c_char_p, c_char_p, POINTER(tg_button))),
    "tg_budget_init": (tg_status, (POINTER(tg_budget), c_size_t)),
    "tg_budget_set": (tg_status, (tg_engine_p, c_char_p, POINTER(tg_budget))),
    "tg_send_begin_budgeted": (
        tg_status,
        (
            tg_engine_p,
            c_char_p,
            c_char_p,
            POINTER(tg_budget_key),
            c_size_t,
            POINTER(tg_ticket),
            POINTER(c_int64),
            POINTER(c_size_t),
        ),
    ),
    "tg_budget_read": (tg_status, (tg_engine_p, c_char_p, c_char_p, POINTER(tg_budget_usage))),
    "tg_budget_reset": (tg_status, (tg_engine_p, c_char_p, c_char_p)),
    "tg_gate_require": (
        tg_status,
        (
            tg_engine_p,
            c_char_p,
            c_int,
            c_char_p,
            tg_action_fn,
            tg_cancel_fn,
            c_void_p,
            tg_destroy_fn,
            POINTER(tg_request),
            POINTER(tg_require_result),
        ),
    ),
    "tg_gate_withdraw": (tg_status, (tg_engine_p, tg_request)),
    "tg_gate_login_succeeded": (tg_status, (tg_engine_p, c_char_p, c_int64)),
    "tg_gate_login_cancelled": (tg_status, (tg_engine_p, c_char_p)),
    "tg_gate_logout": (tg_status, (tg_engine_p, c_char_p)),
    "tg_gate_session": (tg_status, (tg_engine_p, c_char_p, POINTER(c_int), POINTER(c_int64))),
    "tg_gate_set_request_timeout": (tg_status, (tg_engine_p, c_char_p, c_int64)),
    "tg_gate_subscribe": (
        tg_status,
        (tg_engine_p, c_char_p, tg_gate_event_fn, c_void_p, tg_destroy_fn, POINTER(tg_subscription)),
    ),
    "tg_guard_init": (tg_status, (POINTER(tg_guard), c_size_t)),
    "tg_guard_set": (tg_status, (tg_engine_p, c_char_p, POINTER(tg_guard))),
    "tg_send_begin_from": (
        tg_status,
        (
            tg_engine_p,
            c_char_p,
            c_char_p,
            c_char_p,
            POINTER(tg_budget_key),
            c_size_t,
            POINTER(tg_ticket),
            POINTER(c_int64),
            POINTER(c_size_t),
        ),
    ),
    "tg_number_parse": (tg_status, (c_char_p, POINTER(tg_number_info))),
    "tg_challenge_passed": (tg_status, (tg_engine_p, c_char_p, c_char_p, c_char_p)),
    "tg_guard_subscribe": (
        tg_status,
        (tg_engine_p, c_char_p, tg_guard_record_fn, c_void_p, tg_destroy_fn, POINTER(tg_subscription)),
    ),
    "tg_guard_subscribe_outcomes": (
        tg_status,
        (tg_engine_p, c_char_p, tg_guard_record_fn, c_void_p, tg_destroy_fn, POINTER(tg_subscription)),
    ),
    "tg_stats_read": (tg_status, (tg_engine_p, POINTER(tg_stats))),
}

#: Functions whose failure reports a wait through an output parameter:
#: name -> index of that argument (read for the _Waiting errors).
WAIT_OUTPUTS: Dict[str, int] = {
    "tg_countdown_start": 6,  # *out_remaining_ms on TG_E_COOLING_DOWN
    "tg_send_begin": 4,  # *out_wait_ms on COOLING_DOWN, IN_FLIGHT, LOCKED
    "tg_send_begin_budgeted": 6,  # the same
    "tg_send_begin_from": 7,  # the same
}
#: Functions whose failure names a budget: name -> index of
#: ``*out_budget_index`` (TG_BUDGET_NONE when no budget refused).
BUDGET_OUTPUTS: Dict[str, int] = {
    "tg_send_begin_budgeted": 7,
    "tg_send_begin_from": 8,
}
_WAIT_STATUSES = (Status.E_COOLING_DOWN, Status.E_IN_FLIGHT, Status.E_LOCKED)
_STORE_STATUSES = _errors.STORE_STATUSES


def _out_value(arg: Any) -> Optional[int]:
    """The value behind a ``pointer(x)`` or ``byref(x)`` argument (None for NULL)."""
    if arg is None:
        return None
    obj = getattr(arg, "_obj", None)  # a byref() CArgObject
    if obj is None and hasattr(arg, "contents"):
        obj = arg.contents if arg else None
    value = None if obj is None else obj.value
    return None if value is None else int(value)


#: Advice in the library's messages that names a C function, as Python
#: callers call it.
_PYTHON_ADVICE = (("(set it with tg_budget_set)", "(set it with Engine.set_budget)"),)


def python_advice(message: str) -> str:
    """``message`` with the C functions it tells the caller to call named as
    the Python methods they are (``tg_budget_set``: ``Engine.set_budget``)."""
    if "tg_" in message:
        for c_text, python_text in _PYTHON_ADVICE:
            message = message.replace(c_text, python_text)
    return message


def _make_errcheck(
    cdll: ctypes.CDLL, wait_index: Optional[int] = None, budget_index: Optional[int] = None
) -> Callable[..., int]:
    last_error = cdll.tg_last_error_message
    last_store_failure = cdll.tg_last_store_failure

    def errcheck(result: int, func: Any, args: Tuple[Any, ...]) -> int:
        if result == Status.OK:
            return result
        # Read the detail at once, on this thread, before any other call;
        # the kind of a store failure too (only store errors carry one).
        raw = last_error()
        message = python_advice(raw.decode("utf-8", "replace")) if raw else ""
        failure = last_store_failure() if result in _STORE_STATUSES else StoreFailure.NONE
        error = _errors.error_for_status(result, message, failure)
        if wait_index is not None and result in _WAIT_STATUSES:
            error.remaining_ms = _out_value(args[wait_index])  # type: ignore[attr-defined]
        if budget_index is not None and result == Status.E_LOCKED:
            index = _out_value(args[budget_index])
            if index is not None and index != TG_BUDGET_NONE:
                error.budget_index = index  # type: ignore[attr-defined]
        raise error

    return errcheck


def declare(cdll: ctypes.CDLL) -> ctypes.CDLL:
    """Set restype/argtypes (and errcheck for tg_status functions) on every function."""
    for name in FUNCTIONS:
        restype, argtypes = FUNCTIONS[name]
        func = getattr(cdll, name)
        func.restype = restype
        func.argtypes = list(argtypes)
    for name, (restype, _) in FUNCTIONS.items():
        if restype is tg_status:
            getattr(cdll, name).errcheck = _make_errcheck(
                cdll, WAIT_OUTPUTS.get(name), BUDGET_OUTPUTS.get(name)
            )
    return cdll


# ---------------------------------------------------------------------------
# The process's library
# ---------------------------------------------------------------------------

_lock = threading.Lock()
_loaded: Optional[LoadedLibrary] = None


def load_library(path: Optional[str | os.PathLike[str]] = None) -> LoadedLibrary:
    """Open libtickgate.so for this process (once) and declare its functions.

    ``path`` is tried first, then ``$TICKGATE_LIBRARY``, a copy inside the
    package, and the system loader (see :mod:`tickgate._loader`). Calling it
    again returns the library already loaded; asking then for a different
    file raises :class:`~tickgate.LibraryError`, because one process holds
    one Tickgate library.
    """
    global _loaded
    with _lock:
        if _loaded is not None:
            if path is not None and not _same_file(os.fspath(path), _loaded.path):
                raise LibraryError(
                    f"tickgate: libtickgate is already loaded from {_loaded.path} "
                    f"({_loaded.source}); cannot load {os.fspath(path)} as well"
                )
            return _loaded
        loaded = open_library(path)
        declare(loaded.cdll)
        for status in Status:
            text = loaded.cdll.tg_status_string(status)
            if text:
                _errors._STATUS_TEXT[status] = text.decode("utf-8", "replace")
        _loaded = loaded
        return loaded


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def library() -> ctypes.CDLL:
    """The declared CDLL, loading it with the default lookup on first use."""
    loaded = _loaded
    if loaded is None:
        loaded = load_library()
    return loaded.cdll


def loaded_library() -> Optional[LoadedLibrary]:
    """What :func:`load_library` loaded, or None if nothing yet."""
    return _loaded
