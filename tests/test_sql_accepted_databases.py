"""Legitimate SQL that the sandbox once refused or broke is accepted and runs right on the database.

Each query goes through ``check_sql`` and then ``SqlExecutor`` against a real SQLite, PostgreSQL
or MariaDB, under a SELECT-only account, with the manifest declaring the schema the tables live
in (so every table is also written qualified). The rows must equal those of the query as
written, run directly — or, where the database cannot run the text as written (MariaDB has no
``ANY_VALUE`` or ``REGEXP_LIKE``; a byte-order mark is not SQL), the rows it means.

The classes: table functions whose columns qualification must know (``json_each``,
``generate_series``, ``jsonb_array_elements``, ``jsonb_each_text``), CTEs that name later ones,
functions sqlglot parses into classes of its own (``ANY_VALUE``, ``ELT``, ``JSON_KEYS``,
``SPACE``, ``make_timestamp``, ``SOUNDS LIKE``), MySQL's ``FROM DUAL``, the ``REGEXP`` operator,
and a leading byte-order mark.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from manifest_support import manifest_text

from structq.capabilities import Manifest, load_manifest_text
from structq.executors.sql import SqlExecutor
from structq.safety import SafeQuery, check_sql


ROWS = [
    (1, "ann", '[{"lvl": "a"}, {"lvl": "b"}]', '{"x": "1", "y": "2"}'),
    (2, "bob", '[{"lvl": "c"}]', '{"z": "3"}'),
]
DDL = {
    "sqlite": "CREATE TABLE users (uid INTEGER, name TEXT, tags TEXT, attrs TEXT)",
    "postgres": "CREATE TABLE users (uid integer, name text, tags jsonb, attrs jsonb)",
    "mariadb": "CREATE TABLE users (uid integer, name varchar(20), tags json, attrs json)",
}
DIALECT = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mysql"}

#: Compare with the query as written, run directly on the same database.
AS_WRITTEN = None

CASES: list[tuple[str, str, list[tuple[Any, ...]] | None]] = [
    # Table functions: their columns are known to qualification.
    ("sqlite", "SELECT value AS tag FROM users, json_each(users.tags) ORDER BY tag", AS_WRITTEN),
    ("sqlite", "SELECT j.key, j.value FROM users AS u, json_each(u.attrs) AS j WHERE u.uid = 1 ORDER BY j.key",
     [("x", "1"), ("y", "2")]),
    ("sqlite", "SELECT COUNT(*) AS n FROM users, json_tree(users.attrs) WHERE type = 'text'", [(3,)]),
    ("postgres", "SELECT g::date AS d FROM generate_series('2024-01-01'::date, '2024-01-03'::date, "
                 "interval '1 day') g ORDER BY d", [("2024-01-01",), ("2024-01-02",), ("2024-01-03",)]),
    ("postgres", "SELECT DISTINCT g FROM generate_series(1, 3) g ORDER BY g", [(1,), (2,), (3,)]),
    ("postgres", "SELECT j ->> 'lvl' AS lvl FROM users, jsonb_array_elements(users.tags) AS j ORDER BY lvl",
     [("a",), ("b",), ("c",)]),
    ("postgres", "SELECT u.name, j.value ->> 'lvl' AS lvl FROM users u, jsonb_array_elements(u.tags) j "
                 "ORDER BY lvl", AS_WRITTEN),
    ("postgres", "SELECT key, value FROM users, jsonb_each_text(users.attrs) ORDER BY key",
     [("x", "1"), ("y", "2"), ("z", "3")]),
    ("postgres", "SELECT n FROM users, unnest(ARRAY[users.uid * 10]) AS n ORDER BY n", AS_WRITTEN),
    # CTEs that name later ones: RECURSIVE on every database, and always on SQLite.
    ("postgres", "WITH RECURSIVE a AS (SELECT uid FROM b), b AS (SELECT uid FROM users) SELECT uid FROM a ORDER BY uid",
     [(1,), (2,)]),
    ("postgres", "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < (SELECT MAX(uid) FROM b)), "
                 "b AS (SELECT uid FROM users) SELECT n FROM t ORDER BY n", [(1,), (2,)]),
    ("mariadb", "WITH RECURSIVE a AS (SELECT uid FROM b), b AS (SELECT uid FROM users) SELECT uid FROM a ORDER BY uid",
     [(1,), (2,)]),
    ("sqlite", "WITH a AS (SELECT uid FROM b), b AS (SELECT uid FROM users) SELECT uid FROM a ORDER BY uid",
     [(1,), (2,)]),
    # Functions sqlglot parses into classes of its own.
    ("mariadb", "SELECT ANY_VALUE(name) AS n FROM users GROUP BY uid ORDER BY n", [("ann",), ("bob",)]),
    ("mariadb", "SELECT ELT(uid, 'one', 'two') AS e FROM users ORDER BY uid", AS_WRITTEN),
    ("mariadb", "SELECT JSON_KEYS(attrs) AS k FROM users ORDER BY uid", AS_WRITTEN),
    ("mariadb", "SELECT CONCAT('[', SPACE(2), ']') AS s FROM users WHERE uid = 1", AS_WRITTEN),
    ("mariadb", "SELECT name FROM users WHERE name SOUNDS LIKE 'an' ORDER BY name", AS_WRITTEN),
    ("postgres", "SELECT make_timestamp(2024, 1, 2, 3, 4, 5) AS t", AS_WRITTEN),
    # MySQL syntax sqlglot would regenerate into something MariaDB reads otherwise or lacks.
    ("mariadb", "SELECT 1 AS one FROM DUAL", AS_WRITTEN),
    ("mariadb", "SELECT 1 AS one FROM DUAL WHERE 1 = 1", AS_WRITTEN),
    ("mariadb", "SELECT name FROM users WHERE name REGEXP '^a' ORDER BY name", AS_WRITTEN),
    ("mariadb", "SELECT name FROM users WHERE name NOT RLIKE '^a' AND (name REGEXP 'b') = 1", AS_WRITTEN),
    ("mariadb", "SELECT name FROM users WHERE REGEXP_LIKE(name, '^b')", [("bob",)]),
    # A byte-order mark before the query (editors save one).
    ("sqlite", "\ufeffSELECT name FROM users ORDER BY name", [("ann",), ("bob",)]),
    ("postgres", "\ufeffSELECT name FROM users ORDER BY name", [("ann",), ("bob",)]),
    ("mariadb", "\ufeffSELECT name FROM users ORDER BY name", [("ann",), ("bob",)]),
]


def _manifest(url: str, engine: str, schema: str) -> Manifest:
    return load_manifest_text(manifest_text("sql_accepted", url=url, dialect=DIALECT[engine], schema=schema))[0]


#: Per database server: the session fixture that starts it and the schema the tables live in.
SERVERS = {"postgres": ("pg_server", "public"), "mariadb": ("mariadb_server", "accepted_sql")}


#: Database → the URL its data was loaded under: pytest may set a module fixture up more than
#: once when parameters interleave, and each server database is created once per session.
_LOADED: dict[str, str] = {}


def _load_sqlite(directory: Path) -> str:
    path = directory / "accepted.db"
    with sqlite3.connect(path) as db:
        db.execute(DDL["sqlite"])
        db.executemany("INSERT INTO users VALUES (?, ?, ?, ?)", ROWS)
    return f"sqlite:///{path}"


def _load_server(server: Any, engine: str) -> str:
    database = SERVERS[engine][1] if engine == "mariadb" else "accepted_sql"
    server.create_database(database)
    insert = "INSERT INTO users VALUES (%s, %s, %s, %s)"
    server.execute([(DDL[engine], None), *((insert, row) for row in ROWS)], database=database)
    return server.create_readonly_user(database, "accepted_reader", "acc-pw")


@pytest.fixture(scope="module")
def source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlExecutor]:
    """The database named by the case, loaded once per module, behind the production executor."""
    engine: str = request.param
    if engine == "sqlite":
        schema = "main"
        url = _LOADED.get(engine) or _LOADED.setdefault(engine, _load_sqlite(tmp_path_factory.mktemp("accepted")))
    else:
        fixture, schema = SERVERS[engine]
        server = request.getfixturevalue(fixture)
        url = _LOADED.get(engine) or _LOADED.setdefault(engine, _load_server(server, engine))
    executor = SqlExecutor(_manifest(url, engine, schema))
    yield executor
    executor.close()


def _as_written(executor: SqlExecutor, query: str) -> list[tuple[Any, ...]]:
    """The query's own text, run by the same executor (same session, same value conversion)."""
    return executor.fetch(SafeQuery(source="accepted", kind="sql", limit=101, max_rows=100, text=query)).rows


_MARKS = {"sqlite": (), "postgres": (pytest.mark.postgres,), "mariadb": (pytest.mark.mariadb,)}


@pytest.mark.parametrize(
    "source, query, expected",
    # Grouped by database, so each database is loaded once.
    sorted((pytest.param(e, q, x, marks=_MARKS[e], id=f"{e}-{i}") for i, (e, q, x) in enumerate(CASES)),
           key=lambda p: p.values[0]),
    indirect=["source"],
)
def test_accepted_and_runs_as_meant(source: SqlExecutor, query: str, expected: list[tuple[Any, ...]] | None) -> None:
    safe = check_sql(query, source.manifest)
    rows = [tuple(row) for row in source.fetch(safe).rows]
    wanted = expected if expected is not None else [tuple(row) for row in _as_written(source, query)]
    assert rows == wanted, safe.text
    assert rows, "a case whose result is empty proves little"
