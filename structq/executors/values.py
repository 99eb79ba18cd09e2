"""Database values → JSON-safe values (str, int, float, bool, None, lists, dicts).

Results travel to the answer writer, the audit log, the plan cache and later steps as JSON, so
every executor normalises what its driver returns here, once, with the same rules:

==========================  ==================================================================
driver value                becomes
==========================  ==================================================================
``Decimal``                 ``int`` when integral; ``float`` when the float prints back as the
                            same number (``19.99``); otherwise ``str`` (``"0.1000000000000000055"``)
``float``/``Decimal`` NaN   ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (JSON has no such numbers;
(also sNaN) / ±infinity     a signalling ``Decimal('sNaN')`` is a NaN too)
``datetime``/``date``/      ISO 8601 text (``"2024-03-01"``, ``"2024-03-01T09:30:00+08:00"``)
``time``
``timedelta``               seconds (``int`` when whole); MySQL ``TIME`` arrives as a timedelta
``bytes``/``memoryview``    ``"base64:"`` + base64 text, so binary is never mistaken for text
``UUID``, IP addresses, …   ``str``
``Enum``                    its value, normalised
lists, tuples, sets         lists (sets sorted, so output does not depend on hash order)
dicts                       dicts with ``str`` keys
==========================  ==================================================================

Why Decimal is not simply ``float``: ``NUMERIC(38, 18)`` money and ids do not fit a double, and
a wrong number in an answer is worse than a number shown as text. A float is used only when its
shortest printed form equals the database's value exactly, which covers ordinary prices and
ratios; anything else keeps every digit as a string.

Pure Python (no numpy); results of 100k rows pass through here, so ``json_safe_rows`` looks at
the exact type of every value in one C-level pass (``set(map(type, …))``) and returns the rows
untouched when all are plain; otherwise it converts only the columns that hold something else,
value by value, with the same ``json_safe`` rules (a column is never skipped on the evidence of
its first rows: every value's type is seen).
"""

from __future__ import annotations

import base64
import datetime as dt
import enum
import itertools
import math
import numbers
import uuid
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

__all__ = ["BINARY_PREFIX", "json_safe", "json_safe_row", "json_safe_rows"]

#: Marks a binary value rendered as base64 text.
BINARY_PREFIX = "base64:"

_PLAIN = frozenset({str, int, bool, type(None)})
_PLAIN_OR_FLOAT = _PLAIN | {float}


def _decimal(value: Decimal) -> int | float | str:
    if value.is_nan():  # quiet or signalling: float() refuses a signalling NaN
        return "NaN"
    if value.is_infinite():
        return "-Infinity" if value.is_signed() else "Infinity"
    if value == value.to_integral_value():
        return int(value)
    as_float = float(value)
    if math.isfinite(as_float) and Decimal(repr(as_float)) == value:
        return as_float
    return str(value)


def _float(value: float) -> float | str:
    return float(value) if math.isfinite(value) else _non_finite(value)


def _non_finite(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _seconds(value: dt.timedelta) -> int | float:
    seconds = value.total_seconds()
    return int(seconds) if seconds.is_integer() else seconds


def _binary(value: bytes | bytearray | memoryview) -> str:
    return BINARY_PREFIX + base64.b64encode(bytes(value)).decode("ascii")


def _iso(value: dt.date | dt.time) -> str:
    return value.isoformat()


def _sequence(value: Iterable[Any]) -> list[Any]:
    return [json_safe(item) for item in value]


def _set(value: Iterable[Any]) -> list[Any]:
    return sorted((json_safe(item) for item in value), key=repr)


def _mapping(value: dict[Any, Any]) -> dict[str, Any]:
    return {str(key): json_safe(item) for key, item in value.items()}


# Checked in order with isinstance, after the exact-type fast path; datetime before date
# (a datetime is a date), bool never reaches here (it is plain).
_CONVERTERS: tuple[tuple[type | tuple[type, ...], Callable[[Any], Any]], ...] = (
    (float, _float),
    (Decimal, _decimal),
    ((dt.datetime, dt.date, dt.time), _iso),
    (dt.timedelta, _seconds),
    ((bytes, bytearray, memoryview), _binary),
    (enum.Enum, lambda value: json_safe(value.value)),
    (uuid.UUID, str),
    ((list, tuple), _sequence),
    ((set, frozenset), _set),
    (dict, _mapping),
)


#: Converters by exact type, for the column-wise path: the same converter the ``isinstance``
#: chain above picks for a value of exactly that type (anything else goes through ``json_safe``).
_EXACT: dict[type, Callable[[Any], Any]] = {
    float: _float,
    Decimal: _decimal,
    dt.datetime: _iso,
    dt.date: _iso,
    dt.time: _iso,
    dt.timedelta: _seconds,
    bytes: _binary,
    bytearray: _binary,
    memoryview: _binary,
    uuid.UUID: str,
}


def json_safe(value: Any) -> Any:
    """``value`` as a JSON-safe value, by the rules in the module docstring."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, str) and not isinstance(value, enum.Enum):  # str subclasses
        return str(value)
    for types, convert in _CONVERTERS:
        if isinstance(value, types):
            return convert(value)
    if isinstance(value, numbers.Integral):  # int subclasses, and integer types that register
        return int(value)
    return str(value)


def json_safe_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """One row with every value JSON-safe."""
    kinds = set(map(type, row))  # C speed: most rows hold only plain values
    if kinds <= _PLAIN or (kinds <= _PLAIN_OR_FLOAT and all(map(_finite, row))):
        return tuple(row)
    return tuple(value if type(value) in _PLAIN else json_safe(value) for value in row)


def _finite(value: Any) -> bool:
    return type(value) is not float or math.isfinite(value)


def json_safe_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples of JSON-safe values (the same values ``json_safe_row`` gives, faster).

    Driver rows are usually plain tuples of ``int``/``str``/``None``: one pass over the types
    of all values proves it and the rows are returned as they are. Otherwise each column is
    checked the same way and only the columns that need it are converted.
    """
    rows = rows if isinstance(rows, list) else list(rows)
    if not rows:
        return []
    kinds = set(map(type, itertools.chain.from_iterable(rows)))
    if kinds <= _PLAIN_OR_FLOAT and (float not in kinds or _all_finite(itertools.chain.from_iterable(rows))):
        return rows if set(map(type, rows)) == {tuple} else list(map(tuple, rows))
    widths = set(map(len, rows))
    if len(widths) != 1:  # ragged rows (not from a cursor): row by row
        return [json_safe_row(row) for row in rows]
    columns = [_json_safe_column(column) for column in zip(*rows)]
    return list(zip(*columns))


def _json_safe_column(values: tuple[Any, ...]) -> Sequence[Any]:
    kinds = set(map(type, values))
    if kinds <= _PLAIN or (kinds <= _PLAIN_OR_FLOAT and _all_finite(values)):
        return values
    plain, exact = _PLAIN, _EXACT
    return [value if type(value) in plain else exact.get(type(value), json_safe)(value) for value in values]


def _all_finite(values: Iterable[Any]) -> bool:
    """No float in ``values`` is NaN or infinite (other values are ignored)."""
    return all(map(math.isfinite, (v for v in values if type(v) is float)))
