"""Golden files for the sandbox's rewrites (``tests/fixtures/sandbox/*.sql``).

In the style of sqlglot's ``tests/fixtures/optimizer``: a ``-- dialect:`` header, then cases of
``-- title`` / input / optional ``-- by hand`` / ``-- expected`` / output, separated by blank
lines. On SQLite the test also runs the input — or its ``-- by hand`` version, where the row
filter is written out — and the rewritten output on a real in-memory database and compares
the rows (sqlglot's ``check_file`` does the same). The PostgreSQL and MySQL outputs run on
the real servers, on the same rows loaded into the schema the manifest declares (every table
is written qualified with it), and must give the rows the same query gives on SQLite.

``STRUCTQ_UPDATE_GOLDEN=1 pytest tests/test_sandbox_golden.py`` rewrites the expected blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import bindparam, text

from golden_support import UPDATE, blocks, expected_outcome, rewrite
from sandbox_support import FIXTURES, PARAMS, VARS, database_engine, manifest
from structq.safety import check_sql


@dataclass
class Case:
    file: Path
    dialect: str
    title: str
    query: str
    by_hand: str | None
    expected: str


def _cases(path: Path) -> list[Case]:
    dialect = re.search(r"^-- dialect: (\w+)", path.read_text(encoding="utf-8"), re.M).group(1)  # type: ignore[union-attr]
    return [Case(path, dialect, block.title, block.sections["query"], block.sections.get("by hand") or None,
                 block.sections["expected"]) for block in blocks(path, markers=("by hand", "expected"))]


FILES = sorted(FIXTURES.glob("rewrites_*.sql"))  # the per-rule files: test_sandbox_rules_golden.py
CASES = [case for path in FILES for case in _cases(path)]


def _rewrite(case: Case) -> str:
    return check_sql(case.query, manifest(case.dialect), params=PARAMS, vars=VARS).text  # type: ignore[return-value]


def _update_goldens() -> None:
    for path in FILES:
        rewrite(path, ((case.title, expected_outcome(_rewrite(case))) for case in _cases(path)))


@pytest.fixture(scope="module")
def expected() -> dict[tuple[Path, str], str]:
    """Each case's expected block as the files hold it when the tests run — rewritten first
    under ``STRUCTQ_UPDATE_GOLDEN=1``. Never at import: collecting the tests (``--collect-only``,
    a run of another module) must not write into the repository."""
    if UPDATE:
        _update_goldens()
    return {(case.file, case.title): case.expected for path in FILES for case in _cases(path)}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.file.stem}: {c.title}")
def test_rewrite_matches_golden(case: Case, expected: dict[tuple[Path, str], str]) -> None:
    assert _rewrite(case) == expected[(case.file, case.title)]


@pytest.fixture(scope="module")
def engine():
    engine = database_engine()
    yield engine
    engine.dispose()


@pytest.mark.parametrize("case", [c for c in CASES if c.dialect == "sqlite"], ids=lambda c: c.title)
def test_rewrite_gives_the_same_rows(case: Case, engine) -> None:
    result = check_sql(case.query, manifest("sqlite"), params=PARAMS, vars=VARS)
    statement = text(result.text)  # type: ignore[arg-type]
    if result.expanding:
        statement = statement.bindparams(*(bindparam(n, expanding=True) for n in result.expanding))
    with engine.connect() as connection:
        rewritten = [tuple(r) for r in connection.execute(statement, result.params)]
        reference = [tuple(r) for r in connection.exec_driver_sql(case.by_hand or case.query)]
    assert rewritten == reference
    assert rewritten, "a golden case whose rows are all empty proves little"


def _rows(engine, result) -> list[tuple[str, ...]]:
    """The rows of a checked query, as sorted text (databases differ in order and value types)."""
    statement = text(result.text)  # type: ignore[arg-type]
    if result.expanding:
        statement = statement.bindparams(*(bindparam(n, expanding=True) for n in result.expanding))
    with engine.connect() as connection:
        return sorted(tuple(map(str, row)) for row in connection.execute(statement, result.params))


@pytest.mark.parametrize("case", [c for c in CASES if c.dialect != "sqlite"], ids=lambda c: f"{c.dialect}: {c.title}")
def test_rewrite_runs_on_its_database(case: Case, engine, request: pytest.FixtureRequest) -> None:
    from sqlalchemy import create_engine

    _, reader = request.getfixturevalue("pg_hr" if case.dialect == "postgres" else "mariadb_hr")
    server = create_engine(reader)
    try:
        rewritten = _rows(server, check_sql(case.query, manifest(case.dialect), params=PARAMS, vars=VARS))
    finally:
        server.dispose()
    # SQLite has no schema hr: the reference reads the same tables unqualified.
    unqualified = re.sub(r"(?i)\bhr\.", "", case.query)
    reference = _rows(engine, check_sql(unqualified, manifest("sqlite"), params=PARAMS, vars=VARS))
    assert rewritten == reference
    assert rewritten, "a golden case whose rows are all empty proves little"
