"""SQLite statements' deadlines come from one thread (``executors/sql/deadlines.py``), and a
pooled SQLite connection never outlives the file it opened (``SQLiteBackend.on_checkout``).

Outcomes only: which threads exist, whether a cancel ran, what a query returned or raised.
Waits have a bound that only turns a hang into a failure.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import weakref
from pathlib import Path

import pytest

from structq.capabilities.loader import load_manifest_text
from structq.errors import QueryTimeout, SourceUnavailable
from structq.executors.sql import SqlExecutor
from structq.executors.sql import deadlines
from structq.safety.query import SafeQuery

_HANG_GUARD_S = 30.0

MANIFEST = """\
source: shop
kind: sql
url: sqlite:///{path}
limits: {{max_rows: 100, timeout_s: {timeout}}}
tables:
  - name: orders
    columns:
      - {{name: amount, type: integer}}
"""


def _database(path: Path, amounts: list[int]) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (amount INTEGER)")
        db.executemany("INSERT INTO orders VALUES (?)", [(a,) for a in amounts])
    db.close()


def _executor(path: Path, timeout: float = 5) -> SqlExecutor:
    manifest, _ = load_manifest_text(MANIFEST.format(path=path, timeout=timeout), "<shop>", env={})
    return SqlExecutor(manifest)


def _query(text: str) -> SafeQuery:
    return SafeQuery(source="shop", kind="sql", limit=101, max_rows=100, text=text)


def _total(executor: SqlExecutor) -> int:
    return executor.fetch(_query("SELECT SUM(amount) FROM orders")).rows[0][0]


# --- one deadline thread -------------------------------------------------------------------


def test_many_queries_use_one_deadline_thread_and_leave_nothing_watched(tmp_path: Path) -> None:
    _database(tmp_path / "shop.db", [1, 2, 3])
    executor = _executor(tmp_path / "shop.db")
    try:
        before = {t.ident for t in threading.enumerate()}
        for _ in range(50):
            assert _total(executor) == 6
        started = [t for t in threading.enumerate() if t.ident not in before]
    finally:
        executor.close()
    assert all(t.name == deadlines.THREAD_NAME for t in started)  # no thread per query
    assert [t.name for t in threading.enumerate()].count(deadlines.THREAD_NAME) == 1
    assert deadlines.pending() == 0


def test_a_query_past_its_deadline_is_interrupted(tmp_path: Path) -> None:
    _database(tmp_path / "shop.db", list(range(200)))
    executor = _executor(tmp_path / "shop.db", timeout=0.05)
    slow = ("SELECT COUNT(*) FROM orders AS a, orders AS b, orders AS c, orders AS d "
            "WHERE a.amount + b.amount + c.amount + d.amount >= 0")
    try:
        with pytest.raises(QueryTimeout):
            executor.fetch(_query(slow))
        assert _total(executor) == sum(range(200))  # the connection serves the next query
    finally:
        executor.close()


def test_a_watch_past_its_deadline_fires() -> None:
    fired = threading.Event()
    deadlines.watch(fired.set, 0.01)
    assert fired.wait(_HANG_GUARD_S)


def test_a_released_watch_never_fires_afterwards() -> None:
    """Released at once, racing the deadline thread: each cancel either ran before its
    release returned, or never."""
    released = [False] * 300
    late: list[int] = []

    def cancel(i: int) -> None:
        if released[i]:
            late.append(i)

    watches = []
    for i in range(len(released)):
        watch = deadlines.watch(lambda i=i: cancel(i), 0.0)
        watch.release()
        released[i] = True
        watches.append(watch)
    done = threading.Event()
    deadlines.watch(done.set, 0.0)  # after every earlier entry has been handled
    assert done.wait(_HANG_GUARD_S)
    assert late == []


def test_a_released_watch_holds_no_reference_to_its_connection() -> None:
    class Connection:
        def interrupt(self) -> None:
            pass

    connection = Connection()
    alive = weakref.ref(connection)
    deadlines.watch(connection.interrupt, 3600).release()
    del connection
    gc.collect()
    assert alive() is None


# --- a pooled connection and the file it opened --------------------------------------------


def test_a_moved_database_is_unavailable_even_to_a_pooled_connection(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    _database(path, [1, 2, 3])
    executor = _executor(path)
    try:
        assert _total(executor) == 6  # a connection is now pooled, its file open
        path.rename(tmp_path / "moved.db")
        with pytest.raises(SourceUnavailable, match="does not exist"):
            _total(executor)
        (tmp_path / "moved.db").rename(path)
        assert _total(executor) == 6
    finally:
        executor.close()


def test_a_replaced_database_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    _database(path, [1, 2, 3])
    executor = _executor(path)
    try:
        assert _total(executor) == 6
        _database(tmp_path / "rebuilt.db", [10, 20])
        (tmp_path / "rebuilt.db").replace(path)  # a rebuilt database swapped in atomically
        assert _total(executor) == 30
    finally:
        executor.close()
