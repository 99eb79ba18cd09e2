"""SQLite sources run on ``sqlite3`` connections straight (``executors/sql/sqlite_pool.py``):
a plan on a SQLite file never imports SQLAlchemy, and every guard still holds — read-only,
the deadline, RE2's ``REGEXP``, a file swapped under its path read anew.

Outcomes only: what a query returned or raised, what a process had imported. Waits have a
bound that only turns a hang into a failure.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from structq.capabilities import Manifest
from structq.capabilities.model import Limits
from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable
from structq.executors.sql import SqlExecutor, parse_url, read_only_engine, resolve
from structq.executors.sql.sqlite import SQLiteURL, sqlite_deadline, sqlite_path
from structq.executors.sql.sqlite_pool import IDLE_CONNECTIONS, SQLitePool
from structq.safety.query import SafeQuery
from structq.safety.sql import check_sql

ROOT = Path(__file__).resolve().parents[1]
_HANG_GUARD_S = 30.0

#: The table every test reads: an amount and a note with a colon in it.
ORDERS = [{"name": "orders", "columns": [{"name": "id", "type": "integer"}, {"name": "amount", "type": "integer"},
                                         {"name": "note", "type": "text"}]}]


def _database(path: Path, amounts: list[int]) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, note TEXT)")
    db.executemany("INSERT INTO orders (amount, note) VALUES (?, ?)", [(a, f"at 10:{a % 60:02d}") for a in amounts])
    db.commit()
    db.close()
    return path


def _manifest(path: Path, timeout: float = 5) -> Manifest:
    return Manifest(source="shop", kind="sql", url=f"sqlite:///{path}", tables=ORDERS,
                    limits=Limits(max_rows=100, timeout_s=timeout))


def _query(text: str, **params: object) -> SafeQuery:
    return SafeQuery(source="shop", kind="sql", limit=101, max_rows=100, text=text, params=dict(params))


def _total(executor: SqlExecutor) -> int:
    return executor.fetch(_query("SELECT SUM(amount) FROM orders")).rows[0][0]


# --- start-up -------------------------------------------------------------------------------

#: Runs the ``structq`` entry point with the given arguments, then says whether SQLAlchemy was loaded.
_RUN = """
import json, sys
sys.argv = ["structq", *json.loads(sys.argv[1])]
from structq.cli import main
try:
    main()
finally:
    sys.stderr.write("\\nSQLALCHEMY " + json.dumps("sqlalchemy" in sys.modules) + "\\n")
"""


def test_structq_run_of_a_sqlite_plan_never_imports_sqlalchemy(tmp_path: Path) -> None:
    _database(tmp_path / "shop.db", [1, 2, 3])
    (tmp_path / "shop.yaml").write_text(_manifest(tmp_path / "shop.db").model_dump_json(by_alias=True, exclude_defaults=True),
                                        encoding="utf-8")
    plan = {"steps": [{"output_key": "total", "source": "shop", "query": "SELECT sum(amount) AS total FROM orders"}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "STRUCTQ_LLM")}
    env.update(STRUCTQ_AUDIT="0", STRUCTQ_CACHE="0", STRUCTQ_STATE_DIR=str(tmp_path / "state"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", _RUN, json.dumps(["run", "-m", "shop.yaml", "plan.json", "--json"])],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    said = [line for line in result.stderr.splitlines() if line.startswith("SQLALCHEMY ")]
    assert result.returncode == 0 and said, result.stderr
    assert json.loads(result.stdout)["steps"][0]["rows"] == [[6]]  # it ran the plan
    assert said[-1] == "SQLALCHEMY false"


# --- one file, whichever parsed its URL -----------------------------------------------------

#: SQLite URL forms, each read by ``SQLiteURL`` and by SQLAlchemy's ``make_url``.
FILE_URLS = [
    "sqlite:///shop.db",
    "sqlite:////srv/data/shop.db",
    "sqlite+pysqlite:////srv/data/shop.db",
    "SQLite:///shop.db",
    "sqlite:///file:/srv/data/shop.db?mode=rw&uri=true",
    "sqlite:///file:/srv/data/shop.db?uri=1",
    "sqlite:///file:/srv/data/shop.db?uri=true&uri=1",  # given twice: neither counts
    "sqlite:///file://localhost/srv/data/shop.db?uri=true",
    "sqlite:///file:/srv/data/a%2520b.db?uri=true",  # %-decoded twice: once as a URL, once as a file URI
    "sqlite:///file:shop.db?uri=false",
    "sqlite:////srv/da ta/shop+1.db",
    "sqlite:////srv/%E6%95%B0%E6%8D%AE/shop.db",
    "sqlite:////srv/数据/shop.db?timeout=3&empty=",
    "sqlite:////srv/data/shop.db#part",
    "sqlite:////srv/a:b@c/shop.db",
    "sqlite:///:memory:",
    "sqlite:///",
    "sqlite://",
    "sqlite://?uri=true",
]


@pytest.mark.parametrize("url", FILE_URLS)
def test_a_file_url_reads_as_sqlalchemy_reads_it(url: str) -> None:
    mine, theirs = SQLiteURL.parse(url), make_url(url)
    assert mine is not None
    assert (mine.drivername, mine.database, dict(mine.query)) == (theirs.drivername, theirs.database, dict(theirs.query))
    assert mine.render_as_string() == theirs.render_as_string(hide_password=True)
    assert mine.set(drivername="sqlite+pysqlite").render_as_string() == theirs.set(drivername="sqlite+pysqlite").render_as_string()
    try:
        expected = sqlite_path(theirs)
    except ConfigError as error:
        with pytest.raises(ConfigError, match=error.message):
            sqlite_path(mine)
    else:
        assert sqlite_path(mine) == expected


@pytest.mark.parametrize("url", ["sqlite://user@host/shop.db", "sqlite://host:1/shop.db", "sqlite://:pw@/shop.db",
                                 "postgresql://u@h/db", "sqlitex:///shop.db", "sqlite:/shop.db"])
def test_other_urls_are_left_to_sqlalchemy(url: str) -> None:
    assert SQLiteURL.parse(url) is None


def test_the_executor_and_sync_open_the_same_file(tmp_path: Path) -> None:
    """A URI-form URL through the executor's pool and through the SQLAlchemy engine
    ``structq sync`` reads with: the same rows, from the same file, read-only both ways."""
    path = _database(tmp_path / "shop.db", [4, 5])
    manifest = Manifest(source="shop", kind="sql", url=f"sqlite:///file:{path}?mode=rw&uri=true")
    backend, url = resolve(manifest)
    assert isinstance(url, SQLiteURL) and isinstance(parse_url(manifest), SQLiteURL)
    engine = read_only_engine(backend, url, 5.0)
    executor = SqlExecutor(manifest)
    try:
        with engine.connect() as connection:
            synced = connection.exec_driver_sql("SELECT sum(amount) FROM orders").scalar_one()
            with pytest.raises(Exception, match="readonly"):
                connection.exec_driver_sql("DELETE FROM orders")
        assert synced == _total(executor) == 9
        assert repr(executor) == f"SqlExecutor('shop', 'sqlite+pysqlite:///file%3A{path}?mode=rw&uri=true')"
    finally:
        executor.close()
        engine.dispose()


# --- the pool -------------------------------------------------------------------------------


def test_a_replaced_file_is_read_anew_and_its_old_connection_closed(tmp_path: Path) -> None:
    path = _database(tmp_path / "shop.db", [1, 2, 3])
    pool = SQLitePool(str(path), 5.0)
    try:
        with pool.connection() as first:
            assert first.execute("SELECT sum(amount) FROM orders").fetchone() == (6,)
        _database(tmp_path / "rebuilt.db", [10, 20]).replace(path)  # swapped in atomically
        with pool.connection() as second:
            assert second.execute("SELECT sum(amount) FROM orders").fetchone() == (30,)
        assert second is not first
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            first.execute("SELECT 1")
    finally:
        pool.close()


def test_a_deleted_file_is_an_unavailable_source(tmp_path: Path) -> None:
    path = _database(tmp_path / "shop.db", [1, 2, 3])
    executor = SqlExecutor(_manifest(path))
    try:
        assert _total(executor) == 6  # a connection is now pooled, its file open
        path.unlink()
        with pytest.raises(SourceUnavailable, match="does not exist") as caught:
            _total(executor)
        assert f"cannot use the database at sqlite+pysqlite:///{path}" in caught.value.message
        assert not path.exists()  # and nothing created it
    finally:
        executor.close()


def test_concurrent_fetches_from_threads(tmp_path: Path) -> None:
    path = _database(tmp_path / "shop.db", list(range(1, 101)))
    executor = SqlExecutor(_manifest(path))
    results: list[object] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def work(i: int) -> None:
        start.wait(_HANG_GUARD_S)
        for _ in range(20):
            try:
                got = executor.fetch(_query("SELECT count(*), sum(amount) FROM orders WHERE amount > :floor",
                                            floor=i)).rows[0]
            except Exception as error:  # noqa: BLE001 - reported by the assertion below
                got = error
            with lock:
                results.append((i, got))

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(12)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(_HANG_GUARD_S)
        assert len(results) == 12 * 20
        assert all(got == (100 - i, sum(range(i + 1, 101))) for i, got in results), results
    finally:
        executor.close()


def test_the_pool_keeps_a_few_idle_connections_and_close_closes_them(tmp_path: Path) -> None:
    path = _database(tmp_path / "shop.db", [1])
    pool = SQLitePool(str(path), 5.0)
    lent = [pool.connection() for _ in range(IDLE_CONNECTIONS + 2)]
    connections = [context.__enter__() for context in lent]
    for context in lent:
        context.__exit__(None, None, None)
    open_ones = []
    for connection in connections:
        try:
            connection.execute("SELECT 1")
            open_ones.append(connection)
        except sqlite3.ProgrammingError:
            pass
    assert len(open_ones) == IDLE_CONNECTIONS  # the rest were closed on their way back
    with pool.connection() as during:
        pool.close()
        assert during.execute("SELECT count(*) FROM orders").fetchone() == (1,)  # a lent one still runs
    for connection in [*open_ones, during]:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            connection.execute("SELECT 1")


def test_a_connection_that_failed_is_not_lent_again_but_one_interrupted_is(tmp_path: Path) -> None:
    pool = SQLitePool(str(_database(tmp_path / "shop.db", [1])), 5.0)
    try:
        with pytest.raises(sqlite3.DatabaseError), pool.connection() as failed:
            raise sqlite3.DatabaseError("database disk image is malformed")
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            failed.execute("SELECT 1")
        with (pytest.raises(sqlite3.OperationalError, match="interrupted"), pool.connection() as interrupted,
              sqlite_deadline(interrupted, 0.01)):
            interrupted.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                "SELECT max(x) FROM c").fetchall()
        with pool.connection() as again:
            assert again is interrupted and again.execute("SELECT count(*) FROM orders").fetchone() == (1,)
    finally:
        pool.close()


# --- the guards on the pool's connections ---------------------------------------------------


def test_the_pools_connections_cannot_write(tmp_path: Path) -> None:
    path = _database(tmp_path / "shop.db", [1, 2, 3])
    (tmp_path / "other.db").touch()
    pool = SQLitePool(str(path), 5.0)
    try:
        with pool.connection() as connection:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):  # PRAGMA query_only
                connection.execute("INSERT INTO orders (amount) VALUES (99)")
            connection.execute("PRAGMA query_only = OFF")
            with pytest.raises(sqlite3.OperationalError, match="readonly"):  # mode=ro still holds
                connection.execute("INSERT INTO orders (amount) VALUES (99)")
            with pytest.raises(sqlite3.OperationalError, match="too many attached databases"):
                connection.execute(f"ATTACH DATABASE '{tmp_path / 'other.db'}' AS other")
    finally:
        pool.close()
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT count(*), sum(amount) FROM orders").fetchone() == (3, 6)
    check.close()


@pytest.mark.parametrize("statement", [
    "DELETE FROM orders",
    "INSERT INTO orders (amount) VALUES (99)",
    "CREATE TABLE sneaked (x)",
])
def test_a_write_that_got_past_the_sandbox_is_refused_by_the_connection(tmp_path: Path, statement: str) -> None:
    """A ``SafeQuery`` built by hand, as if a sandbox bug had passed a write."""
    path = _database(tmp_path / "shop.db", [1, 2, 3])
    executor = SqlExecutor(_manifest(path))
    try:
        with pytest.raises(ExecutionError, match="readonly"):
            executor.fetch(_query(statement))
        assert _total(executor) == 6
    finally:
        executor.close()


def test_the_deadline_cancels_a_long_query(tmp_path: Path) -> None:
    path = _database(tmp_path / "shop.db", list(range(300)))
    executor = SqlExecutor(_manifest(path, timeout=0.05))
    slow = ("SELECT COUNT(*) FROM orders AS a, orders AS b, orders AS c, orders AS d "
            "WHERE a.amount + b.amount + c.amount + d.amount >= 0")
    try:
        with pytest.raises(QueryTimeout, match="longer than 0.05 s"):
            executor.fetch(_query(slow))
        assert _total(executor) == sum(range(300))
    finally:
        executor.close()


def test_regexp_is_re2(tmp_path: Path) -> None:
    """A pattern catastrophic for a backtracking matcher returns at once; one RE2 cannot run
    (a back-reference) fails with the hint that says so, not with a fallback to ``re``."""
    path = _database(tmp_path / "shop.db", [1])
    executor = SqlExecutor(_manifest(path))
    try:
        got = executor.fetch(_query("SELECT replace(printf('%1000c', '!'), ' ', 'a') REGEXP '^(a+)+$' AS m, "
                                    "'abc' REGEXP '^ab' AS n"))
        assert got.rows == [(0, 1)]
        with pytest.raises(ExecutionError) as caught:
            executor.fetch(_query(r"SELECT note REGEXP '(a)\1' FROM orders"))
        assert "RE2" in (caught.value.hint or "")
    finally:
        executor.close()


# --- binding --------------------------------------------------------------------------------


def test_colons_in_literals_and_bound_values_through_the_sandbox(tmp_path: Path) -> None:
    """The sandbox writes ``text()`` syntax (``\\:`` before a literal's colon); SQLite gets the
    literal whole and each ``:name`` bound."""
    path = _database(tmp_path / "shop.db", [5, 7, 65])
    manifest = _manifest(path)
    safe = check_sql("SELECT count(*) AS n FROM orders WHERE note = 'at 10:05' OR amount IN (<picked>)",
                     manifest, params={"picked": [7]})
    assert "\\:" in (safe.text or "") and safe.params
    executor = SqlExecutor(manifest)
    try:
        result = executor.fetch(safe)
        assert result.rows == [(3,)]  # 'at 10:05' matches 5 and 65; 7 is picked
        assert result.query == safe.sent_text and "'at 10:05'" in result.query
    finally:
        executor.close()


@pytest.mark.parametrize("values", [[], [1], ["a", "b"], [None]])
def test_the_sandbox_binds_sqlite_lists_as_json_never_expanding(tmp_path: Path, values: list[object]) -> None:
    manifest = _manifest(tmp_path / "shop.db")
    for query in ("SELECT amount FROM orders WHERE id IN (<picked>)",
                  "SELECT amount FROM orders WHERE note NOT IN (<picked>)"):
        assert check_sql(query, manifest, params={"picked": values}).expanding == frozenset()


def test_an_expanding_parameter_is_refused_on_sqlite(tmp_path: Path) -> None:
    executor = SqlExecutor(_manifest(_database(tmp_path / "shop.db", [1])))
    query = SafeQuery(source="shop", kind="sql", limit=11, max_rows=10, text="SELECT 1 FROM orders WHERE id IN :ids",
                      params={"ids": [1]}, expanding=frozenset({"ids"}))
    try:
        with pytest.raises(ExecutionError, match="expands ids"):
            executor.fetch(query)
    finally:
        executor.close()
