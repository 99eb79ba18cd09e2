"""The SQL executor: one pooled, read-only, time-limited engine per source.

``fetch`` opens a guarded transaction (``session.begin_read_only``), binds the query the
backend's way, fetches at most ``max_rows + 1`` rows under the backend's deadline guard, rolls
back, and translates the driver's error into the structq error that says whose fault it was.

A SQLite source runs on ``sqlite3`` connections straight (``sqlite_pool.py``), every query: all
its guards are on the connection, and SQLAlchemy would add only its import to a run. The
servers run through SQLAlchemy engines.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

from structq.errors import ExecutionError, QueryTimeout, SourceUnavailable

from ..base import ResultSet
from .fetch import NotAQuery, fetch, fetch_cursor, fetched_result
from .guards import Setup, driver_message
from .session import begin_read_only, read_only_engine, resolve
from .sqlite import SQLiteBackend, sqlite_path, sqlite_statement
from .sqlite_pool import SQLitePool

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["SqlExecutor"]


class SqlExecutor:
    """Runs ``SafeQuery`` objects against one SQL source, read-only, time-limited and capped.

    One pooled engine per source — for a SQLite file, a pool of ``sqlite3`` connections —
    created on first use (thread-safe: the engine calls ``fetch`` from several worker threads
    at once) and disposed by ``close()``.
    """

    def __init__(self, manifest: "Manifest") -> None:
        self.manifest = manifest
        self.source = manifest.source
        self.timeout_s = float(manifest.limits.timeout_s)
        #: No query returns more rows than a step may pass on, whatever it asks for.
        self.row_cap = max(manifest.limits.max_rows, manifest.limits.max_intermediate_rows)
        self._backend, self._url = resolve(manifest)
        #: Whether the source is a SQLite file, whose queries run on ``self._files``.
        self._on_file = isinstance(self._backend, SQLiteBackend)
        self._engine: Engine | None = None
        self._files: SQLitePool | None = None
        self._lock = threading.Lock()
        from structq.safety.query import qualifying_schema, variable_parameter

        schema = qualifying_schema(manifest.schema_, manifest.sql_dialect)
        #: Run after the backend's set-up on every connection (``Backend.pin_schema``).
        self._pin = self._backend.pin_schema(schema) if schema else []
        #: The caller variables the manifest's row filters use, by the parameter the sandbox
        #: binds each to: each transaction hands them to the database's row-level security
        #: too (``Backend.row_settings``, ``structq grants``).
        self._row_variables = {name: variable_parameter(name) for row_filter in manifest.policies.row_filters
                               for name in row_filter.variables}

    def __repr__(self) -> str:
        return f"SqlExecutor({self.source!r}, {self._url.render_as_string(hide_password=True)!r})"

    # -- lifecycle -------------------------------------------------------------------------

    def _get_engine(self) -> "Engine":
        engine = self._engine
        if engine is not None:
            return engine
        with self._lock:
            if self._engine is None:
                self._engine = self._create_engine()
            return self._engine

    def _create_engine(self) -> "Engine":
        return read_only_engine(self._backend, self._url, self.timeout_s)

    def _get_files(self) -> SQLitePool:
        files = self._files
        if files is not None:
            return files
        with self._lock:
            if self._files is None:
                self._files = SQLitePool(sqlite_path(self._url), self.timeout_s)
            return self._files

    def close(self) -> None:
        """Dispose of the pool; the next ``fetch`` opens a new one."""
        with self._lock:
            engine, self._engine = self._engine, None
            files, self._files = self._files, None
        if engine is not None:
            engine.dispose()
        if files is not None:
            files.close()

    # -- running ---------------------------------------------------------------------------

    def fetch(self, query: "SafeQuery") -> ResultSet:
        """Run ``query`` read-only; raise ``SourceUnavailable``, ``QueryTimeout`` or
        ``ExecutionError`` (with the database's message) when it fails."""
        if query.kind != "sql" or query.text is None:
            raise ExecutionError(f"source {self.source!r} runs SQL; got a {query.kind} query",
                                 source=self.source, query=str(query))
        if self._on_file:
            return self._fetch_file(query)
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        engine = self._get_engine()
        started = time.monotonic()
        phase = "connect"
        try:
            with engine.connect() as connection:
                phase = "setup"
                begin_read_only(connection, self._backend, self.timeout_s, [*self._pin, *self._row_settings(query)])
                phase = "query"
                dbapi_connection = connection.connection.dbapi_connection
                with self._backend.guard(dbapi_connection, self.timeout_s):
                    # Inside the guard: binding may ask the server something (PostgreSQL).
                    statement = self._backend.statement(dbapi_connection, query)
                    fetched = fetch(connection, query, self.row_cap, statement=statement,
                                    plain=self._backend.plain_columns, reader=self._backend.read)
                connection.rollback()  # read-only anyway; never commit
        except DBAPIError as exc:
            raise self._translate(exc.orig, exc.connection_invalidated, phase, query,
                                  time.monotonic() - started) from exc
        except NotAQuery:
            raise self._not_a_query(query) from None
        except SQLAlchemyError as exc:  # pool exhausted, closed result, …
            raise self._translate(exc, False, phase, query, time.monotonic() - started) from exc
        sent = statement[1]
        return fetched_result(query, fetched, started, chosen={name: sent[name] for name in query.switches})

    def _fetch_file(self, query: "SafeQuery") -> ResultSet:
        """``fetch`` on a pooled ``sqlite3`` connection to the source's SQLite file: nothing to
        set up (the connection is read-only and limited from its opening; SQLite has no schema
        to pin nor row-level security), the deadline guard around the statement."""
        sql, params = sqlite_statement(query)
        files = self._get_files()
        started = time.monotonic()
        phase = "connect"
        try:
            with files.connection() as connection:
                phase = "query"
                with self._backend.guard(connection, self.timeout_s):
                    fetched = fetch_cursor(connection.cursor(), sql, params, query, self.row_cap)
        except sqlite3.Error as exc:
            raise self._translate(exc, False, phase, query, time.monotonic() - started) from exc
        except NotAQuery:
            raise self._not_a_query(query) from None
        return fetched_result(query, fetched, started)

    def _not_a_query(self, query: "SafeQuery") -> ExecutionError:
        return ExecutionError(f"source {self.source!r}: the statement returned no rows; only queries run here",
                              source=self.source, query=query.sent_text, cause="not a query")

    def _row_settings(self, query: "SafeQuery") -> list[Setup]:
        """The backend's statements that set this query's row-filter variables (the sandbox
        bound each as ``var_<name>``) for the database's own row-level security."""
        if not self._row_variables:
            return []
        params = query.params
        present = {name: params[bound] for name, bound in self._row_variables.items() if bound in params}
        return self._backend.row_settings(present) if present else []

    def ping(self) -> float:
        """Connect, run ``SELECT 1`` read-only and return the round trip in milliseconds.

        For ``structq check --connect``: raises ``SourceUnavailable`` when the source cannot
        be reached or refuses the login.
        """
        from structq.safety.query import SafeQuery

        probe = SafeQuery(source=self.source, kind="sql", limit=2, max_rows=1, text="SELECT 1")
        return self.fetch(probe).elapsed_ms

    def _translate(self, error: BaseException, invalidated: bool, phase: str,
                   query: "SafeQuery", elapsed_s: float) -> ExecutionError:
        """The driver's error as the structq error that says whose fault it was."""
        cause = driver_message(error)
        where = {"source": self.source, "query": query.sent_text, "cause": cause}
        if phase == "query" and self._backend.is_timeout(error):
            return self._timeout(where)
        lost = invalidated or self._backend.is_unavailable(error)
        if phase == "query" and lost and elapsed_s >= self.timeout_s:
            return self._timeout(where)  # the backstop dropped a server that stopped answering
        if phase != "query" or lost:
            url = self._url.render_as_string(hide_password=True)
            return SourceUnavailable(
                f"source {self.source!r}: cannot use the database at {url}: {cause}",
                hint="check that the server is running and that the URL and credentials are right",
                **where,
            )
        return ExecutionError(f"source {self.source!r}: the database rejected the query: {cause}",
                              hint=self._backend.hint_for(error), **where)

    def _timeout(self, where: dict[str, Any]) -> QueryTimeout:
        return QueryTimeout(
            f"source {self.source!r}: the query ran longer than {self.timeout_s:g} s and was cancelled",
            hint="filter earlier, aggregate in the database, or read fewer rows",
            **where,
        )
