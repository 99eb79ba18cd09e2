"""Read the legitimate query corpora (``../shared/corpora/legit``) and build permissive manifests.

Shared by ``bench/sandbox.py`` and ``bench/function_inventory.py`` so both measure the same
queries. Nothing here belongs to the package: the corpora are third-party test material.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

from structq.capabilities import Manifest

LEGIT = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "legit"

_URLS = {"sqlite": "sqlite:///corpus.db", "postgres": "postgresql://corpus", "mysql": "mysql://corpus"}
#: What the manifest model accepts as a name: no control characters, no surrounding blanks.
_IDENT = re.compile(r"^[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f\s])?$")


@dataclass(frozen=True)
class CorpusQuery:
    corpus: str
    dialect: str
    db: str
    sql: str


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _stored_name(name: str) -> str:
    """The name PostgreSQL stores for a DDL name: plain ones were written unquoted and fold
    to lower case; others (spaces, dashes) were quoted and keep their spelling."""
    return name.lower() if _PLAIN.match(name) else name


def manifest_from_columns(
    tables: Mapping[str, Sequence[str]], dialect: str, *, source: str = "corpus", schema: str | None = None
) -> Manifest:
    """A permissive manifest: every table and column allowed, type ``text``.

    Names that the manifest model cannot hold (control characters, surrounding blanks) are
    skipped: queries using them are then rejected as unknown, which the bench counts.
    """
    stored = _stored_name if dialect == "postgres" else (lambda name: name)
    seen: dict[str, dict[str, None]] = {}
    for table, columns in tables.items():
        if not _IDENT.match(table):
            continue
        cols = seen.setdefault(table.lower(), {})
        for column in columns:
            if _IDENT.match(column):
                cols.setdefault(stored(column), None)
    return Manifest.model_validate(
        {
            "source": source,
            "kind": "sql",
            "url": _URLS.get(dialect, "sqlite:///corpus.db"),
            "dialect": dialect,
            "schema": schema,
            "tables": [
                {"name": name, "columns": [{"name": c, "type": "text"} for c in cols]}
                for name, cols in seen.items()
                if cols
            ],
        }
    )


def _alternatives(sql: str, dialect: str) -> list[str]:
    """defog separates alternative gold queries with ``;``: one query each, split on the
    tokenizer's semicolons so that a ``;`` inside a literal or a comment does not cut."""
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    except sqlglot.errors.TokenError:
        return [sql]
    cuts = [t.start for t in tokens if t.token_type == sqlglot.tokens.TokenType.SEMICOLON]
    pieces = [sql[a + 1 if a >= 0 else 0 : b] for a, b in zip([-1, *cuts], [*cuts, len(sql)])]
    return [piece.strip() for piece in pieces if piece.strip()]


def _expand_braces(sql: str) -> list[str]:
    """defog writes ``{a,b}`` for "either column is acceptable": expand each alternative."""
    match = re.search(r"\{([^{}]*)\}", sql)
    if not match:
        return [sql]
    out: list[str] = []
    for option in match.group(1).split(","):
        out.extend(_expand_braces(sql[: match.start()] + option.strip() + sql[match.end():]))
    return out


def _ddl_tables(ddl: str, dialect: str) -> dict[str, list[str]]:
    tables: dict[str, list[str]] = {}
    for statement in sqlglot.parse(ddl, read=dialect, error_level=sqlglot.ErrorLevel.IGNORE):
        if isinstance(statement, exp.Create) and isinstance(statement.this, exp.Schema):
            table = statement.this.this
            columns = [c.name for c in statement.this.expressions if isinstance(c, exp.ColumnDef)]
            tables[table.name] = columns
    return tables


def spider(name: str = "spider_en") -> tuple[dict[str, Manifest], list[CorpusQuery]]:
    root = LEGIT / name
    manifests = {}
    for db in json.loads((root / "tables.json").read_text()):
        tables: dict[str, list[str]] = {}
        for index, column in db["column_names_original"]:
            if index >= 0:
                tables.setdefault(db["table_names_original"][index], []).append(column)
        manifests[db["db_id"]] = manifest_from_columns(tables, "sqlite")
    queries = []
    for line in (root / "dev_gold.sql").read_text().splitlines():
        if "\t" in line:
            sql, db = line.rsplit("\t", 1)
            queries.append(CorpusQuery(name, "sqlite", db.strip(), sql))
    return manifests, queries


def bird(dialect: str) -> tuple[dict[str, Manifest], list[CorpusQuery]]:
    root = LEGIT / "bird"
    file_dialect = {"postgres": "postgresql"}.get(dialect, dialect)
    manifests = {}
    for ddl in sorted((root / "schemas").glob("*.sql")):
        # the DDL files are written for SQLite; table and column names are what matter
        manifests[ddl.stem] = manifest_from_columns(_ddl_tables(ddl.read_text(), "sqlite"), dialect)
    queries = []
    for item in json.loads((root / f"mini_dev_{file_dialect}.json").read_text()):
        queries.append(CorpusQuery("bird", dialect, item["db_id"], item["SQL"]))
    return manifests, queries


def defog(dialect: str) -> tuple[dict[str, Manifest], list[CorpusQuery]]:
    root = LEGIT / "defog"
    manifests = {}
    for dump in sorted((root / "dumps").glob("*.sql")):
        if "_" in dump.stem and dump.stem.rsplit("_", 1)[1] in ("mysql", "sqlite"):
            continue
        ddl = dump.read_text()
        # where the real databases keep the tables: the dump's schema (PostgreSQL, else
        # public), the database itself (MySQL), main (SQLite) — as tests/corpora.py does
        qualifier = re.search(r"CREATE TABLE (\w+)\.", ddl)
        schema = {"postgres": qualifier.group(1) if qualifier else "public", "mysql": dump.stem}.get(dialect, "main")
        manifests[dump.stem] = manifest_from_columns(_ddl_tables(ddl, "postgres"), dialect, schema=schema)
    queries = []
    for path in sorted(root.glob(f"*_{dialect}.csv")):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                for alternative in _alternatives(row["query"], dialect):
                    for sql in _expand_braces(alternative):
                        queries.append(CorpusQuery("defog", dialect, row["db_name"], sql))
    return manifests, queries


def all_corpora() -> Iterator[tuple[str, dict[str, Manifest], list[CorpusQuery]]]:
    """(label, manifests by db, queries) for every corpus and dialect that has a schema."""
    if not LEGIT.is_dir():
        return
    yield "spider_en/sqlite", *spider("spider_en")
    yield "spider_de/sqlite", *spider("spider_de")
    for dialect in ("sqlite", "postgres", "mysql"):
        yield f"bird/{dialect}", *bird(dialect)
        yield f"defog/{dialect}", *defog(dialect)
