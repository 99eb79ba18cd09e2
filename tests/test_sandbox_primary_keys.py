"""Grouping by a primary key still runs on PostgreSQL once every table is projected.

PostgreSQL lets ``SELECT c.id, c.name, count(*) … GROUP BY c.id`` read ``c.name`` because
``id`` is the table's primary key; through the derived table of declared columns the sandbox
reads every table with (``confine.py``) it no longer sees the key. The sandbox then adds the
dependent columns to the GROUP BY (``keys.py``). Each query below runs on real PostgreSQL twice:
as written, on the tables themselves, and through ``check_sql`` and the SQL executor. The rows
must be the same — or, where the rewrite does not apply, the outcome (an error both times).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from corpora import load_defog, quiet_sqlglot
from multistep_support import load_postgres
from structq.capabilities import Manifest, load_manifest_text
from structq.executors.sql import SqlExecutor
from structq.safety import check_sql
from structq.safety.sql import memo

MANIFEST = """
source: shop
kind: sql
url: {url}
dialect: postgres
tables:
  - name: customers
    columns:
      - {{name: id, type: integer, primary_key: true}}
      - {{name: name, type: text}}
      - {{name: city, type: text}}
  - name: orders
    columns:
      - {{name: id, type: integer, primary_key: true}}
      - {{name: customer_id, type: integer, references: customers.id}}
      - {{name: total, type: integer}}
  - name: lines
    columns:
      - {{name: order_id, type: integer, primary_key: true}}
      - {{name: line_no, type: integer, primary_key: true}}
      - {{name: product, type: text}}
"""

SETUP = [
    "CREATE TABLE customers (id integer PRIMARY KEY, name text, city text, secret text)",
    "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, total integer)",
    "CREATE TABLE lines (order_id integer, line_no integer, product text, PRIMARY KEY (order_id, line_no))",
    "INSERT INTO customers VALUES (1, 'Ann', 'Oslo', 's1'), (2, 'Bob', 'Rome', 's2'), (3, 'Cy', 'Oslo', 's3'), "
    "(4, 'Ann', 'Rome', 's4')",
    "INSERT INTO orders VALUES (10, 1, 5), (11, 1, 7), (12, 2, 3), (13, 4, 9), (14, 4, 1), (15, 4, 2)",
    "INSERT INTO lines VALUES (10, 1, 'tea'), (10, 2, 'cup'), (11, 1, 'tea'), (13, 1, 'pot')",
]

#: Queries PostgreSQL runs on the tables as written, and whose rows must not change.
GROUPED_BY_KEY = [
    "SELECT c.id, c.name, count(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY c.id",
    "SELECT customers.id, name, city, sum(orders.total) AS spent FROM customers LEFT JOIN orders "
    "ON orders.customer_id = customers.id GROUP BY customers.id ORDER BY spent DESC NULLS LAST, name",
    "SELECT c.id, count(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id "
    "HAVING c.city = 'Rome' ORDER BY c.name, c.id",
    "SELECT c.name, max(o.total) AS top FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY 1, c.id ORDER BY 1, 2",
    "SELECT c.id, upper(c.name) || '/' || c.city AS label, rank() OVER (ORDER BY c.city, c.id) AS r "
    "FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY c.id",
    "SELECT c.id, max(c.name) AS name, count(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.id "
    "GROUP BY c.id ORDER BY c.id",
    "SELECT c.id, (SELECT count(*) FROM customers d WHERE d.name = c.name) AS namesakes, count(*) AS n "
    "FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY c.id",
    "WITH spend AS (SELECT c.id, c.name, c.city, sum(o.total) AS spent FROM customers c JOIN orders o "
    "ON o.customer_id = c.id GROUP BY c.id) SELECT city, count(*) AS n, max(spent) AS top FROM spend GROUP BY city ORDER BY city",
    "SELECT o.id, o.total, c.name, count(l.line_no) AS lines FROM orders o JOIN customers c ON c.id = o.customer_id "
    "LEFT JOIN lines l ON l.order_id = o.id GROUP BY o.id, c.id ORDER BY o.id",
    "SELECT l.order_id, l.line_no, l.product, count(o.id) AS n FROM lines l JOIN orders o ON o.id = l.order_id "
    "GROUP BY l.order_id, l.line_no ORDER BY 1, 2",
    "SELECT DISTINCT ON (c.city) c.city, c.id, c.name, count(*) AS n FROM customers c JOIN orders o "
    "ON o.customer_id = c.id GROUP BY c.id ORDER BY c.city, n DESC, c.id",
]

#: Queries that fail on the tables as written, and must fail the same way once checked: the
#: rewrite adds nothing that PostgreSQL would not have accepted on its own.
NOT_GROUPED_BY_KEY = [
    "SELECT l.order_id, l.product, count(*) AS n FROM lines l GROUP BY l.order_id ORDER BY 1",  # part of a key
    "SELECT c.name, count(*) AS n FROM customers c GROUP BY c.id + 0 ORDER BY 1",  # an expression of it
    "SELECT c.id, c.name, count(*) AS n FROM customers c GROUP BY ROLLUP (c.id) ORDER BY 1",
]


@pytest.fixture(scope="module")
def shop(pg_server: Any) -> Iterator[tuple[Manifest, Any]]:
    url = pg_server.create_database("pk_groups")
    pg_server.execute([(statement, None) for statement in SETUP], database="pk_groups")
    engine = create_engine(url)
    manifest = load_manifest_text(MANIFEST.format(url=url))[0]
    yield manifest, engine
    engine.dispose()


def _outcome(run: Any) -> object:
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - a database error is an outcome to compare
        return ("error", "must appear in the GROUP BY clause" in str(exc))


def _as_written(engine: Any, sql: str) -> object:
    def run() -> list[tuple[Any, ...]]:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql))]
    return _outcome(run)


def _checked(manifest: Manifest, sql: str) -> object:
    memo.clear()
    safe = check_sql(sql, manifest)
    executor = SqlExecutor(manifest)
    try:
        return _outcome(lambda: [tuple(row) for row in executor.fetch(safe).rows])
    finally:
        executor.close()


@pytest.mark.parametrize("sql", GROUPED_BY_KEY)
def test_grouping_by_a_key_keeps_its_rows(shop: tuple[Manifest, Any], sql: str) -> None:
    manifest, engine = shop
    written = _as_written(engine, sql)
    assert isinstance(written, list) and written, written
    assert _checked(manifest, sql) == written


@pytest.mark.parametrize("sql", NOT_GROUPED_BY_KEY)
def test_without_the_whole_key_nothing_is_added(shop: tuple[Manifest, Any], sql: str) -> None:
    manifest, engine = shop
    assert _as_written(engine, sql) == ("error", True)
    assert _checked(manifest, sql) == ("error", True)


def test_the_dependent_columns_are_appended_on_postgres_only(shop: tuple[Manifest, Any]) -> None:
    manifest, _ = shop
    sql = ("SELECT c.id, c.name, max(c.city) AS m, count(*) AS n FROM customers c JOIN orders o "
           "ON o.customer_id = c.id GROUP BY c.id HAVING c.city <> 'x' ORDER BY c.name")
    memo.clear()
    assert "GROUP BY c.id, c.name, c.city HAVING" in check_sql(sql, manifest).text
    for dialect in ("sqlite", "mysql"):
        other = load_manifest_text(MANIFEST.format(url="sqlite://").replace("dialect: postgres", f"dialect: {dialect}"))[0]
        memo.clear()
        assert "GROUP BY c.id HAVING" in check_sql(sql, other).text


#: The defog gold queries that group by ``salespersons.id`` and select its names
#: (``tests/test_sandbox_plans.py`` found them failing on PostgreSQL once projected).
DEFOG_ORIGINS = ("instruct_advanced_postgres.csv:20", "instruct_advanced_postgres.csv:21")


def test_the_defog_gold_queries_keep_their_rows(pg_server: Any, shared_corpora: Path) -> None:
    quiet_sqlglot()
    defog = load_defog(shared_corpora)
    queries = [q for q in defog.queries if q.origin in DEFOG_ORIGINS]
    assert {q.origin for q in queries} == set(DEFOG_ORIGINS)  # with their alternatives
    url = load_postgres(pg_server, "car_dealership", "pk_groups_defog")
    engine = create_engine(url)
    try:
        for query in queries:
            manifest = defog.manifest_for(query).model_copy(update={"url": url})
            written = _as_written(engine, query.sql)
            assert isinstance(written, list) and written, (query.origin, written)
            assert _checked(manifest, query.sql) == written, query.origin
    finally:
        engine.dispose()
