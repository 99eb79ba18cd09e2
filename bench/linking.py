"""Schema linking on large catalogues: does the pruned prompt keep what the gold SQL reads?

For each corpus, every database is loaded at once as one capability set (the question's
database is not given), each question goes through ``structq.linking.select``, and the tables
and columns its gold SQL reads (parsed with sqlglot; aliases resolved, an unqualified column
credited to the gold tables that have it) are looked up in the kept sub-catalogue.

Corpora (from ../shared/corpora/legit; a missing one is skipped with a note):
- spider_en: dev questions (1,034) over all 206 databases of ``test_tables.json``
  (1,056 tables), names only — no descriptions, as ``structq sync`` would write them;
- spider_de: the German dev questions over its 20 dev databases (from ``tables.json``; small
  enough not to be pruned), and over all 166 databases of ``tables.json`` (851 tables);
- bird: mini-dev sqlite (500), question + evidence, the 11 schemas with their column comments;
- defog: questions_gen_sqlite + instruct_* over the 11 databases, with column descriptions;
- demo: the bundled manifests' verified examples and ``capabilities/eval.yaml`` (Chinese).

Figures per corpus: mean gold-table recall, mean gold-column recall, share of questions with all
gold tables kept, prompt tokens (estimated: ASCII at 4 characters a token, other characters 1
each — ``structq.linking.entities.estimate_tokens``) of the pruned catalogue against the full
one, and linking time p50/p95, wall clock and the thread's CPU time (the CPU time does not
count waiting for a core, so it stays meaningful on a busy machine; value index not built:
the corpora have no data here).

The ``langchain`` column is LangChain's ``SQLDatabase.get_table_info()`` (CREATE TABLE plus 3
sample rows per table) over every database of the corpus, in the same token estimate, when
``langchain_community`` is importable: on the real SQLite files of spider_de and defog; on
empty SQLite files created from the schema for spider_en and BIRD (no data here, so DDL only —
an undercount of what it costs on real data).

Run: ``python bench/linking.py [corpus ...] [--misses]``
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
from structq.linking.entities import estimate_tokens

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora" / "legit"
if not CORPORA.is_dir():
    CORPORA = Path("/work/shared/corpora/legit")


@dataclass
class Item:
    """A question and what its gold answer reads: (source, SQL) parts and (source, index) reads."""

    question: str
    source: str
    sql: str | None
    dialect: str = "sqlite"
    more: tuple[tuple[str, str | None, str | None], ...] = ()  # further (source, sql, index) steps


def _safe_name(name: str) -> str:
    out = re.sub(r"\W", "_", name, flags=re.ASCII)
    return out if re.match(r"[A-Za-z_]", out) else "_" + out


_TYPES = {"number": "real", "text": "text", "time": "datetime", "boolean": "boolean", "others": "text"}


def _column(name: str, type_: str, description: str = "", pk: bool = False, ref: str | None = None) -> Column:
    return Column(name=name, type=type_, description=description, primary_key=pk, references=ref)


def spider_catalogue(tables_json: Path, only: set[str] | None = None) -> CapabilitySet:
    """One SQL source per Spider database (or those in ``only``), from ``tables.json``."""
    manifests = []
    for db in json.loads(tables_json.read_text(encoding="utf-8")):
        if only is not None and db["db_id"] not in only:
            continue
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


def gold(item: Item, capabilities: CapabilitySet) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]] | None:
    """((source, table), (source, table, column)) every part reads, lower-cased; None when one does not parse."""
    tables: set[tuple[str, str]] = set()
    columns: set[tuple[str, str, str]] = set()
    parts = [(item.source, item.sql, None)] if item.sql is not None else []
    for source, sql, index in [*parts, *item.more]:
        if index is not None:
            tables.add((source, index.lower()))
            continue
        found = _gold_sql(source, sql or "", item.dialect, capabilities)
        if found is None:
            return None
        tables |= {(source, t) for t in found[0]}
        columns |= {(source, t, c) for t, c in found[1]}
    return tables, columns


def _gold_sql(source: str, sql: str, dialect: str, capabilities: CapabilitySet) -> tuple[set[str], set[tuple[str, str]]] | None:
    manifest = capabilities.get(source)
    if manifest is None:
        return None
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None
    if tree is None:
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


def _empty_databases(capabilities: CapabilitySet, folder: Path) -> list[Path]:
    """One SQLite file per source with its tables created empty (for corpora without data)."""
    import sqlite3

    paths = []
    for m in capabilities:
        path = folder / f"{m.source}.sqlite"
        with sqlite3.connect(path) as connection:
            for t in m.tables:
                if t.name.lower().startswith("sqlite_"):
                    continue  # SQLite's own (Spider lists sqlite_sequence)
                columns = ", ".join('"{}" {}'.format(c.name.replace('"', '""'), c.type.upper()) for c in t.columns)
                connection.execute('CREATE TABLE "{}" ({})'.format(t.name.replace('"', '""'), columns))
        paths.append(path)
    return paths


def langchain_tokens(paths: list[Path]) -> int | None:
    """Estimated tokens of ``SQLDatabase.get_table_info()`` summed over the databases, if available."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langchain_community.utilities import SQLDatabase
    except ImportError:
        return None
    total = 0
    for path in paths:
        db = SQLDatabase.from_uri(f"sqlite:///{path}", sample_rows_in_table_info=3)
        total += estimate_tokens(db.get_table_info())
    return total


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
    cpu_p50_ms: float
    cpu_p95_ms: float
    langchain: int | None = None


def measure(corpus: str, capabilities: CapabilitySet, items: list[Item], budget: Budget | None = None,
            misses: list[str] | None = None, databases: list[Path] | None = None) -> Figures:
    started = time.perf_counter()
    index = linking_index(capabilities)
    build_s = time.perf_counter() - started
    full_tokens = estimate_tokens(capabilities.render())
    t_rec, c_rec, whole, toks, times, cpu_times = [], [], [], [], [], []
    for item in items:
        found = gold(item, capabilities)
        if found is None or not found[0]:
            continue
        tables, columns = found
        cpu = time.thread_time()
        sel = select(item.question, capabilities, budget=budget)
        cpu_times.append((time.thread_time() - cpu) * 1000)
        times.append(sel.seconds * 1000)
        toks.append(sel.tokens)
        kept_t = [t for t in tables if sel.keeps(*t)]
        kept_c = [c for c in columns if sel.keeps(*c)]
        t_rec.append(len(kept_t) / len(tables))
        c_rec.append(len(kept_c) / len(columns) if columns else 1.0)
        whole.append(len(kept_t) == len(tables))
        if misses is not None and len(kept_t) < len(tables):
            misses.append(f"{item.source}: {item.question[:150]} | missing {sorted(set(tables) - set(kept_t))} | kept "
                          f"{[k.entity.label for k in list(sel.kept.values())[:6]]}")
    times.sort()
    cpu_times.sort()
    print(f"  ({corpus}: index built in {build_s:.2f} s)", file=sys.stderr)
    return Figures(corpus, len(t_rec), len(index.entities), statistics.mean(t_rec), statistics.mean(c_rec),
                   statistics.mean(whole), statistics.mean(toks), full_tokens,
                   times[len(times) // 2], times[int(len(times) * 0.95)],
                   cpu_times[len(cpu_times) // 2], cpu_times[int(len(cpu_times) * 0.95)],
                   langchain_tokens(databases) if databases else None)


def _scratch() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="structq-linking-"))


Corpus = Iterator[tuple[str, CapabilitySet, list[Item], list[Path] | None]]


def corpus_spider_en() -> Corpus:
    folder = CORPORA / "spider_en"
    tables = folder / "test_tables.json"
    if not tables.is_file():
        print("  spider_en: test_tables.json absent, using tables.json", file=sys.stderr)
        tables = folder / "tables.json"
    capabilities = spider_catalogue(tables)
    yield "spider_en dev", capabilities, spider_items(folder / "dev.json"), _empty_databases(capabilities, _scratch())


def corpus_spider_de() -> Corpus:
    folder = CORPORA / "spider_de"
    dev = json.loads((folder / "dev.json").read_text(encoding="utf-8"))
    capabilities = spider_catalogue(folder / "tables.json", only={d["db_id"] for d in dev})
    yield ("spider_de dev", capabilities, spider_items(folder / "dev.json"),
           sorted((folder / "database").glob("*/*.sqlite")))
    # Harder: the same questions among all 166 databases of tables.json (851 tables).
    everything = spider_catalogue(folder / "tables.json")
    yield "spider_de 166db", everything, spider_items(folder / "dev.json"), _empty_databases(everything, _scratch())


def _type(declared: str) -> str:
    d = declared.lower()
    for needle, kind in (("int", "integer"), ("real", "real"), ("float", "real"), ("double", "real"), ("num", "real"),
                         ("dec", "real"), ("datetime", "datetime"), ("timestamp", "datetime"), ("date", "date"),
                         ("bool", "boolean")):
        if needle in d:
            return kind
    return "text"


_CREATE = re.compile(r'^CREATE TABLE\s+["`]?([^"`\s(]+)["`]?\s*\(')
_COLUMN = re.compile(r'^\s*("[^"]+"|`[^`]+`|[^\s,]+)\s+([A-Za-z]\w*)')
_FK = re.compile(r'"?([^",\s.]+)"?\.([^\s,]+)\s+\((many-to-one|one-to-one)\)')


def bird_manifest(path: Path) -> Manifest:
    """A manifest from a BIRD mini-dev schema: tables, columns, their comments as descriptions, FKs."""
    tables, comments, current, pk = [], [], None, set()
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("--"):
            comments.append(stripped[2:].strip())
            continue
        created = _CREATE.match(stripped)
        if created:
            pk_line = next((c for c in comments if "primary key" in c), "")
            pk = {x.strip().strip('"').lower() for x in re.findall(r"\(([^)]*)\)", pk_line)[0].split(",")} if "(" in pk_line else set()
            description = next((c for c in comments if "rows" not in c and not c.startswith("Stats")), "")
            current = {"name": created.group(1), "description": description, "columns": []}
            tables.append(current)
            comments = []
            continue
        if stripped.startswith(")"):
            current, comments = None, []
            continue
        column = _COLUMN.match(line)
        if current is not None and column:
            name = column.group(1).strip('"`')
            description = next((c for c in comments if not c.startswith(("Stats", "Foreign keys"))), "")
            fk = next((m for c in comments if c.startswith("Foreign keys") for m in _FK.finditer(c)), None)
            ref = f"{fk.group(1)}.{fk.group(2).strip(chr(34))}" if fk else None
            if name.lower() not in {c.name.lower() for c in current["columns"]}:
                current["columns"].append(_column(name, _type(column.group(2)), description, name.lower() in pk, ref))
            comments = []
    return Manifest(source=_safe_name(path.stem), kind="sql", url="sqlite://",
                    tables=[Table(**t) for t in tables if t["columns"]])


def corpus_bird() -> Corpus:
    folder = CORPORA / "bird"
    capabilities = CapabilitySet([bird_manifest(p) for p in sorted((folder / "schemas").glob("*.sql"))])
    data = json.loads((folder / "mini_dev_sqlite.json").read_text(encoding="utf-8"))
    items = [Item(f"{d['question']} {d.get('evidence', '')}", _safe_name(d["db_id"]), d["SQL"]) for d in data]
    yield "bird mini-dev", capabilities, items, _empty_databases(capabilities, _scratch())


def defog_manifest(path: Path) -> Manifest:
    meta = json.loads(path.read_text(encoding="utf-8"))["table_metadata"]
    tables = [Table(name=name, columns=[_column(c["column_name"], _type(c["data_type"]), c.get("column_description", ""))
                                        for c in cols]) for name, cols in meta.items() if cols]
    return Manifest(source=_safe_name(path.stem), kind="sql", url="sqlite://", tables=tables)


def _first_gold(query: str) -> str:
    """The first alternative of a defog gold query (``{a,b}`` means either column)."""
    first = query.split(";")[0]
    return re.sub(r"\{([^{},]+),[^{}]*\}", r"\1", first)


def corpus_defog() -> Corpus:
    folder = CORPORA / "defog"
    capabilities = CapabilitySet([defog_manifest(p) for p in sorted((folder / "dumps").glob("*.json"))])
    items = []
    for name in ("questions_gen_sqlite.csv", "instruct_basic_sqlite.csv", "instruct_advanced_sqlite.csv"):
        with (folder / name).open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                question = f"{row['question']} {row.get('instructions') or ''}".strip()
                items.append(Item(question, _safe_name(row["db_name"]), _first_gold(row["query"])))
    yield "defog", capabilities, items, sorted((folder / "sqlite").glob("*.db"))


def corpus_demo() -> Corpus:
    """The demo's verified examples and eval questions: shown whole (under budget), and pruned to 1,200 tokens."""
    import os

    import yaml

    os.environ.setdefault("STRUCTQ_DEMO_DIR", "/nonexistent-demo")  # only the manifests are read
    capabilities = CapabilitySet.from_path(ROOT / "capabilities")
    items = []
    for _, example in capabilities.examples():
        parts = [(s.source, s.query if isinstance(s.query, str) else None, s.index)
                 for s in example.steps if s.source != "local"]
        if parts:
            first, *rest = parts
            items.append(Item(example.question, first[0], first[1], more=tuple(rest)) if first[1] is not None
                         else Item(example.question, first[0], None, more=tuple(parts)))
    indices = [(m.source, None, i.name) for m in capabilities if m.is_search for i in m.indices]
    evaluation = yaml.safe_load((ROOT / "capabilities" / "eval.yaml").read_text(encoding="utf-8"))
    for q in evaluation["questions"]:
        if q.get("expect_sql"):
            items.append(Item(q["question"], q["source"], q["expect_sql"]))
        elif len(indices) == 1:  # expect_rows items read the demo's one search index
            items.append(Item(q["question"], indices[0][0], None, more=tuple(indices)))
    yield "demo", capabilities, items, None
    yield "demo @1200", capabilities, items, None


CORPUS_LOADERS = {"spider_en": corpus_spider_en, "spider_de": corpus_spider_de, "bird": corpus_bird,
                  "defog": corpus_defog, "demo": corpus_demo}
BUDGETS = {"demo @1200": Budget(prompt_tokens=1200, linked_tokens=1200)}


def print_table(rows: list[Figures]) -> None:
    header = (f"{'corpus':<16} {'questions':>9} {'tables':>6} {'table rec':>9} {'col rec':>8} {'all tbls':>8} "
              f"{'tokens':>7} {'full':>7} {'share':>6} {'langchain':>9} {'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} {'cpu p95':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.corpus:<16} {r.questions:>9} {r.tables:>6} {r.table_recall:>9.3f} {r.column_recall:>8.3f} "
              f"{r.all_tables:>8.1%} {r.tokens:>7.0f} {r.full_tokens:>7} {r.tokens / r.full_tokens:>6.1%} "
              f"{r.langchain if r.langchain is not None else 'n/a':>9} "
              f"{r.p50_ms:>7.2f} {r.p95_ms:>7.2f} {r.cpu_p50_ms:>7.2f} {r.cpu_p95_ms:>7.2f}")


def main(argv: list[str]) -> None:
    names = [a for a in argv if not a.startswith("-")] or list(CORPUS_LOADERS)
    show_misses = "--misses" in argv
    rows = []
    for name in names:
        for corpus, capabilities, items, databases in CORPUS_LOADERS[name]():
            misses: list[str] = []
            rows.append(measure(corpus, capabilities, items, BUDGETS.get(corpus), misses=misses, databases=databases))
            if show_misses:
                print("\n".join(misses[:80]), file=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
