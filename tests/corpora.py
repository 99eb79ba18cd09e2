"""Third-party query corpora (``../shared/corpora``) as data, and manifests built from their schemas.

The corpora test the sandbox on SQL nobody on this project wrote. Two kinds:

- *legit*: gold queries of text-to-SQL benchmarks (defog, Spider in English and German, BIRD).
  Each database gets one ``Manifest`` built from the corpus's own schema: Spider's
  ``tables.json``, or the CREATE TABLE statements of the defog dumps and BIRD schemas. There is
  one builder per schema format, no row filters, no denied columns and a generous row cap, so a
  rejection can only come from a rule of the sandbox, never from a policy.
- *hostile*: injection payloads and the test statements of other read-only SQL tools, checked
  against a small hand-made manifest whose tables match what the payloads reference.

``accepted_violations`` checks what the sandbox accepted without trusting its internals: it
re-parses the regenerated text and checks the safety invariants on that fresh tree.
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import sqlglot
from sqlglot import exp

from structq.capabilities.model import Column, Limits, Manifest, Table
from structq.errors import SandboxViolation
from structq.safety import SafeQuery, check_sql
from structq.safety.functions import function_name, is_allowed, is_table_function

# A schema as the builders produce it: table name → [(column name, manifest column type)].
Schema = dict[str, list[tuple[str, str]]]
#: Table → the columns of its primary key, where the schema declares one.
PrimaryKeys = dict[str, frozenset[str]]

#: The dialects the databases under test speak; generic and foreign payloads run under each.
ENGINE_DIALECTS = ("sqlite", "postgres", "mysql")

#: Legit corpora get a cap no gold query comes near, so the LIMIT rule never rejects one.
GENEROUS_MAX_ROWS = 100_000

_URL_FOR_DIALECT = {
    "sqlite": "sqlite://",
    "postgres": "postgresql://localhost/corpus",
    "mysql": "mysql://localhost/corpus",
}


def quiet_sqlglot() -> None:
    """sqlglot logs a warning for every Command fallback; thousands of them drown a test report."""
    logging.getLogger("sqlglot").setLevel(logging.ERROR)


# ============================================================================================
# Records
# ============================================================================================


class _Keyed:
    """A record about one query, identified in the rejection list by its SQL on its database."""

    corpus: str
    dialect: str
    database: str
    sql: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies a query in the rejection list: the same SQL on the same database."""
        return (self.corpus, self.dialect, self.database, self.sql)


@dataclass(frozen=True)
class GoldQuery(_Keyed):
    """One gold query of a legit corpus, in the dialect its corpus wrote it for."""

    corpus: str
    dialect: str
    database: str
    sql: str
    #: ``file:line`` (or ``file:row``), so a reader can find the query in the corpus.
    origin: str


@dataclass(frozen=True)
class LegitCorpus:
    """A legit corpus: its gold queries and one manifest per (database, dialect)."""

    name: str
    queries: tuple[GoldQuery, ...]
    manifests: Mapping[tuple[str, str], Manifest]

    def manifest_for(self, query: GoldQuery) -> Manifest:
        return self.manifests[(query.database, query.dialect)]


@dataclass(frozen=True)
class HostileStatement:
    """One complete statement of the hostile corpus, and the dialect it is checked under."""

    group: str
    dialect: str
    sql: str
    origin: str


# ============================================================================================
# Manifests from schemas: one builder per schema format, one constructor for all of them
# ============================================================================================

_MANIFEST_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


def _named(model: type[Column] | type[Table], name: str, **fields: object) -> Column | Table:
    """A validated column or table, even when its name is outside the manifest name pattern.

    The corpora hold names real databases have (``sänger``, ``"Free Meal Count (K-12)"``) that
    the manifest model's ASCII-identifier pattern refuses. The sandbox must still be tested on
    them, so every other field is validated and only the name is set after validation.
    """
    if _MANIFEST_NAME.match(name):
        return model(name=name, **fields)
    return model(name="placeholder", **fields).model_copy(update={"name": name})


def build_manifest(
    source: str, dialect: str, schema: Schema, *, db_schema: str | None = None, max_rows: int = GENEROUS_MAX_ROWS,
    primary_keys: PrimaryKeys | None = None,
) -> Manifest:
    """One manifest for one database: every table and column allowed, no row filters.

    ``db_schema`` is the database schema the tables live in (the manifest's ``schema``), which
    queries may use to qualify table names; ``primary_keys`` marks the key columns, as
    ``structq init`` does from the database.
    """
    keys = primary_keys or {}
    tables = [
        _named(Table, table, columns=[
            _named(Column, name, type=kind, primary_key=name in keys.get(table, frozenset())) for name, kind in columns
        ])
        for table, columns in schema.items()
        if columns
    ]
    return Manifest(
        source=source,
        kind="sql",
        url=_URL_FOR_DIALECT[dialect],
        dialect=dialect,
        schema=db_schema,
        limits=Limits(max_rows=max_rows),
        tables=tables,
    )


_SPIDER_TYPES = {"text": "text", "number": "numeric", "time": "datetime", "boolean": "boolean"}


def schema_from_spider(entry: Mapping[str, object]) -> Schema:
    """A Spider ``tables.json`` entry: original names, column i belongs to table ``[i][0]``."""
    tables: Schema = {name: [] for name in entry["table_names_original"]}  # type: ignore[union-attr]
    names = list(tables)
    for (table_index, column), kind in zip(entry["column_names_original"], entry["column_types"]):  # type: ignore[call-overload]
        if table_index >= 0:  # index -1 is the "*" pseudo-column
            tables[names[table_index]].append((column, _SPIDER_TYPES.get(kind, "text")))
    return tables


def _ddl_type(data_type: exp.DataType | None) -> str:
    """The manifest type of a DDL column type; anything unusual is text, which only widens."""
    if data_type is None:
        return "text"
    t, T = data_type.this, exp.DataType.Type
    if t in exp.DataType.INTEGER_TYPES:
        return "integer"
    if t in exp.DataType.REAL_TYPES:
        return "numeric" if t in (T.DECIMAL, T.BIGDECIMAL, T.MONEY, T.SMALLMONEY) else "real"
    if t == T.BOOLEAN:
        return "boolean"
    if t == T.DATE:
        return "date"
    if t in exp.DataType.TEMPORAL_TYPES:
        return "datetime"
    if t in (T.JSON, T.JSONB):
        return "json"
    if t in (T.BINARY, T.VARBINARY, T.BLOB, T.LONGBLOB, T.MEDIUMBLOB, T.TINYBLOB):
        return "binary"
    return "text"


def _created_tables(ddl: str, dialect: str) -> Iterator[exp.Schema]:
    """The target (table and column list) of each CREATE TABLE with a column list."""
    quiet_sqlglot()
    for statement in sqlglot.parse(ddl, read=dialect):
        if isinstance(statement, exp.Create) and statement.kind == "TABLE" and isinstance(statement.this, exp.Schema):
            yield statement.this  # CREATE TABLE … AS SELECT has no column list and is skipped


def ddl_schema_name(ddl: str, dialect: str) -> str | None:
    """The schema a dump creates its tables in (``CREATE TABLE consumer_div.users``), if one."""
    qualifiers = {target.this.db for target in _created_tables(ddl, dialect)} - {""}
    return qualifiers.pop() if len(qualifiers) == 1 else None


def schema_from_ddl(ddl: str, dialect: str) -> Schema:
    """CREATE TABLE statements (a dump may also hold INSERTs and comments, which are skipped).

    Schema qualifiers (``consumer_div.users``) are dropped: the manifest names bare tables and
    carries the schema separately (``ddl_schema_name``).
    """
    tables: Schema = {}
    for target in _created_tables(ddl, dialect):
        tables[target.this.name] = [
            (column.name, _ddl_type(column.args.get("kind")))
            for column in target.expressions
            if isinstance(column, exp.ColumnDef)
        ]
    return tables


def primary_keys_from_ddl(ddl: str, dialect: str) -> PrimaryKeys:
    """The primary key of each table of CREATE TABLE statements: a column's ``PRIMARY KEY``
    or the table's ``PRIMARY KEY (…)``, named or not."""
    keys: PrimaryKeys = {}
    for target in _created_tables(ddl, dialect):
        columns = {
            column.name
            for column in target.expressions
            if isinstance(column, exp.ColumnDef)
            and any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint) for c in column.args.get("constraints") or ())
        }
        for key in target.find_all(exp.PrimaryKey):
            columns |= {part.name for part in key.expressions}
        if columns:
            keys[target.this.name] = frozenset(columns)
    return keys


# ============================================================================================
# Legit corpora
# ============================================================================================


def split_statements(text: str) -> list[str]:
    """Split on ``;`` outside quoted text: defog separates alternative gold queries with ``;``,
    and a ``;`` inside a literal or quoted name must not cut a query in two."""
    parts, current, quote = [], [], ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char == ";":
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def expand_defog_alternatives(query: str) -> list[str]:
    """Every gold query a defog ``query`` cell stands for.

    As in defog's own evaluator: ``;`` separates alternatives, and ``{a, b}`` means any
    non-empty combination of those columns is acceptable, with ``GROUP BY {}`` repeating the
    chosen ones.
    """
    expanded = []
    for statement in split_statements(query):
        start = statement.find("{")
        end = statement.find("}", start)
        if start < 0 or end < 0:
            expanded.append(statement)
            continue
        options = [option.strip() for option in statement[start + 1 : end].split(",")]
        left, right = statement[:start], statement[end + 1 :]
        for size in range(1, len(options) + 1):
            for chosen in itertools.combinations(options, size):
                columns = ", ".join(chosen)
                expanded.append(left + columns + right.replace("GROUP BY {}", f"GROUP BY {columns}"))
    return expanded


_DEFOG_DIALECT_FILES = {"postgres": "postgres", "mysql": "mysql", "sqlite": "sqlite"}


def load_defog(root: Path) -> LegitCorpus:
    """defog sql-eval: three question sets per dialect, schemas from the PostgreSQL dumps.

    The PostgreSQL dump is the original; the MySQL and SQLite ones are translations of it, so
    one schema serves all three dialects. The database schema is the one the real databases
    use (``defog_schema``), so the gold queries' qualified names (``consumer_div.users``,
    ``broker.sbCustomer``) resolve.
    """
    folder = root / "legit" / "defog"
    queries: list[GoldQuery] = []
    for dialect, suffix in _DEFOG_DIALECT_FILES.items():
        for path in sorted(folder.glob(f"*_{suffix}.csv")):
            with path.open(newline="", encoding="utf-8") as handle:
                for row_number, row in enumerate(csv.DictReader(handle), start=2):
                    for sql in expand_defog_alternatives(row["query"]):
                        queries.append(GoldQuery("defog", dialect, row["db_name"], sql, f"{path.name}:{row_number}"))
    dumps = {
        dump.stem: dump.read_text(encoding="utf-8")
        for dump in sorted((folder / "dumps").glob("*.sql"))
        if not dump.stem.endswith(("_mysql", "_sqlite"))
    }
    schemas = {name: schema_from_ddl(ddl, "postgres") for name, ddl in dumps.items()}
    qualifiers = {name: ddl_schema_name(ddl, "postgres") for name, ddl in dumps.items()}
    keys = {name: primary_keys_from_ddl(ddl, "postgres") for name, ddl in dumps.items()}
    return _corpus("defog", queries, schemas, lambda db, dialect: defog_schema(db, dialect, qualifiers[db]), keys)


def defog_schema(database: str, dialect: str, dump_schema: str | None) -> str:
    """Where defog's databases keep their tables, per dialect.

    PostgreSQL: the schema the dump creates them in, else ``public``. MySQL: a schema *is* a
    database, and each defog database is loaded under its own name (``broker.sbCustomer``).
    SQLite: every file is attached as ``main``.
    """
    if dialect == "postgres":
        return dump_schema or "public"
    if dialect == "mysql":
        return database
    return "main"


def _spider_schemas(tables_json: Path) -> dict[str, Schema]:
    entries = json.loads(tables_json.read_text(encoding="utf-8"))
    return {entry["db_id"]: schema_from_spider(entry) for entry in entries}


def _tab_separated_gold(path: Path, corpus: str, dialect: str) -> list[GoldQuery]:
    """``SQL<TAB>db_id`` per line: Spider's ``*_gold.sql`` and BIRD's ``mini_dev_*_gold.sql``."""
    queries = []
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            sql, database = line.rsplit("\t", 1)
            queries.append(GoldQuery(corpus, dialect, database.strip(), sql.strip(), f"{path.name}:{line_number}"))
    return queries


def load_spider_de(root: Path) -> LegitCorpus:
    """German Spider: ``dev.json`` questions; the schema from its ``tables.json``."""
    folder = root / "legit" / "spider_de"
    entries = json.loads((folder / "dev.json").read_text(encoding="utf-8"))
    queries = [
        GoldQuery("spider_de", "sqlite", entry["db_id"], entry["query"].strip(), f"dev.json:{index}")
        for index, entry in enumerate(entries)
    ]
    return _corpus("spider_de", queries, _spider_schemas(folder / "tables.json"))


def load_spider_en(root: Path) -> LegitCorpus:
    """English Spider: dev gold on ``tables.json``, test gold on ``test_tables.json`` (a superset)."""
    folder = root / "legit" / "spider_en"
    queries = _tab_separated_gold(folder / "dev_gold.sql", "spider_en", "sqlite")
    queries += _tab_separated_gold(folder / "test_gold.sql", "spider_en", "sqlite")
    schemas = _spider_schemas(folder / "tables.json") | _spider_schemas(folder / "test_tables.json")
    return _corpus("spider_en", queries, schemas)


_BIRD_DIALECTS = {"sqlite": "sqlite", "mysql": "mysql", "postgresql": "postgres"}


def load_bird(root: Path) -> LegitCorpus:
    """BIRD mini-dev: the same 500 questions in three dialects, one DDL schema per database."""
    folder = root / "legit" / "bird"
    queries: list[GoldQuery] = []
    for name, dialect in _BIRD_DIALECTS.items():
        queries += _tab_separated_gold(folder / f"mini_dev_{name}_gold.sql", "bird", dialect)
    schemas = {
        path.stem: schema_from_ddl(path.read_text(encoding="utf-8"), "sqlite")
        for path in sorted((folder / "schemas").glob("*.sql"))
    }
    return _corpus("bird", queries, schemas)


def _corpus(
    name: str,
    queries: Sequence[GoldQuery],
    schemas: Mapping[str, Schema],
    db_schema: Callable[[str, str], str | None] = lambda database, dialect: None,
    primary_keys: Mapping[str, PrimaryKeys] | None = None,
) -> LegitCorpus:
    """Attach a manifest per (database, dialect) actually used by the corpus's queries;
    ``db_schema(database, dialect)`` names the schema its tables live in, if queries use one;
    ``primary_keys`` holds each database's keys, where its schema declares them."""
    used = {(q.database, q.dialect) for q in queries}
    keys = primary_keys or {}
    manifests = {
        (db, dialect): build_manifest(db, dialect, schemas[db], db_schema=db_schema(db, dialect), primary_keys=keys.get(db))
        for db, dialect in sorted(used)
    }
    return LegitCorpus(name, tuple(queries), manifests)


LEGIT_LOADERS: dict[str, Callable[[Path], LegitCorpus]] = {
    "defog": load_defog,
    "spider_de": load_spider_de,
    "spider_en": load_spider_en,
    "bird": load_bird,
}


# ============================================================================================
# Running the sandbox
# ============================================================================================

#: What checking one query gave: the accepted query, the violation, or an exception the
#: sandbox should never let out (anything but ``SandboxViolation`` is a bug in it).
Outcome = SafeQuery | SandboxViolation | Exception


def sandbox_outcome(sql: str, manifest: Manifest) -> Outcome:
    """``check_sql`` on one query, its result or its exception as a value, for tallying."""
    try:
        return check_sql(sql, manifest)
    except SandboxViolation as violation:
        return violation
    except Exception as error:  # noqa: BLE001 - a crash is an outcome the tests report
        return error


def sqlglot_parses(sql: str, dialect: str) -> bool:
    """Whether sqlglot reads ``sql`` into a real tree: no ParseError and no Command fallback.

    The acceptance rate is measured over these; what sqlglot cannot read, a fail-closed
    sandbox must refuse.
    """
    try:
        trees = sqlglot.parse(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return False
    return all(tree is not None and tree.find(exp.Command) is None for tree in trees)


def one_line(text: str) -> str:
    """A message on one line, for a TSV cell and a readable failure report."""
    return " ".join(text.split())


# ============================================================================================
# The checked-in list of legit rejections
# ============================================================================================

REJECTION_COLUMNS = ("corpus", "dialect", "database", "code", "message", "reason", "origin", "sql")

#: Why each kind of rejection is a rule and not a gap: the ``reason`` column of the list. A
#: code without an entry has no reviewed reason, and the list test fails until one is written.
REJECTION_REASONS: dict[str, str] = {
    "parse_error": "rule: fail closed on what sqlglot cannot read (here a keyword such as ALTER used as a "
    "column name, or an expression in LIMIT); a sandbox must not guess what it cannot parse",
    "unknown_table": "rule: the table is not declared in the manifest, or is a system catalog",
    "denied_function": "rule: the function is not on the allowlist (side effects, I/O, system information)",
    "placeholder": "rule: only the sandbox binds values",
}

@dataclass(frozen=True)
class Rejection(_Keyed):
    """A gold query the sandbox refuses, and why (the violation's code and message)."""

    corpus: str
    dialect: str
    database: str
    code: str
    message: str
    reason: str
    origin: str
    sql: str


def rejection_reason(code: str) -> str:
    """The reviewed reason for refusals with ``code``; a code nobody reviewed says so."""
    return REJECTION_REASONS.get(code, "NOT REVIEWED: a gap until shown otherwise")


def _escape(value: str) -> str:
    """One record per line: backslash, tab and newline are escaped, so the file diffs cleanly."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), value)


def read_rejections(path: Path) -> dict[tuple[str, str, str, str], Rejection]:
    """The rejection list by query key (an absent file is an empty list); ``#`` lines are comments."""
    if not path.exists():
        return {}
    rows = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    out = {}
    for line in rows[1:]:
        if line.strip():
            rejection = Rejection(*(_unescape(field) for field in line.split("\t")))
            out[rejection.key] = rejection
    return out


#: The comment block at the top of the list: what it is and how to read it.
REJECTIONS_HEADER = """\
# Gold queries of the legit corpora that the sandbox refuses, each reviewed as a real rule.
# Written by tests/test_sandbox_corpora.py (STRUCTQ_UPDATE_REJECTIONS=1); review every diff.
# Columns: the query's corpus, dialect and database; the violation's code and message; the
# reason the refusal is a rule and not a gap (one per code, see REJECTION_REASONS in
# tests/corpora.py); where the query is in the corpus; the query itself.
# Categories:
#   parse_error     sqlglot cannot parse the text (Spider's column named ALTER, a LIMIT with an
#                   arithmetic expression): refused because the sandbox never guesses. Queries
#                   that do not parse are also left out of the acceptance figures.
#   unknown_table   an undeclared or system table, or a qualifier other than the manifest's schema.
#   denied_function a function with side effects, I/O or system information.
#   placeholder     a bind parameter written by the query's author.
"""


def write_rejections(path: Path, rejections: Iterable[Rejection]) -> None:
    """Write the list sorted by corpus, dialect, code and SQL, so regenerations diff minimally."""
    ordered = sorted(set(rejections), key=lambda r: (r.corpus, r.dialect, r.code, r.database, r.sql))
    lines = ["\t".join(REJECTION_COLUMNS)]
    lines += ["\t".join(_escape(getattr(r, column)) for column in REJECTION_COLUMNS) for r in ordered]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(REJECTIONS_HEADER + "\n".join(lines) + "\n", encoding="utf-8")


# ============================================================================================
# Hostile corpus
# ============================================================================================

#: Folder → dialects its statements are checked under. Generic and foreign-database payloads
#: target no database of ours, so each runs under every database dialect.
HOSTILE_GROUPS: dict[str, tuple[str, ...]] = {
    "postgres": ("postgres",),
    "mysql": ("mysql",),
    "sqlite": ("sqlite",),
    "generic": ENGINE_DIALECTS,
    "other": ENGINE_DIALECTS,
}


def _hostile_files(folder: Path, group: str) -> list[Path]:
    """``other/`` has no ``ALL_full_statements.txt``: its per-database ``*.full.txt`` are the set.

    For PostgreSQL the upstream test files of read-only tools are added (labels are ignored:
    the property decides).
    """
    if group == "other":
        return sorted((folder / group).glob("*/*.full.txt"))
    files = [folder / group / "ALL_full_statements.txt"]
    if group == "postgres":
        files += sorted((folder / group).glob("mcpro_*.full.txt"))
    return files


def _labeled_tsv_statements(path: Path) -> Iterator[tuple[str, str]]:
    """``label<TAB>name<TAB>sql`` rows of postgres-mcp's tests, as (origin, sql)."""
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split("\t", 2)
        if len(fields) == 3 and fields[2].strip():
            yield f"{path.name}:{line_number}", fields[2]


def _plain_statements(path: Path, root: Path) -> Iterator[tuple[str, str]]:
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            yield f"{path.relative_to(root)}:{line_number}", line


def load_hostile(root: Path) -> list[HostileStatement]:
    """Every complete hostile statement once per dialect it is checked under (deduplicated)."""
    folder = root / "hostile"
    out: list[HostileStatement] = []
    for group, dialects in HOSTILE_GROUPS.items():
        sources: list[tuple[str, str]] = []
        for path in _hostile_files(folder, group):
            sources += _plain_statements(path, folder)
        if group == "postgres":
            sources += _labeled_tsv_statements(folder / group / "postgres_mcp_labeled.tsv")
        unique = dict((sql, origin) for origin, sql in reversed(sources))
        for dialect in dialects:
            out += [HostileStatement(group, dialect, sql, origin) for sql, origin in unique.items()]
    return out


#: The tables the payloads read, as the hostile test manifest declares them. ``users.password``
#: and ``employees.salary`` are denied, so payloads that go after them exercise the deny rule.
#: Catalogs (information_schema, pg_catalog, sqlite_master, DUAL…) are deliberately absent.
HOSTILE_SCHEMA: Schema = {
    "users": [("id", "integer"), ("name", "text"), ("username", "text"), ("email", "text"),
              ("status", "text"), ("age", "integer"), ("password", "text")],
    "products": [("product_id", "integer"), ("product_name", "text"), ("product_price", "real")],
    "orders": [("id", "integer"), ("user_id", "integer"), ("order_date", "date"), ("status", "text"),
               ("price", "real"), ("quantity", "integer"), ("total", "real")],
    "employees": [("id", "integer"), ("name", "text"), ("email", "text"), ("salary", "real")],
    "events": [("id", "integer"), ("name", "text"), ("user_id", "integer")],
}
HOSTILE_DENIED = {("users", "password"), ("employees", "salary")}
HOSTILE_MAX_ROWS = 50

#: A few rows per table for the execution test, as plain values in HOSTILE_SCHEMA's column order.
HOSTILE_ROWS: dict[str, list[tuple[object, ...]]] = {
    "users": [(1, "alice", "alice", "alice@example.com", "active", 34, "s3cret"),
              (2, "bob", "bob", "bob@example.com", "inactive", 17, "hunter2"),
              (3, "carol", "admin", "carol@example.com", "active", 52, "P@ssw0rd")],
    "products": [(1, "widget", 9.5), (2, "gadget", 24.0)],
    "orders": [(1, 1, date(2024, 1, 5), "pending", 9.5, 3, 28.5), (2, 3, date(2024, 2, 11), "shipped", 24.0, 50, 1200.0)],
    "employees": [(1, "dora", "dora@example.com", 5200.0), (2, "emil", "emil@example.com", 4100.0)],
    "events": [(1, "login", 1), (2, "logout", 1), (3, "login", 3)],
}


def hostile_outcomes(root: Path, dialects: Collection[str] = ENGINE_DIALECTS) -> Iterator[tuple[HostileStatement, Outcome]]:
    """Every hostile statement checked under each of its dialects that is in ``dialects``."""
    quiet_sqlglot()
    manifests = {dialect: hostile_manifest(dialect) for dialect in dialects}
    for statement in load_hostile(root):
        if statement.dialect in manifests:
            yield statement, sandbox_outcome(statement.sql, manifests[statement.dialect])


def hostile_manifest(dialect: str) -> Manifest:
    """The hostile test manifest in ``dialect``, with the denied columns marked."""
    tables = [
        Table(
            name=table,
            columns=[
                Column(name=name, type=kind, access="deny" if (table, name) in HOSTILE_DENIED else "allow")
                for name, kind in columns
            ],
        )
        for table, columns in HOSTILE_SCHEMA.items()
    ]
    return Manifest(
        source="hostile", kind="sql", url=_URL_FOR_DIALECT[dialect], dialect=dialect,
        limits=Limits(max_rows=HOSTILE_MAX_ROWS), tables=tables,
    )


# ============================================================================================
# The property an accepted query must have, checked on a fresh parse of what would run
# ============================================================================================

def _forbidden_node_types() -> tuple[type[exp.Expression], ...]:
    """Write, DDL, session and fallback node types of the installed sqlglot (names vary by release)."""
    names = (
        "DML", "DDL", "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "TruncateTable",
        "Command", "Transaction", "Commit", "Rollback", "Set", "Pragma", "Attach", "Detach",
        "Copy", "Into", "Lock", "LoadData", "Use", "Grant", "Revoke", "Analyze", "Describe",
        "Show", "Kill", "Execute", "Summarize", "Comment", "Cache", "Uncache", "Refresh",
    )
    return tuple(getattr(exp, name) for name in names if isinstance(getattr(exp, name, None), type))


FORBIDDEN_NODES = _forbidden_node_types()
QUERY_ROOTS = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)


def _cte_and_derived_names(tree: exp.Expression) -> set[str]:
    """Names a FROM may use without being a real table: CTE names and derived-table aliases."""
    names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names |= {sub.alias.lower() for sub in tree.find_all(exp.Subquery) if sub.alias}
    return names


def _outer_limit(tree: exp.Expression, params: Mapping[str, object]) -> int | None:
    """The row count of the outermost LIMIT or FETCH FIRST (a literal or a bound parameter);
    None when there is none or it is not a plain integer."""
    node = tree
    while isinstance(node, exp.Subquery):
        node = node.this
    clause = node.args.get("limit")
    count = clause.args.get("count") if isinstance(clause, exp.Fetch) else getattr(clause, "expression", None)
    if isinstance(count, exp.Literal) and count.is_int:
        return int(count.name)
    if isinstance(count, exp.Placeholder) and isinstance(params.get(count.name), int):
        return int(params[count.name])  # type: ignore[call-overload]
    return None


def _placeholder_violations(tree: exp.Expression, safe: SafeQuery) -> list[str]:
    """Only the sandbox's own named parameters; no ``?``, ``$1``, ``@var`` or ``@@server_var``."""
    problems = []
    for node in tree.find_all(exp.Placeholder, exp.Parameter, exp.SessionParameter):
        if not (isinstance(node, exp.Placeholder) and node.name and node.name in safe.params):
            problems.append(f"parameter {node.sql()} is not one the sandbox bound")
    return problems


def accepted_violations(safe: SafeQuery, manifest: Manifest) -> list[str]:
    """Why an accepted query breaks the sandbox's contract; empty when it keeps it.

    Independent of the sandbox's internals: the text that would run is parsed afresh in the
    manifest's dialect and every invariant is checked on that tree.
    """
    dialect = manifest.sql_dialect
    text = safe.text or ""
    try:
        trees = [t for t in sqlglot.parse(text, read=dialect) if t is not None]
    except sqlglot.errors.ParseError as error:
        return [f"accepted text does not parse: {error}"]
    if len(trees) != 1:
        return [f"accepted text holds {len(trees)} statements"]
    tree = trees[0]
    problems = []
    if not isinstance(tree, QUERY_ROOTS):
        problems.append(f"root is {type(tree).__name__}, not a query")
    problems += [f"forbidden node {type(n).__name__}: {n.sql(dialect)[:80]}" for n in tree.find_all(*FORBIDDEN_NODES)]
    problems += _table_violations(tree, manifest)
    problems += _column_violations(tree, manifest)
    problems += _function_violations(tree, manifest)
    problems += _placeholder_violations(tree, safe)
    limit = _outer_limit(tree, safe.params)
    if limit is None or limit > safe.limit or safe.limit != manifest.limits.max_rows + 1:
        problems.append(f"outermost LIMIT {limit} is not within the enforced {manifest.limits.max_rows + 1}")
    return problems


def _is_mysql_dual(table: exp.Table, manifest: Manifest) -> bool:
    name = table.this
    return (manifest.sql_dialect == "mysql" and isinstance(name, exp.Identifier) and not name.quoted
            and name.name.lower() == "dual" and not table.args.get("db") and manifest.table("dual") is None)


def _table_violations(tree: exp.Expression, manifest: Manifest) -> list[str]:
    local = _cte_and_derived_names(tree)
    problems = []
    for table in tree.find_all(exp.Table):
        if not table.name:  # a table-valued function (json_each, UNNEST) is a Func, checked there
            continue
        if _is_mysql_dual(table, manifest):  # the keyword for "no table", not a table's name
            continue
        if table.args.get("catalog") or (table.args.get("db") and table.text("db").lower() != (manifest.schema_ or "").lower()):
            problems.append(f"qualified table {table.sql()} (the manifest's schema is {manifest.schema_!r})")
        elif (manifest.schema_ and manifest.sql_dialect != "sqlite" and not table.args.get("db")
              and table.name.lower() not in local):
            problems.append(f"table {table.name} not qualified with the manifest's schema {manifest.schema_!r}")
        elif manifest.table(table.name) is None and table.name.lower() not in local:
            problems.append(f"undeclared table {table.name}")
    return problems


def _function_violations(tree: exp.Expression, manifest: Manifest) -> list[str]:
    """Every call on the fresh tree must be on the sandbox's allowlist (imported, not copied:
    the allowlist defines "allowed"; the calls are found here, independently).

    A table-valued function is allowed only as a table source and only if listed as one.
    """
    dialect = manifest.sql_dialect
    problems = set()
    for node in tree.find_all(exp.Func):
        if isinstance(node.parent, exp.Table) and is_table_function(node, dialect):
            continue
        if not is_allowed(node, dialect, manifest.functions):
            problems.add(f"function {function_name(node)} is not on the allowlist")
    return sorted(problems)


def _column_violations(tree: exp.Expression, manifest: Manifest) -> list[str]:
    """A denied column's name may appear nowhere: not as a column, not even as an alias."""
    denied = {c.name.lower() for t in manifest.tables for c in t.columns if c.denied}
    names = {ident.name.lower() for ident in tree.find_all(exp.Identifier)}
    return [f"denied column {name} appears" for name in sorted(names & denied)]
