"""SQL over earlier steps' results (``source: local``): intersections, growth rates, joins
across sources.

Each earlier ``output_key`` becomes a table with the columns its result returned. The engine
describes those tables to the sandbox with ``local_manifest(results)``, checks the step's SQL
with ``check_sql(query, local_manifest(results), …)`` like any other source, then runs it with
``LocalExecutor(results).run(safe_query)``.

Why an in-memory SQLite rather than DuckDB: it is in the standard library (no extra
dependency, nothing to install for the demo), it is the dialect the demo company's database
and its examples already use, so the planner writes one SQL flavour, and loading plus querying
100k rows takes a fraction of a second. Every run gets a brand-new in-memory database, loaded
from the results and then switched to ``query_only``: nothing is shared between runs or
threads, and a run cannot see another's tables.

SQLite caveat: columns have *affinities*, not types. Types are inferred from all of a column's
values (never the first row only, so the row order does not change them) and declared so that
values come back as they went in:

=========  ===============================  ================================================
type       values                           stored as
=========  ===============================  ================================================
integer    ints (and bools mixed in)        INTEGER
real       ints and floats                  REAL
boolean    bools only                       0/1, read back as ``True``/``False``
json       any list or dict                 JSON text, read back as lists/dicts
text       anything else; ints too big for  TEXT (``True`` as ``'true'``)
           64 bits (a wrong number is worse
           than text)
=========  ===============================  ================================================

Booleans and JSON read back as such only when a result column *is* a table column
(``SELECT flag FROM t``); an expression over them (``flag AND x``, ``json_extract(…)``) comes
back as SQLite computes it. Dates and datetimes arrive as ISO text from the executors, which
SQLite's date functions read directly.

Odd column names (``count(*)``, ``销售额``, duplicates) are kept: identifiers are quoted by
sqlglot, duplicates get ``_2``, ``_3`` suffixes, and an empty name becomes ``column_N``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from structq.capabilities.model import Column, Limits, Manifest, Table
from structq.capabilities.validate import LOCAL_SOURCE
from structq.errors import ExecutionError, QueryTimeout

from .base import ResultSet, register
from .sql import (
    SQLITE_TOO_BIG_HINT,
    NotAQuery,
    fetch,
    limit_sqlite,
    sqlite_deadline,
    sqlite_interrupted,
    sqlite_too_big,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from structq.safety.query import SafeQuery

__all__ = ["LocalTable", "LocalExecutor", "describe_results", "infer_column_type", "local_manifest"]

#: How long a local query may run unless the engine says otherwise.
DEFAULT_TIMEOUT_S = 5.0

_INT64 = (-(2**63), 2**63 - 1)

# Declared types that pick the right affinity and tell sqlite3 how to read the value back
# (PARSE_DECLTYPES keys converters on the declared type's first word, case-insensitively).
_BOOLEAN_DECL = "STRUCTQ_BOOLEAN"  # no INT/CHAR/TEXT/REAL… inside: NUMERIC affinity, 0/1 stay ints
_JSON_DECL = "STRUCTQ_JSON_TEXT"  # contains TEXT: TEXT affinity, JSON text stays text
sqlite3.register_converter(_BOOLEAN_DECL, lambda raw: raw not in (b"0", b"0.0"))
sqlite3.register_converter(_JSON_DECL, lambda raw: json.loads(raw.decode("utf-8")))


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def _as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class _ColumnType:
    """A manifest type, how SQLite declares it, and how a Python value is stored in it."""

    name: str
    declared: str
    store: Callable[[Any], Any] | None  # None: the value is stored as it is


# sqlite3 binds bools as 0/1 and INTEGER/REAL affinities convert numbers, so only JSON and
# text that holds non-text values need converting before they are stored.
_TYPES = {
    t.name: t
    for t in (
        _ColumnType("integer", "INTEGER", None),
        _ColumnType("real", "REAL", None),
        _ColumnType("boolean", _BOOLEAN_DECL, None),
        _ColumnType("json", _JSON_DECL, _as_json),
        _ColumnType("text", "TEXT", _as_text),
    )
}


def infer_column_type(values: Iterable[Any]) -> str:
    """``integer``, ``real``, ``boolean``, ``json`` or ``text`` for a column's values.

    Looks at every non-null value, so the answer does not depend on row order.
    """
    values = values if isinstance(values, (list, tuple)) else list(values)
    kinds = set(map(type, values)) - {type(None)}
    if tuple in kinds:
        kinds = (kinds - {tuple}) | {list}
    if list in kinds or dict in kinds:
        return "json"
    if not kinds or not kinds <= {bool, int, float}:
        return "text"
    if kinds == {bool}:
        return "boolean"
    if int in kinds:
        numbers = [v for v in values if v is not None]
        if not (_INT64[0] <= min(numbers) and max(numbers) <= _INT64[1]):
            return "text"  # SQLite integers are 64-bit; text keeps every digit
    return "real" if float in kinds else "integer"


@dataclass(frozen=True)
class LocalTable:
    """One earlier result as a table: its name, (column, type) pairs and rows."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rows: list[tuple[Any, ...]]

    def stored_rows(self) -> Iterable[tuple[Any, ...]]:
        """Rows converted for storage in the declared column types."""
        stores = {
            i: _TYPES[kind].store
            for i, (_, kind) in enumerate(self.columns)
            if _TYPES[kind].store is not None and (kind != "text" or not self._all_text(i))
        }
        if not stores:
            return self.rows
        return (
            tuple(v if v is None or i not in stores else stores[i](v) for i, v in enumerate(row))
            for row in self.rows
        )

    def _all_text(self, index: int) -> bool:
        return set(map(type, (row[index] for row in self.rows))) <= {str, type(None)}


def _unique_names(columns: Iterable[str]) -> list[str]:
    """Column names SQLite accepts in one table: non-empty, unique case-insensitively."""
    names: list[str] = []
    seen: set[str] = set()
    for position, name in enumerate(columns, start=1):
        candidate = name or f"column_{position}"
        base, n = candidate, 1
        while candidate.lower() in seen:
            n += 1
            candidate = f"{base}_{n}"
        seen.add(candidate.lower())
        names.append(candidate)
    return names


def describe_results(results: Mapping[str, ResultSet]) -> list[LocalTable]:
    """The tables ``results`` become, in name order (so load order never varies).

    A result without columns has nothing to query and is left out.
    """
    tables = []
    for key in sorted(results):
        result = results[key]
        if not result.columns:
            continue
        names = _unique_names(result.columns)
        if set(map(len, result.rows)) - {len(names)}:
            raise ExecutionError(
                f"the result of step {key!r} has rows that do not match its {len(names)} columns",
                source=LOCAL_SOURCE, step=key,
            )
        by_column = list(zip(*result.rows)) if result.rows else [()] * len(names)
        kinds = [infer_column_type(values) for values in by_column]
        tables.append(LocalTable(key, tuple(zip(names, kinds)), result.rows))
    return tables


def _manifest_table(table: LocalTable) -> Table:
    columns = []
    for name, kind in table.columns:
        fields = {"name": name, "type": kind, "description": f"column of step {table.name}'s result"}
        try:
            columns.append(Column(**fields))
        except ValidationError:
            # A result column is whatever the source called it (`` total``, a tab inside):
            # the rules for names people write do not apply to it.
            columns.append(Column.model_construct(**fields))
    return Table(
        name=table.name,
        description=f"result of step {table.name} ({len(table.rows)} rows)",
        columns=columns,
    )


def local_manifest(results: Mapping[str, ResultSet], *, limits: Limits | None = None) -> Manifest:
    """A manifest describing ``results`` as tables of the ``local`` source (SQLite dialect),
    for ``check_sql``."""
    return _manifest_for(describe_results(results), limits)


def _manifest_for(tables: list[LocalTable], limits: Limits | None) -> Manifest:
    return Manifest(
        source=LOCAL_SOURCE,
        kind="sql",
        url="sqlite://",
        dialect="sqlite",
        description="earlier steps' results; each output_key is a table",
        limits=limits or Limits(),
        tables=[_manifest_table(t) for t in tables],
    )


def _quote(name: str) -> str:
    from sqlglot import exp

    return exp.to_identifier(name, quoted=True).sql(dialect="sqlite")


def _load(connection: sqlite3.Connection, tables: Iterable[LocalTable]) -> None:
    """Create and fill each table; identifiers quoted, values bound."""
    for table in tables:
        columns = ", ".join(f"{_quote(name)} {_TYPES[kind].declared}" for name, kind in table.columns)
        marks = ", ".join("?" for _ in table.columns)
        connection.execute(f"CREATE TABLE {_quote(table.name)} ({columns})")
        connection.executemany(f"INSERT INTO {_quote(table.name)} VALUES ({marks})", table.stored_rows())


_engine: Engine | None = None
_engine_lock = threading.Lock()


def _local_engine() -> "Engine":
    """One engine whose every connection is a new, empty in-memory database (no pooling)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            from sqlalchemy import create_engine
            from sqlalchemy.pool import NullPool

            def connect() -> sqlite3.Connection:
                return sqlite3.connect(":memory:", detect_types=sqlite3.PARSE_DECLTYPES,
                                       check_same_thread=False)

            _engine = create_engine("sqlite+pysqlite://", creator=connect, poolclass=NullPool)
        return _engine


@register("local")
class LocalExecutor:
    """Runs checked SQLite queries over earlier results. Cheap to create; one per step run
    is fine, and one instance may also run several queries, from several threads."""

    def __init__(self, results: Mapping[str, ResultSet] | None = None, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, limits: Limits | None = None) -> None:
        self.limits = limits
        self.timeout_s = float(limits.timeout_s) if limits is not None else float(timeout_s)
        self.tables = describe_results(results or {})

    @classmethod
    def load(cls, results: Mapping[str, ResultSet], **options: Any) -> "LocalExecutor":
        """``LocalExecutor(results, …)``, named for readability at the call site."""
        return cls(results, **options)

    @property
    def manifest(self) -> Manifest:
        """The ``local`` manifest of exactly these tables (same as ``local_manifest``)."""
        return _manifest_for(self.tables, self.limits)

    def run(self, query: "SafeQuery") -> ResultSet:
        """Load the tables into a fresh in-memory database and run ``query`` over them."""
        from sqlalchemy.exc import DBAPIError

        if query.kind != "sql" or query.text is None:
            raise ExecutionError(f"the local source runs SQL; got a {query.kind} query",
                                 source=LOCAL_SOURCE, query=str(query))
        started = time.monotonic()
        where = {"source": LOCAL_SOURCE, "query": query.text}
        try:
            with _local_engine().connect() as connection:
                raw = connection.connection.dbapi_connection
                _load(raw, self.tables)
                raw.execute("PRAGMA query_only = ON")
                limit_sqlite(raw)  # after loading: the limits are for what the query builds
                with sqlite_deadline(raw, self.timeout_s):
                    columns, rows, truncated = fetch(connection, query)
        except DBAPIError as exc:
            raise self._error(exc.orig, where) from exc
        except sqlite3.Error as exc:  # loading the tables, on the raw connection
            cause = " ".join(str(exc).split())
            raise ExecutionError(f"could not load earlier results for the local query: {cause}",
                                 cause=cause, **where) from exc
        except NotAQuery:
            raise ExecutionError("the local source runs queries only", cause="not a query", **where) from None
        return ResultSet(
            columns=columns,
            rows=rows,
            truncated=truncated,
            elapsed_ms=(time.monotonic() - started) * 1000,
            query=query.text,
            params=dict(query.params),
        )

    def _error(self, error: BaseException, where: dict[str, Any]) -> ExecutionError:
        """The SQLite error of the query as the structq error that says what to change."""
        cause = " ".join(str(error).split())
        if sqlite_interrupted(error):
            return QueryTimeout(f"the local query ran longer than {self.timeout_s:g} s and was cancelled",
                                hint="join on fewer rows, or aggregate in the source steps", cause=cause, **where)
        hint = SQLITE_TOO_BIG_HINT if sqlite_too_big(error) else None
        return ExecutionError(f"the local query failed: {cause}", hint=hint, cause=cause, **where)

    def close(self) -> None:
        """Nothing to release: each run's database disappears with its connection."""
