"""SQLite: a file opened ``mode=ro`` with ``PRAGMA query_only``, size limits, and a deadline.

SQLite has no statement timeout and no server to cancel on, so the deadline is enforced in
the client (``sqlite_deadline``); ``limit_sqlite`` bounds what one function call can build.
Both are shared with the local executor, which runs its SQL on an in-memory SQLite.
"""

from __future__ import annotations

import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError

from ..regexp import REGEXP_HINT, install_regexp
from . import deadlines
from .guards import Backend

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["SQLITE_MAX_SQL_BYTES", "SQLITE_MAX_VALUE_BYTES", "SQLITE_PROGRESS_STEPS", "SQLITE_TOO_BIG_HINT",
           "SQLiteBackend", "limit_sqlite", "sqlite_deadline", "sqlite_interrupted", "sqlite_too_big"]

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
    (``regexp.py``). Call it after SQLAlchemy's own connect hook, which registers a
    backtracking ``REGEXP``.

    Beyond the value limit SQLite fails the statement with "string or blob too big" —
    except ``printf``/``format``, which return NULL instead."""
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, SQLITE_MAX_SQL_BYTES)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    from structq.safety.query import MAX_PATTERN_CHARS  # structq.safety loads sqlglot: not at import time

    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, _UTF8_MAX_BYTES * MAX_PATTERN_CHARS)
    install_regexp(dbapi_connection)


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



class _FileConnection(sqlite3.Connection):
    """A connection that remembers the file it opened: its path, and its identity (device and
    inode) as it was just before opening."""

    path: str = ""
    file_id: tuple[int, int] | None = None


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class SQLiteBackend(Backend):
    """SQLite files, read-only.

    A pooled connection keeps reading the file it opened through its descriptor, even after
    that file was moved away, deleted or replaced by a new one under the same name (a rebuilt
    database swapped in): its answers would come from a file the manifest no longer names.
    So each checkout compares the path's identity with the one the connection opened
    (``on_checkout``: one ``stat``), and a connection whose file is gone or replaced is
    dropped: the next one opens what the path names now — or, when nothing is there, the
    source is unavailable, as it would be for a new process.
    """

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
            opened = _file_id(path)  # before opening: a swap in between is caught at checkout
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=timeout_s,
                                         factory=_FileConnection)
            connection.path, connection.file_id = path, opened
            connection.execute("PRAGMA query_only = ON")
            return connection  # ``on_connect`` sets the limits, after SQLAlchemy's own hook

        # ``creator`` owns the connection; the URL only selects the dialect. QueuePool because
        # connections are handed between the engine's worker threads.
        return make_url("sqlite+pysqlite://"), {"creator": connect, "poolclass": QueuePool}

    def on_connect(self, dbapi_connection: Any) -> None:
        limit_sqlite(dbapi_connection)

    def on_checkout(self, dbapi_connection: Any) -> None:
        from sqlalchemy.exc import DisconnectionError

        if isinstance(dbapi_connection, _FileConnection) and _file_id(dbapi_connection.path) != dbapi_connection.file_id:
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
