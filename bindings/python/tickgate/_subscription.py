"""A handle on one subscription of an engine (keys, scopes and realms)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from . import _callbacks
from .errors import Closed, NotFound

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["Subscription"]


class Subscription:
    """A handle on one subscription; ``with`` or :meth:`close` ends it.

    Dropping the handle does not end the subscription (it lives until
    :meth:`close` or the engine's close). :meth:`close` is idempotent and
    quiet when the subscription already ended.
    """

    def __init__(
        self,
        engine: Engine,
        slot: _callbacks.SubscriptionSlot,
        scope: Optional[bytes],
        subject: Optional[bytes],
    ) -> None:
        self._engine = engine
        self._slot = slot
        self._id = int(slot.id or 0)
        self.scope: Optional[str] = None if scope is None else _callbacks.decode(scope)
        #: None for a subscription to a whole scope.
        self.subject: Optional[str] = None if subject is None else _callbacks.decode(subject)

    @property
    def id(self) -> int:
        """The ``tg_subscription`` id (also in each :attr:`Event.subscription`)."""
        return self._id

    @property
    def engine(self) -> Engine:
        """The engine the subscription belongs to."""
        return self._engine

    @property
    def active(self) -> bool:
        """False once the library ran its destructor (unsubscribed or engine closed)."""
        return not self._slot.ended.is_set()

    def wait_ended(self, timeout: Optional[float] = None) -> bool:
        """Wait until the subscription ended, at most ``timeout`` seconds
        (None: no limit); True if it did."""
        return self._slot.ended.wait(timeout)

    def close(self) -> None:
        """End the subscription; does nothing if it already ended."""
        if self._slot.ended.is_set():
            return
        try:
            self._engine.unsubscribe(self._id)
        except (NotFound, Closed):
            pass

    unsubscribe = close

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        what = self.scope if self.subject is None else f"{self.scope}/{self.subject}"
        return f"<tickgate.Subscription {self._id} {what} {'active' if self.active else 'ended'}>"
