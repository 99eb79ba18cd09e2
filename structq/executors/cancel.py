"""Cancelling a statement on the server when its own timeout did not stop it.

A client that stops waiting does not stop the server: PyMySQL's read timeout closes the
socket, and MariaDB goes on running the statement until it notices the dead connection (a
``LIKE`` over a long text went on for 21–31 s in ``PROCESSLIST``). The backstop therefore asks
the server itself to stop the statement:

- **PostgreSQL**: a cancel request for the backend (psycopg's ``cancel_safe``, bounded by a
  connect timeout; ``cancel`` on older psycopg), what ``pg_cancel_backend`` does;
- **MariaDB / MySQL**: ``KILL QUERY <thread id>`` sent over a second, short-lived connection
  with the same account and TLS settings (a user may kill its own statements without any
  privilege); the statement fails with error 1317 and the connection stays usable.

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


def _mysql_kill_query(dbapi_connection: Any, connect_timeout: float) -> None:
    """``KILL QUERY`` the statement running on ``dbapi_connection`` (a PyMySQL connection)."""
    import pymysql

    thread_id = dbapi_connection.thread_id()
    killer = pymysql.connect(
        host=dbapi_connection.host,
        port=dbapi_connection.port,
        user=dbapi_connection.user,
        password=dbapi_connection.password,
        unix_socket=dbapi_connection.unix_socket,
        ssl=dbapi_connection.ctx if getattr(dbapi_connection, "_ssl_required", False) else None,
        connect_timeout=connect_timeout,
        read_timeout=connect_timeout,
        write_timeout=connect_timeout,
    )
    try:
        with killer.cursor() as cursor:
            cursor.execute("KILL QUERY %s", (int(thread_id),))
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
        return functools.partial(_mysql_kill_query, dbapi_connection, connect_timeout)
    raise ValueError(f"no server-side cancel for {kind!r}")
