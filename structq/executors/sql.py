"""Run checked SQL against SQLite, PostgreSQL and MySQL/MariaDB through SQLAlchemy.

The sandbox is the first line of defence; this executor is the second, for the day a query it
should have refused gets through. Whatever the text says, a query here:

- runs on a **read-only** connection or transaction, and is rolled back, never committed;
- is cancelled by the **server** after ``limits.timeout_s``, and if the server's own timeout
  did not stop it, a backstop cancels it on the server (``cancel.py``) half a second later;
  a dead server fails fast thanks to a connect timeout;
- returns at most ``max_rows`` rows, fetched with ``fetchmany`` (one more tells truncation).

What differs between databases lives in one small strategy object per backend (``_Backend``):
how to open a read-only connection, how to start a read-only transaction with a timeout, and
how to recognise a timeout or a lost server in the driver's error. Everything else — binding,
fetching, normalising values, translating errors — is shared.

Per backend (each guard verified against the real server in ``tests/test_executor_sql.py``):

===========  ======================================  ==========================================
backend      read-only                               statement timeout
===========  ======================================  ==========================================
SQLite       file opened ``mode=ro`` (URI) plus      progress handler that aborts the VM past
             ``PRAGMA query_only``; no ATTACH;       the deadline + a timer that interrupts
             values, SQL text and LIKE patterns      a long single step at the deadline;
             size-limited; REGEXP matched by RE2     ``REGEXP`` by RE2, linear in the text
PostgreSQL   ``SET TRANSACTION READ ONLY`` per       ``set_config('statement_timeout', …,
             query, ``default_transaction_read_      true)`` (transaction-local) + a timer that
             only`` per session; every statement     cancels the backend as a backstop
             prepared, so ``…; COMMIT; …`` cannot
             run (the simple protocol would run it)
MariaDB /    ``SET SESSION TRANSACTION READ ONLY``   MariaDB ``max_statement_time`` (s), MySQL
MySQL        + ``START TRANSACTION READ ONLY``;      ``max_execution_time`` (ms, SELECT only);
             the session mode matters: a READ ONLY   ``KILL QUERY`` from a second connection
             transaction alone still lets DDL run    as a backstop, then the read timeout
             (DDL commits implicitly first)
===========  ======================================  ==========================================

With a ``schema`` in the manifest, each transaction is also pinned to it (PostgreSQL
``search_path``, MySQL/MariaDB ``USE``): the sandbox already writes every table qualified
with that schema, and the pin keeps any name that is not from reaching a same-named object
elsewhere (``_Backend.pin_schema``).

Plain ``postgresql://`` / ``mysql://`` / ``mariadb://`` URLs (and other drivers' URLs) are run
with psycopg 3 and PyMySQL: the guards above are tested with those drivers only.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable

from .base import ResultSet, register
from .cancel import canceller
from .regexp import REGEXP_HINT, install_regexp
from .urls import redact_url
from .values import json_safe_rows

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, CursorResult, Engine
    from sqlalchemy.sql.elements import TextClause

    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["NotAQuery", "SqlExecutor", "bind", "fetch", "fetched_result", "limit_sqlite", "sqlite_deadline",
           "sqlite_interrupted", "sqlite_too_big"]

#: Longest wait for a connection to a server; a dead host fails within it.
CONNECT_TIMEOUT_MAX_S = 5.0
#: libpq refuses connect timeouts under 2 s.
CONNECT_TIMEOUT_MIN_S = 2.0
#: How long after the server-side timeout the client-side backstop steps in.
BACKSTOP_GRACE_S = 0.5
#: How long after the server-side timeout a MySQL/MariaDB client stops waiting on its socket:
#: after the backstop's ``KILL QUERY`` (at ``BACKSTOP_GRACE_S``) has had time to answer.
SOCKET_GRACE_S = 0.9
#: SQLite VM instructions between two looks at the clock.
SQLITE_PROGRESS_STEPS = 1000
#: Longest string or blob one SQLite value may be (``SQLITE_LIMIT_LENGTH``; SQLite's default is
#: 1 GB). One function call — ``printf('%.*c', N, 'x')``, ``replace()``, ``||`` — builds its
#: whole result before the VM can be stopped, so this is what bounds a call's memory and time.
#: 10 MB is far above any value a question needs (a document's text, a JSON list of results).
SQLITE_MAX_VALUE_BYTES = 10_000_000
#: Longest SQL text (``SQLITE_LIMIT_SQL_LENGTH``; default 1 GB). The sandbox regenerates the
#: query and list parameters are bound (``?`` each, at most 32,766), so real queries are a few
#: kilobytes; a larger text is a mistake or an attack.
SQLITE_MAX_SQL_BYTES = 1_000_000
#: UTF-8 bytes per character at most: the LIKE pattern limit is the sandbox's cap in characters
#: (``MAX_PATTERN_CHARS``) times this (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``; SQLite's default is
#: 50,000 bytes). Matching costs the pattern's length times the text's, in one VM step no
#: deadline interrupts.
_UTF8_MAX_BYTES = 4
#: Advice when a value outgrows ``SQLITE_MAX_VALUE_BYTES``.
SQLITE_TOO_BIG_HINT = (f"a value grew past {SQLITE_MAX_VALUE_BYTES // 1_000_000} MB (printf widths, replace, "
                       "group_concat over many rows…): build smaller values, or return rows instead")


# --------------------------------------------------------------------------------------------
# Shared by every SQL engine (and the local executor): binding, fetching, the SQLite deadline
# --------------------------------------------------------------------------------------------


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


def fetch(
    connection: "Connection", query: "SafeQuery", row_cap: int | None = None, *,
    statement: Statement | None = None,
) -> Fetched:
    """Run ``query`` on ``connection``: (columns, JSON-safe rows, truncated).

    At most ``max_rows + 1`` rows are ever fetched, whatever the query says; ``row_cap``
    lowers ``max_rows`` further (the executor's own ceiling). ``statement`` is the clause
    and parameters to execute when a backend binds ``query`` its own way (default:
    ``bind(query)`` with ``query.params``).
    """
    max_rows = query.max_rows if row_cap is None else min(query.max_rows, row_cap)
    clause, params = statement if statement is not None else (bind(query), dict(query.params))
    result = connection.execute(clause, params)
    try:
        if not result.returns_rows:
            raise NotAQuery()
        columns = tuple(result.keys())
        rows = _fetch_rows(result, min(query.limit, max_rows + 1))
    finally:
        result.close()
    truncated = len(rows) > max_rows
    return columns, json_safe_rows(rows[:max_rows]), truncated


def fetched_result(
    query: "SafeQuery", fetched: Fetched, started: float, notes: tuple[str, ...] = (),
) -> ResultSet:
    """The ``ResultSet`` of what ``fetch`` returned for ``query``, timed from ``started``
    (a ``time.monotonic()`` reading): the SQL engines and the local executor report a run
    the same way, with the SQL text and parameters that ran, and the result columns named
    as the query wrote them (``query.names``) when the sandbox recorded them."""
    columns, rows, truncated = fetched
    if query.names is not None and len(query.names) == len(columns):
        columns = query.names
    return ResultSet(
        columns=columns,
        rows=rows,
        truncated=truncated,
        elapsed_ms=(time.monotonic() - started) * 1000,
        query=query.sent_text,
        params=dict(query.params),
        notes=notes,
    )


def _fetch_rows(result: "CursorResult[Any]", size: int) -> list[Any]:
    """At most ``size`` rows of ``result``, as the DB-API cursor returns them (tuples).

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
        return result.fetchmany(size)
    rows = strategy.fetchmany(result, result.cursor, size)
    return rows if isinstance(rows, list) else list(rows)


class NotAQuery(Exception):
    """The statement ran but returned no result set: it was not a query."""


def sqlite_interrupted(error: BaseException) -> bool:
    """Whether a SQLite error is the progress handler's (or ``interrupt()``'s) doing."""
    return isinstance(error, sqlite3.OperationalError) and str(error) == "interrupted"


def sqlite_too_big(error: BaseException) -> bool:
    """Whether a SQLite error says a value or the SQL text outgrew the connection's limits."""
    return isinstance(error, sqlite3.DataError) and ("too big" in str(error) or "too large" in str(error))


def limit_sqlite(dbapi_connection: sqlite3.Connection) -> None:
    """The size limits every SQLite connection that runs checked queries gets: values and
    SQL text (see ``SQLITE_MAX_VALUE_BYTES``), LIKE / GLOB patterns (the sandbox's cap, in
    UTF-8 bytes), no ATTACH (it could create files), and ``REGEXP`` matched by RE2
    (``regexp.py``). Call it after SQLAlchemy's own connect hook, which registers a
    backtracking ``REGEXP``.

    Beyond the value limit SQLite fails the statement with "string or blob too big" —
    except ``printf``/``format``, which return NULL instead."""
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, SQLITE_MAX_SQL_BYTES)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    from structq.safety.sql.patterns import MAX_PATTERN_CHARS  # sqlglot: not at import time

    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, _UTF8_MAX_BYTES * MAX_PATTERN_CHARS)
    install_regexp(dbapi_connection)


@contextmanager
def sqlite_deadline(dbapi_connection: sqlite3.Connection, timeout_s: float) -> Iterator[None]:
    """Abort any statement on ``dbapi_connection`` that runs past ``timeout_s`` from now.

    SQLite has no statement timeout. A progress handler, called every thousand VM steps,
    that returns non-zero makes the statement fail with ``interrupted``; but it is never
    called inside one expensive step (a function call, a sort), so a timer also calls
    ``interrupt()`` at the deadline, which stops the statement as soon as that step ends.
    """
    deadline = time.monotonic() + timeout_s

    def past_deadline() -> int:
        return 1 if time.monotonic() > deadline else 0

    dbapi_connection.set_progress_handler(past_deadline, SQLITE_PROGRESS_STEPS)
    timer = _Backstop(dbapi_connection.interrupt, timeout_s)
    try:
        yield
    finally:
        timer.finish()
        dbapi_connection.set_progress_handler(None, 0)


class _Backstop:
    """A timer that cancels the running statement if the server's own timeout did not.

    ``finish()`` must be called before the connection goes back to the pool; the lock makes
    sure a late timer can never cancel the next query that borrows the connection.
    """

    def __init__(self, cancel: Callable[[], None], after_s: float) -> None:
        self._cancel = cancel
        self._lock = threading.Lock()
        self._done = False
        self._timer = threading.Timer(after_s, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                try:
                    self._cancel()
                except Exception:  # noqa: BLE001 - the query's own error is what matters
                    pass

    def finish(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


@contextmanager
def _server_cancel(kind: str, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
    """Cancel the statement on the server (``cancel.py``) if it outlives ``timeout_s`` + grace."""
    backstop = _Backstop(canceller(kind, dbapi_connection, _connect_timeout(timeout_s)),
                         timeout_s + BACKSTOP_GRACE_S)
    try:
        yield
    finally:
        backstop.finish()


def _connect_timeout(timeout_s: float) -> float:
    return max(CONNECT_TIMEOUT_MIN_S, min(CONNECT_TIMEOUT_MAX_S, timeout_s))


def _driver_message(error: BaseException) -> str:
    """The database's own words: PyMySQL errors are ``(code, message)`` tuples."""
    args = getattr(error, "args", ())
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        return f"{args[1]} (error {args[0]})"
    return " ".join(str(error).split()) or type(error).__name__


# --------------------------------------------------------------------------------------------
# What differs per backend
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    """One statement run before each query, with bound parameters."""

    sql: str
    params: dict[str, Any] | None = None


class _Backend:
    """How one kind of database is opened read-only, timed out and diagnosed."""

    label: ClassVar[str]
    drivername: ClassVar[str]  # SQLAlchemy dialect+driver this backend runs with
    driver_module: ClassVar[str | None] = None  # import name of the DB-API package
    extra: ClassVar[str | None] = None  # the structq extra that installs it

    def check_driver(self) -> None:
        """A missing driver is a setup mistake, and the message says how to fix it."""
        if self.driver_module and importlib.util.find_spec(self.driver_module) is None:
            raise ConfigError(
                f"{self.label} sources need the {self.driver_module!r} package, "
                "which is not installed",
                hint=f'pip install "structq[{self.extra}]"',
            )

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        """The URL and ``create_engine`` keyword arguments for a read-only engine."""
        raise NotImplementedError

    def setup(self, connection: "Connection", timeout_s: float) -> list[_Setup]:
        """Statements that make the next statement read-only and time-limited."""
        return []

    def pin_schema(self, schema: str) -> list[_Setup]:
        """Statements that make unqualified names resolve in ``schema`` only.

        The sandbox already qualifies every table with the manifest's schema; this is the
        second guard, so that no unqualified name can reach a same-named object elsewhere.
        """
        return []

    def on_connect(self, dbapi_connection: Any) -> None:
        """Called once for each new DB-API connection of the engine."""

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """The clause and parameters that run ``query`` on ``dbapi_connection``."""
        return bind(query), dict(query.params)

    @contextmanager
    def guard(self, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
        """Around the query itself: client-side deadline enforcement, if any."""
        yield

    def is_timeout(self, error: BaseException) -> bool:
        """Whether the driver error says the statement was cancelled for running too long."""
        return False

    def is_unavailable(self, error: BaseException) -> bool:
        """Whether the driver error says the server is gone or refuses us (not the query)."""
        return False

    def hint_for(self, error: BaseException) -> str | None:
        """Advice for a query the database rejected, when its error has a known fix."""
        return None


class _SQLite(_Backend):
    label = "SQLite"
    drivername = "sqlite+pysqlite"

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        from sqlalchemy.engine import make_url
        from sqlalchemy.pool import QueuePool

        path = _sqlite_path(url)
        uri = "file:" + urllib.parse.quote(path) + "?mode=ro"

        def connect() -> sqlite3.Connection:
            # mode=ro would fail on a missing file too, but with a vaguer message; and a
            # read-write open would create it, which must never happen.
            if not os.path.isfile(path):
                raise sqlite3.OperationalError(f"unable to open database file: {path} does not exist")
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=timeout_s)
            connection.execute("PRAGMA query_only = ON")
            return connection  # ``on_connect`` sets the limits, after SQLAlchemy's own hook

        # ``creator`` owns the connection; the URL only selects the dialect. QueuePool because
        # connections are handed between the engine's worker threads.
        return make_url("sqlite+pysqlite://"), {"creator": connect, "poolclass": QueuePool}

    def on_connect(self, dbapi_connection: Any) -> None:
        limit_sqlite(dbapi_connection)

    @contextmanager
    def guard(self, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
        with sqlite_deadline(dbapi_connection, timeout_s):
            yield

    def is_timeout(self, error: BaseException) -> bool:
        return sqlite_interrupted(error)

    def is_unavailable(self, error: BaseException) -> bool:
        return isinstance(error, sqlite3.OperationalError) and "unable to open database" in str(error)

    def hint_for(self, error: BaseException) -> str | None:
        if sqlite_too_big(error):
            return SQLITE_TOO_BIG_HINT
        return REGEXP_HINT if "user-defined function raised exception" in str(error) else None


def _sqlite_path(url: "URL") -> str:
    """The file a ``sqlite:///path`` (or ``sqlite:///file:path?…&uri=true``) URL names."""
    database = url.database or ""
    if url.query.get("uri") in ("true", "1") and database.startswith("file:"):
        database = urllib.parse.unquote(database[len("file:"):].split("?", 1)[0])
        if database.startswith("//"):  # file://host/path: only the local host is meaningful
            database = "/" + database[2:].split("/", 1)[-1]
    if database in ("", ":memory:"):
        raise ConfigError(
            "an in-memory SQLite URL has no tables to read",
            hint="point the url at a database file, e.g. sqlite:///data/company.db",
        )
    return database


class _Postgres(_Backend):
    label = "PostgreSQL"
    drivername = "postgresql+psycopg"
    driver_module = "psycopg"
    extra = "postgres"

    #: query_canceled: statement_timeout, or our backstop's cancel.
    _TIMEOUT_STATES = frozenset({"57014"})
    #: connection exceptions, shutting down, too many connections, authentication.
    _UNAVAILABLE_CLASSES = ("08", "28", "57P", "53300")

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        options = " ".join(filter(None, [url.query.get("options"), "-c default_transaction_read_only=on"]))
        connect_args = {
            "connect_timeout": round(_connect_timeout(timeout_s)),
            # Every statement goes through the extended protocol, which takes one statement
            # only: "SELECT 1; COMMIT; DELETE …" fails instead of escaping the transaction.
            "prepare_threshold": 0,
            "options": options,
            "application_name": url.query.get("application_name", "structq"),
        }
        return url.difference_update_query(["options"]), {"connect_args": connect_args}

    def on_connect(self, dbapi_connection: Any) -> None:
        for array_class, dumper in _pg_array_dumpers().items():
            dbapi_connection.adapters.register_dumper(array_class, dumper)

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """Lists of plain ints (``= ANY(:ref)``) bound as ready-made array text.

        psycopg adapts a list of 100k ints in ~60 ms (it dumps every element through the
        dumper machinery); joining their decimal text takes ~10 ms. The array gets the type
        psycopg itself would give it (``int2[]``, ``int4[]`` or ``int8[]`` by the largest
        magnitude), so the server sees the same parameter type either way. Any other list
        (NULLs, bools, text, numbers past 64 bits) is left to psycopg.
        """
        params = dict(query.params)
        for name, value in params.items():
            if type(value) is list:
                array = _pg_int_array(value)
                if array is not None and _pg_registered(dbapi_connection, type(array)):
                    params[name] = array
        return bind(query), params

    def setup(self, connection: "Connection", timeout_s: float) -> list[_Setup]:
        return [
            _Setup("SET TRANSACTION READ ONLY"),
            _Setup("SELECT set_config('statement_timeout', :ms, true)", {"ms": str(_ms(timeout_s))}),
        ]

    def pin_schema(self, schema: str) -> list[_Setup]:
        """``search_path`` for this transaction only: the catalog's built-in functions first
        (as PostgreSQL does implicitly), then the declared schema, temporary objects last —
        nothing from ``public`` or a schema named after the user."""
        path = 'pg_catalog, "' + schema.replace('"', '""') + '", pg_temp'
        return [_Setup("SELECT set_config('search_path', :path, true)", {"path": path})]

    @contextmanager
    def guard(self, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
        with _server_cancel("postgres", dbapi_connection, timeout_s):
            yield

    def is_timeout(self, error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) in self._TIMEOUT_STATES

    def is_unavailable(self, error: BaseException) -> bool:
        state = getattr(error, "sqlstate", None) or ""
        return bool(state) and state.startswith(self._UNAVAILABLE_CLASSES)


class _MySQL(_Backend):
    label = "MySQL/MariaDB"
    drivername = "mysql+pymysql"
    driver_module = "pymysql"
    extra = "mysql"

    #: MariaDB max_statement_time, MySQL max_execution_time, query killed.
    _TIMEOUT_CODES = frozenset({1969, 3024, 1317})
    #: too many connections, access denied, unknown database, lost/refused connections.
    _UNAVAILABLE_CODES = frozenset({1040, 1044, 1045, 1049, 1129, 1130, 2002, 2003, 2005, 2006, 2013})

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        # The server cancels at timeout_s and says so at once; if it did not, the backstop
        # sends KILL QUERY at timeout_s + grace (``guard``); a server that stops answering is
        # caught by the socket timeouts after that. PyMySQL also waits for the login greeting
        # under read_timeout, so a hung server cannot hold a connect past it.
        backstop = timeout_s + SOCKET_GRACE_S
        connect_args = {
            "connect_timeout": _connect_timeout(timeout_s),
            "read_timeout": backstop,
            "write_timeout": backstop,
        }
        return url, {"connect_args": connect_args, "pool_recycle": 3600}

    def on_connect(self, dbapi_connection: Any) -> None:
        # PyMySQL keeps a per-connection copy of its encoders (type → literal).
        dbapi_connection.encoders[_MySQLIntList] = _MySQLIntList.literal

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """Lists of plain ints (``IN :ref``) bound as one parameter PyMySQL renders at once.

        SQLAlchemy expands a list into one placeholder per value (100k names to render and
        100k values for PyMySQL to escape one by one, ~200 ms at 100k); the values of an
        ``_MySQLIntList`` are checked to be exactly ``int`` and written ``(1,2,3)`` in one
        join — what PyMySQL's ``escape_int`` writes for each. Empty lists and lists of
        anything else keep SQLAlchemy's expanding bind (and its empty-set rendering; text
        is escaped by PyMySQL per value, honouring the server's SQL mode).
        """
        params = dict(query.params)
        whole = set()
        if _MySQLIntList in getattr(dbapi_connection, "encoders", {}):
            for name in query.expanding:
                value = params.get(name)
                if isinstance(value, (list, tuple)) and value and set(map(type, value)) == {int}:
                    params[name] = _MySQLIntList(value)
                    whole.add(name)
        if not whole:
            return bind(query), params
        return bind(query, query.expanding - whole), params

    def setup(self, connection: "Connection", timeout_s: float) -> list[_Setup]:
        if getattr(connection.dialect, "is_mariadb", False):
            limit = _Setup("SET SESSION max_statement_time = :seconds", {"seconds": float(timeout_s)})
        else:
            limit = _Setup("SET SESSION max_execution_time = :ms", {"ms": _ms(timeout_s)})
        return [
            _Setup("SET SESSION TRANSACTION READ ONLY"),
            limit,
            _Setup("START TRANSACTION READ ONLY"),
        ]

    @contextmanager
    def guard(self, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
        with _server_cancel("mysql", dbapi_connection, timeout_s):
            yield

    def pin_schema(self, schema: str) -> list[_Setup]:
        """The declared database as the session's current one (``USE``; ``text()`` reads a
        ``:`` as a bind, so one in the name is escaped)."""
        return [_Setup("USE `" + schema.replace("`", "``").replace(":", "\\:") + "`")]

    def is_timeout(self, error: BaseException) -> bool:
        return _mysql_code(error) in self._TIMEOUT_CODES

    def is_unavailable(self, error: BaseException) -> bool:
        return _mysql_code(error) in self._UNAVAILABLE_CODES


class _MySQLIntList(tuple):  # type: ignore[type-arg]
    """A non-empty list of exact ``int`` values, bound as one MySQL parameter."""

    __slots__ = ()

    @staticmethod
    def literal(value: "_MySQLIntList", mapping: Any = None) -> str:
        """``(1,2,3)``: PyMySQL's encoder signature; ``str(int)`` is ``escape_int``."""
        if not value or set(map(type, value)) != {int}:  # never render anything else this way
            raise TypeError("_MySQLIntList holds non-empty plain ints only")
        return "(" + ",".join(map(str, value)) + ")"


#: The array types psycopg gives a list of ints, by the largest magnitude (int2, int4, int8).
_PG_INT_ARRAYS = ((2**15, 1005), (2**31, 1007), (2**63, 1016))


class _PgIntArray:
    """A list of ints already written as PostgreSQL array text (``{1,2,3}``)."""

    __slots__ = ("text",)
    oid: ClassVar[int]

    def __init__(self, text: bytes) -> None:
        self.text = text


@functools.cache
def _pg_array_classes() -> dict[int, type[_PgIntArray]]:
    return {oid: type(f"_PgIntArray{oid}", (_PgIntArray,), {"__slots__": (), "oid": oid})
            for _, oid in _PG_INT_ARRAYS}


@functools.cache
def _pg_array_dumpers() -> dict[type[_PgIntArray], type]:
    from psycopg.adapt import Dumper

    def dumper(array_class: type[_PgIntArray]) -> type:
        def dump(self: Any, obj: _PgIntArray) -> bytes:
            return obj.text

        return type(f"{array_class.__name__}Dumper", (Dumper,), {"oid": array_class.oid, "dump": dump})

    return {array_class: dumper(array_class) for array_class in _pg_array_classes().values()}


def _pg_int_array(values: list[Any]) -> _PgIntArray | None:
    """``values`` as array text when all are exact ints within 64 bits, else None."""
    if not values or set(map(type, values)) != {int}:
        return None
    magnitude = max(-min(values), max(values) + 1)  # int2 holds -2**15 … 2**15 - 1
    for bound, oid in _PG_INT_ARRAYS:
        if magnitude <= bound:
            return _pg_array_classes()[oid](("{" + ",".join(map(str, values)) + "}").encode("ascii"))
    return None


def _pg_registered(dbapi_connection: Any, array_class: type) -> bool:
    """Whether the connection dumps ``array_class`` with our dumper (set by ``on_connect``)."""
    from psycopg.adapt import PyFormat

    try:
        dumper = dbapi_connection.adapters.get_dumper(array_class, PyFormat.AUTO)
    except Exception:  # noqa: BLE001 - psycopg raises ProgrammingError when none is registered
        return False
    return dumper is _pg_array_dumpers().get(array_class)


def _mysql_code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


_SQLITE, _POSTGRES, _MYSQL = _SQLite(), _Postgres(), _MySQL()

#: URL backend name → strategy. Anything else has no tested read-only guard and is refused.
_BACKENDS: dict[str, _Backend] = {
    "sqlite": _SQLITE,
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "mysql": _MYSQL,
    "mariadb": _MYSQL,
}


def _backend_for(url: "URL") -> _Backend:
    name = url.drivername.split("+", 1)[0].lower()
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ConfigError(
            f"no read-only SQL executor for {name!r} URLs",
            hint="supported: sqlite:///PATH, postgresql://…, mysql://… or mariadb://…",
        ) from None


# --------------------------------------------------------------------------------------------
# The executor
# --------------------------------------------------------------------------------------------


def _parse_url(manifest: "Manifest") -> "URL":
    """The manifest's URL parsed, or a ``ConfigError`` that shows it without its password.

    SQLAlchemy raises ``ArgumentError`` for an unparseable URL and a bare ``ValueError`` for
    a port that is not a number. Neither message is shown: the first quotes the whole URL and
    the second the "port", which is part of the password when the password holds ``@``.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(manifest.url)
    except (ArgumentError, ValueError) as exc:
        problem = "its port is not a number" if type(exc) is ValueError else "it is not a database URL"
        raise ConfigError(
            f"source {manifest.source!r}: cannot parse the database URL {redact_url(manifest.url)!r}: {problem}",
            hint="e.g. sqlite:///data/company.db, postgresql://user@host:5432/db, mysql://user@host/db",
        ) from None


@register("sql")
class SqlExecutor:
    """Runs ``SafeQuery`` objects against one SQL source, read-only, time-limited and capped.

    One pooled engine per source, created on first use (thread-safe: the engine calls ``run``
    from several worker threads at once) and disposed by ``close()``.
    """

    def __init__(self, manifest: "Manifest") -> None:
        self.manifest = manifest
        self.source = manifest.source
        self.timeout_s = float(manifest.limits.timeout_s)
        #: No query returns more rows than a step may pass on, whatever it asks for.
        self.row_cap = max(manifest.limits.max_rows, manifest.limits.max_intermediate_rows)
        url = _parse_url(manifest)
        self._backend = _backend_for(url)
        self._url = url.set(drivername=self._backend.drivername)
        self._engine: Engine | None = None
        self._lock = threading.Lock()
        from structq.safety.sql.tables import qualifying_schema

        schema = qualifying_schema(manifest.schema_, manifest.sql_dialect)
        #: Run after the backend's set-up on every connection (``_Backend.pin_schema``).
        self._pin = self._backend.pin_schema(schema) if schema else []

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
        from sqlalchemy import create_engine

        from sqlalchemy import event

        self._backend.check_driver()
        url, arguments = self._backend.engine_arguments(self._url, self.timeout_s)
        engine = create_engine(url, pool_pre_ping=True, **arguments)
        backend = self._backend
        event.listen(engine, "connect", lambda dbapi_connection, _record: backend.on_connect(dbapi_connection))
        return engine

    def close(self) -> None:
        """Dispose of the pool; the next ``run`` opens a new one."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()

    # -- running ---------------------------------------------------------------------------

    def run(self, query: "SafeQuery") -> ResultSet:
        """Run ``query`` read-only; raise ``SourceUnavailable``, ``QueryTimeout`` or
        ``ExecutionError`` (with the database's message) when it fails."""
        from sqlalchemy import text
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        if query.kind != "sql" or query.text is None:
            raise ExecutionError(f"source {self.source!r} runs SQL; got a {query.kind} query",
                                 source=self.source, query=str(query))
        engine = self._get_engine()
        started = time.monotonic()
        phase = "connect"
        try:
            with engine.connect() as connection:
                phase = "setup"
                for step in [*self._backend.setup(connection, self.timeout_s), *self._pin]:
                    connection.execute(text(step.sql), step.params or {})
                phase = "query"
                dbapi_connection = connection.connection.dbapi_connection
                statement = self._backend.statement(dbapi_connection, query)
                with self._backend.guard(dbapi_connection, self.timeout_s):
                    fetched = fetch(connection, query, self.row_cap, statement=statement)
                connection.rollback()  # read-only anyway; never commit
        except DBAPIError as exc:
            raise self._translate(exc.orig, exc.connection_invalidated, phase, query,
                                  time.monotonic() - started) from exc
        except NotAQuery:
            raise ExecutionError(
                f"source {self.source!r}: the statement returned no rows; only queries run here",
                source=self.source, query=query.sent_text, cause="not a query",
            ) from None
        except SQLAlchemyError as exc:  # pool exhausted, closed result, …
            raise self._translate(exc, False, phase, query, time.monotonic() - started) from exc
        return fetched_result(query, fetched, started)

    def ping(self) -> float:
        """Connect, run ``SELECT 1`` read-only and return the round trip in milliseconds.

        For ``structq check --connect``: raises ``SourceUnavailable`` when the source cannot
        be reached or refuses the login.
        """
        from structq.safety.query import SafeQuery

        probe = SafeQuery(source=self.source, kind="sql", limit=2, max_rows=1, text="SELECT 1")
        return self.run(probe).elapsed_ms

    def _translate(self, error: BaseException, invalidated: bool, phase: str,
                   query: "SafeQuery", elapsed_s: float) -> ExecutionError:
        """The driver's error as the structq error that says whose fault it was."""
        cause = _driver_message(error)
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
