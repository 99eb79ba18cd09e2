"""Legitimate SQL that the sandbox once refused or broke is accepted and runs right on the engine.

Each query goes through ``check_sql`` and then ``SqlExecutor`` against a real SQLite, PostgreSQL
or MariaDB, under a SELECT-only account, with the manifest declaring the schema the tables live
in (so every table is also written qualified). The rows must equal those of the query as
written, run directly — or, where the engine cannot run the text as written (MariaDB has no
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

from structq.capabilities import Manifest, load_manifest_text
from structq.executors.sql import SqlExecutor
from structq.safety import SafeQuery, check_sql

MANIFEST = """
source: accepted
kind: sql
url: {url}
dialect: {dialect}
schema: {schema}
limits: {{max_rows: 100}}
tables:
  - name: users
    columns:
      - {{name: uid, type: integer}}
      - {{name: name, type: text}}
      - {{name: tags, type: json}}
      - {{name: attrs, type: json}}
"""

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

#: Compare with the query as written, run directly on the same engine.
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
    # CTEs that name later ones: RECURSIVE on every engine, and always on SQLite.
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
    return load_manifest_text(MANIFEST.format(url=url, dialect=DIALECT[engine], schema=schema))[0]


@pytest.fixture(scope="module")
def sqlite_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlExecutor]:
    path: Path = tmp_path_factory.mktemp("accepted") / "accepted.db"
    with sqlite3.connect(path) as db:
        db.execute(DDL["sqlite"])
        db.executemany("INSERT INTO users VALUES (?, ?, ?, ?)", ROWS)
    executor = SqlExecutor(_manifest(f"sqlite:///{path}", "sqlite", "main"))
    yield executor
    executor.close()


def _server_source(server: Any, engine: str, schema: str) -> Iterator[SqlExecutor]:
    database = "accepted_sql"
    server.create_database(database)
    placeholders = "%s, %s, %s, %s"
    server.execute([(DDL[engine], None), *((f"INSERT INTO users VALUES ({placeholders})", row) for row in ROWS)],
                   database=database)
    reader = server.create_readonly_user(database, "accepted_reader", "acc-pw")
    executor = SqlExecutor(_manifest(reader, engine, schema))
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def postgres_source(pg_server: Any) -> Iterator[SqlExecutor]:
    yield from _server_source(pg_server, "postgres", "public")


@pytest.fixture(scope="module")
def mariadb_source(mariadb_server: Any) -> Iterator[SqlExecutor]:
    yield from _server_source(mariadb_server, "mariadb", "accepted_sql")


def _as_written(executor: SqlExecutor, query: str) -> list[tuple[Any, ...]]:
    """The query's own text, run by the same executor (same session, same value conversion)."""
    return executor.run(SafeQuery(source="accepted", kind="sql", limit=101, max_rows=100, text=query)).rows


@pytest.mark.parametrize("engine, query, expected", CASES, ids=[f"{e}-{i}" for i, (e, _, _) in enumerate(CASES)])
def test_accepted_and_runs_as_meant(request: pytest.FixtureRequest, engine: str, query: str,
                                    expected: list[tuple[Any, ...]] | None) -> None:
    executor: SqlExecutor = request.getfixturevalue(f"{engine}_source")
    safe = check_sql(query, executor.manifest)
    rows = [tuple(row) for row in executor.run(safe).rows]
    wanted = expected if expected is not None else [tuple(row) for row in _as_written(executor, query)]
    assert rows == wanted, safe.text
    assert rows, "a case whose result is empty proves little"
