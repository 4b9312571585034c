"""The login gate of a realm: actions that run now, or after login."""

from __future__ import annotations

from ctypes import byref, c_int, c_int64
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _callbacks, _convert, _ffi
from ._convert import Key, Seconds
from ._enums import CancelReason, RequireResult
from ._subscription import Subscription
from ._types import GateEvent, Session
from .errors import Closed, NotFound

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["Gate", "GateRequest"]


class GateRequest:
    """A request made with :meth:`Gate.require`.

    It ends in exactly one way: its action runs once (``outcome == "ran"``),
    its ``on_cancel`` runs once (``"cancelled"``, with ``reason``), or it is
    withdrawn, coalesced into an earlier request, or dropped by the engine's
    close (``outcome`` stays None). :attr:`done` is set once the library has
    released it.
    """

    def __init__(self, gate: Gate, slot: _callbacks.RequestSlot, request_id: int, result: Union[RequireResult, int]) -> None:
        self.gate = gate
        self._slot = slot
        #: The request's id (for COALESCED: the id of the request it joined).
        self.id = request_id
        #: RUNS_NOW, QUEUED or COALESCED.
        self.result = result

    @property
    def outcome(self) -> Optional[str]:
        """``"ran"``, ``"cancelled"``, or None (not ended yet, withdrawn,
        coalesced or dropped by the engine's close)."""
        return self._slot.outcome

    @property
    def reason(self) -> Optional[Union[CancelReason, int]]:
        """Why it was cancelled (a :class:`tickgate.CancelReason`), or None."""
        return self._slot.reason

    @property
    def done(self) -> bool:
        """True once the library released the request (after its callback, if any)."""
        return self._slot.ended.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the request ended (engine-thread delivery), at most
        ``timeout`` seconds (None: no limit); True if it did."""
        return self._slot.ended.wait(timeout)

    def withdraw(self) -> bool:
        """Withdraw the request if it has not run; False if it already ended."""
        if self._slot.ended.is_set() or self.result == RequireResult.COALESCED:
            return False
        try:
            self.gate.withdraw(self.id)
            return True
        except (NotFound, Closed):
            return False

    def __repr__(self) -> str:
        result = getattr(self.result, "name", self.result)
        return f"<tickgate.GateRequest {self.id} {self.gate.realm} {result} outcome={self.outcome}>"


class Gate:
    """The login gate of one realm of an engine (``engine.gate("account")``).

    :meth:`require` runs an action now if it needs no login or the realm's
    session is live; otherwise it queues it, tells the realm's observers to
    present the login screen (LOGIN_REQUIRED), and runs it after
    :meth:`login_succeeded`, or cancels it on :meth:`login_cancelled`,
    :meth:`logout` or timeout. Actions and cancels run like events: on the
    engine thread or inside :meth:`Engine.dispatch`, never inside the call
    that caused them.
    """

    def __init__(self, engine: Engine, realm: Key) -> None:
        self.engine = engine
        self._realm = _convert.key(realm, "realm")
        self.realm = _callbacks.decode(self._realm)

    def require(
        self,
        action: Callable[[], Any],
        *,
        needs_login: bool = True,
        coalesce_key: Optional[Key] = None,
        on_cancel: Optional[Callable[[CancelReason], Any]] = None,
        _on_end: Optional[Callable[[], None]] = None,
    ) -> GateRequest:
        """Ask to run ``action()``; returns the :class:`GateRequest`.

        ``needs_login=False`` runs it whatever the session. While a queued
        request of the realm has the same ``coalesce_key``, a new one joins it
        (``result == COALESCED``, this action never runs). ``on_cancel(reason)``
        runs instead of the action if the login is cancelled, times out, or
        the user logs out. Exceptions from either are reported like callback
        exceptions (see :func:`tickgate.set_callback_error_hook`).
        """
        if not callable(action):
            raise TypeError("action must be callable")
        if on_cancel is not None and not callable(on_cancel):
            raise TypeError("on_cancel must be callable")
        slot = _callbacks.RequestSlot(action, on_cancel)
        if _on_end is not None:
            slot.on_end.append(_on_end)
        key = _convert.key(coalesce_key, "coalesce_key")
        index = _callbacks.slots.allocate(slot)
        out = _ffi.tg_request(0)
        result = c_int(0)
        try:
            self.engine.c_call("tg_gate_require", self._realm, 1 if needs_login else 0, key,
                _callbacks.on_action, _callbacks.on_cancel, index, _callbacks.on_destroy, byref(out), byref(result),
            )
        except BaseException:
            _callbacks.slots.deallocate(index)  # on error the library never calls back
            raise
        slot.id = int(out.value)
        return GateRequest(self, slot, int(out.value), _callbacks.enum_or_int(RequireResult, result.value))

    def withdraw(self, request: Union[GateRequest, int]) -> None:
        """Withdraw a request that has not run. Raises NotFound if it already ended."""
        rid = request.id if isinstance(request, GateRequest) else int(request)
        self.engine.c_call("tg_gate_withdraw", rid)

    def login_succeeded(self, session_ttl: Optional[Seconds] = None, *, session_ttl_ms: Optional[int] = None) -> None:
        """The user logged in; queued actions run. ``session_ttl`` None: no expiry."""
        ttl = _convert.to_ms(session_ttl, session_ttl_ms, "session_ttl", 0)
        self.engine.c_call("tg_gate_login_succeeded", self._realm, ttl)

    def login_cancelled(self) -> None:
        """The user abandoned the login screen: every queued request is cancelled."""
        self.engine.c_call("tg_gate_login_cancelled", self._realm)

    def logout(self) -> None:
        """The user logged out: requests that needed login and have not run are cancelled."""
        self.engine.c_call("tg_gate_logout", self._realm)

    def session(self) -> Session:
        """The realm's session: logged in, and the time to expiry."""
        logged_in = c_int(0)
        remaining = c_int64(0)
        self.engine.c_call("tg_gate_session", self._realm, byref(logged_in), byref(remaining))
        return Session(bool(logged_in.value), int(remaining.value))

    def set_request_timeout(self, timeout: Optional[Seconds] = None, *, timeout_ms: Optional[int] = None) -> None:
        """How long requests queued from now on wait for login before TIMED_OUT."""
        ms = _convert.to_ms(timeout, timeout_ms, "timeout")
        if ms is None:
            raise TypeError("set_request_timeout() needs timeout or timeout_ms")
        self.engine.c_call("tg_gate_set_request_timeout", self._realm, ms)

    def subscribe(
        self, callback: Callable[[GateEvent], Any], _on_end: Optional[Callable[[], None]] = None
    ) -> Subscription:
        """Observe the realm: its state first (STATE), then every change.

        End it with :meth:`Subscription.close` (or the engine's close).
        """
        if not callable(callback):
            raise TypeError("callback must be callable")
        slot = _callbacks.SubscriptionSlot(callback)  # type: ignore[arg-type]
        if _on_end is not None:
            slot.on_end.append(_on_end)
        index = _callbacks.slots.allocate(slot)
        out = _ffi.tg_subscription(0)
        try:
            self.engine.c_call("tg_gate_subscribe", self._realm, _callbacks.on_gate_event, index, _callbacks.on_destroy, byref(out)
            )
        except BaseException:
            _callbacks.slots.deallocate(index)
            raise
        slot.id = int(out.value)
        return Subscription(self.engine, slot, self._realm, None)

    def __repr__(self) -> str:
        return f"<tickgate.Gate {self.realm}>"


