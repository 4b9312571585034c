"""The Engine and its send tickets."""

from __future__ import annotations

import atexit
import os
import ctypes
import weakref
from ctypes import byref, c_int, c_int64, c_size_t, c_uint32, create_string_buffer
from datetime import datetime
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from . import _callbacks, _convert, _ffi
from ._callbacks import (
    CallbackErrorHook,
    EventCallback,
    get_callback_error_hook,
    live_slots,
    set_callback_error_hook,
    stray_calls,
)
from ._convert import Key, Seconds
from ._enums import ButtonState, ClockKind, Delivery, GuardMode, SendOutcome
from ._gate import Gate
from ._managed import Managed
from ._stats import Stats, stats_of
from ._subscription import Subscription
from ._types import (
    Budget, BudgetUsage, Button, CountdownInfo, GuardRecord, NumberInfo, Policy, Remaining, Titles, display_seconds_of,
)
from .errors import Closed, Expired, InvalidArgument, InvalidTemplate, Locked, NotFound

__all__ = [
    "Engine",
    "Subscription",
    "SendTicket",
    "Key",
    "Seconds",
    "EventCallback",
    "CallbackErrorHook",
    "set_callback_error_hook",
    "get_callback_error_hook",
    "live_slots",
    "stray_calls",
]

# ---------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------

_live_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


class Engine(Managed[int]):
    """A Tickgate engine: countdowns keyed by (scope, subject), and their observers.

    ``Engine()`` opens an in-memory engine with the library's defaults: the
    real clock (CLOCK_BOOTTIME) and callbacks on the engine's own thread.

    Keyword options:

    ``delivery``
        :class:`Delivery` (or ``"thread"`` / ``"host"``). With
        ``HOST_THREAD`` the engine starts no thread: poll :meth:`fileno` and
        call :meth:`dispatch` (or use :class:`tickgate.aio.AsyncEngine`).
    ``clock``
        :class:`ClockKind` (or ``"system"`` / ``"manual"``). The manual
        clock moves only by :meth:`advance`.
    ``tick_interval`` / ``tick_interval_ms``
        Default tick interval of countdowns, in seconds or in integer
        milliseconds (default: one tick per second).
    ``store_path``
        A SQLite file that keeps cooldowns, send history, policies, titles
        and sessions across restarts (None: memory only).
        ``store_commit_delay`` / ``_ms`` group commits (default: commit each
        change before its call returns; see :meth:`flush`);
        ``store_start_fresh_if_corrupt`` moves a corrupt store aside instead
        of raising :class:`tickgate.StoreCorrupt`; ``store_full_sync`` syncs
        every commit to disk; ``store_timeout`` / ``_ms`` bounds every wait
        for the store's lock (default 5 s; past it :class:`tickgate.StoreIO`).
    ``store_url``
        A Redis server shared by every engine, instead of ``store_path``,
        in one of seven forms:

        - ``redis://[[user]:password@]host[:port][/db]`` (port 6379, db 0)
        - ``rediss://...``: the same over TLS
        - ``redis+unix://[[user]:password@]/path/redis.sock[?db=N]``
        - ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]``
        - ``rediss+sentinel://...``: the same over TLS
        - ``redis+cluster://[[user]:password@]host:port[,host:port...]``
        - ``rediss+cluster://...``: the same over TLS

        user and password may be percent-encoded; options go after ``?``
        (docs/redis.md, "Connecting"). ``store_prefix`` goes before every
        key (default ``"tickgate:"``); ``store_timeout`` / ``_ms`` bounds
        every call (connecting included); ``store_fail_open`` grants sends
        locally while the server is unreachable (default: refused with
        :class:`tickgate.StoreIO`); ``store_local_refusals=False`` asks the
        server for every send and verify (by default a refusal the engine
        already knows is made without a round trip); ``store_engine_clock`` decides by this
        engine's clock instead of the server's (manual-clock tests only).
    ``manual_boot`` / ``manual_wall`` / ``manual_boot_id``
        MANUAL clock only: the first readings of its boot clock and its wall
        clock (seconds, or ``_ms``; the wall clock also takes an aware
        ``datetime``), and its boot id.
    ``library``
        Path of libtickgate.so, tried before ``$TICKGATE_LIBRARY`` (see
        :func:`tickgate.load_library`).

    Durations: every method takes seconds (``int``, ``float``, ``Decimal``,
    ``Fraction`` or a ``timedelta``, rounded half up to the millisecond) or,
    through a ``*_ms`` keyword, exact integer milliseconds (:meth:`advance`
    and :meth:`set_wall`: ``ms``). Results carry both: ``remaining_ms``
    (int) and ``remaining`` (float seconds). Keys are ``str`` (UTF-8) or
    ``bytes``, 1 to 256 bytes.

    Every method may be called from any thread, and from inside a callback.
    Failures raise :class:`tickgate.TickgateError` subclasses; use after
    :meth:`close` raises :class:`tickgate.Closed`.
    """

    def __init__(
        self,
        *,
        delivery: Union[Delivery, int, str] = Delivery.ENGINE_THREAD,
        clock: Union[ClockKind, int, str] = ClockKind.SYSTEM,
        tick_interval: Optional[Seconds] = None,
        tick_interval_ms: Optional[int] = None,
        store_path: Optional[str | os.PathLike[str]] = None,
        store_commit_delay: Optional[Seconds] = None,
        store_commit_delay_ms: Optional[int] = None,
        store_start_fresh_if_corrupt: bool = False,
        store_full_sync: bool = False,
        store_timeout: Optional[Seconds] = None,
        store_timeout_ms: Optional[int] = None,
        store_url: Optional[str] = None,
        store_prefix: Optional[str] = None,
        store_engine_clock: bool = False,
        store_fail_open: bool = False,
        store_local_refusals: bool = True,
        manual_boot: Optional[Seconds] = None,
        manual_boot_ms: Optional[int] = None,
        manual_wall: Optional[Seconds | datetime] = None,
        manual_wall_ms: Optional[int] = None,
        manual_boot_id: Optional[str] = None,
        library: Optional[str | os.PathLike[str]] = None,
    ) -> None:
        self._lib = (
            _ffi.load_library(library).cdll if library is not None else _ffi.library()
        )
        # The functions of the hot paths, looked up once.
        self._send_begin = self._lib.tg_send_begin
        self._send_end = self._lib.tg_send_end
        options = _ffi.tg_engine_options()
        self._lib.tg_engine_options_init(byref(options), ctypes.sizeof(options))
        options.delivery = _convert.coerce(Delivery, delivery, _convert.DELIVERY_NAMES)
        options.clock = _convert.coerce(ClockKind, clock, _convert.CLOCK_NAMES)
        options.tick_interval_ms = _convert.to_ms(tick_interval, tick_interval_ms, "tick_interval", 0)
        # The struct holds these bytes objects (ctypes keeps them alive)
        # until tg_engine_open has copied them.
        if store_path is not None:
            options.store_path = os.fsencode(store_path)
        options.store_commit_delay_ms = _convert.to_ms(
            store_commit_delay, store_commit_delay_ms, "store_commit_delay", 0
        )
        options.store_flags = (
            (_ffi.TG_STORE_START_FRESH_IF_CORRUPT if store_start_fresh_if_corrupt else 0)
            | (_ffi.TG_STORE_FULL_SYNC if store_full_sync else 0)
            | (_ffi.TG_STORE_ENGINE_CLOCK if store_engine_clock else 0)
            | (_ffi.TG_STORE_FAIL_OPEN if store_fail_open else 0)
            | (0 if store_local_refusals else _ffi.TG_STORE_NO_LOCAL_REFUSALS)
        )
        if store_url is not None:
            options.store_url = store_url.encode("utf-8")
        if store_prefix is not None:
            options.store_prefix = store_prefix.encode("utf-8")
        options.manual_boot_ms = _convert.to_ms(manual_boot, manual_boot_ms, "manual_boot", 0)
        options.manual_wall_ms = _convert.wall_ms(manual_wall, manual_wall_ms, "manual_wall", 0)
        if manual_boot_id is not None:
            options.manual_boot_id = manual_boot_id.encode("utf-8")
        options.store_timeout_ms = _convert.to_ms(store_timeout, store_timeout_ms, "store_timeout", 0)
        handle = _ffi.tg_engine_p()
        self._lib.tg_engine_open(byref(options), byref(handle))
        self._delivery = Delivery(options.delivery)
        self._clock = ClockKind(options.clock)
        self._set_handle(int(handle.value or 0))
        # The handle as a plain attribute for the hot paths; it stays after
        # close (the library keeps a tombstone and answers TG_E_CLOSED).
        self._hv = int(handle.value or 0)
        _live_engines.add(self)

    # -- plumbing ----------------------------------------------------------

    @property
    def _h(self) -> int:
        handle = self._handle_or_none()
        if handle is None:
            raise Closed("the engine was never opened")
        # After close the handle stays: the library keeps a tombstone and
        # answers TG_E_CLOSED, which errcheck turns into Closed.
        return handle

    def _delete(self, handle: int) -> None:
        _live_engines.discard(self)
        try:
            self._lib.tg_engine_close(handle)
        except Closed:
            pass

    @property
    def handle(self) -> int:
        """The raw ``tg_engine *`` value (for ctypes interop)."""
        return self._h

    def c_call(self, function: str, *args: object) -> int:
        """Call the C function ``function`` of this engine's library with the
        engine's handle first: ``engine.c_call("tg_gate_logout", b"account")``
        is ``tg_gate_logout(engine, "account")``. :class:`Gate` works through
        it, and so can a caller that needs a C function this class does not
        wrap. The arguments are ctypes values as the header declares them; a
        failure raises the status's error (:mod:`tickgate.errors`)."""
        return int(getattr(self._lib, function)(self._h, *args))

    @property
    def delivery(self) -> Delivery:
        """Where callbacks run: ``ENGINE_THREAD`` (the engine's own thread) or
        ``HOST_THREAD`` (inside :meth:`dispatch`)."""
        return self._delivery

    @property
    def clock(self) -> ClockKind:
        """``SYSTEM`` (CLOCK_BOOTTIME) or ``MANUAL`` (moved by :meth:`advance`)."""
        return self._clock

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<tickgate.Engine {state} delivery={self._delivery.name} "
            f"clock={self._clock.name}>"
        )

    # -- countdowns --------------------------------------------------------

    def start(
        self,
        scope: Key,
        subject: Key,
        duration: Optional[Seconds] = None,
        *,
        duration_ms: Optional[int] = None,
        tick_interval: Optional[Seconds] = None,
        tick_interval_ms: Optional[int] = None,
        restart: bool = False,
    ) -> Remaining:
        """Start a countdown of ``duration`` for (scope, subject).

        Observers get a tick every ``tick_interval`` (default: the engine's)
        and a FINISHED at the deadline. If the key is already counting down,
        raises :class:`tickgate.CoolingDown` with ``remaining`` /
        ``remaining_ms``, unless ``restart=True`` replaces it.
        Returns the remaining time (the full duration).
        """
        ms = _convert.to_ms(duration, duration_ms, "duration")
        if ms is None:
            raise TypeError("start() needs duration (seconds) or duration_ms")
        tick = _convert.to_ms(tick_interval, tick_interval_ms, "tick_interval", 0)
        out = c_int64(0)
        self._lib.tg_countdown_start(
            self._h,
            _convert.key(scope, "scope"),
            _convert.key(subject, "subject"),
            ms,
            tick,
            _ffi.TG_START_RESTART if restart else 0,
            ctypes.pointer(out),
        )
        return Remaining(int(out.value), display_seconds_of(int(out.value)))

    def cancel(self, scope: Key, subject: Key) -> None:
        """Cancel the countdown of (scope, subject); observers get CANCELLED.

        Raises :class:`tickgate.NotFound` if it is not counting down.
        """
        self._lib.tg_countdown_cancel(self._h, _convert.key(scope, "scope"), _convert.key(subject, "subject"))

    def cancel_scope(self, scope: Key) -> int:
        """Cancel every countdown of a scope; returns how many."""
        out = c_size_t(0)
        self._lib.tg_countdown_cancel_scope(self._h, _convert.key(scope, "scope"), byref(out))
        return int(out.value)

    def cancel_all(self) -> int:
        """Cancel every countdown of the engine; returns how many."""
        out = c_size_t(0)
        self._lib.tg_countdown_cancel_all(self._h, byref(out))
        return int(out.value)

    def remaining(self, scope: Key, subject: Key) -> Remaining:
        """How long (scope, subject) still counts down.

        Raises :class:`tickgate.NotFound` if it is not counting down (see
        :meth:`is_counting` for a plain bool).
        """
        ms = c_int64(0)
        display = c_int64(0)
        self._lib.tg_countdown_remaining(
            self._h, _convert.key(scope, "scope"), _convert.key(subject, "subject"), byref(ms), byref(display)
        )
        return Remaining(int(ms.value), int(display.value))

    def is_counting(self, scope: Key, subject: Key) -> bool:
        """True if (scope, subject) is counting down."""
        try:
            self.remaining(scope, subject)
        except NotFound:
            return False
        return True

    def list(self, scope: Optional[Key] = None) -> List[CountdownInfo]:
        """The running countdowns of ``scope`` (all scopes if None), by scope then subject."""
        items: List[CountdownInfo] = []
        index = _callbacks.visit_slots.allocate(items)
        try:
            self._lib.tg_countdown_list(
                self._h, _convert.key(scope, "scope"), _callbacks.on_visit, index, None
            )
        finally:
            _callbacks.visit_slots.deallocate(index)
        return items

    def count(self, scope: Optional[Key] = None) -> int:
        """How many countdowns run in ``scope`` (all scopes if None)."""
        out = c_size_t(0)
        self._lib.tg_countdown_list(self._h, _convert.key(scope, "scope"), _callbacks.no_visit, None, byref(out))
        return int(out.value)

    # -- observers ---------------------------------------------------------

    def subscribe(
        self, scope: Key, subject: Optional[Key], callback: EventCallback
    ) -> Subscription:
        """Call ``callback(event)`` for the key (scope, subject), or for every
        key of ``scope`` when ``subject`` is None.

        The first event is the current state (STATE); then STARTED, TICK,
        FINISHED, CANCELLED as they happen, one at a time and in order, on the
        engine thread (or inside :meth:`dispatch` in host mode). The
        subscription lasts until :meth:`Subscription.close` or
        :meth:`close`, whether or not the returned handle is kept: the
        package keeps ``callback`` alive until the library says it is done
        with it. Exceptions raised by ``callback`` are reported (see
        :func:`tickgate.set_callback_error_hook`), never propagated.
        """
        return self._subscribe(scope, subject, callback)

    def subscribe_scope(self, scope: Key, callback: EventCallback) -> Subscription:
        """Same as ``subscribe(scope, None, callback)``: every key of ``scope``."""
        return self._subscribe(scope, None, callback)

    def _subscribe(
        self,
        scope: Optional[Key],
        subject: Optional[Key],
        callback: EventCallback,
        on_end: Optional[Callable[[], None]] = None,
    ) -> Subscription:
        if not callable(callback):
            raise TypeError("callback must be callable")
        scope_b = _convert.key(scope, "scope")
        subject_b = _convert.key(subject, "subject")
        handle = self._h
        slot = _callbacks.SubscriptionSlot(callback)
        if on_end is not None:
            slot.on_end.append(on_end)
        index = _callbacks.slots.allocate(slot)
        out = _ffi.tg_subscription(0)
        try:
            self._lib.tg_subscribe(
                handle, scope_b, subject_b, _callbacks.on_event, index, _callbacks.on_destroy, byref(out)
            )
        except BaseException:
            # On error the library calls neither callback nor destructor:
            # the slot is still ours to free.
            _callbacks.slots.deallocate(index)
            raise
        slot.id = int(out.value)
        return Subscription(self, slot, scope_b, subject_b)

    def unsubscribe(self, subscription: Union["Subscription", int]) -> None:
        """End a subscription (by handle or id).

        Raises :class:`tickgate.NotFound` if it already ended;
        :meth:`Subscription.close` is the idempotent variant. When this returns
        (outside the subscription's own callback) the callback will not run
        again.
        """
        sid = subscription.id if isinstance(subscription, Subscription) else int(subscription)
        self._lib.tg_unsubscribe(self._h, sid)

    # -- host-thread delivery ----------------------------------------------

    def fileno(self) -> int:
        """HOST_THREAD only: a descriptor that is readable when events are due.

        Poll it for reading and call :meth:`dispatch`. The engine owns it: do
        not read, write or close it, and stop polling it before :meth:`close`.
        Raises :class:`tickgate.WrongMode` on an engine-thread engine.
        """
        out = c_int(-1)
        self._lib.tg_engine_fd(self._h, byref(out))
        return int(out.value)

    @property
    def store_warning(self) -> Optional[str]:
        """What the open saw in the store that its operator should change
        (a Redis maxmemory-policy that evicts live keys), or None."""
        length = c_size_t(0)
        self._lib.tg_engine_store_warning(self._h, None, 0, byref(length))
        if length.value == 0:
            return None
        buffer = create_string_buffer(length.value + 1)
        self._lib.tg_engine_store_warning(self._h, buffer, len(buffer), byref(length))
        return buffer.value.decode("utf-8", "replace")

    def stats(self) -> Stats:
        """What this engine did since it was opened, and what it holds now
        (``tg_stats_read``): send decisions by outcome and reason, the
        store's calls by latency, notices and their lag. Never waits on the
        store: cheap enough for every scrape of a metrics endpoint."""
        raw = _ffi.tg_stats()
        raw.struct_size = ctypes.sizeof(raw)
        self._lib.tg_stats_read(self._h, byref(raw))
        return stats_of(raw)

    def dispatch(self) -> int:
        """HOST_THREAD only: run the due callbacks on this thread; returns how many ran.

        Never waits for time to pass. Raises :class:`tickgate.Busy` if a
        dispatch of this engine is already running.
        """
        out = c_size_t(0)
        self._lib.tg_engine_dispatch(self._h, byref(out))
        return int(out.value)

    # -- clock ---------------------------------------------------------------

    def advance(self, seconds: Optional[Seconds] = None, *, ms: Optional[int] = None) -> None:
        """MANUAL clock only: move the clock forward by ``seconds`` (or by
        ``ms``, integer milliseconds).

        On an engine-thread engine this returns after the engine thread ran
        the callbacks that became due; in host mode they wait for
        :meth:`dispatch`.
        """
        step = _convert.to_ms(seconds, ms, "seconds", ms_name="ms")
        if step is None:
            raise TypeError("advance() needs seconds or ms")
        self._lib.tg_clock_advance(self._h, step)

    def now_ms(self) -> int:
        """The engine's clock in milliseconds (CLOCK_BOOTTIME, or the manual clock)."""
        out = c_int64(0)
        self._lib.tg_clock_now(self._h, byref(out))
        return int(out.value)

    def now(self) -> float:
        """The engine's clock in seconds."""
        return self.now_ms() / 1000.0

    def set_wall(self, wall: Optional[Seconds | datetime] = None, *, ms: Optional[int] = None) -> None:
        """MANUAL clock only: set the wall part of the clock (seconds since the
        epoch, an aware ``datetime``, or ``ms``), as a user changing the date would."""
        value = _convert.wall_ms(wall, ms, "wall", ms_name="ms")
        if value is None:
            raise TypeError("set_wall() needs wall or ms")
        self._lib.tg_clock_set_wall(self._h, value)

    # -- the store --------------------------------------------------------------

    def flush(self) -> None:
        """Commit what a group commit holds now (no-op without a store or pending changes).

        Raises :class:`tickgate.StoreIO` if the store cannot be written.
        """
        self._lib.tg_store_flush(self._h)

    def finish_store_upgrade(self) -> int:
        """Finish a rolling upgrade: raise the store's format to the newest
        this release reads, and return the store's format after the call.

        Call it once, through any one engine, when every server of the fleet
        runs this release (docs/upgrading.md, "Finishing an upgrade"). Until
        then every engine keeps writing the format the previous release
        reads; afterwards an engine of an older release refuses to open the
        store (:class:`tickgate.StoreVersion`). Calling it again changes
        nothing. On Redis it raises format 2 to 3; on SQLite nothing is left
        to finish (schema 4); with no store it returns 0.

        Raises :class:`tickgate.OlderEnginesLive` while engines that cannot
        read the new format are live on the store (nothing changed),
        :class:`tickgate.StoreIO` or :class:`tickgate.StoreUnknown` if the
        store cannot be reached.
        """
        out = c_int(0)
        self._lib.tg_store_finish_upgrade(self._h, byref(out))
        return out.value

    # -- the resend flow -------------------------------------------------------

    def set_policy(self, scope: Key, policy: Policy) -> None:
        """Set the send policy of ``scope`` (see :class:`tickgate.Policy`).

        It applies to the next send of every key of the scope; a running
        cooldown keeps its length.
        """
        raw = _ffi.tg_policy()
        self._lib.tg_policy_init(byref(raw), ctypes.sizeof(raw))
        steps = [int(x) for x in policy.cooldowns_ms]
        if not 1 <= len(steps) <= _ffi.TG_POLICY_MAX_STEPS:
            # The library would name its struct's field (policy.step_count).
            raise InvalidArgument(f"a policy has 1 to {_ffi.TG_POLICY_MAX_STEPS} cooldowns, "
                                  f"not {len(steps)}: Policy(cooldowns=(60, 90, 120))")
        raw.step_count = len(steps)
        for i, ms in enumerate(steps[: _ffi.TG_POLICY_MAX_STEPS]):
            raw.cooldown_ms[i] = _convert.clamp64(ms)
        if not 0 <= int(policy.window_max_sends) <= 0xFFFFFFFF:
            raise InvalidArgument(f"window_max_sends {policy.window_max_sends} is out of range")
        raw.window_max_sends = int(policy.window_max_sends)
        raw.window_ms = _convert.clamp64(int(policy.window_ms))
        raw.quiet_reset_ms = _convert.clamp64(int(policy.quiet_reset_ms))
        raw.ticket_timeout_ms = _convert.clamp64(int(policy.ticket_timeout_ms))
        if not 0 <= int(policy.max_wrong_codes) <= 0xFFFFFFFF:
            raise InvalidArgument(f"max_wrong_codes {policy.max_wrong_codes} is out of range")
        raw.max_wrong_codes = int(policy.max_wrong_codes)
        self._lib.tg_policy_set(self._h, _convert.key(scope, "scope"), byref(raw))

    def policy(self, scope: Key) -> Policy:
        """The send policy of ``scope`` (the defaults if none was set)."""
        raw = _ffi.tg_policy()
        self._lib.tg_policy_init(byref(raw), ctypes.sizeof(raw))
        self._lib.tg_policy_get(self._h, _convert.key(scope, "scope"), byref(raw))
        count = min(int(raw.step_count), _ffi.TG_POLICY_MAX_STEPS)
        return Policy(
            cooldowns_ms=tuple(int(raw.cooldown_ms[i]) for i in range(count)),
            window_max_sends=int(raw.window_max_sends),
            window_ms=int(raw.window_ms),
            quiet_reset_ms=int(raw.quiet_reset_ms),
            ticket_timeout_ms=int(raw.ticket_timeout_ms),
            max_wrong_codes=int(raw.max_wrong_codes),
        )

    def send_begin(
        self,
        scope: Key,
        subject: Key,
        budgets: Optional[_convert.Budgets] = None,
        client_address: Optional[str] = None,
    ) -> SendTicket:
        """The user tapped "Get code": ask whether the host may send now.

        Returns a :class:`SendTicket` (the key's state becomes SENDING); the
        host then calls its SMS or e-mail API and ends the ticket with
        :meth:`SendTicket.succeeded` or :meth:`SendTicket.failed` (or uses it
        as a context manager). Otherwise raises :class:`tickgate.CoolingDown`,
        :class:`tickgate.InFlight` or :class:`tickgate.Locked`, whose
        ``remaining`` says how long until a send may be granted.

        ``budgets`` names the budgets the send is charged to and their keys,
        as a mapping (``{"ip": "203.0.113.7", "global": "sms"}``) or a
        sequence of (budget, key) pairs (``[("ip", "203.0.113.7")]``);
        anything else raises :class:`TypeError` (see
        :meth:`set_budget`): the send is granted only if each has room, and
        a :class:`tickgate.Locked` raised by one names it in ``budget`` and
        ``budget_key``. A failed send returns its charge.

        On a guarded scope (:meth:`set_guard`) the subject is an E.164 number
        and ``client_address`` (IPv4 or IPv6 text) the client's: the guard
        may raise :class:`tickgate.InvalidNumber`,
        :class:`tickgate.DestinationRefused`,
        :class:`tickgate.PumpingSuspected` or
        :class:`tickgate.ChallengeRequired` first.
        """
        ticket = _ffi.tg_ticket(0)
        wait = c_int64(0)
        scope_b, subject_b = _convert.key(scope, "scope"), _convert.key(subject, "subject")
        pairs = _convert.budget_pairs(budgets)
        if client_address is not None:
            if not isinstance(client_address, str) or "\0" in client_address:
                raise InvalidArgument("client_address must be an IP address as text")
            raw = (_ffi.tg_budget_key * max(len(pairs), 1))()
            for i, (b, k) in enumerate(pairs):
                raw[i].budget, raw[i].key = b, k
            index = c_size_t(_ffi.TG_BUDGET_NONE)
            try:
                self._lib.tg_send_begin_from(
                    self._h, scope_b, subject_b, client_address.encode("utf-8", "surrogatepass"), raw, len(pairs),
                    byref(ticket), byref(wait), byref(index)
                )
            except Locked as error:
                if error.budget_index is not None and error.budget_index < len(pairs):
                    b, k = pairs[error.budget_index]
                    error.budget, error.budget_key = _callbacks.decode(b), _callbacks.decode(k)
                raise
        elif pairs:
            raw = (_ffi.tg_budget_key * len(pairs))()
            for i, (b, k) in enumerate(pairs):
                raw[i].budget, raw[i].key = b, k  # the list keeps the bytes alive
            index = c_size_t(_ffi.TG_BUDGET_NONE)
            try:
                self._lib.tg_send_begin_budgeted(
                    self._h, scope_b, subject_b, raw, len(pairs), byref(ticket), byref(wait), byref(index)
                )
            except Locked as error:
                if error.budget_index is not None and error.budget_index < len(pairs):
                    b, k = pairs[error.budget_index]
                    error.budget, error.budget_key = _callbacks.decode(b), _callbacks.decode(k)
                raise
        else:
            self._send_begin(self._hv, scope_b, subject_b, byref(ticket), byref(wait))
        return SendTicket(self, ticket.value,
                          scope if type(scope) is str else _callbacks.decode(scope_b),
                          subject if type(subject) is str else _callbacks.decode(subject_b))

    def send_end(
        self,
        ticket: Union["SendTicket", int],
        outcome: Union[SendOutcome, int],
        retry_after: Optional[Seconds] = None,
        *,
        retry_after_ms: Optional[int] = None,
    ) -> Remaining:
        """Close a send ticket; returns the cooldown that starts (0 after a failure).

        ``retry_after`` is how long the server asked to wait (None: it said
        nothing); the cooldown is the longest of that, the policy's next step
        and the time until the window frees a send. Raises
        :class:`tickgate.Expired` if the ticket timed out first, and
        :class:`tickgate.NotFound` for an unknown or already ended ticket.
        """
        tid = ticket.id if isinstance(ticket, SendTicket) else int(ticket)
        retry = 0 if retry_after is None and retry_after_ms is None else _convert.to_ms(
            retry_after, retry_after_ms, "retry_after", 0)
        out = c_int64(0)
        self._send_end(self._hv, tid, int(outcome), retry, byref(out))
        ms = out.value
        return Remaining(ms, display_seconds_of(ms))

    def verified(self, scope: Key, subject: Key) -> None:
        """The host verified the code: the key's escalation starts again and it becomes IDLE.

        Call it before accepting the code: it raises :class:`tickgate.CodeDead`
        (changing nothing) if wrong codes killed the code, and then the login
        must be refused.
        """
        self._lib.tg_verified(self._h, _convert.key(scope, "scope"), _convert.key(subject, "subject"))

    def challenge_passed(self, scope: Key, number: Key, client_address: Optional[str] = None) -> None:
        """The person asking codes for ``number`` from ``client_address``
        passed the challenge shown after :class:`tickgate.ChallengeRequired`:
        the next send of that number from that address goes through the
        guard's ``challenge_signals``, once, within its
        ``challenge_pass_seconds``, and is counted as usual (cooldowns,
        windows, budgets and the other signals still hold; let through
        warnings of its ranges alone, it is counted in them but not among
        its country's codes).

        Raises :class:`tickgate.NotFound` when the scope has no guard with
        ``challenge_signals``, :class:`tickgate.InvalidNumber` for a number
        that is no E.164 number, :class:`tickgate.InvalidArgument` for a bad
        address; nothing is kept then.
        """
        address: Optional[bytes] = None
        if client_address is not None:
            if not isinstance(client_address, str) or "\0" in client_address:
                raise InvalidArgument("client_address must be an IP address as text")
            address = client_address.encode("utf-8", "surrogatepass")
        self._lib.tg_challenge_passed(self._h, _convert.key(scope, "scope"), _convert.key(number, "number"), address)

    def verify_failed(self, scope: Key, subject: Key) -> Optional[int]:
        """The user typed a wrong code: count it against the key's current code.

        Returns how many more wrong codes the code survives (None: the
        policy has no cap); 0 means this one killed it (event CODE_DEAD).
        Raises :class:`tickgate.NotFound` if no code was sent since the last
        :meth:`verified`, :class:`tickgate.CodeDead` if the code is dead already.
        """
        left = c_uint32(0)
        self._lib.tg_verify_failed(
            self._h, _convert.key(scope, "scope"), _convert.key(subject, "subject"), byref(left)
        )
        return None if left.value == 0xFFFFFFFF else int(left.value)

    # -- budgets -------------------------------------------------------------

    def set_budget(
        self,
        name: Key,
        budget: Union[Budget, Sequence[Tuple[int, Seconds]], None] = None,
        *,
        windows_ms: Optional[Sequence[Tuple[int, int]]] = None,
    ) -> None:
        """Set (or replace) the budget ``name``: at most N sends per window,
        for each (N, seconds) of ``budget`` (1 to 4 windows), e.g.
        ``set_budget("ip", [(10, 3600), (50, 86400)])``, or for each
        (N, milliseconds) of ``windows_ms``."""
        if not isinstance(budget, Budget):
            budget = Budget(budget, windows_ms=windows_ms)
        elif windows_ms is not None:
            raise TypeError("give a Budget or windows_ms, not both")
        raw = _ffi.tg_budget()
        self._lib.tg_budget_init(byref(raw), ctypes.sizeof(raw))
        if not 1 <= len(budget.windows_ms) <= _ffi.TG_BUDGET_MAX_WINDOWS:
            # The library would name its struct's field (budget.window_count).
            raise InvalidArgument(f"a budget has 1 to {_ffi.TG_BUDGET_MAX_WINDOWS} windows, "
                                  f"not {len(budget.windows_ms)}: [(10, 3600), (50, 86400)]")
        raw.window_count = len(budget.windows_ms)
        for i, (sends, window_ms) in enumerate(budget.windows_ms[: _ffi.TG_BUDGET_MAX_WINDOWS]):
            if not 0 <= sends <= 0xFFFFFFFF:
                raise InvalidArgument(f"window {i + 1} allows {sends} sends, out of range")
            raw.max_sends[i] = sends
            raw.window_ms[i] = _convert.clamp64(window_ms)
        self._lib.tg_budget_set(self._h, _convert.key(name, "budget name"), byref(raw))

    def set_guard(
        self,
        scope: Key,
        mode: Union[GuardMode, str, int, None] = GuardMode.RECORD_ONLY,
        *,
        allowed_destinations: Sequence[str] = (),
        refused_destinations: Sequence[str] = (),
        always_allow_numbers: Sequence[str] = (),
        always_allow_addresses: Sequence[str] = (),
        always_allow_countries: Sequence[str] = (),
        always_allow_skips_budgets: bool = False,
        **thresholds: int,
    ) -> None:
        """Set the guard of ``scope`` against SMS pumping (``mode=None``
        removes it). ``mode`` is a :class:`GuardMode` or its name as text,
        in any case: "off", "record_only" (or "record"), "enforce"; any other
        value raises :class:`tickgate.InvalidArgument` (a ValueError). Destinations are region codes ("CN") or prefixes
        ("+1876"); numbers are exact or patterns ("+1555010?", "+1555*");
        addresses are IPs or CIDR ranges. ``thresholds`` set any of the
        signals' constants by name (``country_daily_minimum=20``,
        ``country_history_percent``, ``country_day_percent``,
        ``country_hourly_minimum``, ``country_hourly_divisor``,
        ``country_hour_percent``, ``address_daily_minimum``,
        ``address_day_percent``, ``address_hourly_minimum``,
        ``address_hourly_divisor``, ``address_countries_maximum``,
        ``history_days``, ``unverified_after_seconds``: 120, a code counts
        as unverified that long after its send unless verified),
        ``range_signals=1`` (count the number's ranges too, with
        ``range_daily_minimum``: 40 and ``range_hourly_minimum``: 8, or
        for a range none of whose codes was verified in ``history_days``
        ``range_new_daily_minimum``: 5 and ``range_new_hourly_minimum``: 1;
        docs/pumping.md, "Number ranges"), ``challenge_signals`` (the
        :class:`tickgate.PumpingWarning` bits that answer with
        :class:`tickgate.ChallengeRequired` instead of a refusal) and
        ``challenge_pass_seconds`` (600: how long a passed challenge
        waits for its send; see :meth:`challenge_passed`), and on
        Redis ``record_stream_length`` (keep about that many decision
        records in the scope's stream)."""
        scope_b = _convert.key(scope, "scope")
        if mode is None:
            self._lib.tg_guard_set(self._h, scope_b, None)
            return
        checked_mode = _convert.guard_mode(mode)
        raw = _ffi.tg_guard()
        self._lib.tg_guard_init(byref(raw), ctypes.sizeof(raw))
        raw.mode = int(checked_mode)

        def joined(items: Sequence[str], role: str) -> Optional[bytes]:
            if isinstance(items, str):
                items = [items]
            for item in items:
                if not isinstance(item, str) or "," in item or "\0" in item:
                    raise InvalidArgument(f"{role}: {item!r} is not one entry")
            return ",".join(items).encode("utf-8", "surrogatepass") if items else None

        raw.allowed_destinations = joined(allowed_destinations, "allowed_destinations")
        raw.refused_destinations = joined(refused_destinations, "refused_destinations")
        raw.always_allow_numbers = joined(always_allow_numbers, "always_allow_numbers")
        raw.always_allow_addresses = joined(always_allow_addresses, "always_allow_addresses")
        raw.always_allow_countries = joined(always_allow_countries, "always_allow_countries")
        raw.always_allow_skips_budgets = 1 if always_allow_skips_budgets else 0
        known = {field[0] for field in _ffi.tg_guard._fields_[8:]}
        for name, value in thresholds.items():
            if name not in known:
                raise TypeError(f"set_guard() got an unknown threshold {name!r}")
            if not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
                raise InvalidArgument(f"{name} must be a whole number 0 ... 1000000")
            setattr(raw, name, value)
        self._lib.tg_guard_set(self._h, scope_b, byref(raw))

    def subscribe_records(self, scope: Key, callback: Callable[[GuardRecord], None]) -> Subscription:
        """Call ``callback(record)`` with the :class:`GuardRecord` of every
        send of the guarded ``scope``, granted or refused, on the engine
        thread (or inside :meth:`dispatch`). Ends with
        :meth:`Subscription.close`."""
        return self._subscribe_guard(self._lib.tg_guard_subscribe, scope, callback)

    def subscribe_outcomes(self, scope: Key, callback: Callable[[GuardRecord], None]) -> Subscription:
        """Call ``callback(record)`` with what became of every code of the
        guarded ``scope`` that this engine sent while it listened: a
        :class:`GuardRecord` whose :attr:`GuardRecord.outcome` is a
        :class:`tickgate.CodeOutcome` (verified, replaced, killed, never
        verified once ``unverified_after_seconds`` passed), one per code,
        and one per :meth:`challenge_passed`. On Redis, the guard's record
        stream holds every engine's; this hears what this engine decided.
        A never-verified outcome is found by this engine's next guarded
        send of the scope (on a store at most once a second). Ends with
        :meth:`Subscription.close`."""
        return self._subscribe_guard(self._lib.tg_guard_subscribe_outcomes, scope, callback)

    def _subscribe_guard(self, subscribe: Any, scope: Key, callback: Callable[[GuardRecord], None],
                         on_end: Optional[Callable[[], None]] = None) -> Subscription:
        """tg_guard_subscribe or tg_guard_subscribe_outcomes: ``callback``
        gets each :class:`GuardRecord`, ``on_end`` runs when it ends."""
        if not callable(callback):
            raise TypeError("callback must be callable")
        scope_b = _convert.key(scope, "scope")
        slot = _callbacks.SubscriptionSlot(callback)  # type: ignore[arg-type]
        if on_end is not None:
            slot.on_end.append(on_end)
        index = _callbacks.slots.allocate(slot)
        out = _ffi.tg_subscription(0)
        try:
            subscribe(self._h, scope_b, _callbacks.on_guard_record, index, _callbacks.on_destroy, byref(out))
        except BaseException:
            _callbacks.slots.deallocate(index)
            raise
        slot.id = int(out.value)
        return Subscription(self, slot, scope_b, None)

    def budget_usage(self, name: Key, key: Key) -> BudgetUsage:
        """What the budget key (name, key) has used now, in its binding window."""
        raw = _ffi.tg_budget_usage()
        raw.struct_size = ctypes.sizeof(raw)
        self._lib.tg_budget_read(self._h, _convert.key(name, "budget name"), _convert.key(key, "budget key"),
                                 byref(raw))
        return BudgetUsage(int(raw.used), int(raw.max_sends), int(raw.window_ms), int(raw.frees_in_ms))

    def reset_budget(self, name: Key, key: Key) -> None:
        """Drop every charge of the budget key (name, key)."""
        self._lib.tg_budget_reset(self._h, _convert.key(name, "budget name"), _convert.key(key, "budget key"))

    def set_titles(self, scope: Key, titles: Optional[Titles] = None, **templates: Optional[str]) -> None:
        """Set the title templates of ``scope``: a :class:`tickgate.Titles`, or
        keywords ``idle``, ``sending``, ``cooling``, ``ready_again``, ``locked``,
        ``code_dead``.

        Templates left out (None) keep the English default. Raises
        :class:`tickgate.InvalidTemplate` for a malformed one (then nothing changes).
        """
        if titles is None:
            titles = Titles(**templates)
        elif templates:
            raise TypeError("give a Titles or keywords, not both")
        raw = _ffi.tg_titles()
        raw.struct_size = ctypes.sizeof(_ffi.tg_titles)
        for name in ("idle", "sending", "cooling", "ready_again", "locked", "code_dead"):
            text = getattr(titles, name)
            if text is None:
                continue
            data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
            if b"\0" in data:
                raise InvalidTemplate(f"{name} title contains a NUL byte")
            setattr(raw, name, data)  # the struct keeps the bytes alive
        self._lib.tg_titles_set(self._h, _convert.key(scope, "scope"), byref(raw))

    def button(self, scope: Key, subject: Key) -> Button:
        """The button of (scope, subject) now: state, enabled, remaining time, title."""
        raw = _ffi.tg_button()
        raw.struct_size = ctypes.sizeof(_ffi.tg_button)
        self._lib.tg_button_get(self._h, _convert.key(scope, "scope"), _convert.key(subject, "subject"), byref(raw))
        return Button(
            state=_callbacks.enum_or_int(ButtonState, raw.state),
            enabled=bool(raw.enabled),
            remaining_ms=int(raw.remaining_ms),
            display_seconds=int(raw.display_seconds),
            title=_callbacks.decode(raw.title),
        )

    # -- the login gate -------------------------------------------------------------

    def gate(self, realm: Key) -> Gate:
        """The login gate of ``realm`` ("account", "payment-pin"): see :class:`tickgate.Gate`."""
        return Gate(self, realm)


class SendTicket:
    """A send in flight (from :meth:`Engine.send_begin`).

    End it once: :meth:`succeeded` (the cooldown starts) or :meth:`failed`
    (the key is free again). As a context manager it ends itself: failed if
    the block raised, succeeded otherwise (unless the block ended it)::

        with engine.send_begin("login", phone):
            sms_api.send_code(phone)
    """

    def __init__(self, engine: Engine, ticket: int, scope: str, subject: str) -> None:
        self._engine = engine
        self.id = ticket
        self.scope = scope
        self.subject = subject
        #: None while open, else the outcome it was ended with.
        self.outcome: Optional[SendOutcome] = None

    def succeeded(self, retry_after: Optional[Seconds] = None, *, retry_after_ms: Optional[int] = None) -> Remaining:
        """The server accepted the send: the cooldown starts; returns its length."""
        cooldown = self._engine.send_end(
            self.id, SendOutcome.SUCCEEDED, retry_after, retry_after_ms=retry_after_ms
        )
        self.outcome = SendOutcome.SUCCEEDED
        return cooldown

    def failed(self) -> None:
        """The send failed: no cooldown, the key is free again."""
        self._engine.send_end(self.id, SendOutcome.FAILED)
        self.outcome = SendOutcome.FAILED

    def __enter__(self) -> SendTicket:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.outcome is not None:
            return
        if exc_type is None:
            self.succeeded()
        else:
            try:
                self.failed()
            except (Expired, NotFound, Closed):
                pass  # the block's own exception is the one to see

    def __repr__(self) -> str:
        state = "open" if self.outcome is None else self.outcome.name.lower()
        return f"<tickgate.SendTicket {self.id} {self.scope}/{self.subject} {state}>"


@atexit.register
def _close_engines_at_exit() -> None:
    # Join engine threads before the interpreter tears down the objects their
    # callbacks use.
    for engine in list(_live_engines):
        try:
            engine.close()
        except Exception:  # noqa: BLE001
            pass



def parse_number(number: str) -> NumberInfo:
    """Read an E.164 number ("+8613800000000"): its country calling code
    and region, by longest prefix on the ITU table the library carries.
    Raises :class:`tickgate.InvalidNumber` if it is not one."""
    if not isinstance(number, str) or "\0" in number:
        raise InvalidArgument("number must be text without NUL")
    raw = _ffi.tg_number_info()
    raw.struct_size = ctypes.sizeof(raw)
    _ffi.library().tg_number_parse(number.encode("utf-8", "surrogatepass"), byref(raw))
    return NumberInfo(raw.calling_code.decode("ascii"), raw.region.decode("ascii"), int(raw.digits))
