"""Helpers the sandbox tests share: the test manifest per dialect and a small SQLite database
(also behind a SQLAlchemy pool, for running checked queries).

``manifest_from_columns`` (build a permissive Manifest from ``{table: [columns]}``) lives in
``bench/corpora.py`` because the benchmark needs it too; tests build theirs from YAML.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from structq.capabilities import Manifest, load_manifest_text
from structq.errors import SandboxViolation

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sandbox"
#: The SQL dialects every allow/deny table runs in.
DIALECTS = ["sqlite", "postgres", "mysql"]
#: The references' values and the row-filter variables the golden files' cases are checked with.
PARAMS = {"members": ["E1", "E3"], "top.dept_id": [2]}
VARS = {"tenant_id": 7}


@lru_cache(maxsize=None)
def manifest(dialect: str = "sqlite", *, filters: bool = True) -> Manifest:
    """The shared test manifest (``fixtures/sandbox/manifest.yaml``) for ``dialect``."""
    text = (FIXTURES / "manifest.yaml").read_text(encoding="utf-8")
    text = text.replace("url: sqlite:///hr.db", "url: sqlite:///hr.db\ndialect: " + dialect)
    if not filters:
        text = text.replace('    - {table: employees, where: "tenant_id = :tenant_id"}\n', "")
        text = text.replace("  row_filters:\n", "  row_filters: []\n")
    return load_manifest_text(text)[0]


SCHEMA = """
CREATE TABLE employees (employee_id TEXT, name TEXT, dept_id INTEGER, tenant_id INTEGER,
                        hired_at DATE, salary INTEGER);
CREATE TABLE departments (dept_id INTEGER, title TEXT, budget INTEGER);
CREATE TABLE employee_performance (employee_id TEXT, performance_grade TEXT,
                                   assessment_month DATE, id_card TEXT);
CREATE TABLE project_members (employee_id TEXT, project_name TEXT, note TEXT);
"""


def database() -> sqlite3.Connection:
    """An in-memory SQLite database with a little data, two tenants."""
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    db.executemany(
        "INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("E1", "王芳", 1, 7, "2020-01-05", 100),
            ("E2", "李雷", 1, 7, "2021-03-01", 200),
            ("E3", "张伟", 2, 7, "2022-07-15", 300),
            ("E4", "Ann", 2, 8, "2019-11-11", 400),
            ("E5", "Bob", 3, 8, "2023-02-02", 500),
        ],
    )
    db.executemany("INSERT INTO departments VALUES (?, ?, ?)", [(1, "R&D", 10), (2, "Sales", 20), (3, "Ops", 30), (4, "Empty", 0)])
    db.executemany(
        "INSERT INTO employee_performance VALUES (?, ?, ?, ?)",
        [("E1", "A", "2024-03-01", "x1"), ("E2", "B", "2024-03-01", "x2"), ("E3", "A", "2024-03-01", "x3"),
         ("E4", "A", "2024-03-01", "x4"), ("E5", "C", "2024-03-01", "x5")],
    )
    db.executemany(
        "INSERT INTO project_members VALUES (?, ?, ?)",
        [("E1", "星火", "10:30"), ("E2", "星火", "a::b"), ("E4", "星火", None), ("E3", "北斗", ":x")],
    )
    db.commit()
    return db


_INSERTS = {
    "employees": "INSERT INTO employees VALUES (%s, %s, %s, %s, %s, %s)",
    "departments": "INSERT INTO departments VALUES (%s, %s, %s)",
    "employee_performance": "INSERT INTO employee_performance VALUES (%s, %s, %s, %s)",
    "project_members": "INSERT INTO project_members VALUES (%s, %s, %s)",
}
#: Where ``load_hr`` puts the tables: a PostgreSQL database (schema ``hr`` inside), MariaDB's
#: database ``hr`` itself.
HR_DATABASE = {"postgres": "sandbox_redteam", "mysql": "hr"}


def load_hr(server: Any, dialect: str) -> tuple[str, str]:
    """``database()``'s tables and rows on a real server, where the test manifest
    (``schema: hr``) says they live — schema ``hr`` on PostgreSQL, the database ``hr`` on
    MariaDB — since the sandbox qualifies every table with it; returns (admin URL, read-only
    URL). Once per server: the session fixtures ``pg_hr`` / ``mariadb_hr`` call it."""
    name = HR_DATABASE[dialect]
    admin = server.create_database(name)
    statements: list[tuple[Any, Any]] = []
    if dialect == "postgres":
        statements += [("CREATE SCHEMA hr", None), ("SET search_path TO hr", None)]
    statements += [(s.strip(), None) for s in SCHEMA.split(";") if s.strip()]
    source = database()
    for table, insert in _INSERTS.items():
        statements += [(insert, row) for row in source.execute(f"SELECT * FROM {table}")]
    server.execute(statements, database=name)
    reader = server.create_readonly_user(name, "redteam_reader", "r3d-team")
    if dialect == "postgres":
        server.execute([("GRANT USAGE ON SCHEMA hr TO redteam_reader", None),
                        ("GRANT SELECT ON ALL TABLES IN SCHEMA hr TO redteam_reader", None)], database=name)
    return admin, reader


def database_file(path: Path) -> Path:
    """``database()`` saved as the SQLite file ``path`` (for executors, which open files)."""
    target = sqlite3.connect(path)
    database().backup(target)
    target.close()
    return path


def table_engine(request: pytest.FixtureRequest, dialect: str, database: str, create: str,
                 rows: list[tuple[Any, ...]]) -> Engine:
    """One table (``create``, then ``rows``) on the database of ``dialect``: an in-memory SQLite, or
    the new database ``database`` of the session's PostgreSQL or MariaDB server. Dispose after."""
    table = create.split()[2]
    marks = ", ".join(["%s"] * len(rows[0]))
    if dialect == "sqlite":
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.execute(create)
        db.executemany(f"INSERT INTO {table} VALUES ({marks.replace('%s', '?')})", rows)
        db.commit()
        return create_engine("sqlite://", creator=lambda: db, poolclass=StaticPool)
    server = request.getfixturevalue("pg_server" if dialect == "postgres" else "mariadb_server")
    url = server.create_database(database)
    server.execute([(create, None)] + [(f"INSERT INTO {table} VALUES ({marks})", row) for row in rows], database=database)
    return create_engine(url)


def database_engine() -> Engine:
    """``database()`` behind a SQLAlchemy pool. The in-memory data lives in that one
    connection, so the pool hands out only it (``StaticPool``); dispose the pool after."""
    db = database()
    return create_engine("sqlite://", creator=lambda: db, poolclass=StaticPool)


def in_every_dialect(rows: list[Any]) -> list[tuple[Any, ...]]:
    """The rows of a table that holds in every dialect (``query`` or ``(query, code)``) as
    ``(dialect, query, …)`` rows, one per dialect, to stand beside a table's per-dialect rows
    under one test."""
    return [(dialect, *(row if isinstance(row, tuple) else (row,))) for row in rows for dialect in DIALECTS]


def refused(check: Callable[..., object], *args: Any, code: str, **kw: Any) -> SandboxViolation:
    """``check(*args, **kw)`` raises the SandboxViolation ``code``, and it is returned.

    The one contract for every allow/deny table (SQL and DSL): a row names the rule it is about,
    and a refusal by another rule fails, because such a row could not catch a regression in its
    own rule."""
    with pytest.raises(SandboxViolation) as info:
        check(*args, **kw)
    assert info.value.code == code, f"refused by {info.value.code!r}, not {code!r}: {info.value}"
    return info.value
