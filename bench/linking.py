"""Schema linking on large catalogues: does the pruned prompt keep what the gold SQL reads?

For each corpus, every database is loaded at once as one capability set (the question's
database is not given), each question goes through ``structq.linking.select``, and the tables
and columns its gold SQL reads (parsed with sqlglot; aliases resolved, an unqualified column
credited to the gold tables that have it) are looked up in the kept sub-catalogue.

Corpora (from ../shared/corpora/legit; a missing one is skipped with a note):
- spider_en: dev questions (1,034) over all 206 databases of ``test_tables.json``
  (1,056 tables), names only — no descriptions, as ``structq sync`` would write them;
- spider_de: the German dev questions over its 20 databases (``tables.json``);
- bird: mini-dev sqlite (500), question + evidence, the 11 schemas with their column comments;
- defog: questions_gen_sqlite + instruct_* over the 11 databases, with column descriptions;
- demo: the bundled manifests' verified examples and ``capabilities/eval.yaml`` (Chinese).

Figures per corpus: mean gold-table recall, mean gold-column recall, share of questions with all
gold tables kept, prompt tokens (estimated: ASCII at 4 characters a token, other characters 1
each — ``structq.linking.entities.estimate_tokens``) of the pruned catalogue against the full
one, and linking time p50/p95 (value index not built: the corpora have no data here).

Run: ``python bench/linking.py [corpus ...]``
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

from structq.capabilities import CapabilitySet
from structq.capabilities.model import Column, Manifest, Table
from structq.linking import Budget, linking_index, select

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora" / "legit"
if not CORPORA.is_dir():
    CORPORA = Path("/work/shared/corpora/legit")


@dataclass
class Item:
    question: str
    source: str
    sql: str
    dialect: str = "sqlite"


def _safe_name(name: str) -> str:
    out = re.sub(r"\W", "_", name, flags=re.ASCII)
    return out if re.match(r"[A-Za-z_]", out) else "_" + out


_TYPES = {"number": "real", "text": "text", "time": "datetime", "boolean": "boolean", "others": "text"}


def _column(name: str, type_: str, description: str = "", pk: bool = False, ref: str | None = None) -> Column:
    return Column(name=name, type=type_, description=description, primary_key=pk, references=ref)


def spider_catalogue(tables_json: Path) -> CapabilitySet:
    """One SQL source per Spider database, from ``tables.json``: names, types, keys, FKs."""
    manifests = []
    for db in json.loads(tables_json.read_text(encoding="utf-8")):
        names = db["table_names_original"]
        cols = db["column_names_original"]
        refs = {a: b for a, b in db["foreign_keys"]}
        pks = set()
        for pk in db["primary_keys"]:
            pks |= set(pk) if isinstance(pk, list) else {pk}
        tables = []
        for ti, tname in enumerate(names):
            columns, seen = [], set()
            for ci, (owner, cname) in enumerate(cols):
                if owner != ti or cname.lower() in seen:
                    continue
                seen.add(cname.lower())
                ref = None
                if ci in refs:
                    rt, rc = cols[refs[ci]]
                    ref = f"{names[rt]}.{rc}"
                columns.append(_column(cname, _TYPES.get(db["column_types"][ci], "text"), pk=ci in pks, ref=ref))
            if columns:
                tables.append(Table(name=tname, columns=columns))
        manifests.append(Manifest(source=_safe_name(db["db_id"]), kind="sql", url="sqlite://", tables=tables))
    return CapabilitySet(manifests)


def spider_items(dev: Path) -> list[Item]:
    return [Item(d["question"], _safe_name(d["db_id"]), d["query"]) for d in json.loads(dev.read_text(encoding="utf-8"))]


# --- gold tables and columns --------------------------------------------------------------------


def gold(item: Item, capabilities: CapabilitySet) -> tuple[set[str], set[tuple[str, str]]] | None:
    """(tables, (table, column)) the gold SQL reads, lower-cased; None when it does not parse."""
    manifest = capabilities.get(item.source)
    if manifest is None:
        return None
    try:
        tree = sqlglot.parse_one(item.sql, read=item.dialect)
    except sqlglot.errors.SqlglotError:
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    alias: dict[str, str] = {}
    tables: set[str] = set()
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if name in ctes or manifest.table(name) is None:
            continue
        tables.add(name)
        alias[t.alias_or_name.lower()] = name
        alias[name] = name
    columns: set[tuple[str, str]] = set()
    for c in tree.find_all(exp.Column):
        cname = c.name.lower()
        owners = [alias[c.table.lower()]] if c.table and c.table.lower() in alias else sorted(tables)
        for owner in owners:
            table = manifest.table(owner)
            if table is not None and table.column(cname) is not None:
                columns.add((owner, cname))
                break
    return tables, columns


# --- running ------------------------------------------------------------------------------------


@dataclass
class Figures:
    corpus: str
    questions: int
    tables: int
    table_recall: float
    column_recall: float
    all_tables: float
    tokens: float
    full_tokens: int
    p50_ms: float
    p95_ms: float


def measure(corpus: str, capabilities: CapabilitySet, items: list[Item], budget: Budget | None = None,
            misses: list[str] | None = None) -> Figures:
    started = time.perf_counter()
    index = linking_index(capabilities)
    build_s = time.perf_counter() - started
    t_rec, c_rec, whole, toks, times = [], [], [], [], []
    for item in items:
        found = gold(item, capabilities)
        if found is None or not found[0]:
            continue
        tables, columns = found
        sel = select(item.question, capabilities, budget=budget)
        times.append(sel.seconds * 1000)
        toks.append(sel.tokens)
        kept_t = [t for t in tables if sel.keeps(item.source, t)]
        kept_c = [c for c in columns if sel.keeps(item.source, *c)]
        t_rec.append(len(kept_t) / len(tables))
        c_rec.append(len(kept_c) / len(columns) if columns else 1.0)
        whole.append(len(kept_t) == len(tables))
        if misses is not None and len(kept_t) < len(tables):
            misses.append(f"{item.source}: {item.question} | missing {sorted(set(tables) - set(kept_t))} | kept "
                          f"{[k.entity.label for k in list(sel.kept.values())[:6]]}")
    times.sort()
    print(f"  ({corpus}: index built in {build_s:.2f} s)", file=sys.stderr)
    return Figures(corpus, len(t_rec), len(index.entities), statistics.mean(t_rec), statistics.mean(c_rec),
                   statistics.mean(whole), statistics.mean(toks), index.total_tokens,
                   times[len(times) // 2], times[int(len(times) * 0.95)])


def corpus_spider_en() -> Iterator[tuple[str, CapabilitySet, list[Item]]]:
    folder = CORPORA / "spider_en"
    tables = folder / "test_tables.json"
    if not tables.is_file():
        print("  spider_en: test_tables.json absent, using tables.json", file=sys.stderr)
        tables = folder / "tables.json"
    yield "spider_en dev", spider_catalogue(tables), spider_items(folder / "dev.json")


CORPUS_LOADERS = {"spider_en": corpus_spider_en}


def print_table(rows: list[Figures]) -> None:
    header = (f"{'corpus':<16} {'questions':>9} {'tables':>6} {'table rec':>9} {'col rec':>8} {'all tbls':>8} "
              f"{'tokens':>7} {'full':>7} {'share':>6} {'p50 ms':>7} {'p95 ms':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.corpus:<16} {r.questions:>9} {r.tables:>6} {r.table_recall:>9.3f} {r.column_recall:>8.3f} "
              f"{r.all_tables:>8.1%} {r.tokens:>7.0f} {r.full_tokens:>7} {r.tokens / r.full_tokens:>6.1%} "
              f"{r.p50_ms:>7.2f} {r.p95_ms:>7.2f}")


def main(argv: list[str]) -> None:
    names = [a for a in argv if not a.startswith("-")] or list(CORPUS_LOADERS)
    show_misses = "--misses" in argv
    rows = []
    for name in names:
        for corpus, capabilities, items in CORPUS_LOADERS[name]():
            misses: list[str] = []
            rows.append(measure(corpus, capabilities, items, misses=misses))
            if show_misses:
                print("\n".join(misses[:80]), file=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
