"""Integer slots for the Python objects that C holds as ``void *user_data``.

As in wasmtime-py's ``_slab.py``: C never receives a pointer to a Python
object, only an integer that indexes this table. The table holds the Python
callback (and whatever it closes over) until the library's destructor
callback frees the slot, so nothing C may still call can be collected, and a
stale or unknown number finds nothing instead of freed memory.
"""

from __future__ import annotations

import itertools
import threading
from typing import Dict, Generic, Iterator, Optional, TypeVar

T = TypeVar("T")

__all__ = ["Slab"]


class Slab(Generic[T]):
    """Maps integer handles to Python objects; safe to use from many threads.

    Handles come from a counter that starts at 1 (0 would read back from C as
    a NULL ``void *``) and are never reused. Values live in a dict, and the
    lock only guards the counter, so freeing a slot (which may drop the last
    reference to arbitrary user objects, running their finalizers) never
    happens under a lock.
    """

    def __init__(self) -> None:
        self._handles: Dict[int, T] = {}
        self._counter: Iterator[int] = itertools.count(1)
        self._lock = threading.Lock()

    def allocate(self, value: T) -> int:
        with self._lock:
            index = next(self._counter)
        self._handles[index] = value
        return index

    def get(self, index: Optional[int]) -> Optional[T]:
        """The value of a slot, or None if it is free (or was never handed out)."""
        if not index:
            return None
        return self._handles.get(index)

    def deallocate(self, index: Optional[int]) -> Optional[T]:
        """Free a slot and return its value; idempotent."""
        if not index:
            return None
        return self._handles.pop(index, None)

    def __len__(self) -> int:
        return len(self._handles)

    def __contains__(self, index: object) -> bool:
        return index in self._handles
