"""The corpora ``bench/linking.py`` measures, each loaded as one capability set.

Spider (``tables.json``: names, types, keys, FKs), BIRD mini-dev (DDL with column comments as
descriptions), defog (column descriptions from its JSON), and the bundled demo. A corpus
yields (name, capability set, questions with their gold SQL, SQLite files for LangChain's
``get_table_info`` or None).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from structq.capabilities import CapabilitySet
from structq.capabilities.model import Column, Manifest, Table

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


# --- cross-language corpora: the question in one language, the names in another ---------------------


def _neighbours(exclude: set[str]) -> list[Manifest]:
    """Spider's test databases (English names) but those in ``exclude``: a large catalogue to get lost in."""
    folder = CORPORA / "spider_en"
    tables = folder / "test_tables.json"
    if not tables.is_file():
        tables = folder / "tables.json"
    return [m for m in spider_catalogue(tables) if m.source not in {_safe_name(x) for x in exclude}]


def corpus_en_de() -> Corpus:
    """English Spider dev questions over the German-named dev databases of spider_de, among
    Spider's English test databases (the dev databases themselves left out, so the English
    copy of a German database is not there to be found instead)."""
    folder = CORPORA / "spider_de"
    dev = json.loads((folder / "dev.json").read_text(encoding="utf-8"))
    dev_ids = {d["db_id"] for d in dev}
    german = list(spider_catalogue(folder / "tables.json", only=dev_ids))
    capabilities = CapabilitySet(german + _neighbours(dev_ids))
    items = [Item(d["match"], _safe_name(d["db_id"]), d["query"]) for d in dev if d.get("match")]
    yield "en→de names", capabilities, items, None


ZH_QUESTIONS = ROOT / "bench" / "linking_zh.json"


def zh_items() -> list[Item]:
    """The Chinese questions of ``bench/linking_zh.json`` with Spider dev's gold SQL."""
    data = json.loads(ZH_QUESTIONS.read_text(encoding="utf-8"))["questions"]
    return [Item(d["question"], _safe_name(d["db_id"]), d["query"]) for d in data]


def corpus_zh() -> Corpus:
    """Chinese questions over Spider dev's English-named databases, all 206 test databases loaded;
    and the same questions in Spider's English (the control: what the language alone costs)."""
    capabilities = CapabilitySet(_neighbours(set()))
    data = json.loads(ZH_QUESTIONS.read_text(encoding="utf-8"))["questions"]
    yield "zh→en names", capabilities, zh_items(), None
    yield "zh control (en)", capabilities, [Item(d["question_en"], _safe_name(d["db_id"]), d["query"]) for d in data], None


CORPUS_LOADERS = {"spider_en": corpus_spider_en, "spider_de": corpus_spider_de, "bird": corpus_bird,
                  "defog": corpus_defog, "demo": corpus_demo, "en_de": corpus_en_de, "zh": corpus_zh}

#: Corpora whose questions are not in the language of the names (the confidence target differs).
CROSS_LANGUAGE = {"en→de names", "zh→en names"}
