"""The SQL shown as what ran writes each output alias as the query wrote it.

The sandbox matches names without regard to case, and used to write the query that runs with
every identifier lower-cased: ``SELECT CustomerId AS CustomerId`` ran, and was shown in the
CLI, the page and the audit log, as ``customer.CustomerId AS customerid``. Aliases are now
written back in their written case — bare if written bare, quoted if written quoted — while
the result columns keep the names they had (``SafeQuery.names``). Each query runs through
``check_sql`` and the SQL executor on SQLite, PostgreSQL and MariaDB and must return the same
rows under the same names on each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from structq.capabilities import Manifest, load_manifest_text
from structq.executors.sql import SqlExecutor
from structq.safety import check_sql
from structq.safety.sql import memo

MANIFEST = """
source: crm
kind: sql
url: {url}
dialect: {dialect}
tables:
  - name: customer
    columns:
      - {{name: CustomerId, type: integer}}
      - {{name: name, type: text}}
"""

ROWS = [(1, "Ann"), (2, "Bob"), (3, "Ann")]

#: (query with ``"`` for the dialect's identifier quote, what the text that runs must hold,
#: the result's column names — the ones the query had before aliases kept their case —, rows).
CASES = [
    ("SELECT CustomerId AS CustomerId FROM customer ORDER BY 1", ["AS CustomerId"], ("CustomerId",), [(1,), (2,), (3,)]),
    ('SELECT c.CustomerId AS "CustId", name AS Nm, count(*) AS Total FROM customer c GROUP BY 1, 2 ORDER BY Total, c.CustomerId + 0',
     ['AS "CustId"', "AS Nm", "AS Total", "ORDER BY Total"], ("CustId", "Nm", "Total"),
     [(1, "Ann", 1), (2, "Bob", 1), (3, "Ann", 1)]),
    ('SELECT name AS "Nm", count(*) AS n FROM customer GROUP BY "Nm" ORDER BY "Nm"', ['AS "Nm"', 'ORDER BY "Nm"'],
     ("Nm", "n"), [("Ann", 2), ("Bob", 1)]),
    ("SELECT t.Cid FROM (SELECT CustomerId AS Cid FROM customer) AS t ORDER BY t.Cid", ["AS Cid", "ORDER BY t.Cid"],
     ("Cid",), [(1,), (2,), (3,)]),
    ("SELECT * FROM (SELECT CustomerId AS Cid, upper(name) AS BigName FROM customer) AS t ORDER BY Cid",
     ["AS Cid", "AS BigName"], ("Cid", "BigName"), [(1, "ANN"), (2, "BOB"), (3, "ANN")]),
]

#: PostgreSQL: a quoted alias its references do not spell alike keeps the lower case it was
#: matched in (each reference then still finds it); a bare one folds, whatever its case.
POSTGRES_CASES = [
    ('SELECT name AS "Nm" FROM customer ORDER BY nm, 1', ['AS "nm"'], ("Nm",), [("Ann",), ("Ann",), ("Bob",)]),
    ('SELECT name AS NaMe FROM customer ORDER BY "name", 1', ["AS NaMe"], ("NaMe",), [("Ann",), ("Ann",), ("Bob",)]),
]


def _quoted(dialect: str, sql: str) -> str:
    return sql.replace('"', "`") if dialect == "mysql" else sql


def _crm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, dialect: str,
         database: str) -> tuple[str, Manifest, Any]:
    """The table on the database of ``dialect`` (the new database ``database`` of a server)."""
    create = _quoted(dialect, 'CREATE TABLE customer ("CustomerId" integer, name varchar(20))')
    if dialect == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp(database)) / 'crm.db'}"
        engine = create_engine(url)
        with engine.begin() as connection:
            connection.execute(text(create))
            connection.execute(text("INSERT INTO customer VALUES (:i, :n)"), [{"i": i, "n": n} for i, n in ROWS])
    else:
        server = request.getfixturevalue("pg_server" if dialect == "postgres" else "mariadb_server")
        url = server.create_database(database)
        server.execute([(create, None)] + [("INSERT INTO customer VALUES (%s, %s)", row) for row in ROWS],
                       database=database)
        engine = create_engine(url)
    return dialect, load_manifest_text(MANIFEST.format(url=url, dialect=dialect))[0], engine


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def crm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Manifest, Any]]:
    found = _crm(request, tmp_path_factory, request.param, "alias_case")
    yield found
    found[2].dispose()


@pytest.fixture(scope="module")
def pg_crm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Manifest, Any]]:
    found = _crm(request, tmp_path_factory, "postgres", "alias_case_pg")
    yield found
    found[2].dispose()


def _check(crm: tuple[str, Manifest, Any], sql: str, holds: list[str], names: tuple[str, ...],
           rows: list[tuple[Any, ...]]) -> None:
    dialect, manifest, _ = crm
    memo.clear()
    safe = check_sql(_quoted(dialect, sql), manifest)
    executor = SqlExecutor(manifest)
    try:
        result = executor.fetch(safe)
    finally:
        executor.close()
    assert (result.columns, result.rows) == (names, rows)
    for part in holds:
        assert _quoted(dialect, part) in safe.text, safe.text


@pytest.mark.parametrize(("sql", "holds", "names", "rows"), CASES)
def test_aliases_are_written_as_the_query_wrote_them(crm: tuple[str, Manifest, Any], sql: str, holds: list[str],
                                                       names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    _check(crm, sql, holds, names, rows)


@pytest.mark.parametrize(("sql", "holds", "names", "rows"), POSTGRES_CASES)
def test_postgres_keeps_what_its_references_find(pg_crm: tuple[str, Manifest, Any], sql: str, holds: list[str],
                                                 names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    _check(pg_crm, sql, holds, names, rows)
