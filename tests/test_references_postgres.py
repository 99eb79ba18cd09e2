"""100,000-value references on real PostgreSQL, of every value type: the rows are exactly the
rows of the equivalent subquery, NULLs and duplicates included.

The engine binds ``col IN (<ref>)`` on PostgreSQL as ``col = ANY(:array)`` (see
``executors/sql/postgresql.py`` for why that form): ints go as ready-made array text, other
values through psycopg. A step's values come back JSON-safe — a date as ISO text — so a
date column is compared with text values here, as it is in every plan that passes dates on.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet
from structq.capabilities.loader import load_manifest_text

ROWS = 100_000

#: Both tables have the same columns: ``picks`` holds the values passed on, ``items`` the rows
#: they select.
COLUMNS = "".join(f"      - {{name: {name}, type: {kind}}}\n" for name, kind in
                  [("id", "integer"), ("n", "integer"), ("big", "integer"), ("code", "text"), ("day", "date")])
MANIFEST = ("source: items\nkind: sql\nurl: {url}\n"
            "limits: {{max_rows: 200000, max_intermediate_rows: 200000, timeout_s: 60}}\ntables:\n"
            + "".join(f"  - name: {table}\n    columns:\n" + COLUMNS.replace("{", "{{").replace("}", "}}")
                      for table in ("items", "picks")))


@pytest.fixture(scope="module")
def items_url(pg_server: Any) -> Iterator[str]:
    """``items``: 120,000 rows; ``picks``: 100,000 rows whose values repeat (duplicates), hold
    NULLs, and partly miss ``items`` — for ints, 64-bit ints, text and dates."""
    from sqlalchemy import create_engine, text

    url = pg_server.create_database("references_pg")
    admin = create_engine(url)
    columns = "(id integer, n integer, big bigint, code text, day date)"
    try:
        with admin.begin() as connection:
            connection.execute(text(f"CREATE TABLE items {columns}"))
            connection.execute(text(f"CREATE TABLE picks {columns}"))
            connection.execute(text(
                "INSERT INTO items SELECT g, g % 50000, g::bigint * 100000, 'K' || (g % 70000), "
                "DATE '2020-01-01' + (g % 3000) FROM generate_series(1, 120000) AS g"))
            connection.execute(text(
                "INSERT INTO picks SELECT g, CASE WHEN g % 997 = 0 THEN NULL ELSE (g * 7) % 90000 END, "
                "CASE WHEN g % 991 = 0 THEN NULL ELSE ((g * 7) % 60000)::bigint * 100000 END, "
                "CASE WHEN g % 983 = 0 THEN NULL ELSE 'K' || ((g * 3) % 95000) END, "
                "CASE WHEN g % 977 = 0 THEN NULL ELSE DATE '2019-06-01' + (g % 1500) END "
                f"FROM generate_series(1, {ROWS}) AS g"))
            connection.execute(text("ANALYZE"))
        yield url
    finally:
        admin.dispose()


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    from sqlalchemy import create_engine, text

    plain = create_engine(url)
    try:
        with plain.connect() as connection:
            return [tuple(_plain(v) for v in row) for row in connection.execute(text(query))]
    finally:
        plain.dispose()


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


@pytest.mark.parametrize("column", ["n", "big", "code", "day"])
@pytest.mark.parametrize("negated, nulls", [(False, True), (True, True), (True, False)],
                         ids=["IN", "NOT IN, a NULL in the list", "NOT IN, no NULL"])
def test_hundred_thousand_values_of_each_type_give_the_subquery_rows(items_url: str, column: str, negated: bool,
                                                                      nulls: bool) -> None:
    manifest, _ = load_manifest_text(MANIFEST.format(url=items_url), "<items>")
    operator = "NOT IN" if negated else "IN"
    picks = f"SELECT {column} FROM picks" + ("" if nulls else f" WHERE {column} IS NOT NULL")
    plan = Plan.parse({"steps": [
        {"output_key": "picked", "source": "items", "query": picks},
        {"output_key": "found", "source": "items",
         "query": f"SELECT id, {column} FROM items WHERE {column} {operator} (<picked>)"},
    ]})
    with Engine(CapabilitySet([manifest])) as engine:
        result = engine.run(plan)
    values = [row[0] for row in result.steps["picked"].rows]
    assert len(values) > 99_000 and (None in values) is nulls and len(set(values)) < len(values)  # duplicates
    want = _rows(items_url, f"SELECT id, {column} FROM items WHERE {column} {operator} ({picks})")
    assert collections.Counter(result.final.rows) == collections.Counter(want)
    # NOT IN over a list holding NULL selects nothing, as over the subquery; otherwise rows.
    assert bool(want) is not (negated and nulls)
