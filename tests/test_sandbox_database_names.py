"""``resolution.database_names.READINGS`` is what the databases do, asked of the real SQLite, PostgreSQL and MariaDB.

For each place a name can sit (``Place``), two probes on ``t(x, y)`` = (1, 30), (2, 20), (3, 10):

- *shadow*: an output alias named ``x`` whose value differs from the column ``x``; the rows say
  which one the database used (MariaDB's HAVING reads one or the other, by whether the column is
  grouped: ``EITHER``, shown by two probes) (an error also means it did not read the alias: every shadow probe
  is valid SQL read either way, but for a database that forbids the alias there);
- *alias only*: the alias is named ``z``, which no column is; the rows say whether the database
  falls back to the alias or fails.

Nothing here is written from what the databases are believed to do: the table in the module
must match these observations, place by place.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sandbox_support import table_engine
from sqlalchemy import text
from sqlalchemy.engine import Engine

from structq.capabilities import load_manifest_text
from structq.errors import SandboxViolation
from structq.safety import check_sql
from structq.safety.sql.resolution.database_names import ALIAS, COLUMN, EITHER, READINGS, Place

ROWS = [(1, 30), (2, 20), (3, 10)]


@dataclass(frozen=True)
class Probe:
    place: Place
    sql: str  # ``{n}``: the name (``x`` shadows a column, ``z`` does not)
    alias_rows: list[tuple[Any, ...]]  # the rows when the database reads the alias
    ordered: bool = True


PROBES = [
    Probe(Place.ORDER_TERM, "SELECT y AS {n} FROM t ORDER BY {n}", [(10,), (20,), (30,)]),
    Probe(Place.ORDER_EXPRESSION, "SELECT y AS {n} FROM t ORDER BY {n} + 0", [(10,), (20,), (30,)]),
    Probe(Place.ORDER_EXPRESSION, "SELECT y AS {n} FROM t ORDER BY CASE WHEN {n} = 10 THEN 0 ELSE 1 END, y DESC",
          [(10,), (30,), (20,)]),
    Probe(Place.WINDOW, "SELECT y AS {n}, ROW_NUMBER() OVER (ORDER BY {n}) AS r FROM t ORDER BY r",
          [(10, 1), (20, 2), (30, 3)]),
    Probe(Place.ORDER_WINDOW, "SELECT y AS {n} FROM t ORDER BY ROW_NUMBER() OVER (ORDER BY {n})", [(10,), (20,), (30,)]),
    Probe(Place.GROUP_TERM, "SELECT x % 2 AS {n}, COUNT(*) AS c FROM t GROUP BY {n}", [(0, 1), (1, 2)], ordered=False),
    Probe(Place.GROUP_EXPRESSION, "SELECT x % 2 AS {n}, COUNT(*) AS c FROM t GROUP BY {n} + 0", [(0, 1), (1, 2)],
          ordered=False),
    Probe(Place.HAVING, "SELECT x AS g, MIN(y) - MIN(y) + 30 AS {n} FROM t GROUP BY 1 HAVING {n} = 30",
          [(1, 30), (2, 30), (3, 30)], ordered=False),
    Probe(Place.HAVING, "SELECT y AS g, MAX(y) AS {n} FROM t GROUP BY y HAVING {n} = 30", [(30, 30)]),
    Probe(Place.HAVING_AGGREGATE, "SELECT x AS g, 'a' AS {n} FROM t GROUP BY 1 HAVING MAX({n}) = 'a'",
          [(1, "a"), (2, "a"), (3, "a")], ordered=False),
    Probe(Place.DISTINCT_ON, "SELECT DISTINCT ON ({n}) x % 2 AS {n} FROM t", [(0,), (1,)], ordered=False),
    Probe(Place.WHERE, "SELECT y AS {n} FROM t WHERE {n} = 10", [(10,)]),
    Probe(Place.SELECT, "SELECT y AS {n}, {n} + 0 AS w FROM t ORDER BY 2", [(10, 10), (20, 20), (30, 30)]),
]


def _rows(database: Engine, sql: str, ordered: bool) -> list[tuple[Any, ...]] | None:
    try:
        with database.connect() as connection:
            rows = [tuple(row) for row in connection.execute(text(sql))]
    except Exception:  # noqa: BLE001 - a failure is an observation
        return None
    return rows if ordered else sorted(rows)


CREATE = "CREATE TABLE t (x integer, y integer)"


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, Engine]]:
    database = table_engine(request, request.param, "database_names", CREATE, ROWS)
    yield request.param, database
    database.dispose()


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: f"{p.place.value}:{p.sql[:40]}")
def test_rules_match_the_database(target: tuple[str, Engine], probe: Probe) -> None:
    dialect, database = target
    shadow = _rows(database, probe.sql.replace("{n}", "x"), probe.ordered)
    alias_only = _rows(database, probe.sql.replace("{n}", "z"), probe.ordered)
    rule = READINGS[dialect].get(probe.place)
    if rule is None:  # a place the dialect does not have: the database refuses the syntax
        assert shadow is None and alias_only is None, (shadow, alias_only)
        return
    first, fallback = rule
    observed_first = ALIAS if shadow == probe.alias_rows else COLUMN
    if first != EITHER:
        assert observed_first == first, f"{dialect} reads the {observed_first} in {probe.sql}: {shadow}"
    if first == COLUMN:
        falls_back = alias_only == probe.alias_rows
        assert falls_back == fallback, f"{dialect} {'falls back' if falls_back else 'fails'} without a column: {alias_only}"


def _manifest(dialect: str):
    return load_manifest_text(f"""
source: probe
kind: sql
url: sqlite://
dialect: {dialect}
tables:
  - name: t
    columns:
      - {{name: x, type: integer}}
      - {{name: y, type: integer}}
""")[0]


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: f"{p.place.value}:{p.sql[:40]}")
def test_an_accepted_probe_gives_the_rows_the_database_gives(target: tuple[str, Engine], probe: Probe) -> None:
    """Whatever the sandbox accepts of the probes, rewritten, reads what the database reads in the
    text as written: the rewrite never changes which value the database uses."""
    dialect, database = target
    for name in ("x", "z"):
        sql = probe.sql.replace("{n}", name)
        written = _rows(database, sql, probe.ordered)
        if written is None:
            continue  # the database cannot run it as written (DISTINCT ON outside PostgreSQL)
        try:
            safe = check_sql(sql, _manifest(dialect))
        except SandboxViolation:
            continue
        assert _rows(database, safe.text, probe.ordered) == written, f"{sql}\n{safe.text}"  # type: ignore[arg-type]


def test_mariadb_having_reads_a_grouped_column_else_the_alias(request: pytest.FixtureRequest) -> None:
    """``EITHER``: of the two HAVING probes, MariaDB reads the column in one (it is grouped)
    and the alias in the other."""
    database = table_engine(request, "mysql", "database_names_having", CREATE, ROWS)
    try:
        having = [p for p in PROBES if p.place is Place.HAVING]
        observed = {ALIAS if _rows(database, p.sql.replace("{n}", "x"), p.ordered) == p.alias_rows else COLUMN
                    for p in having}
    finally:
        database.dispose()
    assert READINGS["mysql"][Place.HAVING][0] == EITHER and observed == {ALIAS, COLUMN}
