"""Sandbox rewrites run on real PostgreSQL and MariaDB servers (session fixtures on loopback).

What only a real database can show: a list reference bound as a PostgreSQL array
(``col = ANY(:ref)``) or as a SQLAlchemy expanding bind on MariaDB works against integer and
text columns, and with an empty list; and names the manifest spells in mixed case reach the
database in that spelling (quoted on PostgreSQL, case-sensitive table names on MariaDB).
Every query runs under the read-only account the README recommends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import bindparam, create_engine, text
from sqlalchemy.engine import Engine
from manifest_support import manifest_text

from structq.capabilities import Manifest, load_manifest_text
from structq.errors import SandboxViolation
from structq.safety import SafeQuery, check_sql


SETUP = {
    "postgres": [
        'CREATE TABLE items (id integer, label text)',
        "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        'CREATE TABLE "Patient" ("ID" integer, "First Name" text)',
        "INSERT INTO \"Patient\" VALUES (1, 'Ann'), (2, 'Bob')",
    ],
    "mysql": [
        "CREATE TABLE items (id integer, label text)",
        "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "CREATE TABLE `Patient` (`ID` integer, `First Name` text)",
        "INSERT INTO `Patient` VALUES (1, 'Ann'), (2, 'Bob')",
    ],
}


def _prepare(server: Any, dialect: str) -> tuple[Manifest, Engine]:
    server.create_database("sandbox_engines")
    server.execute([(statement, None) for statement in SETUP[dialect]], database="sandbox_engines")
    url = server.create_readonly_user("sandbox_engines", "sandbox_reader", "reader-pw")
    manifest = load_manifest_text(manifest_text("sandbox_engines", url=url, dialect=dialect))[0]
    return manifest, create_engine(url)


@pytest.fixture(scope="module", params=["postgres", "mysql"])
def engine_and_manifest(request: pytest.FixtureRequest) -> Iterator[tuple[Manifest, Engine]]:
    server = request.getfixturevalue("pg_server" if request.param == "postgres" else "mariadb_server")
    manifest, engine = _prepare(server, request.param)
    yield manifest, engine
    engine.dispose()


def run(engine: Engine, result: SafeQuery) -> list[tuple]:
    statement = text(result.text)  # type: ignore[arg-type]
    if result.expanding:
        statement = statement.bindparams(*(bindparam(name, expanding=True) for name in result.expanding))
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(statement, result.params)]


@pytest.mark.parametrize(
    "column,values,expected",
    [
        ("id", [1, 3], [(1,), (3,)]),
        ("id", [], []),
        ("label", ["a", "c"], [(1,), (3,)]),
        ("label", [], []),
        ("label", ["x'); DROP TABLE items; --"], []),
    ],
)
def test_list_reference_in(engine_and_manifest, column: str, values: list, expected: list) -> None:
    manifest, engine = engine_and_manifest
    result = check_sql(f"SELECT id FROM items WHERE {column} IN (<picked>) ORDER BY id", manifest,
                       params={"picked": values})
    assert run(engine, result) == expected


@pytest.mark.parametrize("column,values,expected", [("id", [2], [(1,), (3,)]), ("id", [], [(1,), (2,), (3,)]),
                                                     ("label", [], [(1,), (2,), (3,)])])
def test_list_reference_not_in(engine_and_manifest, column: str, values: list, expected: list) -> None:
    manifest, engine = engine_and_manifest
    result = check_sql(f"SELECT id FROM items WHERE {column} NOT IN (<picked>) ORDER BY id", manifest,
                       params={"picked": values})
    assert run(engine, result) == expected


def test_list_reference_of_5000_values(engine_and_manifest) -> None:
    manifest, engine = engine_and_manifest
    result = check_sql("SELECT COUNT(*) FROM items WHERE id IN (<picked>)", manifest,
                       params={"picked": list(range(3, 5003))})
    assert run(engine, result) == [(1,)]


def test_mixed_case_table_reaches_the_database_in_manifest_spelling(engine_and_manifest) -> None:
    manifest, engine = engine_and_manifest
    quote = '"' if manifest.sql_dialect == "postgres" else "`"
    query = f"SELECT {quote}First Name{quote} FROM patient ORDER BY 1"
    assert run(engine, check_sql(query, manifest)) == [("Ann",), ("Bob",)]
    assert run(engine, check_sql("SELECT * FROM PATIENT p ORDER BY 1", manifest)) == [(1, "Ann"), (2, "Bob")]


def test_column_names_in_any_case_reach_the_database_in_manifest_spelling(engine_and_manifest) -> None:
    # PostgreSQL alone would fold the unquoted ID to "id" and fail; the sandbox writes "ID"
    manifest, engine = engine_and_manifest
    result = check_sql("SELECT id FROM patient WHERE Id = 2", manifest)
    assert run(engine, result) == [(2,)]
    assert result.columns == ("Patient.ID",)


def test_undeclared_names_stay_refused_in_any_case(engine_and_manifest) -> None:
    manifest, _ = engine_and_manifest
    with pytest.raises(SandboxViolation) as info:
        check_sql("SELECT Secret FROM patient", manifest)
    assert info.value.code == "unknown_column"
