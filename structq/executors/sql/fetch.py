"""Binding and fetching, shared by every SQL backend and by the local executor.

A checked query becomes a SQLAlchemy ``text()`` with its list parameters expanding (``bind``);
``fetch`` runs it and reads at most ``max_rows + 1`` rows (one more tells truncation), as
JSON-safe tuples; ``fetch_cursor`` does the same on a DB-API cursor, without SQLAlchemy (SQLite
files, ``executor.py``); ``fetched_result`` reports the run as a ``ResultSet`` the same way for all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base import ResultSet
from ..values import json_safe_rows

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.engine import Connection, CursorResult
    from sqlalchemy.sql.elements import TextClause

    from structq.safety.query import SafeQuery

__all__ = ["Fetched", "NotAQuery", "Read", "Reader", "Statement", "bind", "fetch", "fetch_cursor", "fetched_result"]


def bind(query: "SafeQuery", expanding: frozenset[str] | None = None) -> "TextClause":
    """``query.text`` as a SQLAlchemy ``text()``, with its list parameters expanding
    (``expanding``, when given, instead of ``query.expanding``)."""
    from sqlalchemy import bindparam, text

    clause = text(query.text or "")
    names = query.expanding if expanding is None else expanding
    lists = [bindparam(name, expanding=True) for name in sorted(names)]
    return clause.bindparams(*lists) if lists else clause


#: A statement ready for ``Connection.execute``: the clause and its parameters.
Statement = tuple["TextClause", dict[str, Any]]

#: What ``fetch`` returns: the column names, the JSON-safe rows and whether rows were cut off.
Fetched = tuple[tuple[str, ...], list[tuple[Any, ...]], bool]

#: What a backend's own reader returns: the column names, the DB-API cursor's ``description``
#: (None when no row came) and the rows as the driver's tuples.
Read = tuple[tuple[str, ...], Any, list[tuple[Any, ...]]]

#: A backend's own way to read at most N rows of a statement (``Backend.read``): None when
#: it cannot read this one, which is then read through SQLAlchemy.
Reader = Callable[["Connection", Statement, int], "Read | None"]


def fetch(
    connection: "Connection", query: "SafeQuery", row_cap: int | None = None, *,
    statement: Statement | None = None, plain: Callable[[Any], bool] | None = None,
    reader: Reader | None = None,
) -> Fetched:
    """Run ``query`` on ``connection``: (columns, JSON-safe rows, truncated).

    At most ``max_rows + 1`` rows are ever fetched, whatever the query says; ``row_cap``
    lowers ``max_rows`` further (the executor's own ceiling). ``statement`` is the clause
    and parameters to execute when a backend binds ``query`` its own way (default:
    ``bind(query)`` with ``query.params``). ``plain`` tells from the DB-API cursor's
    ``description`` that every column's values come from the driver JSON-safe (``int``,
    ``str``, ``bool``, None: ``Backend.plain_columns``); the driver's tuples are then kept as
    they are instead of being checked value by value (100k rows: ~5 ms). ``reader`` is the
    backend's own way to read the rows (``Backend.read``), tried first.
    """
    max_rows, size = _row_bounds(query, row_cap)
    statement = statement if statement is not None else (bind(query), dict(query.params))
    read = reader(connection, statement, size) if reader is not None else None
    if read is not None:
        columns, description, rows = read
        kept = plain is not None and description is not None and plain(description)
        return _capped(columns, rows, kept, max_rows)
    clause, params = statement
    result = connection.execute(clause, params)
    try:
        if not result.returns_rows:
            raise NotAQuery()
        columns = tuple(result.keys())
        described = plain is not None and plain(result.cursor.description)  # before the rows close it
        rows, tuples = _fetch_rows(result, size)
        kept = described and tuples
    finally:
        result.close()
    return _capped(columns, rows, kept, max_rows)


def fetch_cursor(
    cursor: Any, sql: str, params: "Mapping[str, Any]", query: "SafeQuery", row_cap: int | None = None,
) -> Fetched:
    """``fetch`` on a DB-API ``cursor``: run ``sql`` with ``params`` in the driver's own
    placeholder style and read at most ``max_rows + 1`` rows of it, with ``query``'s and
    ``row_cap``'s bounds as ``fetch`` takes them; every value is checked JSON-safe. The cursor
    is closed after."""
    max_rows, size = _row_bounds(query, row_cap)
    try:
        cursor.execute(sql, params)
        description = cursor.description
        if description is None:
            raise NotAQuery()
        columns = tuple(column[0] for column in description)
        rows = cursor.fetchmany(size)
    finally:
        cursor.close()
    return _capped(columns, rows, False, max_rows)


def _row_bounds(query: "SafeQuery", row_cap: int | None) -> tuple[int, int]:
    """The most rows ``query`` may return (``row_cap`` lowers it further), and how many to
    fetch: one more, to tell truncation, and never more than ``query.limit``."""
    max_rows = query.max_rows if row_cap is None else min(query.max_rows, row_cap)
    return max_rows, min(query.limit, max_rows + 1)


def _capped(columns: tuple[str, ...], rows: list[Any], kept: bool, max_rows: int) -> Fetched:
    """At most ``max_rows`` of ``rows`` (one more tells truncation), JSON-safe unless ``kept``."""
    truncated = len(rows) > max_rows
    rows = rows[:max_rows] if truncated else rows
    return columns, rows if kept else json_safe_rows(rows), truncated


def fetched_result(
    query: "SafeQuery", fetched: Fetched, started: float, notes: tuple[str, ...] = (), *,
    chosen: "Mapping[str, Any] | None" = None,
) -> ResultSet:
    """The ``ResultSet`` of what ``fetch`` returned for ``query``, timed from ``started``
    (a ``time.monotonic()`` reading): the SQL backends and the local executor report a run
    the same way, with the SQL text and parameters that ran, and the result columns named
    as the query wrote them (``query.names``) when the sandbox recorded them. ``chosen``
    holds the values the backend sent for the switches (``SafeQuery.switches``) instead of
    the sandbox's, so that the parameters reported are the ones that ran."""
    columns, rows, truncated = fetched
    if query.names is not None and len(query.names) == len(columns):
        columns = query.names
    return ResultSet(
        columns=columns,
        rows=rows,
        truncated=truncated,
        elapsed_ms=(time.monotonic() - started) * 1000,
        query=query.sent_text,
        params={**query.params, **chosen} if chosen else dict(query.params),
        notes=notes,
    )


def _fetch_rows(result: "CursorResult[Any]", size: int) -> tuple[list[Any], bool]:
    """At most ``size`` rows of ``result``, as the DB-API cursor returns them (tuples), and
    whether they are the cursor's own tuples.

    ``Result.fetchmany`` wraps every row in a ``Row`` object, which costs more than the
    driver's own fetch for large results. A ``text()`` query has no typed result columns, so
    SQLAlchemy has no value processors to apply: the rows are taken through the result's own
    fetch strategy (``cursor.fetchmany(size)``, with SQLAlchemy's translation of driver
    errors, disconnects included). Should a result ever carry processors or a column filter,
    the ordinary ``Result.fetchmany`` is used.
    """
    metadata = getattr(result, "_metadata", None)
    strategy = getattr(result, "cursor_strategy", None)
    processors = getattr(metadata, "_processors", None)
    if (strategy is None or processors is None or any(p is not None for p in processors)
            or getattr(metadata, "_tuplefilter", None) is not None):
        return result.fetchmany(size), False
    rows = strategy.fetchmany(result, result.cursor, size)
    rows = rows if isinstance(rows, list) else list(rows)
    return rows, not rows or type(rows[0]) is tuple  # one row factory makes them all


class NotAQuery(Exception):
    """The statement ran but returned no result set: it was not a query."""
