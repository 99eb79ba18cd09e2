"""SQLite: a file opened ``mode=ro`` with ``PRAGMA query_only``, size limits, and a deadline.

SQLite has no statement timeout and no server to cancel on, so the deadline is enforced in
the client (``sqlite_deadline``); ``limit_sqlite`` bounds what one function call can build.
Both are shared with the local executor, which runs its SQL on an in-memory SQLite.

Every guard is on the connection (``connect_read_only``), so the SQL executor runs a SQLite
file's queries on ``sqlite3`` connections straight (``sqlite_pool.py``, ``sqlite_statement``),
and reads its URL without SQLAlchemy (``SQLiteURL``); ``SQLiteBackend`` also serves the
SQLAlchemy engine ``structq sync`` reads catalogues with.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, ExecutionError

from ..floor import install_floor
from ..regexp import REGEXP_HINT, install_regexp
from . import deadlines
from .guards import Backend

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from structq.safety.query import SafeQuery

__all__ = ["SQLITE_MAX_SQL_BYTES", "SQLITE_MAX_VALUE_BYTES", "SQLITE_PROGRESS_STEPS", "SQLITE_TOO_BIG_HINT",
           "FileConnection", "SQLiteBackend", "SQLiteURL", "connect_read_only", "limit_sqlite", "sqlite_deadline",
           "sqlite_interrupted", "sqlite_path", "sqlite_statement", "sqlite_too_big"]

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
    (``regexp.py``), and ``floor`` as SQLite documents it (``floor.py``). Call it after
    SQLAlchemy's own connect hook, which registers a backtracking ``REGEXP`` and Python's
    ``math.floor``.

    Beyond the value limit SQLite fails the statement with "string or blob too big" —
    except ``printf``/``format``, which return NULL instead."""
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, SQLITE_MAX_SQL_BYTES)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    from structq.safety.query import MAX_PATTERN_CHARS  # structq.safety loads sqlglot: not at import time

    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, _UTF8_MAX_BYTES * MAX_PATTERN_CHARS)
    install_regexp(dbapi_connection)
    install_floor(dbapi_connection)


@contextmanager
def sqlite_deadline(dbapi_connection: sqlite3.Connection, timeout_s: float) -> Iterator[None]:
    """Abort any statement on ``dbapi_connection`` that runs past ``timeout_s`` from now.

    SQLite has no statement timeout. A progress handler, called every thousand VM steps,
    that returns non-zero makes the statement fail with ``interrupted``; but it is never
    called inside one expensive step (a function call, a sort), so the process's one
    deadline thread (``deadlines.py``) also calls ``interrupt()`` at the deadline, which stops
    the statement as soon as that step ends — no thread is started per statement.
    """
    deadline = time.monotonic() + timeout_s

    def past_deadline() -> int:
        return 1 if time.monotonic() > deadline else 0

    dbapi_connection.set_progress_handler(past_deadline, SQLITE_PROGRESS_STEPS)
    backstop = deadlines.watch(dbapi_connection.interrupt, timeout_s)
    try:
        yield
    finally:
        backstop.release()
        dbapi_connection.set_progress_handler(None, 0)



class FileConnection(sqlite3.Connection):
    """A connection that remembers the file it opened: its path, and its identity (device and
    inode) as it was just before opening."""

    path: str = ""
    file_id: tuple[int, int] | None = None

    def replaced(self) -> bool:
        """Whether the path no longer names the file this connection opened (moved away,
        deleted, or another file swapped in): one ``stat``."""
        return _file_id(self.path) != self.file_id


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def connect_read_only(path: str, timeout_s: float) -> FileConnection:
    """A connection to the SQLite file at ``path`` that can only read: opened ``mode=ro``,
    ``PRAGMA query_only`` on, with ``limit_sqlite``'s limits, no ATTACH and RE2's ``REGEXP``;
    ``timeout_s`` is how long it waits for a writer's lock. Every SQLite connection that runs a
    question's query or reads a catalogue opens here: the SQL executor's pool
    (``sqlite_pool.py``) and SQLAlchemy's, for ``structq sync`` (``SQLiteBackend``).

    A missing file is ``sqlite3.OperationalError`` ("unable to open database file: … does not
    exist"): ``mode=ro`` would fail too, but with a vaguer message, and a read-write open
    would create the file, which must never happen. The file's identity is taken before
    opening, so a swap in between is caught at the next checkout (``replaced``)."""
    if not os.path.isfile(path):
        raise sqlite3.OperationalError(f"unable to open database file: {path} does not exist")
    opened = _file_id(path)
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=timeout_s,
                                 factory=FileConnection)
    try:
        connection.path, connection.file_id = path, opened
        connection.execute("PRAGMA query_only = ON")
        limit_sqlite(connection)
    except BaseException:
        connection.close()
        raise
    return connection


class SQLiteBackend(Backend):
    """SQLite files, read-only.

    A pooled connection keeps reading the file it opened through its descriptor, even after
    that file was moved away, deleted or replaced by a new one under the same name (a rebuilt
    database swapped in): its answers would come from a file the manifest no longer names.
    So each checkout compares the path's identity with the one the connection opened
    (``FileConnection.replaced``: one ``stat``), and a connection whose file is gone or
    replaced is dropped: the next one opens what the path names now — or, when nothing is
    there, the source is unavailable, as it would be for a new process.

    The SQL executor runs SQLite queries on its own pool of these connections
    (``sqlite_pool.py``, no SQLAlchemy); the SQLAlchemy engine (``engine_arguments``,
    ``on_connect``, ``on_checkout``) is for ``structq sync``, which reads catalogues through
    SQLAlchemy. Both open connections with ``connect_read_only``.
    """

    label = "SQLite"
    drivername = "sqlite+pysqlite"

    def engine_arguments(self, url: "URL | SQLiteURL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        from sqlalchemy.engine import make_url
        from sqlalchemy.pool import QueuePool

        path = sqlite_path(url)

        def connect() -> sqlite3.Connection:
            return connect_read_only(path, timeout_s)

        # ``creator`` owns the connection; the URL only selects the dialect. QueuePool because
        # connections are handed between the engine's worker threads.
        return make_url("sqlite+pysqlite://"), {"creator": connect, "poolclass": QueuePool}

    def on_connect(self, dbapi_connection: Any) -> None:
        # SQLAlchemy's own connect hook, which runs after the creator, registers a
        # backtracking ``REGEXP``: the limits (RE2's ``REGEXP`` with them) are set again after it.
        limit_sqlite(dbapi_connection)

    def on_checkout(self, dbapi_connection: Any) -> None:
        from sqlalchemy.exc import DisconnectionError

        if isinstance(dbapi_connection, FileConnection) and dbapi_connection.replaced():
            raise DisconnectionError(f"{dbapi_connection.path} was moved or replaced since this connection opened it")

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


def sqlite_statement(query: "SafeQuery") -> tuple[str, dict[str, Any]]:
    """The SQL text and parameters that run ``query`` on a ``sqlite3`` connection.

    ``query.text`` is written for SQLAlchemy's ``text()``: ``:name`` placeholders, which
    ``sqlite3`` binds by name too, and ``\\:`` before a colon that is not one (inside a
    literal), which ``sent_text`` undoes — SQLite's own parser never reads a colon inside a
    literal as a placeholder. A SQLite list reference is one JSON text read by ``json_each``
    (``safety/sql/rules/references.py``), never an expanding parameter; a query that asks for
    one was not written by the sandbox for SQLite, and is refused rather than bound some other way.
    """
    if query.expanding:
        raise ExecutionError(
            f"source {query.source!r}: SQLite queries bind lists as JSON text, but this one expands "
            f"{', '.join(sorted(query.expanding))}: it was not checked for SQLite",
            source=query.source, query=query.sent_text, cause="expanding parameters on SQLite",
        )
    return query.sent_text or "", dict(query.params)


def sqlite_path(url: "URL | SQLiteURL") -> str:
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


#: ``sqlite[+driver]://``, then nothing or ``/`` and the database, then ``?`` and the query: a
#: SQLite URL without user, password, host or port (the only form a file URL takes).
_FILE_URL = re.compile(r"(?P<name>sqlite(?:\+[\w+]*)?)://(?:/(?P<database>[^?]*))?(?:\?(?P<query>[^\r\n]*))?",
                       re.IGNORECASE)


@dataclass(frozen=True)
class SQLiteURL:
    """A SQLite file URL read without SQLAlchemy, which a one-step plan on a SQLite file need
    not import (about 0.2 s of the whole run): the parts of SQLAlchemy's ``URL`` the SQL
    executor and the backends read, with the same values ``sqlalchemy.engine.make_url`` gives
    them — ``database`` %-decoded, ``query`` from ``parse_qsl`` (blank values dropped, a key
    given twice a tuple) — so the same file is opened whichever parsed the URL
    (``tests/test_sqlite_connections.py`` compares them), and rendered as it renders them."""

    drivername: str
    database: str | None
    query: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)

    #: What a file URL has none of (as on SQLAlchemy's ``URL``).
    username = password = host = port = None

    @classmethod
    def parse(cls, url: str) -> "SQLiteURL | None":
        """``url`` read as a SQLite file URL, or None when it is not one of that form (another
        database, or a SQLite URL with a user or host part, which SQLAlchemy reads)."""
        match = _FILE_URL.fullmatch(url)
        if match is None:
            return None
        query: dict[str, str | tuple[str, ...]] = {}
        for key, value in urllib.parse.parse_qsl(match["query"] or ""):
            known = query.get(key)
            query[key] = value if known is None else (*((known,) if isinstance(known, str) else known), value)
        database = match["database"]
        return cls(match["name"], None if database is None else urllib.parse.unquote(database), query)

    def set(self, *, drivername: str) -> "SQLiteURL":
        return replace(self, drivername=drivername)

    def render_as_string(self, hide_password: bool = True) -> str:
        """As SQLAlchemy writes a URL (a file URL has no password to hide)."""
        text = self.drivername + "://"
        if self.database is not None:
            text += "/" + urllib.parse.quote(self.database, safe=" +/")
        if self.query:
            text += "?" + "&".join(f"{urllib.parse.quote_plus(key)}={urllib.parse.quote_plus(value)}"
                                   for key in sorted(self.query)
                                   for value in ((self.query[key],) if isinstance(self.query[key], str)
                                                 else self.query[key]))
        return text

    def __str__(self) -> str:
        return self.render_as_string()
