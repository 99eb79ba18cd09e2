"""What the YAML tests share: typed equality and generated YAML data (hypothesis strategies)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

#: Plain scalars the safe loader reads as something else than text, or nearly does.
PLAIN_WORDS = st.sampled_from(["yes", "No", "on", "OFF", "~", "", "null", "010", "0x1F", "0b1", "1_000", "1:30",
                               "1e3", "1.5E+3", ".inf", ".NaN", "2024-03-01", "2024-03-01 10:00:00", "=", "<<",
                               "text", "true", "y", "-1", "+5", ".5", "12:30", "描述"])

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | PLAIN_WORDS | st.dates()
#: Nested lists and mappings of scalars, with keys of every plain kind.
DATA = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.none() | st.booleans() | st.integers() | st.text(max_size=5), inner, max_size=3),
                    max_leaves=15)


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``True == 1`` and ``1 == 1.0`` are not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(same(k, k2) and same(a[k], b[k2]) for k, k2 in zip(a, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b
