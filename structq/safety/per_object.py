"""What the sandboxes derive from an immutable object of a manifest (the manifest itself, a
search index), made once per object and kept exactly as long as that object lives.

A check runs many times over the same few objects, and what it needs from them (a schema,
the maps of an index's fields) costs in proportion to their size: rebuilt on every check, a
1,000-field index costs a check 2 ms instead of 0.1. Kept in a cache of fixed size, a process
serving more sources than the cache holds rebuilds on nearly every check (a 1,000-table
manifest's cost 0.3 s). So an entry lives beside a weak reference to its object and goes
when the object does: no bound to fall off, nothing kept for a manifest no longer loaded.
The object is found by ``id()``: an id is reused only after its object is gone, and by then
its entry is gone too (the weak reference's callback runs before the memory is freed).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerObject"]

K = TypeVar("K")
V = TypeVar("V")


class PerObject(Generic[K, V]):
    """``make(obj)`` for each object, made on the first ``get`` and kept while ``obj`` lives."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[K], V]] = {}  # type: ignore[type-var]

    def get(self, obj: K, make: Callable[[K], V]) -> V:
        key = id(obj)
        hit = self._entries.get(key)
        if hit is not None and hit[0]() is obj:
            return hit[1]
        value = make(obj)
        self._entries[key] = (weakref.ref(obj, functools.partial(self._forget, key)), value)  # type: ignore[type-var]
        return value

    def _forget(self, key: int, reference: weakref.ref[K]) -> None:  # type: ignore[type-var]
        entry = self._entries.get(key)
        if entry is not None and entry[0] is reference:  # not a newer entry under a reused id
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
