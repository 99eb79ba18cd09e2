"""The process's one SQLite deadline thread (``structq/executors/deadlines.py``), by outcome.

Real SQLite connections throughout. A statement that must outlive its deadline runs with no
progress handler, so only the deadline's ``interrupt()`` stops it; through the executor it is
one ``printf`` call that loops inside a single VM step, where the progress handler is never
called. A statement that must stay "running"
is a cursor left half-read over a large recursive CTE. Nothing measures time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from structq.capabilities import Limits, Manifest
from structq.errors import QueryTimeout
from structq.executors import deadlines
from structq.executors.sql import (
    SqlExecutor,
    limit_sqlite,
    sqlite_deadline,
    sqlite_interrupted,
)
from structq.safety.query import SafeQuery

# A statement of some hundred million VM steps (seconds, even unloaded): with no progress
# handler installed, only the deadline's ``interrupt()`` ends it early; uninterrupted it
# returns a row, which the tests reject.
# ``arm()`` registers the deadline from inside the running statement: an ``interrupt()`` while
# no statement runs is a no-op, so a deadline that fired before a loaded machine got round to
# starting the statement would prove nothing (in the executors the progress handler covers that).
LONG_RUN = ("WITH RECURSIVE n(i) AS (SELECT arm() UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
            "SELECT count(*) FROM n")
# One long single VM step: printf builds 300M characters (past the value limit, so an
# uninterrupted run ends in "string or blob too big", never in "interrupted").
LONG_STEP = "SELECT length(printf('%.*c', 300000000, 'x'))"
# A statement with many rows to read, left open with only some of them read.
MANY_ROWS = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) "
             "SELECT i FROM n")
SHORT_S = 0.05
LONG_S = 600.0


@pytest.fixture
def connect() -> Iterator[type[sqlite3.Connection]]:
    """Opens limited in-memory connections (as the executors configure them); closes them after."""
    opened: list[sqlite3.Connection] = []

    def open_one() -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:", check_same_thread=False)
        limit_sqlite(connection)
        opened.append(connection)
        return connection

    yield open_one  # type: ignore[misc]
    for connection in opened:
        connection.close()


def run_past_deadline(connection: sqlite3.Connection, timeout_s: float = SHORT_S) -> BaseException:
    """Run ``LONG_RUN`` under a deadline of ``timeout_s``; the error it ended with."""
    watches: list[deadlines.Watch] = []

    def arm() -> int:
        watches.append(deadlines.watch(connection, timeout_s))
        return 1

    connection.create_function("arm", 0, arm)
    try:
        connection.execute(LONG_RUN).fetchall()
    except sqlite3.Error as exc:
        return exc
    finally:
        for watch in watches:
            watch.release()
    raise AssertionError("the long statement finished without an error")


def test_a_statement_past_its_deadline_is_interrupted(connect) -> None:
    connection = connect()
    assert sqlite_interrupted(run_past_deadline(connection))
    assert connection.execute("SELECT 1").fetchall() == [(1,)]  # the connection stays usable


def test_a_released_watch_never_interrupts_its_connection_later(connect) -> None:
    """Released before its deadline, then the deadline passes (proved by a later deadline
    firing on another connection): the still-open statement reads on undisturbed."""
    quiet, other = connect(), connect()
    watch = deadlines.watch(quiet, SHORT_S)
    cursor = quiet.execute(MANY_ROWS)
    assert cursor.fetchmany(10) == [(i,) for i in range(1, 11)]
    watch.release()
    watch.release()  # idempotent
    # ``other``'s deadline is later than ``quiet``'s: once it fired, ``quiet``'s has passed.
    assert sqlite_interrupted(run_past_deadline(other))
    assert cursor.fetchmany(10) == [(i,) for i in range(11, 21)]
    assert quiet.execute("SELECT 2").fetchall() == [(2,)]


def test_concurrent_statements_each_get_their_own_deadline(connect) -> None:
    """Sixteen long-deadline statements stay open while sixteen short-deadline ones run past
    theirs on other threads: every short one is interrupted, no long one is."""
    patient = [connect() for _ in range(16)]
    hasty = [connect() for _ in range(16)]
    watches = [deadlines.watch(connection, LONG_S) for connection in patient]
    cursors = [connection.execute(MANY_ROWS) for connection in patient]
    for cursor in cursors:
        cursor.fetchmany(5)
    with ThreadPoolExecutor(max_workers=8) as pool:
        errors = list(pool.map(lambda c: run_past_deadline(c[1], SHORT_S * (1 + c[0] % 4)), enumerate(hasty)))
    assert all(sqlite_interrupted(error) for error in errors), errors
    for cursor in cursors:
        assert cursor.fetchmany(5) == [(i,) for i in range(6, 11)]
    for watch in watches:
        watch.release()


def test_no_thread_is_started_per_statement(connect) -> None:
    """Fifty statements under a deadline at once run with the same threads as one."""
    with sqlite_deadline(connect(), LONG_S):  # the deadline thread exists from here on
        pass
    before = set(threading.enumerate())
    with ExitStack() as stack:
        for _ in range(50):
            connection = connect()
            stack.enter_context(sqlite_deadline(connection, LONG_S))
            assert connection.execute("SELECT 1").fetchall() == [(1,)]
        assert not set(threading.enumerate()) - before  # threads of other tests may end, none start
    assert not set(threading.enumerate()) - before
    names = [thread.name for thread in before]
    assert names.count(deadlines.THREAD_NAME) == 1


def test_many_released_watches_do_not_pile_up(connect) -> None:
    """Released entries are dropped from the heap: it stays within twice the live ones."""
    connection = connect()
    live = deadlines.watch(connection, LONG_S)
    for _ in range(1000):
        deadlines.watch(connection, LONG_S).release()
    assert len(deadlines._watcher._heap) <= 2 * 17 + 1
    live.release()


def query(text: str) -> SafeQuery:
    """A SafeQuery built by hand, as if the sandbox had passed ``text``."""
    return SafeQuery(source="one", kind="sql", limit=11, max_rows=10, text=text)


def test_the_executor_reports_an_interrupted_statement_as_a_query_timeout(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE items (id INTEGER)")
        setup.execute("INSERT INTO items VALUES (1)")
    setup.close()
    executor = SqlExecutor(Manifest(source="one", kind="sql", url=f"sqlite:///{path}",
                                    limits=Limits(timeout_s=SHORT_S)))
    try:
        with pytest.raises(QueryTimeout):
            executor.run(query(f"{LONG_STEP} AS n FROM items"))
        assert executor.run(query("SELECT id FROM items")).rows == [(1,)]
    finally:
        executor.close()
