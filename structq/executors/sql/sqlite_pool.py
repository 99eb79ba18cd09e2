"""The SQL executor's connections to one SQLite file: a small thread-safe pool, no SQLAlchemy.

Every defence SQLite has lives on the connection itself (``sqlite.connect_read_only``:
``mode=ro``, ``PRAGMA query_only``, size limits, no ATTACH, RE2's ``REGEXP``; the deadline is
``sqlite.sqlite_deadline`` around each statement), so the executor runs SQLite queries straight
on ``sqlite3`` connections: SQLAlchemy's engine and pool would add nothing to them but their
import, the largest single cost of a one-step ``structq run``.

What the pool keeps, it keeps for the same file only. A connection reads the file it opened
through its descriptor even after the path names another file (a rebuilt database swapped in)
or none, so each checkout compares the path's identity with the one the connection opened
(``FileConnection.replaced``: one ``stat``) and closes a connection whose file was moved,
deleted or replaced: the next connection opens what the path names now, or fails as a new
process would ("does not exist": the source is unavailable).

A connection goes back to the pool rolled back, and only after a statement that returned its
rows or was stopped at its deadline; after any other error it is closed, since the error may
come from the file (moved, corrupted, unreadable) rather than from the query, and the next
checkout opens a fresh one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .sqlite import FileConnection, connect_read_only, sqlite_interrupted

__all__ = ["IDLE_CONNECTIONS", "SQLitePool"]

#: Connections kept open between queries (as many as SQLAlchemy's pool kept by default); more
#: open while more queries run at once, and close when they end.
IDLE_CONNECTIONS = 5


class SQLitePool:
    """Read-only connections to the SQLite file at ``path``, reused across queries and threads.

    ``connection()`` lends one (opening it when none is idle); ``close()`` closes the idle ones,
    and each lent one when it comes back. A closed pool keeps nothing: a query that raced
    ``close()`` still runs, on a connection closed after it.
    """

    def __init__(self, path: str, timeout_s: float, idle: int = IDLE_CONNECTIONS) -> None:
        self.path = path
        #: How long a connection waits for a writer's lock (``sqlite3.connect``'s ``timeout``).
        self.timeout_s = timeout_s
        self._most_idle = idle
        self._idle: list[FileConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection to the file as the path names it now, for one statement; raises
        ``sqlite3.OperationalError`` ("unable to open database file") when there is none."""
        connection = self._checkout()
        try:
            yield connection
        except sqlite3.Error as error:
            if sqlite_interrupted(error):
                self._checkin(connection)
            else:
                connection.close()
            raise
        except BaseException:
            connection.close()
            raise
        self._checkin(connection)

    def _checkout(self) -> FileConnection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return connect_read_only(self.path, self.timeout_s)
            if not connection.replaced():
                return connection
            connection.close()  # its file was moved or replaced: never read it again

    def _checkin(self, connection: FileConnection) -> None:
        try:
            connection.rollback()  # nothing to undo on a read-only file; ends any open read
        except sqlite3.Error:
            connection.close()
            return
        with self._lock:
            if not self._closed and len(self._idle) < self._most_idle:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection now, and each lent one when it comes back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
