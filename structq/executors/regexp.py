"""SQLite's ``REGEXP`` operator, matched by RE2 instead of Python's backtracking ``re``.

SQLite has no regular expressions of its own: ``x REGEXP p`` calls a function ``regexp(p, x)``
the connection provides, and SQLAlchemy's SQLite dialect provides one built on ``re.search``.
Python's ``re`` backtracks: ``'aaaaaaaaaaaaaaaaaaaaaaaaaa!' REGEXP '(a+)+$'`` runs for seconds
per character added, holding the GIL, so no timer, no ``interrupt()`` and no other thread of
the process runs until it is done. RE2 matches in time linear in the text (at most
``SQLITE_MAX_VALUE_BYTES``), so one call is bounded whatever the pattern.

RE2 has no back-references or look-around; a pattern that uses them fails the query with a
message saying so. Without the ``google-re2`` package ``REGEXP`` fails the same way rather than
fall back to ``re``.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

__all__ = ["install_regexp", "REGEXP_HINT"]

#: Advice when a pattern is refused at run time.
REGEXP_HINT = ("SQLite REGEXP patterns are matched with RE2 syntax (no back-references or look-around); "
               "or use LIKE / GLOB")

#: Compiled patterns kept per process; the sandbox keeps each pattern short.
_CACHE_SIZE = 128
#: Memory RE2 may use for one compiled pattern (its own default is 8 MB).
_MAX_PATTERN_MEMORY = 8 << 20


class RegexpUnavailable(Exception):
    """The pattern cannot be matched safely: RE2 is missing, or the pattern is not RE2 syntax."""


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compiled(pattern: str) -> Any:
    try:
        import re2
    except ImportError:
        raise RegexpUnavailable('REGEXP on SQLite needs RE2: pip install "google-re2"') from None
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_PATTERN_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise RegexpUnavailable(f"REGEXP pattern {pattern!r} is not RE2 syntax: {exc}") from None


def _regexp(pattern: str | None, value: Any) -> int | None:
    """``value REGEXP pattern``: 1 when the pattern matches anywhere in the text, as ``re.search``."""
    if pattern is None or value is None:
        return None
    return int(_compiled(str(pattern)).search(str(value)) is not None)


def install_regexp(dbapi_connection: sqlite3.Connection) -> None:
    """Make ``REGEXP`` on ``dbapi_connection`` match with RE2 (replacing any earlier function)."""
    dbapi_connection.create_function("regexp", 2, _regexp, deterministic=True)
