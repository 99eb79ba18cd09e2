"""The projection of every table (``confine.py``) leaves the databases' plans as they were.

Every read of a declared table becomes ``(SELECT <allowed columns> FROM t) AS t``; SQLite,
PostgreSQL and MariaDB merge such a derived table into the outer query, so the plan — join
order, access method, the index each table is read through — must be the one the query had
without it. For each defog gold query the sandbox accepts, the text checked with the projection
and the text checked without it (``confine_reads`` left out of the passes) are explained on
the real database: SQLite ``EXPLAIN QUERY PLAN``, PostgreSQL ``EXPLAIN (COSTS OFF)`` (sequential
scans discouraged, so that index use is what is compared), MariaDB ``EXPLAIN``. Every column
of every table gets an index first (the dumps declare few), so there is an index to lose.

PostgreSQL's functional dependency on a primary key (``GROUP BY s.id`` selecting ``s.name``)
does not pass through a derived table; the sandbox groups such a select by the dependent
columns too (``keys.py``), and the plan must still be the one the query had. The manifests
carry the dumps' primary keys for that.

Only names are normalised: the alias a table is read under (the projection keeps it, but an
database may print the table's own name or the alias), and MariaDB's ``ref`` column, which
names the alias. Everything else — node types, scan and join methods, index names, estimated
rows — must be equal.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

import structq.safety.sql as sandbox
from corpora import GoldQuery, LegitCorpus, load_defog, quiet_sqlglot
from multistep_support import load_postgres
from structq.capabilities import Manifest
from structq.errors import SandboxViolation
from structq.safety import SafeQuery, check_sql
from structq.safety.sql import memo
from structq.safety.sql.rules.confine import confine_reads

Plan = list[tuple[Any, ...]]


@pytest.fixture(scope="module")
def defog(shared_corpora: Path) -> LegitCorpus:
    quiet_sqlglot()
    return load_defog(shared_corpora)


def _both(query: GoldQuery, manifest: Manifest) -> tuple[SafeQuery, SafeQuery] | None:
    """The query checked with the projection and without it; None when the sandbox refuses it."""
    memo.clear()
    try:
        walled = check_sql(query.sql, manifest)
    except SandboxViolation:
        return None
    rules = sandbox.RULES
    sandbox.RULES = tuple(rule for rule in rules if rule is not confine_reads)
    try:
        memo.clear()
        bare = check_sql(query.sql, manifest)
    finally:
        sandbox.RULES = rules
        memo.clear()
    return walled, bare


def _explain(engine: Engine, prefix: str, safe: SafeQuery, setup: tuple[str, ...] = ()) -> Plan | str:
    try:
        with engine.connect() as connection:
            for statement in setup:
                connection.execute(text(statement))
            return [tuple(row) for row in connection.execute(text(prefix + safe.text), safe.params)]  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - a query the database cannot plan is compared as its error
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"


def _compare(defog: LegitCorpus, dialect: str, engines: dict[str, Engine], explain: Callable[[Engine, SafeQuery], Plan | str],
             normalise: Callable[[Plan, SafeQuery], Any]) -> tuple[int, list[str]]:
    """How many accepted queries were explained, and the ones whose plans differ."""
    explained, differ = 0, []
    for query in (q for q in defog.queries if q.dialect == dialect and q.database in engines):
        both = _both(query, defog.manifest_for(query))
        if both is None:
            continue
        walled, bare = both
        engine = engines[query.database]
        with_projection, without = explain(engine, walled), explain(engine, bare)
        if isinstance(without, str):
            continue  # the database cannot plan the query as written either
        explained += 1
        if isinstance(with_projection, str) or normalise(with_projection, walled) != normalise(without, bare):
            differ.append(f"{query.origin}: {query.sql}\n  without: {without}\n  with:    {with_projection}")
    return explained, differ


def _aliases(safe: SafeQuery) -> set[str]:
    names = set(re.findall(r"\bAS (\w+)", safe.text)) | set(safe.tables)  # type: ignore[arg-type]
    return {name.lower() for name in names}


def _anonymous(detail: str, names: set[str]) -> str:
    return " ".join("_" if word.lower().strip("(),") in names else word for word in str(detail).split())


# ---- SQLite -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_engines(shared_corpora: Path) -> Iterator[dict[str, Engine]]:
    engines = {}
    for path in sorted((shared_corpora / "legit" / "defog" / "sqlite").glob("*.db")):
        db = sqlite3.connect(":memory:", check_same_thread=False)
        sqlite3.connect(path).backup(db)
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for position, (_, column, *_) in enumerate(db.execute(f'PRAGMA table_info("{table}")').fetchall()):
                db.execute(f'CREATE INDEX "ix_{table}_{position}" ON "{table}" ("{column}")')
        db.execute("ANALYZE")
        db.commit()
        engines[path.stem] = create_engine("sqlite://", creator=lambda db=db: db, poolclass=StaticPool)
    yield engines
    for engine in engines.values():
        engine.dispose()


def test_sqlite_plans_are_unchanged(defog: LegitCorpus, sqlite_engines: dict[str, Engine]) -> None:
    def normalise(plan: Plan, safe: SafeQuery) -> list[str]:
        # ``EXPLAIN QUERY PLAN`` rows: id, parent, unused, detail; ids and subquery numbers
        # are counters that a merged subquery advances, so the tree is compared by its
        # details in order, subqueries unnumbered.
        return [_anonymous(re.sub(r"(SUBQUERY |subquery-)\d+", r"\1n", row[3]), _aliases(safe)) for row in plan]

    explained, differ = _compare(defog, "sqlite", sqlite_engines,
                                 lambda engine, safe: _explain(engine, "EXPLAIN QUERY PLAN ", safe), normalise)
    print(f"sqlite: {explained} plans compared, {len(differ)} differ")
    assert explained > 300
    assert not differ, "\n".join(differ)


# ---- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_engines(pg_server: Any, shared_corpora: Path) -> Iterator[dict[str, Engine]]:
    import psycopg

    engines = {}
    for dump in sorted((shared_corpora / "legit" / "defog" / "dumps").glob("*.json")):
        name = f"plans_{dump.stem}"
        url = load_postgres(pg_server, dump.stem, name)
        with psycopg.connect(host=pg_server.host, port=pg_server.port, user=pg_server.admin_user, dbname=name,
                             autocommit=True) as connection:
            columns = connection.execute(
                "SELECT table_schema, table_name, column_name FROM information_schema.columns "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')").fetchall()
            for schema, table, column in columns:
                connection.execute(f'CREATE INDEX ON "{schema}"."{table}" ("{column}")')
            connection.execute("ANALYZE")
        engines[dump.stem] = create_engine(url)
    yield engines
    for engine in engines.values():
        engine.dispose()


def test_postgres_plans_are_unchanged(defog: LegitCorpus, pg_engines: dict[str, Engine]) -> None:
    def normalise(plan: Plan, safe: SafeQuery) -> list[str]:
        # A scan prints the relation and the name it is read under (``on coupons c`` written,
        # ``on coupons`` or ``on coupons coupons_1`` through the projection): the relation
        # stays, the names go, here and as qualifiers in conditions and keys (which are
        # printed only where a plan reads more than one relation: the projection adds one).
        lines = [re.sub(r"\b\w+\.(?=[a-z_\"])", "", row[0]) for row in plan]
        return [re.sub(r" on (\w+)(?: \w+)?$", r" on \1", line) for line in lines]

    explained, differ = _compare(
        defog, "postgres", pg_engines,
        lambda engine, safe: _explain(engine, "EXPLAIN (COSTS OFF) ", safe, ("SET enable_seqscan = off",)), normalise)
    # PostgreSQL lets a query group by a table's primary key and select its other columns
    # (a functional dependency); it knows the key of a base table only, not of a derived table
    # over it, so the sandbox adds those columns to the GROUP BY (``keys.py``): such a query
    # must still run, with the plan it had.
    lost_keys = [d for d in differ if "must appear in the GROUP BY clause" in d]
    print(f"postgres: {explained} plans compared, {len(differ)} differ, {len(lost_keys)} of them by a lost primary key")
    assert explained > 300
    assert not differ, "\n".join(differ)


# ---- MariaDB ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mariadb_engines(mariadb_server: Any, defog_mariadb: dict[str, str]) -> Iterator[dict[str, Engine]]:
    engines = {}
    for database, url in defog_mariadb.items():
        engine = create_engine(url)
        with engine.begin() as connection:
            columns = connection.execute(text(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = DATABASE() AND data_type IN ('int', 'bigint', 'smallint', 'date', 'datetime', "
                "'decimal', 'double', 'float', 'varchar', 'char')")).fetchall()
            for position, (table, column) in enumerate(columns):
                connection.execute(text(f"CREATE INDEX IF NOT EXISTS `plans_{position}` ON `{table}` (`{column}`)"))
            for (table,) in connection.execute(text(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")).fetchall():
                connection.execute(text(f"ANALYZE TABLE `{table}`"))
        engines[database] = engine
    yield engines
    for engine in engines.values():
        engine.dispose()


def test_mariadb_plans_are_unchanged(defog: LegitCorpus, mariadb_engines: dict[str, Engine]) -> None:
    def normalise(plan: Plan, safe: SafeQuery) -> list[tuple[Any, ...]]:
        # id, select_type, table, type, possible_keys, key, key_len, ref, rows, Extra. A merged
        # derived table still uses up a select number, so select ids (and ``<derivedN>``) are
        # renumbered in order of appearance.
        names, ids = _aliases(safe), {}
        for row in plan:
            ids.setdefault(row[0], len(ids) + 1)
        return [(ids.get(row[0]), row[1], _anonymous(re.sub(r"<(derived|subquery|union)[\d,]+>", r"<\1>", str(row[2])), names), *row[3:7],
                 _anonymous(re.sub(r"\w+\.", "", str(row[7])), names), row[8], row[9]) for row in plan]

    def access(plan: Plan, safe: SafeQuery) -> list[tuple[Any, ...]]:
        return [row[:-1] for row in normalise(plan, safe)]  # all but Extra

    def explain(engine: Engine, safe: SafeQuery) -> Plan | str:
        return _explain(engine, "EXPLAIN ", safe)

    explained, differ = _compare(defog, "mysql", mariadb_engines, explain, access)
    _, extra = _compare(defog, "mysql", mariadb_engines, explain, normalise)
    # Join order, access types, keys and row estimates must be equal; ``Extra`` is counted:
    # MariaDB's split materialisation of a grouped CTE (``LATERAL DERIVED``) adds
    # "Using temporary; Using filesort" inside that step for a projected table.
    print(f"mariadb: {explained} plans compared, {len(differ)} differ in access, {len(extra)} in Extra")
    assert explained > 300
    assert not differ, "\n".join(differ)
    assert len(extra) <= 3, "\n".join(extra)
