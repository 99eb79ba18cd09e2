"""The local executor: a fresh in-memory SQLite per run, loaded with earlier results.

Every run gets a brand-new in-memory database, loaded from the results and then switched to
``query_only`` with the same size limits and deadline as a SQLite source: nothing is shared
between runs or threads, and a run cannot see another's tables.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from structq.capabilities.model import Limits, Manifest
from structq.capabilities.references import LOCAL_SOURCE
from structq.errors import ExecutionError, QueryTimeout

from ..base import ResultSet
from ..sql.fetch import NotAQuery, fetch, fetched_result
from ..sql.sqlite import SQLITE_TOO_BIG_HINT, limit_sqlite, sqlite_deadline, sqlite_interrupted, sqlite_too_big
from .inference import COLUMN_TYPES, LocalTable, describe_results, manifest_for

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from structq.safety.query import SafeQuery

__all__ = ["DEFAULT_TIMEOUT_S", "LocalExecutor"]

#: How long a local query may run unless ``Engine`` says otherwise.
DEFAULT_TIMEOUT_S = 5.0


def _quote(name: str) -> str:
    from sqlglot import exp

    return exp.to_identifier(name, quoted=True).sql(dialect="sqlite")


def _load(connection: sqlite3.Connection, tables: Iterable[LocalTable]) -> None:
    """Create and fill each table; identifiers quoted, values bound."""
    for table in tables:
        columns = ", ".join(f"{_quote(name)} {COLUMN_TYPES[kind].declared}" for name, kind in table.columns)
        marks = ", ".join("?" for _ in table.columns)
        connection.execute(f"CREATE TABLE {_quote(table.name)} ({columns})")
        connection.executemany(f"INSERT INTO {_quote(table.name)} VALUES ({marks})", table.stored_rows())


_memory: Engine | None = None
_memory_lock = threading.Lock()


def _in_memory() -> "Engine":
    """Where local queries connect: each connection is a new, empty in-memory database (``NullPool`` keeps none)."""
    global _memory
    with _memory_lock:
        if _memory is None:
            from sqlalchemy import create_engine
            from sqlalchemy.pool import NullPool

            def connect() -> sqlite3.Connection:
                return sqlite3.connect(":memory:", detect_types=sqlite3.PARSE_DECLTYPES,
                                       check_same_thread=False)

            _memory = create_engine("sqlite+pysqlite://", creator=connect, poolclass=NullPool)
        return _memory


class LocalExecutor:
    """Runs checked SQLite queries over earlier results. Cheap to create; one per step run
    is fine, and one instance may also run several queries, from several threads."""

    def __init__(self, results: Mapping[str, ResultSet] | None = None, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, limits: Limits | None = None) -> None:
        self.limits = limits
        self.timeout_s = float(limits.timeout_s) if limits is not None else float(timeout_s)
        self.tables = describe_results(results or {})

    @classmethod
    def of_tables(cls, tables: Iterable[LocalTable], **options: Any) -> "LocalExecutor":
        """An executor over tables already described (``describe_results``), so that a step's
        column types are inferred once for both its sandbox check and its run."""
        executor = cls(None, **options)
        executor.tables = list(tables)
        return executor

    @classmethod
    def load(cls, results: Mapping[str, ResultSet], **options: Any) -> "LocalExecutor":
        """``LocalExecutor(results, …)``, named for readability at the call site."""
        return cls(results, **options)

    @property
    def manifest(self) -> Manifest:
        """The ``local`` manifest of exactly these tables (same as ``local_manifest``)."""
        return manifest_for(self.tables, self.limits)

    def fetch(self, query: "SafeQuery") -> ResultSet:
        """Load the tables into a fresh in-memory database and run ``query`` over them."""
        from sqlalchemy.exc import DBAPIError

        if query.kind != "sql" or query.text is None:
            raise ExecutionError(f"the local source runs SQL; got a {query.kind} query",
                                 source=LOCAL_SOURCE, query=str(query))
        started = time.monotonic()
        where = {"source": LOCAL_SOURCE, "query": query.sent_text}
        try:
            with _in_memory().connect() as connection:
                raw = connection.connection.dbapi_connection
                _load(raw, self.tables)
                raw.execute("PRAGMA query_only = ON")
                limit_sqlite(raw)  # after loading: the limits are for what the query builds
                with sqlite_deadline(raw, self.timeout_s):
                    fetched = fetch(connection, query)
        except DBAPIError as exc:
            raise self._error(exc.orig, where) from exc
        except sqlite3.Error as exc:  # loading the tables, on the raw connection
            cause = " ".join(str(exc).split())
            raise ExecutionError(f"could not load earlier results for the local query: {cause}",
                                 cause=cause, **where) from exc
        except NotAQuery:
            raise ExecutionError("the local source runs queries only", cause="not a query", **where) from None
        return fetched_result(query, fetched, started,
                              notes=tuple(note for table in self.tables for note in table.notes))

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
