"""A declared schema is the only schema: same-named tables elsewhere are never read.

With ``schema: consumer_div`` in a manifest, an unqualified ``users`` would resolve through
PostgreSQL's ``search_path`` (``"$user", public``) or MariaDB's current database (the one the
URL names). Each database here holds a decoy ``users`` where an unqualified name would land —
``public.users`` on PostgreSQL, ``users`` in the URL's database on MariaDB — with rows that
must never come back. Two guards are shown separately:

- the sandbox writes every table qualified with the declared schema, in every position
  (FROM, JOIN, subqueries, CTE bodies, set operations, a row filter's own subquery);
- the executor pins the session to the declared schema (``search_path`` / ``USE``), so even a
  text that reached it unqualified reads the declared table.

Every query runs through ``SqlExecutor`` under a SELECT-only account, as in production.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
import sqlglot
from sqlglot import exp
from manifest_support import manifest_text

from structq.capabilities import Manifest, load_manifest_text
from structq.executors.sql import SqlExecutor
from structq.errors import SandboxViolation
from structq.safety import SafeQuery, check_sql

SCHEMA = "consumer_div"
DECLARED = [(1, "declared-ann"), (2, "declared-bob")]
DECOY = [(1, "decoy-eve"), (666, "decoy-mallory")]


#: Queries that read ``users`` in every position a table can take.
QUERIES = [
    "SELECT uid, name FROM users ORDER BY uid",
    "SELECT u.uid, u.name FROM users AS u JOIN orders AS o ON o.uid = u.uid ORDER BY u.uid",
    "SELECT uid, name FROM users WHERE uid IN (SELECT uid FROM users) ORDER BY uid",
    "WITH x AS (SELECT uid, name FROM users) SELECT uid, name FROM x ORDER BY uid",
    "SELECT uid, name FROM users UNION SELECT uid, name FROM users ORDER BY uid",
    "SELECT o.uid, (SELECT u.name FROM users AS u WHERE u.uid = o.uid) AS name FROM orders AS o ORDER BY o.uid",
    f"SELECT uid, name FROM {SCHEMA}.users ORDER BY uid",
]


@dataclass
class Deployment:
    manifest: Manifest
    executor: SqlExecutor
    admin: sa.Engine

    def run(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.executor.fetch(check_sql(query, self.manifest)).rows]

    def run_text(self, text: str) -> list[tuple[Any, ...]]:
        """``text`` as if the sandbox had passed it unchanged: only the executor's guard acts."""
        query = SafeQuery(source="consumer", kind="sql", limit=101, max_rows=100, text=text)
        return [tuple(row) for row in self.executor.fetch(query).rows]


def _deploy(url: str, dialect: str, admin: str) -> Iterator[Deployment]:
    manifest = load_manifest_text(manifest_text("schema_qualification", url=url, dialect=dialect, schema=SCHEMA))[0]
    executor = SqlExecutor(manifest)
    engine = sa.create_engine(admin)
    yield Deployment(manifest, executor, engine)
    executor.close()
    engine.dispose()


def _tables(qualifier: str, rows: list[tuple[int, str]]) -> list[tuple[str, None]]:
    values = ", ".join(f"({uid}, '{name}')" for uid, name in rows)
    orders = ", ".join(f"({uid}, {uid * 10})" for uid, _ in rows)
    return [
        (f"CREATE TABLE {qualifier}users (uid integer, name varchar(40))", None),
        (f"INSERT INTO {qualifier}users VALUES {values}", None),
        (f"CREATE TABLE {qualifier}orders (uid integer, amount integer)", None),
        (f"INSERT INTO {qualifier}orders VALUES {orders}", None),
    ]


@pytest.fixture(scope="module")
def postgres(pg_server: Any) -> Iterator[Deployment]:
    database = "schema_pin"
    admin = pg_server.create_database(database)
    statements = [(f"CREATE SCHEMA {SCHEMA}", None), *_tables(f"{SCHEMA}.", DECLARED), *_tables("public.", DECOY)]
    pg_server.execute(statements, database=database)
    reader = pg_server.create_readonly_user(database, "schema_pin_reader", "pin-pw")
    pg_server.execute([(f"GRANT USAGE ON SCHEMA {SCHEMA} TO schema_pin_reader", None),
                       (f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO schema_pin_reader", None)],
                      database=database)
    yield from _deploy(reader, "postgres", admin)


@pytest.fixture(scope="module")
def mariadb(mariadb_server: Any) -> Iterator[Deployment]:
    # The URL names the decoy's database; the manifest declares the other one.
    decoy = "schema_pin_url_db"
    admin = mariadb_server.create_database(decoy)
    mariadb_server.create_database(SCHEMA)
    mariadb_server.execute(_tables("", DECOY), database=decoy)
    mariadb_server.execute(_tables("", DECLARED), database=SCHEMA)
    reader = mariadb_server.create_readonly_user(decoy, "schema_pin_reader", "pin-pw")
    mariadb_server.execute([(f"GRANT SELECT ON {SCHEMA}.* TO %s@%s", ("schema_pin_reader", "127.0.0.1"))])
    yield from _deploy(reader, "mysql", admin)


@pytest.fixture(params=["postgres", "mariadb"])
def deployment(request: pytest.FixtureRequest) -> Deployment:
    return request.getfixturevalue(request.param)


def test_the_decoy_is_where_an_unqualified_name_would_land(deployment: Deployment) -> None:
    # Without the executor's pin, the reader's session resolves ``users`` to the decoy:
    # what the two guards below protect against is real on this set-up.
    with deployment.admin.connect() as connection:
        rows = [tuple(r) for r in connection.execute(sa.text("SELECT uid, name FROM users ORDER BY uid"))]
    assert rows == DECOY


@pytest.mark.parametrize("query", QUERIES)
def test_every_read_names_the_declared_schema(deployment: Deployment, query: str) -> None:
    result = check_sql(query, deployment.manifest)
    tree = sqlglot.parse_one(result.text or "", read=result.dialect)
    ctes = {cte.alias for cte in tree.find_all(exp.CTE)}
    reads = [t for t in tree.find_all(exp.Table) if t.name not in ctes]
    assert reads and all(t.db == SCHEMA for t in reads), result.text
    rows = deployment.run(query)
    assert rows, query
    assert all(str(value).startswith("declared") for row in rows for value in row if isinstance(value, str)), rows
    assert 666 not in [row[0] for row in rows]


def test_a_row_filter_subquery_reads_the_declared_schema(deployment: Deployment) -> None:
    # The filter keeps orders of users named 'declared…' — in the declared schema only; read
    # through the decoy, no user would match and no order would come back.
    result = check_sql("SELECT uid, amount FROM orders ORDER BY uid", deployment.manifest)
    assert f"FROM {SCHEMA}.users WHERE" in (result.text or "")
    assert deployment.run("SELECT uid, amount FROM orders ORDER BY uid") == [(1, 10), (2, 20)]


def test_the_session_is_pinned_to_the_declared_schema(deployment: Deployment) -> None:
    # A text that reached the executor unqualified still reads the declared table.
    assert deployment.run_text("SELECT uid, name FROM users ORDER BY uid") == DECLARED


def test_sqlite_tables_stay_unqualified() -> None:
    manifest = load_manifest_text(manifest_text("schema_qualification", url="sqlite:///x.db", dialect="sqlite", schema=SCHEMA))[0]
    assert check_sql("SELECT uid FROM users", manifest).text == "SELECT users.uid AS uid FROM (SELECT uid, name FROM users) AS users LIMIT 101"


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_every_accepted_defog_query_reads_only_qualified_tables(shared_corpora, dialect: str) -> None:
    """The class, on SQL nobody here wrote: every defog gold query the sandbox accepts runs
    with each real table qualified with its manifest's schema (checked on a fresh parse of
    the text that would run, by the corpora's independent property checker)."""
    from corpora import accepted_violations, load_defog, quiet_sqlglot

    quiet_sqlglot()
    defog = load_defog(shared_corpora)
    checked, problems = 0, []
    for query in (q for q in defog.queries if q.dialect == dialect):
        manifest = defog.manifest_for(query)
        try:
            safe = check_sql(query.sql, manifest)
        except SandboxViolation:
            continue
        checked += 1
        problems += [f"{query.origin}: {p}" for p in accepted_violations(safe, manifest) if "qualified" in p]
    assert checked > 300 and not problems, problems[:10]


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_a_schema_name_with_quotes_and_colons_stays_one_name(dialect: str) -> None:
    manifest = load_manifest_text(manifest_text("schema_qualification", url="sqlite:///x.db", dialect=dialect, schema="'Odd\"` :div'"))[0]
    text = check_sql("SELECT uid FROM users", manifest).text or ""
    tree = sqlglot.parse_one(text.replace("\\:", ":"), read=dialect)
    assert {t.db for t in tree.find_all(exp.Table)} == {'Odd"` :div'}
