"""A base class for objects that own a C handle (after wasmtime-py's ``_managed.py``)."""

from __future__ import annotations

import threading
from typing import Any, Generic, Optional, TypeVar

T = TypeVar("T")
# The class of the object itself, so that ``with Engine() as engine`` types
# ``engine`` as an Engine (an AsyncEngine for an AsyncEngine), not Any.
_Self = TypeVar("_Self", bound="Managed[Any]")

__all__ = ["Managed"]


class Managed(Generic[T]):
    """Owns one C handle: ``close()`` (idempotent), ``with``, and a guarded ``__del__``.

    Subclasses call :meth:`_set_handle` once the C object exists and
    implement :meth:`_delete`, which releases it. ``close()`` calls
    ``_delete`` at most once, whichever thread or how many times it is called;
    it does not hold a lock while ``_delete`` runs, so ``_delete`` may wait for
    callbacks that themselves call ``close()``.
    """

    __handle: Optional[T]
    __closing: bool

    def _delete(self, handle: T) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_handle(self, handle: T) -> None:
        if getattr(self, "_Managed__handle", None) is not None:
            raise ValueError("already initialised")
        self.__lock = threading.Lock()
        self.__closing = False
        self.__handle = handle

    def _handle_or_none(self) -> Optional[T]:
        """The handle, even after close (the library answers a dead one with TG_E_CLOSED)."""
        return getattr(self, "_Managed__handle", None)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun (or if the object never opened)."""
        return getattr(self, "_Managed__closing", True)

    def close(self) -> None:
        """Release the C object. Safe to call more than once, and from any thread."""
        lock = getattr(self, "_Managed__lock", None)
        if lock is None:  # never opened
            return
        with lock:
            if self.__closing:
                return
            self.__closing = True
            handle = self.__handle
        if handle is not None:
            self._delete(handle)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Guarded: __init__ may have failed half-way, and at interpreter
        # shutdown the modules this needs may already be gone.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing may escape a finalizer
            pass
