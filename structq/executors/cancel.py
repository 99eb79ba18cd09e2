"""Cancelling a statement on the server when its own timeout did not stop it.

A client that stops waiting does not stop the server: the driver's read timeout closes the
socket, and MariaDB goes on running the statement until it notices the dead connection (a
``LIKE`` over a long text went on for 21–31 s in ``PROCESSLIST``). The backstop therefore asks
the server itself to stop the statement:

- **PostgreSQL**: a cancel request for the backend (psycopg's ``cancel_safe``, bounded by a
  connect timeout; ``cancel`` on older psycopg), what ``pg_cancel_backend`` does;
- **MariaDB / MySQL**: ``KILL QUERY <thread id>`` sent over a second, short-lived connection
  with the same driver, account and TLS settings (the ``Login`` the MySQL backend keeps on
  each connection it opens; a user may kill its own statements without any privilege); the
  statement fails with error 1317 and the connection stays usable.

Both are called by the executor's ``_Backstop`` timer a little after ``timeout_s``; neither
raises: a server that cannot be reached has nothing running for us either.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["canceller"]


def _postgres_cancel(dbapi_connection: Any, connect_timeout: float) -> Callable[[], None]:
    if hasattr(dbapi_connection, "cancel_safe"):  # psycopg ≥ 3.2: bounded, interruptible
        return functools.partial(dbapi_connection.cancel_safe, timeout=connect_timeout)
    return dbapi_connection.cancel


def _mysql_kill_query(login: Any, thread_id: int, connect_timeout: float) -> None:
    """``KILL QUERY thread_id`` over a new connection opened from ``login`` (``sql/mysql/``)."""
    killer = login.connect(connect_timeout)
    try:
        cursor = killer.cursor()
        try:
            cursor.execute("KILL QUERY %s", (thread_id,))
        finally:
            cursor.close()
    finally:
        killer.close()


def canceller(kind: str, dbapi_connection: Any, connect_timeout: float) -> Callable[[], None]:
    """The call that cancels the statement now running on ``dbapi_connection``.

    ``kind`` is ``"postgres"`` or ``"mysql"``; ``connect_timeout`` bounds how long reaching the
    server for the cancel may take.
    """
    if kind == "postgres":
        return _postgres_cancel(dbapi_connection, connect_timeout)
    if kind == "mysql":
        # Read now, in the thread that runs the statement: mysqlclient refuses any call on a
        # connection from another thread while it is busy. The ``Login`` is what the MySQL
        # backend keeps on each connection it opens (``structq_login``).
        thread_id = int(dbapi_connection.thread_id())
        return functools.partial(_mysql_kill_query, dbapi_connection.structq_login, thread_id, connect_timeout)
    raise ValueError(f"no server-side cancel for {kind!r}")
