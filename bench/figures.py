"""What the benchmarks share to report figures: one definition of a percentile."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["percentile"]

N = TypeVar("N", int, float)


def percentile(values: Sequence[N], p: float, empty: N | None = None) -> N:
    """The ``p``-th percentile (0-100) of ``values``, nearest rank: one of the values, never an
    interpolation, so a p95 is a time some run took. ``empty`` is returned for no values (an
    error when not given)."""
    if not values:
        if empty is None:
            raise ValueError("no values to take a percentile of")
        return empty
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
