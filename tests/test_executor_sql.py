"""The SQL executor: one behavioural suite run on SQLite, PostgreSQL and MariaDB.

Every engine gets the same tables, created through its admin URL; the executor reads them
through the read-only account (PostgreSQL, MariaDB) or the SQLite file, which it opens
read-only itself. Where the engines differ (how a list is bound, how to sleep) the ``Dialect``
table says so; the tests themselves are written once.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from structq.capabilities import Limits, Manifest
from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable
from structq.executors import create_executor
from structq.executors.base import ResultSet
from structq.executors.sql import CONNECT_TIMEOUT_MAX_S, SqlExecutor
from structq.executors.values import json_safe, json_safe_row
from structq.safety.query import SafeQuery

from servers import free_port

ITEMS = 3000
IDS = 100_000
CATEGORIES = ("书", "toys", "food", "tools")
TIMEOUT_S = 1.0


# ============================================================================================
# Test data: identical on every engine, written through SQLAlchemy Core (no per-engine DDL)
# ============================================================================================

metadata = sa.MetaData()
items = sa.Table(
    "items", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("price", sa.Numeric(10, 2), nullable=False),
    sa.Column("created", sa.Date, nullable=False),
)
tags = sa.Table(
    "tags", metadata,
    sa.Column("item_id", sa.Integer, nullable=False),
    sa.Column("tag", sa.String(20), nullable=False),
)
ids = sa.Table("ids", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False))


def _price(i: int) -> Decimal:
    """Half the prices are whole numbers, half end in .99."""
    return Decimal(i % 50) + (Decimal("0.99") if i % 2 else Decimal(0))


def item_row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"item {i}", "category": CATEGORIES[i % len(CATEGORIES)],
            "price": _price(i), "created": dt.date(2024, 1, 1) + dt.timedelta(days=i % 366)}


def populate(admin_url: str) -> None:
    engine = sa.create_engine(admin_url)
    try:
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(items.insert(), [item_row(i) for i in range(1, ITEMS + 1)])
            connection.execute(tags.insert(), [{"item_id": i, "tag": tag}
                                               for i in range(1, ITEMS + 1)
                                               for tag in (("odd",) if i % 2 else ("even",)) + (("x7",) if i % 7 == 0 else ())])
            connection.execute(ids.insert(), [{"id": i} for i in range(1, IDS + 1)])
    finally:
        engine.dispose()


def count_rows(admin_url: str, table: str) -> int:
    engine = sa.create_engine(admin_url)
    try:
        with engine.connect() as connection:
            return connection.execute(sa.select(sa.func.count()).select_from(metadata.tables[table])).scalar_one()
    finally:
        engine.dispose()


def table_names(admin_url: str) -> set[str]:
    engine = sa.create_engine(admin_url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


# ============================================================================================
# What differs per engine
# ============================================================================================


@dataclass(frozen=True)
class Dialect:
    """How one engine spells the few things the suite needs."""

    name: str
    ref: str  # a predicate testing {column} against the list parameter :{param}
    encode: Callable[[list[Any]], Any]  # the list as the parameter value
    expanding: bool
    sleep: tuple[str, ...]  # queries that run far longer than the timeout
    readonly_words: tuple[str, ...]  # what the refusal of a write says

    def in_list(self, column: str, param: str, values: list[Any]) -> tuple[str, dict[str, Any], frozenset[str]]:
        """A predicate, its parameters and expanding names for ``column IN values``."""
        predicate = self.ref.format(column=column, param=param)
        return predicate, {param: self.encode(values)}, frozenset({param}) if self.expanding else frozenset()


_CROSS_JOIN = "SELECT count(*) AS n FROM ids a, ids b WHERE a.id + b.id > 7"
DIALECTS = {
    "sqlite": Dialect(
        "sqlite", "{column} IN (SELECT value FROM json_each(:{param}))", json.dumps, False,
        ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
         "SELECT max(x) AS m FROM c", _CROSS_JOIN),
        ("readonly",)),
    "postgres": Dialect(
        "postgres", "{column} = ANY(:{param})", list, False,
        ("SELECT pg_sleep(10) AS s", _CROSS_JOIN), ("read-only",)),
    "mariadb": Dialect(
        "mariadb", "{column} IN :{param}", list, True,
        ("SELECT SLEEP(10) AS s", _CROSS_JOIN), ("READ ONLY",)),
}


@dataclass
class Target:
    """One engine with the test tables: its admin URL and the URL the executor gets."""

    dialect: Dialect
    admin_url: str
    reader_url: str
    _executors: list[SqlExecutor] = field(default_factory=list)

    def manifest(self, url: str | None = None, **limits: Any) -> Manifest:
        settings = {"max_rows": 1000, "timeout_s": TIMEOUT_S, **limits}
        return Manifest(source="shop", kind="sql", url=url or self.reader_url, limits=Limits(**settings),
                        tables=MANIFEST_TABLES)

    def executor(self, url: str | None = None, **limits: Any) -> SqlExecutor:
        executor = SqlExecutor(self.manifest(url, **limits))
        self._executors.append(executor)
        return executor

    def close(self) -> None:
        for executor in self._executors:
            executor.close()


MANIFEST_TABLES = [
    {"name": "items", "columns": [{"name": "id", "type": "integer"}, {"name": "name", "type": "text"},
                                  {"name": "category", "type": "text"}, {"name": "price", "type": "numeric"},
                                  {"name": "created", "type": "date"}]},
    {"name": "tags", "columns": [{"name": "item_id", "type": "integer"}, {"name": "tag", "type": "text"}]},
    {"name": "ids", "columns": [{"name": "id", "type": "integer"}]},
]


def sql(text: str, *, max_rows: int = 1000, params: dict[str, Any] | None = None,
        expanding: frozenset[str] = frozenset()) -> SafeQuery:
    """A SafeQuery built by hand, as if the sandbox had passed ``text``."""
    return SafeQuery(source="shop", kind="sql", limit=max_rows + 1, max_rows=max_rows, text=text,
                     params=params or {}, expanding=expanding)


@pytest.fixture(scope="module")
def sqlite_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    path = tmp_path_factory.mktemp("sqlite") / "shop.db"
    url = f"sqlite:///{path}"
    populate(url)
    target = Target(DIALECTS["sqlite"], url, url)
    yield target
    target.close()


def _server_target(server: Any, dialect: str, database: str) -> Iterator[Target]:
    admin = server.create_database(database)
    populate(admin)
    reader = server.create_readonly_user(database, f"{database}_reader", "reader-secret")
    target = Target(DIALECTS[dialect], admin, reader)
    yield target
    target.close()


@pytest.fixture(scope="module")
def postgres_target(pg_server: Any) -> Iterator[Target]:
    yield from _server_target(pg_server, "postgres", "exec_shop")


@pytest.fixture(scope="module")
def mariadb_target(mariadb_server: Any) -> Iterator[Target]:
    yield from _server_target(mariadb_server, "mariadb", "exec_shop")


@pytest.fixture(params=[
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mariadb", marks=pytest.mark.mariadb),
])
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(f"{request.param}_target")


def elapsed(action: Callable[[], Any]) -> tuple[float, BaseException | None]:
    """Seconds ``action`` took, and what it raised."""
    started = time.monotonic()
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - returned for the test to inspect
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


# ============================================================================================
# The behavioural suite
# ============================================================================================


class TestReading:
    def test_values_are_json_safe(self, target: Target) -> None:
        result = target.executor().run(sql(
            "SELECT id, name, category, price, created FROM items WHERE id IN (1, 2, 4) ORDER BY id"))
        assert result.columns == ("id", "name", "category", "price", "created")
        assert result.rows == [
            (1, "item 1", "toys", 1.99, "2024-01-02"),
            (2, "item 2", "food", 2, "2024-01-03"),
            (4, "item 4", "书", 4, "2024-01-05"),
        ]
        assert [type(v) for v in result.rows[0]] == [int, str, str, float, str]
        json.dumps(result.rows)  # everything serialises
        assert result.truncated is False
        assert result.query.startswith("SELECT id, name")
        assert result.elapsed_ms > 0

    def test_params_are_data_and_percent_and_colon_survive(self, target: Target) -> None:
        executor = target.executor()
        like = executor.run(sql("SELECT count(*) AS n FROM items WHERE name LIKE 'item 1%'"))
        assert like.rows == [(1111,)]
        hostile = executor.run(sql("SELECT count(*) AS n FROM items WHERE category = :c",
                                   params={"c": "书' OR '1'='1"}))
        assert hostile.rows == [(0,)]
        chinese = executor.run(sql("SELECT count(*) AS n FROM items WHERE category = :c", params={"c": "书"}))
        assert chinese.rows == [(ITEMS // 4,)]
        assert chinese.params == {"c": "书"}

    def test_truncation_at_max_rows(self, target: Target) -> None:
        executor = target.executor()
        over = executor.run(sql("SELECT id FROM items ORDER BY id LIMIT 11", max_rows=10))
        assert over.truncated is True
        assert over.rows == [(i,) for i in range(1, 11)]
        exact = executor.run(sql("SELECT id FROM items WHERE id <= 10 ORDER BY id LIMIT 11", max_rows=10))
        assert exact.truncated is False and exact.row_count == 10

    def test_the_executor_caps_rows_even_without_a_limit_clause(self, target: Target) -> None:
        executor = target.executor(max_rows=5, max_intermediate_rows=5)
        result = executor.run(sql("SELECT id FROM ids ORDER BY id", max_rows=100_000))
        assert result.truncated is True
        assert result.rows == [(i,) for i in range(1, 6)]

    def test_a_result_of_100k_rows(self, target: Target) -> None:
        result = target.executor().run(sql("SELECT id FROM ids ORDER BY id", max_rows=IDS))
        assert result.row_count == IDS and result.truncated is False
        assert result.rows[-1] == (IDS,)


class TestReferences:
    """A step's result bound as a list gives the same rows as the equivalent JOIN."""

    @pytest.mark.parametrize("modulus,expected", [(IDS, 1), (100, 1000), (1, IDS)])
    def test_reference_matches_join(self, target: Target, modulus: int, expected: int) -> None:
        executor = target.executor(max_rows=10, max_intermediate_rows=IDS)
        picked = executor.run(sql("SELECT id FROM ids WHERE id % :k = 0 ORDER BY id",
                                  params={"k": modulus}, max_rows=IDS))
        values = [row[0] for row in picked.rows]
        assert len(values) == expected and not picked.truncated

        predicate, params, expanding = target.dialect.in_list("id", "ref", values)
        by_reference = executor.run(sql(
            "SELECT count(*) AS n, sum(id) AS s, min(id) AS lo, max(id) AS hi FROM ids WHERE " + predicate,
            params=params, expanding=expanding))
        by_join = executor.run(sql(
            "SELECT count(*) AS n, sum(ids.id) AS s, min(ids.id) AS lo, max(ids.id) AS hi "
            "FROM ids JOIN (SELECT id FROM ids WHERE id % :k = 0) r ON r.id = ids.id",
            params={"k": modulus}))
        assert by_reference.rows == by_join.rows
        assert by_reference.rows[0][0] == expected

        predicate, params, expanding = target.dialect.in_list("i.id", "ref", values)
        rows_by_reference = executor.run(sql(
            "SELECT i.id, i.name, i.price FROM items i WHERE " + predicate + " ORDER BY i.id",
            params=params, expanding=expanding, max_rows=ITEMS))
        rows_by_join = executor.run(sql(
            "SELECT i.id, i.name, i.price FROM items i JOIN ids ON ids.id = i.id "
            "WHERE ids.id % :k = 0 ORDER BY i.id", params={"k": modulus}, max_rows=ITEMS))
        assert rows_by_reference.rows == rows_by_join.rows

    def test_text_references(self, target: Target) -> None:
        predicate, params, expanding = target.dialect.in_list("category", "cats", ["书", "toys", "it's"])
        result = target.executor().run(sql("SELECT count(*) AS n FROM items WHERE " + predicate,
                                           params=params, expanding=expanding))
        assert result.rows == [(ITEMS // 2,)]


WRITES = [
    "INSERT INTO tags (item_id, tag) VALUES (1, 'sneaked')",
    "UPDATE items SET price = 0",
    "DELETE FROM tags",
    "CREATE TABLE sneaked (id INTEGER)",
    "DROP TABLE tags",
    "CREATE TEMPORARY TABLE sneaked_tmp (id INTEGER)",
    "SELECT 1 AS one; DELETE FROM tags",
    "SELECT 1 AS one; COMMIT; DELETE FROM tags",
]


class TestReadOnly:
    """Writes that got past the sandbox are refused by the connection itself."""

    @pytest.mark.parametrize("statement", WRITES)
    def test_write_is_refused_for_the_reader(self, target: Target, statement: str) -> None:
        self._assert_refused(target, target.reader_url, statement)

    @pytest.mark.parametrize("statement", WRITES)
    def test_write_is_refused_even_for_an_admin_url(self, target: Target, statement: str) -> None:
        """Grants would not stop the admin: the read-only transaction/session must."""
        error = self._assert_refused(target, target.admin_url, statement)
        if statement in WRITES[:5]:
            assert any(word in (error.cause or "") for word in target.dialect.readonly_words), error.cause

    def _assert_refused(self, target: Target, url: str, statement: str) -> ExecutionError:
        before = {name: count_rows(target.admin_url, name) for name in ("items", "tags")}
        with pytest.raises(ExecutionError) as caught:
            target.executor(url).run(sql(statement))
        assert not isinstance(caught.value, (SourceUnavailable, QueryTimeout)), caught.value
        assert table_names(target.admin_url) == {"items", "tags", "ids"}
        assert {name: count_rows(target.admin_url, name) for name in ("items", "tags")} == before
        result = target.executor(target.admin_url).run(sql("SELECT count(*) AS n FROM items WHERE price = 0"))
        assert result.rows == [(ITEMS // 50,)]  # untouched: only ids divisible by 50 cost 0
        return caught.value


class TestFailures:
    def test_bad_query_carries_the_database_message(self, target: Target) -> None:
        with pytest.raises(ExecutionError) as caught:
            target.executor().run(sql("SELECT no_such_column FROM items"))
        error = caught.value
        assert type(error) is ExecutionError and error.retryable
        assert "no_such_column" in (error.cause or "")
        assert error.query == "SELECT no_such_column FROM items"
        assert error.source == "shop"

    @pytest.mark.parametrize("which", [0, 1], ids=["sleep", "cross_join"])
    def test_long_query_is_cancelled(self, target: Target, which: int) -> None:
        executor = target.executor()
        took, error = elapsed(lambda: executor.run(sql(target.dialect.sleep[which])))
        assert isinstance(error, QueryTimeout), error
        assert took < TIMEOUT_S + 1, took
        assert "1 s" in str(error)
        assert executor.run(sql("SELECT count(*) AS n FROM items")).rows == [(ITEMS,)]  # pool still fine

    def test_closed_port_is_unavailable(self, target: Target) -> None:
        if target.dialect.name == "sqlite":
            pytest.skip("SQLite has no server")
        url = sa.make_url(target.reader_url).set(port=free_port()).render_as_string(hide_password=False)
        took, error = elapsed(lambda: target.executor(url).run(sql("SELECT 1 AS one")))
        assert isinstance(error, SourceUnavailable), error
        assert not error.retryable
        assert took < CONNECT_TIMEOUT_MAX_S + 1

    def test_wrong_password_is_unavailable(self, target: Target) -> None:
        if target.dialect.name == "sqlite":
            pytest.skip("SQLite has no logins")
        url = sa.make_url(target.reader_url).set(password="wrong").render_as_string(hide_password=False)
        with pytest.raises(SourceUnavailable) as caught:
            target.executor(url).run(sql("SELECT 1 AS one"))
        assert "wrong" not in str(caught.value)  # the password is never echoed
        assert caught.value.cause

    def test_ping(self, target: Target) -> None:
        assert target.executor().ping() >= 0

    def test_not_a_query(self, target: Target) -> None:
        statement = {"sqlite": "PRAGMA user_version = 3", "postgres": "SET LOCAL work_mem = '8MB'",
                     "mariadb": "SET @x = 1"}[target.dialect.name]
        with pytest.raises(ExecutionError):
            target.executor().run(sql(statement))


class TestConcurrency:
    def test_eight_threads_share_one_executor(self, target: Target) -> None:
        executor = target.executor()
        errors: list[BaseException] = []
        results: dict[int, list[tuple[Any, ...]]] = {}

        def work(n: int) -> None:
            try:
                for _ in range(5):
                    result = executor.run(sql("SELECT count(*) AS n FROM items WHERE id <= :n", params={"n": n * 100}))
                    results[n] = result.rows
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not errors, errors
        assert results == {n: [(n * 100,)] for n in range(1, 9)}

    def test_close_then_run_reopens(self, target: Target) -> None:
        executor = target.executor()
        assert executor.run(sql("SELECT 1 AS one")).rows == [(1,)]
        executor.close()
        assert executor.run(sql("SELECT 1 AS one")).rows == [(1,)]


class TestThroughTheSandbox:
    """Once the sandbox exists, the same reference test goes through ``check_sql``."""

    def test_checked_reference_query(self, target: Target) -> None:
        try:
            from structq.safety import check_sql  # type: ignore[attr-defined]
        except ImportError:
            pytest.skip("structq.safety.check_sql is not available yet")
        manifest = target.manifest()
        executor = SqlExecutor(manifest)
        try:
            values = list(range(1, IDS + 1, 3))
            checked = check_sql("SELECT count(*) AS n FROM ids WHERE id IN (<picked>)", manifest,
                                params={"picked": values})
            assert executor.run(checked).rows == [(len(values),)]
            literals = check_sql("SELECT count(*) AS n FROM items WHERE name <> 'a :b' AND name LIKE 'item 1%'",
                                 manifest)
            assert executor.run(literals).rows == [(1111,)]
        finally:
            executor.close()


# ============================================================================================
# Engines that stop, files that are missing, URLs that are wrong
# ============================================================================================


@pytest.mark.parametrize("fixture", [
    pytest.param("fresh_pg_server", marks=pytest.mark.postgres),
    pytest.param("fresh_mariadb_server", marks=pytest.mark.mariadb),
])
def test_stopped_server_is_unavailable(request: pytest.FixtureRequest, fixture: str) -> None:
    server = request.getfixturevalue(fixture)
    admin = server.create_database("doomed")
    engine = sa.create_engine(admin)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE t (id INTEGER)"))
    engine.dispose()
    executor = SqlExecutor(Manifest(source="doomed", kind="sql", url=admin, limits=Limits(timeout_s=TIMEOUT_S)))
    try:
        assert executor.run(sql("SELECT count(*) AS n FROM t")).rows == [(0,)]
        server.kill()
        took, error = elapsed(lambda: executor.run(sql("SELECT count(*) AS n FROM t")))
        assert isinstance(error, SourceUnavailable), error
        assert took < CONNECT_TIMEOUT_MAX_S + 1
    finally:
        executor.close()


def test_missing_sqlite_file_is_unavailable_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.db"
    executor = SqlExecutor(Manifest(source="gone", kind="sql", url=f"sqlite:///{path}"))
    with pytest.raises(SourceUnavailable) as caught:
        executor.run(sql("SELECT 1 AS one"))
    assert str(path) in str(caught.value)
    assert not path.exists()


def test_sqlite_uri_urls_and_odd_paths(tmp_path: Path) -> None:
    path = tmp_path / "dir with space #% 数据" / "a.db"
    path.parent.mkdir()
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (x)")
    connection.execute("INSERT INTO t VALUES (42)")
    connection.commit()
    connection.close()
    plain = SqlExecutor(Manifest(source="odd", kind="sql", url="sqlite:///" + str(path)))
    assert plain.run(sql("SELECT x FROM t")).rows == [(42,)]
    plain.close()


def test_create_executor_picks_the_sql_executor(tmp_path: Path) -> None:
    executor = create_executor(Manifest(source="s", kind="sql", url=f"sqlite:///{tmp_path / 'x.db'}"))
    assert isinstance(executor, SqlExecutor)


@pytest.mark.parametrize("url,drivername", [
    ("postgresql://u:p@127.0.0.1:1/db", "postgresql+psycopg"),
    ("postgres://u@127.0.0.1/db", "postgresql+psycopg"),
    ("postgresql+psycopg2://u@127.0.0.1/db", "postgresql+psycopg"),
    ("mysql://u@127.0.0.1/db", "mysql+pymysql"),
    ("mariadb://u@127.0.0.1/db", "mysql+pymysql"),
    ("sqlite:///x.db", "sqlite+pysqlite"),
])
def test_plain_urls_get_the_tested_drivers(url: str, drivername: str) -> None:
    executor = SqlExecutor(Manifest(source="s", kind="sql", url=url))
    assert executor._url.drivername == drivername
    assert "p@" not in repr(executor)


def test_unsupported_and_malformed_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="mssql"):
        SqlExecutor(Manifest(source="s", kind="sql", url="mssql+pyodbc://u@h/db"))
    with pytest.raises(ConfigError):
        SqlExecutor(Manifest(source="s", kind="sql", url="not a url"))


def test_in_memory_sqlite_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="in-memory"):
        SqlExecutor(Manifest(source="s", kind="sql", url="sqlite://")).run(sql("SELECT 1 AS one"))


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a))
    with pytest.raises(ConfigError) as caught:
        SqlExecutor(Manifest(source="s", kind="sql", url="postgresql://u@127.0.0.1/db")).run(sql("SELECT 1 AS one"))
    assert 'pip install "structq[postgres]"' in str(caught.value)


# ============================================================================================
# values.py: the JSON-safe normalisation shared with the search executor
# ============================================================================================


class Colour(__import__("enum").Enum):
    RED = "red"


@pytest.mark.parametrize("value,expected", [
    (Decimal("12"), 12),
    (Decimal("12.00"), 12),
    (Decimal("-0"), 0),
    (Decimal("1E+3"), 1000),
    (Decimal("19.99"), 19.99),
    (Decimal("0.1"), 0.1),
    (Decimal("123456789012345678901234567890"), 123456789012345678901234567890),
    (Decimal("0.1000000000000000055511151231257827"), "0.1000000000000000055511151231257827"),
    (Decimal("12345678901234567.89"), "12345678901234567.89"),
    (Decimal("NaN"), "NaN"),
    (Decimal("-Infinity"), "-Infinity"),
    (float("inf"), "Infinity"),
    (1.5, 1.5),
    (True, True),
    (None, None),
    (dt.date(2024, 3, 1), "2024-03-01"),
    (dt.datetime(2024, 3, 1, 9, 30), "2024-03-01T09:30:00"),
    (dt.datetime(2024, 3, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=8))), "2024-03-01T09:30:00+08:00"),
    (dt.time(9, 30, 15), "09:30:15"),
    (dt.timedelta(hours=1), 3600),
    (dt.timedelta(seconds=1.5), 1.5),
    (b"\x00\xff", "base64:AP8="),
    (memoryview(b"ab"), "base64:YWI="),
    (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (Colour.RED, "red"),
    ([Decimal("1.5"), dt.date(2024, 1, 1)], [1.5, "2024-01-01"]),
    ({1: Decimal("2")}, {"1": 2}),
    ({3, 1, 2}, [1, 2, 3]),
])
def test_json_safe(value: Any, expected: Any) -> None:
    converted = json_safe(value)
    assert converted == expected and type(converted) is type(expected)
    json.dumps(converted, allow_nan=False)


def test_json_safe_row_keeps_plain_values() -> None:
    row = json_safe_row((1, "a", None, Decimal("2.50"), False))
    assert row == (1, "a", None, 2.5, False)


def test_result_set_defaults() -> None:
    assert ResultSet(columns=("a",), rows=[(1,)]).row_count == 1
