"""A small bounded cache: linking builds per manifest version, a process sees only a few."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Memo"]

T = TypeVar("T")


class Memo(Generic[T]):
    """Values by key, built on first use; the oldest goes when ``size`` are held."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._held: dict[Hashable, T] = {}

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        if key not in self._held:
            if len(self._held) >= self.size:
                self._held.pop(next(iter(self._held)))
            self._held[key] = build()
        return self._held[key]
