"""asyncio integration: host-thread delivery driven by the running event loop.

:class:`AsyncEngine` is an :class:`tickgate.Engine` opened with
``Delivery.HOST_THREAD``. It registers its descriptor with
``loop.add_reader(engine.fileno(), ...)``, so every callback runs on the
loop's thread inside ``engine.dispatch()``, and removes the reader before the
engine closes. On top of that it offers awaitables::

    async with AsyncEngine() as engine:
        engine.start("login", phone, 60)
        async with engine.events("login", phone, until_idle=True) as events:
            async for event in events:
                button.text = f"Resend ({event.display_seconds}s)" if event.counting else "Get code"
        await engine.wait_ready("login", phone)   # returns at once if idle

The login gate has an awaitable too: ``await engine.gate("account").require()``
returns when the action may run (at once if no login is needed or the
session is live, else after the login succeeds) and raises
:class:`tickgate.RequestCancelled` if the login is cancelled, times out or
the user logs out.

Use an AsyncEngine from its loop's thread. Without a store, or with a
SQLite one, the synchronous methods of Engine (``start``, ``cancel``, ...)
are fine to call from there. With a Redis store (``store_url``) every
decision and query is a round trip to the server: await the ``a``-methods
instead (``await engine.asend_begin("login", phone)``), which run the call on
a worker thread, so the loop never waits for the server::

    engine = await tickgate.aio.open_engine_async(store_url="redis://10.0.0.5")
    ticket = await engine.asend_begin("login", phone)

The guard's records and its codes' outcomes are async iterators too
(``async for record in engine.outcomes("login")``), and
``await engine.achallenge_passed("login", phone, address)`` records a
passed challenge.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, Callable, Generic, Optional, TypeVar, Union

from ._convert import Budgets
from ._engine import Engine, Key, Seconds, SendTicket, Subscription
from ._enums import CancelReason, ClockKind, Delivery, EventKind, RequireResult, SendOutcome
from ._gate import Gate, GateRequest
from ._types import Button, BudgetUsage, Event, GateEvent, GuardRecord, Remaining
from .errors import Busy, Closed, RequestCancelled

__all__ = ["AsyncEngine", "AsyncGate", "EventStream", "open_engine", "open_engine_async"]

_T = TypeVar("_T")
#: What an EventStream yields: an Event (a key or a scope) or a GateEvent (a realm).
_E = TypeVar("_E", Event, GateEvent, GuardRecord)


def _call_on_loop(loop: asyncio.AbstractEventLoop, owner: int, fn: Callable[[], Any]) -> None:
    """Run fn now if this is the loop's thread, else schedule it there."""
    if threading.get_ident() == owner:
        fn()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(fn)


class AsyncEngine(Engine):
    """An Engine whose callbacks run on an asyncio event loop.

    Create it while the loop runs (inside a coroutine), or pass ``loop`` and
    create it on the loop's thread. Options are those of
    :class:`tickgate.Engine` except ``delivery``, which is always
    ``HOST_THREAD``. ``close()`` (or ``async with``) removes the
    reader, then closes the engine.
    """

    def __init__(
        self,
        *,
        clock: Union[ClockKind, int, str] = ClockKind.SYSTEM,
        tick_interval: Optional[Seconds] = None,
        tick_interval_ms: Optional[int] = None,
        loop: Optional[asyncio.AbstractEventLoop] = None,
        _attach_later: bool = False,
        **options: Any,
    ) -> None:
        if "delivery" in options:
            raise TypeError("an AsyncEngine always uses Delivery.HOST_THREAD")
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._owner = threading.get_ident()
        self._fd = -1
        super().__init__(
            delivery=Delivery.HOST_THREAD,
            clock=clock,
            tick_interval=tick_interval,
            tick_interval_ms=tick_interval_ms,
            **options,
        )
        #: Futures of AsyncGate.require by request id (for coalesced requests).
        self._gate_waiting: dict[int, asyncio.Future[None]] = {}
        if not _attach_later:
            self._attach()

    def _attach(self) -> None:
        """Polls the engine's descriptor from the loop (on the loop's thread)."""
        self._owner = threading.get_ident()
        self._fd = self.fileno()
        # The reader holds only a weak reference, so that an engine nobody
        # holds can still be collected (and closed by its finalizer).
        ref = weakref.ref(self)
        self._loop.add_reader(self._fd, _on_readable, ref)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop whose thread runs the callbacks."""
        return self._loop

    def _delete(self, handle: int) -> None:
        # Stop polling the descriptor before the engine closes it.
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                if not self._loop.is_closed():
                    self._loop.remove_reader(fd)
            except Exception:  # noqa: BLE001 - a closing loop, or another thread
                pass
        super()._delete(handle)

    async def aclose(self) -> None:
        """Close the engine (same as :meth:`close`; for ``async with``)."""
        self.close()

    async def __aenter__(self) -> AsyncEngine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def _run_pending(self) -> int:
        try:
            return self.dispatch()
        except (Busy, Closed):
            return 0

    # -- store calls off the loop -------------------------------------------

    async def _off_loop(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Runs fn(*args, **kwargs) on a worker thread and awaits it."""
        return await self._loop.run_in_executor(None, lambda: fn(*args, **kwargs))

    async def astart(
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
        """:meth:`Engine.start` on a worker thread."""
        return await self._off_loop(
            self.start, scope, subject, duration, duration_ms=duration_ms,
            tick_interval=tick_interval, tick_interval_ms=tick_interval_ms, restart=restart,
        )

    async def acancel(self, scope: Key, subject: Key) -> None:
        """:meth:`Engine.cancel` on a worker thread."""
        return await self._off_loop(self.cancel, scope, subject)

    async def acancel_scope(self, scope: Key) -> int:
        """:meth:`Engine.cancel_scope` on a worker thread."""
        return await self._off_loop(self.cancel_scope, scope)

    async def aremaining(self, scope: Key, subject: Key) -> Remaining:
        """:meth:`Engine.remaining` on a worker thread."""
        return await self._off_loop(self.remaining, scope, subject)

    async def abutton(self, scope: Key, subject: Key) -> Button:
        """:meth:`Engine.button` on a worker thread."""
        return await self._off_loop(self.button, scope, subject)

    async def asend_begin(
        self,
        scope: Key,
        subject: Key,
        budgets: Optional[Budgets] = None,
        client_address: Optional[str] = None,
    ) -> SendTicket:
        """:meth:`Engine.send_begin` on a worker thread."""
        return await self._off_loop(self.send_begin, scope, subject, budgets, client_address)

    async def asend_end(
        self,
        ticket: Union[SendTicket, int],
        outcome: Union[SendOutcome, int],
        retry_after: Optional[Seconds] = None,
        *,
        retry_after_ms: Optional[int] = None,
    ) -> Remaining:
        """:meth:`Engine.send_end` on a worker thread."""
        return await self._off_loop(self.send_end, ticket, outcome, retry_after, retry_after_ms=retry_after_ms)

    async def averified(self, scope: Key, subject: Key) -> None:
        """:meth:`Engine.verified` on a worker thread."""
        return await self._off_loop(self.verified, scope, subject)

    async def averify_failed(self, scope: Key, subject: Key) -> Optional[int]:
        """:meth:`Engine.verify_failed` on a worker thread."""
        return await self._off_loop(self.verify_failed, scope, subject)

    async def abudget_usage(self, name: Key, key: Key) -> BudgetUsage:
        """:meth:`Engine.budget_usage` on a worker thread."""
        return await self._off_loop(self.budget_usage, name, key)

    async def achallenge_passed(self, scope: Key, number: Key, client_address: Optional[str] = None) -> None:
        """:meth:`Engine.challenge_passed` on a worker thread."""
        return await self._off_loop(self.challenge_passed, scope, number, client_address)

    # -- awaitables ----------------------------------------------------------

    async def wait_ready(self, scope: Key, subject: Key) -> Optional[Event]:
        """Wait until (scope, subject) is not counting down.

        Returns None at once if the key is idle, else the event that ended the
        countdown (FINISHED or CANCELLED). A restart while waiting keeps
        waiting for the new countdown. Raises :class:`tickgate.Closed` if the
        engine closes first.
        """
        if not self.is_counting(scope, subject):
            return None
        future: asyncio.Future[Optional[Event]] = self._loop.create_future()

        def on_event(event: Event) -> None:
            if event.ends_countdown and not future.done():
                future.set_result(None if event.kind == EventKind.STATE else event)

        def on_end() -> None:
            def settle() -> None:
                if not future.done():
                    future.set_exception(Closed("the engine closed while waiting"))

            _call_on_loop(self._loop, self._owner, settle)

        subscription = self._subscribe(scope, subject, on_event, on_end)
        try:
            return await future
        finally:
            subscription.close()

    def events(
        self, scope: Key, subject: Optional[Key], *, until_idle: bool = False
    ) -> EventStream[Event]:
        """An async iterator of the events of (scope, subject), or of every key
        of ``scope`` when ``subject`` is None.

        The first event is the current state (STATE). With ``until_idle=True``
        the iteration ends after the event that leaves the key idle (FINISHED,
        CANCELLED, or an idle STATE); otherwise it ends when the stream or the
        engine is closed. Use it with ``async with`` so that the subscription
        ends when the block does, even after ``break``.
        """
        return EventStream[Event](
            self, lambda cb, end: self._subscribe(scope, subject, cb, end), until_idle
        )

    def records(self, scope: Key) -> EventStream[GuardRecord]:
        """An async iterator of the guard's records of ``scope``, as
        :meth:`Engine.subscribe_records` gives them; it ends when the stream
        or the engine is closed (use it with ``async with``)."""
        return EventStream[GuardRecord](
            self, lambda cb, end: self._subscribe_guard(self._lib.tg_guard_subscribe, scope, cb, end)
        )

    def outcomes(self, scope: Key) -> EventStream[GuardRecord]:
        """An async iterator of what became of the codes of ``scope``, as
        :meth:`Engine.subscribe_outcomes` gives them (one
        :class:`GuardRecord` per outcome)."""
        return EventStream[GuardRecord](
            self, lambda cb, end: self._subscribe_guard(self._lib.tg_guard_subscribe_outcomes, scope, cb, end)
        )

    def gate(self, realm: Key) -> AsyncGate:
        """The login gate of ``realm``, with an awaitable :meth:`AsyncGate.require`."""
        return AsyncGate(self, realm)


def _on_readable(ref: weakref.ref[AsyncEngine]) -> None:
    engine = ref()
    if engine is not None:
        engine._run_pending()


_END = object()


class EventStream(Generic[_E]):
    """Events of one subscription as an async iterator: :class:`tickgate.Event` s
    from :meth:`AsyncEngine.events`, :class:`tickgate.GateEvent` s from
    :meth:`AsyncGate.events`, :class:`tickgate.GuardRecord` s from
    :meth:`AsyncEngine.records` and :meth:`AsyncEngine.outcomes`."""

    def __init__(
        self,
        engine: AsyncEngine,
        subscribe: Callable[[Callable[[_E], None], Callable[[], None]], Subscription],
        until_idle: bool = False,
    ) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._until_idle = until_idle
        self._finished = False
        queue = self._queue  # the callbacks must not hold the stream itself
        loop, owner = engine.loop, engine._owner

        def on_event(event: _E) -> None:
            queue.put_nowait(event)

        def on_end() -> None:
            _call_on_loop(loop, owner, lambda: queue.put_nowait(_END))

        self._subscription: Subscription = subscribe(on_event, on_end)

    @property
    def subscription(self) -> Subscription:
        """The subscription behind the stream (closed when the stream is)."""
        return self._subscription

    def __aiter__(self) -> EventStream[_E]:
        return self

    async def __anext__(self) -> _E:
        if self._finished:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is _END:
            self._finished = True
            raise StopAsyncIteration
        if self._until_idle and getattr(item, "ends_countdown", False):
            self._finished = True
            self.close()
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the subscription (idempotent); iteration stops after queued events."""
        self._subscription.close()

    async def aclose(self) -> None:
        """Same as :meth:`close` (for ``contextlib.aclosing``)."""
        self.close()

    async def __aenter__(self) -> EventStream[_E]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._subscription.close()
        except Exception:  # noqa: BLE001
            pass


class AsyncGate(Gate):
    """A :class:`tickgate.Gate` of an :class:`AsyncEngine`, with awaitables."""

    engine: AsyncEngine

    async def require(  # type: ignore[override]
        self,
        action: Optional[Callable[[], Any]] = None,
        *,
        needs_login: bool = True,
        coalesce_key: Optional[Key] = None,
    ) -> GateRequest:
        """Wait until the action may run; returns the :class:`tickgate.GateRequest`.

        Returns at once (after one pass of the loop) if no login is needed
        or the session is live; otherwise after the login succeeds. Raises
        :class:`tickgate.RequestCancelled` (with ``reason``) if the login is
        cancelled, times out or the user logs out, and
        :class:`tickgate.Closed` if the engine closes first. ``action``
        (optional) runs on the loop thread just before the await returns.
        A request that joins a queued one of the same ``coalesce_key``
        resolves with it. Cancelling the awaiting task withdraws the request.
        """
        engine = self.engine
        loop = engine.loop
        future: asyncio.Future[None] = loop.create_future()
        state = {"coalesced": False}

        def on_action() -> None:
            if action is not None:
                action()
            if not future.done():
                future.set_result(None)

        def on_cancel(reason: CancelReason) -> None:
            if not future.done():
                future.set_exception(RequestCancelled(reason, self.realm))

        def on_end() -> None:
            # Deferred, so that a coalesced request (whose destructor runs
            # inside tg_gate_require) is known as such first.
            def settle() -> None:
                if not state["coalesced"] and not future.done():
                    future.set_exception(Closed("the engine closed before the request ran"))

            _call_on_loop(loop, engine._owner, lambda: loop.call_soon(settle))

        request = Gate.require(
            self, on_action, needs_login=needs_login, coalesce_key=coalesce_key,
            on_cancel=on_cancel, _on_end=on_end,
        )
        waiting = engine._gate_waiting
        if request.result == RequireResult.COALESCED:
            state["coalesced"] = True
            joined = waiting.get(request.id)
            if joined is None:
                raise RuntimeError(
                    "this request was coalesced into one that was not made with "
                    "AsyncGate.require; await that one instead"
                )
            await asyncio.shield(joined)
            return request
        waiting[request.id] = future
        try:
            await future
        except asyncio.CancelledError:
            request.withdraw()
            raise
        finally:
            waiting.pop(request.id, None)
        return request

    def events(self) -> EventStream[GateEvent]:
        """An async iterator of the realm's :class:`tickgate.GateEvent` s (STATE first)."""
        return EventStream[GateEvent](self.engine, lambda cb, end: self.subscribe(cb, end))


def open_engine(**options: Any) -> AsyncEngine:
    """Open an :class:`AsyncEngine` on the running loop (same options)."""
    return AsyncEngine(**options)


async def open_engine_async(**options: Any) -> AsyncEngine:
    """Open an :class:`AsyncEngine` on the running loop, connecting to its
    store (a Redis server: a round trip or more) on a worker thread."""
    loop = asyncio.get_running_loop()
    engine = await loop.run_in_executor(None, lambda: AsyncEngine(loop=loop, _attach_later=True, **options))
    engine._attach()
    return engine

