"""SQLite's ``floor()``, the same on every connection whatever the SQLite build.

``floor`` is one of SQLite's math functions, which a build has only when compiled with them
(``SQLITE_ENABLE_MATH_FUNCTIONS``; Debian's has them, not every Python's does). SQLAlchemy's
SQLite dialect registers Python's ``math.floor`` on its connections, which answers otherwise:
an integer for a REAL (``floor(2.5)`` is ``2``, not ``2.0``), and an error for NULL. So the same
query would answer differently on a SQLite source (a plain ``sqlite3`` connection, SQLite's own
``floor``), in a ``local`` step (SQLAlchemy's connection) and on a build without the math
functions. ``install_floor`` asks the connection: when its ``floor`` does not answer as SQLite
documents it, or there is none, it registers ``sqlite_floor``, which does.
"""

from __future__ import annotations

import math
import re
import sqlite3
from typing import Any

__all__ = ["install_floor", "sqlite_floor"]

#: A text SQLite reads as a number (ASCII digits, surrounding ASCII spaces allowed); anything else
#: is NULL to floor().
_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*\Z", re.ASCII)
_INTEGER = re.compile(r"\s*[+-]?\d+\s*\Z", re.ASCII)
_INT64 = range(-(2**63), 2**63)


def sqlite_floor(value: Any) -> Any:
    """``floor(value)`` as SQLite's own computes it: an INTEGER stays as it is, a REAL is
    rounded down and stays REAL (infinities too), NULL is NULL, a text that reads as a
    number is that number floored, and any other text or a blob is NULL."""
    if value is None or type(value) is int:
        return value
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(math.floor(value))
    if isinstance(value, str) and _NUMBER.match(value):
        if _INTEGER.match(value) and int(value) in _INT64:
            return int(value)
        return sqlite_floor(float(value))
    return None


def _floor_is_sqlites(connection: sqlite3.Connection) -> bool:
    """Whether ``floor`` on ``connection`` answers as SQLite documents it (REAL for REAL, NULL
    for NULL, INTEGER for an integer text)."""
    try:
        row = connection.execute("SELECT floor(-0.5), floor(NULL), floor('3')").fetchone()
    except sqlite3.Error:  # no such function, or one that fails on NULL
        return False
    return row is not None and type(row[0]) is float and row[0] == -1.0 and row[1] is None and type(row[2]) is int


def install_floor(connection: sqlite3.Connection) -> None:
    """Make ``floor`` on ``connection`` SQLite's own (see the module's docstring)."""
    if not _floor_is_sqlites(connection):
        connection.create_function("floor", 1, sqlite_floor, deterministic=True)
