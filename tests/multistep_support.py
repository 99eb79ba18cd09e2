"""Two-step plans against the equivalent single query, on the corpora's real databases.

The oracle of issue "multi-step plans give the results of the equivalent single query": a plan
that passes keys from one step to the next through ``<k>`` must return the same multiset of
rows as one query with a subquery in the reference's place. Both run through structq (the
single query is one plan step), so the comparison isolates what happens between steps:
list binding, empty inputs, column names.

Shared by ``tests/test_multistep.py`` and ``bench/multistep.py``: foreign keys from the
databases' declarations (SQLite ``PRAGMA foreign_key_list``; the defog PostgreSQL dumps'
``REFERENCES``, which the SQLite and MySQL translations lost), permissive manifests built from
the live catalogues, dump loading for PostgreSQL and MariaDB, and the plan shapes.
"""

from __future__ import annotations

import collections
import math
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet, Manifest

from corpora import split_statements

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "legit"
SPIDER_DE = CORPORA / "spider_de" / "database"
DEFOG = CORPORA / "defog"
#: The defog databases whose PostgreSQL dumps declare foreign keys.
DEFOG_WITH_KEYS = ("car_dealership", "derm_treatment", "ewallet")
#: High enough that no step of these databases is truncated (the largest table has ~4,000 rows).
LIMITS = {"max_rows": 100_000, "max_intermediate_rows": 100_000, "timeout_s": 30}


@dataclass(frozen=True)
class ForeignKey:
    """``child.column REFERENCES parent.key`` in database ``db``."""

    db: str
    child: str
    column: str
    parent: str
    key: str

    def __str__(self) -> str:
        return f"{self.db}: {self.child}.{self.column} -> {self.parent}.{self.key}"

    def directions(self) -> list[tuple[str, str, str, str]]:
        """(from table, from column, to table, to column): parent keys → child rows and back."""
        return [(self.parent, self.key, self.child, self.column), (self.child, self.column, self.parent, self.key)]


# --- databases and their keys ------------------------------------------------------------------


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sqlite_tables(path: Path) -> dict[str, list[str]]:
    """Table → column names, as the file declares them."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {name: [r[1] for r in db.execute(f"PRAGMA table_info({_quote(name)})")] for name in names}


def sqlite_foreign_keys(db: str, path: Path) -> list[ForeignKey]:
    """The declared foreign keys whose tables and columns exist (Spider declares a few that
    point at nothing; those cannot be joined by any query)."""
    tables = {t.lower(): {c.lower(): c for c in cols} | {"": t} for t, cols in sqlite_tables(path).items()}
    keys = []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        for table in tables.values():
            for row in con.execute(f"PRAGMA foreign_key_list({_quote(table[''])})"):
                parent, column, key = row[2].lower(), (row[3] or "").lower(), (row[4] or "").lower()
                if parent in tables and column in table and key in tables[parent]:
                    keys.append(ForeignKey(db, table[""], table[column], tables[parent][""], tables[parent][key]))
    return sorted(set(keys), key=str)


_REFERENCES = re.compile(r"^\s*(\w+)\s+[^,]*?\bREFERENCES\s+(?:\w+\.)?(\w+)\s*\((\w+)\)", re.I | re.M)
_CREATE = re.compile(r"CREATE TABLE\s+(?:\w+\.)?(\w+)\s*\((.*?)\n\);", re.I | re.S)


def defog_foreign_keys(db: str) -> list[ForeignKey]:
    """The ``REFERENCES`` clauses of the defog PostgreSQL dump of ``db``."""
    dump = (DEFOG / "dumps" / f"{db}.sql").read_text(encoding="utf-8")
    return [ForeignKey(db, table, column, parent, key)
            for table, body in _CREATE.findall(dump)
            for column, parent, key in _REFERENCES.findall(body)]


def spider_databases() -> list[tuple[str, Path]]:
    return [(p.parent.name, p) for p in sorted(SPIDER_DE.glob("*/*.sqlite"))]


def defog_sqlite(db: str) -> Path:
    return DEFOG / "sqlite" / f"{db}.db"


def load_postgres(server: Any, db: str, name: str | None = None) -> str:
    """``db``'s PostgreSQL dump in a new database of ``server`` (named ``name``, by default
    ``db``); returns its URL."""
    import psycopg

    name = name or db
    url = server.create_database(name)
    dump = (DEFOG / "dumps" / f"{db}.sql").read_text(encoding="utf-8")
    with psycopg.connect(host=server.host, port=server.port, user=server.admin_user, dbname=name,
                         autocommit=True) as connection:
        connection.execute(dump)  # no parameters: the simple protocol runs the whole script
        schema = re.search(r"CREATE SCHEMA IF NOT EXISTS (\w+)", dump)
        if schema:
            connection.execute(f"ALTER DATABASE {name} SET search_path = {schema.group(1)}, public")
    return url


def load_mariadb(server: Any, db: str) -> str:
    """``db``'s MySQL dump in a new database of ``server``; returns its URL."""
    url = server.create_database(db)
    dump = (DEFOG / "dumps" / f"{db}_mysql.sql").read_text(encoding="utf-8")
    server.execute([(statement, None) for statement in split_statements(dump)], database=db)
    return url


def server_tables(url: str) -> dict[str, list[str]]:
    """Table → columns of the database at ``url`` (its default schema), read by SQLAlchemy."""
    from sqlalchemy import create_engine, inspect

    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        schema = inspector.default_schema_name
        return {t: [c["name"] for c in inspector.get_columns(t, schema=schema)]
                for t in inspector.get_table_names(schema=schema)}
    finally:
        engine.dispose()


def manifest(source: str, url: str, dialect: str, tables: dict[str, list[str]]) -> Manifest:
    """A permissive manifest: every table and column readable."""
    return Manifest.model_validate({
        "source": source, "kind": "sql", "url": url, "dialect": dialect, "limits": LIMITS,
        "tables": [{"name": t, "columns": [{"name": c, "type": "text"} for c in cols]}
                   for t, cols in tables.items() if cols],
    })


# --- plans -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A two-step plan and the single query it must equal."""

    label: str
    plan: Plan
    single: str


def _ident(name: str, dialect: str) -> str:
    quote = "`" if dialect == "mysql" else '"'
    return quote + name.replace(quote, quote * 2) + quote


#: Step-2 shapes: label → query with ``{all}`` (every column, quoted: Spider has columns called
#: ``alter``), ``{table}``, ``{column}``, ``{keys}`` (``<k>`` or the subquery).
SHAPES = {
    "in": "SELECT {all} FROM {table} WHERE {column} IN ({keys})",
    "not_in": "SELECT {all} FROM {table} WHERE {column} NOT IN ({keys})",
    "count_in": "SELECT COUNT(*) AS n FROM {table} WHERE {column} IN ({keys})",
    "count_not_in": "SELECT COUNT(*) AS n FROM {table} WHERE {column} NOT IN ({keys})",
    "in_or": "SELECT {all} FROM {table} WHERE {column} IN ({keys}) OR {column} IS NULL",
    "group_in": "SELECT {column}, COUNT(*) AS n FROM {table} WHERE {column} IN ({keys}) GROUP BY {column}",
}


def case(manifest_: Manifest, direction: tuple[str, str, str, str], shape: str, *, keys_where: str = "") -> Case:
    """Step ``k`` reads the keys (``keys_where`` filters them: ``WHERE 1 = 0`` empties them),
    step ``rows`` uses them in ``shape``; ``single`` is the same with a subquery."""
    source, dialect = manifest_.source, manifest_.sql_dialect
    from_table, from_column, to_table, to_column = direction
    every = manifest_.table(to_table).columns  # type: ignore[union-attr]
    keys = f"SELECT {_ident(from_column, dialect)} FROM {_ident(from_table, dialect)}{keys_where}"
    parts = {"table": _ident(to_table, dialect), "column": _ident(to_column, dialect),
             "all": ", ".join(_ident(c.name, dialect) for c in every)}
    second = SHAPES[shape].format(keys="<k>", **parts)
    plan = Plan.parse({"steps": [
        {"output_key": "k", "source": source, "query": keys},
        {"output_key": "rows", "source": source, "query": second},
    ]})
    label = f"{from_table}.{from_column} -> {to_table}.{to_column} [{shape}{' empty' if keys_where else ''}]"
    return Case(label, plan, SHAPES[shape].format(keys=keys, **parts))


def _normal(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return round(value, 6)
    return value


def multiset(rows: Sequence[Sequence[Any]]) -> collections.Counter[tuple[Any, ...]]:
    return collections.Counter(tuple(_normal(v) for v in row) for row in rows)


@dataclass(frozen=True)
class Outcome:
    label: str
    equal: bool
    detail: str = ""


def compare(engine: Engine, case_: Case, source: str) -> Outcome:
    """Run both; equal when the rows are the same multiset (and the columns the same names)."""
    try:
        two = engine.run(case_.plan).final
        one = engine.run(Plan.parse({"steps": [{"output_key": "rows", "source": source,
                                                "query": case_.single}]})).final
    except Exception as exc:  # noqa: BLE001 - an error is an unequal outcome, with its message
        return Outcome(case_.label, False, f"{type(exc).__name__}: {exc}")
    if two.skipped is None and two.columns != one.columns:  # a step left out has no columns
        return Outcome(case_.label, False, f"columns {two.columns} != {one.columns}")
    if multiset(two.rows) != multiset(one.rows):
        return Outcome(case_.label, False, f"{two.row_count} rows != {one.row_count} rows (single query)")
    return Outcome(case_.label, True)


def capabilities(*manifests: Manifest) -> CapabilitySet:
    return CapabilitySet(list(manifests))


def run_cases(manifest_: Manifest, cases: Callable[[], Iterator[Case]]) -> list[Outcome]:
    """Every case of ``cases()`` on one source; the engine is closed afterwards."""
    with Engine(capabilities(manifest_)) as engine:
        return [compare(engine, c, manifest_.source) for c in cases()]
