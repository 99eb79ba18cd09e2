"""The demo company: the same seed builds the same data, and the seed questions have answers.

The verified examples of ``capabilities/*.yaml`` are run end to end against a built demo
without the agent: SQL steps with ``sqlite3`` (references bound as JSON parameters), local
steps over earlier results in an in-memory database, and search steps by evaluating their
DSL subset over the JSONL documents in Python. The manifests are read with plain
``yaml.safe_load`` so these tests stand on the generator alone.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import yaml
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify

from structq.capabilities import manifest_files
from structq.demo import DemoPaths, build_demo

CAPABILITIES = Path(__file__).resolve().parents[1] / "capabilities"
MANIFESTS = {
    manifest["source"]: manifest
    for manifest in (yaml.safe_load(path.read_text(encoding="utf-8"))
                     for path in manifest_files(CAPABILITIES))
}
EXAMPLES = [example for manifest in MANIFESTS.values() for example in manifest.get("examples", [])]
#: Test ids for the examples: plain ASCII (``hr-4``), since pytest escapes Chinese in ids.
EXAMPLE_IDS = [f"{source}-{n}" for source, manifest in MANIFESTS.items()
               for n, _ in enumerate(manifest.get("examples", []), start=1)]
REFERENCE = re.compile(r"<([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?>")
#: A slotted example's parameter (``:month_start``), outside string literals (the examples have none there).
SLOT_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
#: The day relative slot examples (上个月, last year) are read for, as ``structq demo`` asks them.
DEMO_TODAY = date(2026, 11, 30)
WINDOW = ("2023-01-01", "2026-10-31")
SMALL = 0.05

Rows = list[dict[str, Any]]


# --- building -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(demo_data: DemoPaths) -> DemoPaths:
    """The demo at its default scale: the session's build (``conftest.demo_data``), so the
    suite builds it once (about 10 s)."""
    return demo_data


@pytest.fixture(scope="module")
def db(demo: DemoPaths) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(f"file:{demo.database}?mode=ro", uri=True)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def documents(demo: DemoPaths) -> list[dict[str, Any]]:
    with demo.reports.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def fingerprint(database: Path) -> dict[str, str]:
    """A hash of every table's rows, read in primary-key order."""
    connection = sqlite3.connect(database)
    try:
        tables = [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        digests = {}
        for table in tables:
            info = connection.execute(f"PRAGMA table_info({table})").fetchall()
            key = ", ".join(column[1] for column in sorted(info, key=lambda c: c[5]) if column[5])
            digest = hashlib.sha256()
            for row in connection.execute(f"SELECT * FROM {table} ORDER BY {key}"):
                digest.update(repr(row).encode())
            digests[table] = digest.hexdigest()
        return digests
    finally:
        connection.close()


def test_same_seed_builds_identical_data(tmp_path: Path) -> None:
    first = build_demo(tmp_path / "a", scale=SMALL, seed=3)
    second = build_demo(tmp_path / "b", scale=SMALL, seed=3)
    assert fingerprint(first.database) == fingerprint(second.database)
    assert first.reports.read_bytes() == second.reports.read_bytes()


def test_other_seed_builds_other_data(tmp_path: Path) -> None:
    first = build_demo(tmp_path / "a", scale=SMALL, seed=3)
    other = build_demo(tmp_path / "b", scale=SMALL, seed=4)
    assert fingerprint(first.database)["sales"] != fingerprint(other.database)["sales"]
    assert first.reports.read_bytes() != other.reports.read_bytes()


def test_failed_build_keeps_previous_files(tmp_path: Path) -> None:
    paths = build_demo(tmp_path, scale=SMALL)
    before = fingerprint(paths.database), paths.reports.read_bytes()

    def interrupt(stage: str, done: int, total: int) -> None:
        if stage == "sales" and done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_demo(tmp_path, scale=SMALL, seed=9, progress=interrupt)
    assert (fingerprint(paths.database), paths.reports.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["company.db", "weekly_reports.jsonl"]


def test_progress_reaches_every_stage_total(tmp_path: Path) -> None:
    last: dict[str, tuple[int, int]] = {}
    build_demo(tmp_path, scale=SMALL, progress=lambda stage, done, total: last.update({stage: (done, total)}))
    assert set(last) == {"employees", "projects", "project_members", "employee_performance",
                         "customers", "products", "sales", "contracts", "weekly_reports"}
    assert all(done == total > 0 for done, total in last.values())


@pytest.mark.parametrize("scale", [0, -1.0])
def test_scale_must_be_positive(tmp_path: Path, scale: float) -> None:
    with pytest.raises(ValueError, match="scale"):
        build_demo(tmp_path, scale=scale)


# --- the data at the default scale --------------------------------------------------------


def count(db: sqlite3.Connection, sql: str, *params: object) -> int:
    return db.execute(sql, params).fetchone()[0]


def test_default_scale_sizes(db: sqlite3.Connection, documents: list[dict[str, Any]]) -> None:
    assert count(db, "SELECT COUNT(*) FROM sales") >= 200_000
    assert count(db, "SELECT COUNT(*) FROM employees") >= 400
    assert 10_000 <= len(documents) <= 30_000


def test_references_resolve(db: sqlite3.Connection) -> None:
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.mark.parametrize(("table", "column"), [
    ("employees", "leave_date"), ("projects", "start_date"), ("projects", "end_date"),
    ("project_members", "joined_at"), ("employee_performance", "assessment_month"),
    ("sales", "sale_date"), ("contracts", "signed_at"),
])
def test_event_dates_lie_in_the_window(db: sqlite3.Connection, table: str, column: str) -> None:
    # hire_date is not among them: many people were hired before the data starts.
    low, high = db.execute(f"SELECT MIN({column}), MAX({column}) FROM {table}").fetchone()
    assert WINDOW[0] <= low <= high <= WINDOW[1]


def test_calendar_conventions(db: sqlite3.Connection, documents: list[dict[str, Any]]) -> None:
    assert count(db, "SELECT COUNT(*) FROM employee_performance WHERE assessment_month NOT LIKE '%-01'") == 0
    assert {date.fromisoformat(d["week_start_date"]).weekday() for d in documents} == {0}
    assert all(WINDOW[0] <= d["week_start_date"] <= WINDOW[1] for d in documents)


def test_schema_is_what_the_manifests_declare(db: sqlite3.Connection) -> None:
    declared = {table["name"]: [column["name"] for column in table["columns"]]
                for manifest in MANIFESTS.values() for table in manifest.get("tables", [])}
    actual = {name: [column[1] for column in db.execute(f"PRAGMA table_info({name})")]
              for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%'")}
    assert declared == actual


def enum_columns() -> Iterator[Any]:
    for manifest in MANIFESTS.values():
        for table in manifest.get("tables", []) + manifest.get("indices", []):
            for column in table.get("columns", table.get("fields", [])):
                if column.get("values"):
                    yield pytest.param(table["name"], column["name"], column["values"],
                                       id=f"{table['name']}.{column['name']}")


@pytest.mark.parametrize(("table", "column", "values"), list(enum_columns()))
def test_enum_values_are_declared_ones(
    db: sqlite3.Connection, documents: list[dict[str, Any]], table: str, column: str, values: dict[str, str]
) -> None:
    if table == "weekly_reports":
        seen = {document[column] for document in documents}
    else:
        seen = {value for (value,) in db.execute(f"SELECT DISTINCT {column} FROM {table}")}
    assert seen <= {str(key) for key in values}


def test_denied_columns_hold_fake_values(db: sqlite3.Connection) -> None:
    cards = [card for (card,) in db.execute("SELECT id_card FROM employees")]
    assert all(re.fullmatch(r"\d{18}", card) for card in cards)
    assert not any(_valid_id_card(card) for card in cards)


def _valid_id_card(card: str) -> bool:
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return "10X98765432"[sum(int(d) * w for d, w in zip(card[:17], weights, strict=True)) % 11] == card[17]


# --- running the verified examples -----------------------------------------------------------


def _period(text: str, kind: str) -> tuple[date, date]:
    """A slot example's period: the canonical form (2026-03, 2023-Q4, 2025) or words (上个月)."""
    from structq.periods import find_periods

    if re.fullmatch(r"\d{4}", text):
        return date(int(text), 1, 1), date(int(text), 12, 31)
    if found := re.fullmatch(r"(\d{4})-(\d{2})", text):
        year, month = int(found[1]), int(found[2])
        after = date(year + month // 12, month % 12 + 1, 1)
        return date(year, month, 1), date.fromordinal(after.toordinal() - 1)
    if found := re.fullmatch(r"(\d{4})-Q([1-4])", text):
        year, quarter = int(found[1]), int(found[2])
        return _period(f"{year}-{quarter * 3 - 2:02d}", kind)[0], _period(f"{year}-{quarter * 3:02d}", kind)[1]
    (period,) = find_periods(text, DEMO_TODAY)
    return period.first, period.last


def slot_values(example: dict[str, Any]) -> dict[str, Any]:
    """The parameters a slotted example's own question binds (its slots' example values)."""
    values: dict[str, Any] = {}
    for name, slot in example.get("slots", {}).items():
        text = str(slot["example"])
        if "column" in slot:
            values[name] = text
        elif slot["type"] == "integer":
            values[name] = int(text)
        else:
            first, last = _period(text, slot["type"])
            values.update({f"{name}_start": first.isoformat(), f"{name}_end": last.isoformat(), name: first.isoformat()})
    return values


def run_plan(
    example: dict[str, Any], db: sqlite3.Connection, documents: list[dict[str, Any]]
) -> dict[str, Rows]:
    """Every step's rows, in order; a step's references read the earlier steps' rows, its
    slot parameters the example's own values."""
    results: dict[str, Rows] = {}
    slots = slot_values(example)
    for step in example["steps"]:
        if step["source"] == "local":
            rows = run_local(step["query"], results)
        elif isinstance(step["query"], str):
            rows = run_sql(db, step["query"], results, slots)
        else:
            rows = run_search(resolve_slots(step["query"], slots), documents, results)
        assert rows, f"step {step['output_key']!r} of {example['question']!r} returned nothing"
        results[step["output_key"]] = rows
    return results


def referenced(match: re.Match[str], results: dict[str, Rows]) -> list[Any]:
    rows = results[match.group(1)]
    column = match.group(2) or next(iter(rows[0]))
    return [row[column] for row in rows]


def run_sql(db: sqlite3.Connection, sql: str, results: dict[str, Rows], slots: dict[str, Any] | None = None) -> Rows:
    params: list[Any] = []

    def bind(match: re.Match[str]) -> str:
        if match.group(0).startswith(":"):
            params.append((slots or {})[match.group(3)])
            return "?"
        params.append(json.dumps(referenced(match, results)))
        return "SELECT value FROM json_each(?)"

    pattern = re.compile(f"{REFERENCE.pattern}|{SLOT_PARAMETER.pattern}")
    cursor = db.execute(pattern.sub(bind, sql), params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def run_local(sql: str, results: dict[str, Rows]) -> Rows:
    scratch = sqlite3.connect(":memory:")
    try:
        for key, rows in results.items():
            columns = list(rows[0])
            scratch.execute(f"CREATE TABLE {key} ({', '.join(columns)})")
            scratch.executemany(f"INSERT INTO {key} VALUES ({', '.join('?' * len(columns))})",
                                [tuple(row.values()) for row in rows])
        return run_sql(scratch, sql, {})
    finally:
        scratch.close()


def run_search(body: dict[str, Any], documents: list[dict[str, Any]], results: dict[str, Rows]) -> Rows:
    """The hits of a query (and the buckets of a terms aggregation) over the documents."""
    body = resolve_json(body, results)
    hits = [d for d in documents if matches(d, body.get("query", {"match_all": {}}))]
    for aggregation in body.get("aggs", {}).values():
        counts = Counter(hit[aggregation["terms"]["field"]] for hit in hits)
        return [{"key": key, "doc_count": n} for key, n in counts.most_common(aggregation["terms"]["size"])]
    return hits


def resolve_slots(value: Any, slots: dict[str, Any]) -> Any:
    """A search body with each ``":name"`` string replaced by the slot's value."""
    if isinstance(value, dict):
        return {key: resolve_slots(item, slots) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_slots(item, slots) for item in value]
    if isinstance(value, str) and value.startswith(":") and value[1:] in slots:
        return slots[value[1:]]
    return value


def resolve_json(value: Any, results: dict[str, Rows]) -> Any:
    if isinstance(value, dict):
        return {key: resolve_json(item, results) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_json(item, results) for item in value]
    if isinstance(value, str) and (match := REFERENCE.fullmatch(value)):
        return referenced(match, results)
    return value


def matches(document: dict[str, Any], clause: dict[str, Any]) -> bool:
    """The subset of the query DSL the examples use; anything else fails loudly."""
    ((kind, body),) = clause.items()
    if kind == "match_all":
        return True
    if kind == "bool":
        return (all(matches(document, c) for c in body.get("must", []) + body.get("filter", []))
                and not any(matches(document, c) for c in body.get("must_not", [])))
    ((field, condition),) = body.items()
    value = document[field]
    values = value if isinstance(value, list) else [value]
    if kind == "term":
        return condition in values
    if kind == "terms":
        return bool(set(condition) & set(values))
    if kind == "range":
        bounds = {"gte": str.__ge__, "gt": str.__gt__, "lte": str.__le__, "lt": str.__lt__}
        return all(bounds[op](value, limit) for op, limit in condition.items())
    if kind == "match_phrase":
        return condition in value
    raise NotImplementedError(f"the test's DSL evaluator does not know {kind!r}")


# --- the examples read only what their manifests declare -----------------------------------

_SQLGLOT_TYPES = {"text": "TEXT", "integer": "INT", "real": "DOUBLE", "date": "DATE"}


def sql_steps() -> Iterator[Any]:
    for example_id, example in zip(EXAMPLE_IDS, EXAMPLES, strict=True):
        for step in example["steps"]:
            if step["source"] in MANIFESTS and isinstance(step["query"], str):
                yield pytest.param(step["source"], step["query"], id=f"{example_id}:{step['output_key']}")


@pytest.mark.parametrize(("source", "sql"), list(sql_steps()))
def test_example_sql_reads_only_declared_allowed_columns(source: str, sql: str) -> None:
    tables = MANIFESTS[source]["tables"]
    schema = {t["name"]: {c["name"]: _SQLGLOT_TYPES[c["type"]] for c in t["columns"]} for t in tables}
    denied = {c["name"] for t in tables for c in t["columns"] if c.get("access") == "deny"}
    tree = qualify(sqlglot.parse_one(REFERENCE.sub("NULL", sql), read="sqlite"), schema=schema,
                   dialect="sqlite", validate_qualify_columns=True)
    assert {t.name for t in tree.find_all(exp.Table)} <= set(schema)
    assert not {c.name for c in tree.find_all(exp.Column)} & denied


def search_fields(body: Any) -> Iterator[str]:
    """Field names a DSL body mentions (clause keys, sort keys, _source, aggregation fields)."""
    if isinstance(body, dict):
        for key, value in body.items():
            if key in ("term", "terms", "range", "match", "match_phrase") and "field" not in value:
                yield from value
            elif key == "field":
                yield value
            elif key == "_source":
                yield from value
            elif key == "sort":
                yield from (next(iter(item)) for item in value)
            else:
                yield from search_fields(value)
    elif isinstance(body, list):
        for item in body:
            yield from search_fields(item)


def test_example_dsl_uses_declared_fields() -> None:
    (index,) = MANIFESTS["reports"]["indices"]
    declared = {field["name"] for field in index["fields"]}
    for example in EXAMPLES:
        for step in example["steps"]:
            if isinstance(step["query"], dict):
                assert step["index"] == index["name"]
                assert set(search_fields(step["query"])) <= declared, example["question"]


# --- the verified examples run, and the seed questions have answers ----------------------


def check_spotlight(results: dict[str, Rows], db: sqlite3.Connection) -> None:
    top = {row["employee_id"] for row in results["top"]}
    authors = {report["author_id"] for report in results["reports"]}
    assert 2 <= len(authors) <= len(top) <= 10
    assert authors <= top
    assert all(report["week_start_date"] == "2026-03-02" for report in results["reports"])


def check_big_contracts(results: dict[str, Rows], db: sqlite3.Connection) -> None:
    rows = results["contracts"]
    assert 3 <= len(rows) <= 15
    for row in rows:
        assert row["amount"] > 10_000_000 and row["collection_days"] < 60
        assert "2023-10-01" <= row["signed_at"] <= "2023-12-31"
    ids = json.dumps([row["contract_id"] for row in rows])
    regions = db.execute("SELECT DISTINCT region FROM contracts"
                         " WHERE contract_id IN (SELECT value FROM json_each(?))", (ids,))
    assert regions.fetchall() == [("华东",)]


def check_top_product(results: dict[str, Rows], db: sqlite3.Connection) -> None:
    (row,) = results["top_product"]
    assert row["product_name"] and row["total_amount"] > 0


def check_product_x_growth(results: dict[str, Rows], db: sqlite3.Connection) -> None:
    assert [row["quarter"] for row in results["quarterly"]] == ["2025-Q4", "2026-Q1", "2026-Q2", "2026-Q3"]
    growth = [row["growth_pct"] for row in results["growth"]]
    assert len(growth) == 3
    assert growth[0] > growth[1] > growth[2] > 0, "产品X's growth should slow over 2026 Q1–Q3"


SEED_CHECKS = {
    "‘星火’项目组里，绩效为A的员工在三月第一周写了哪些周报？": check_spotlight,
    "2023年第四季度，华东区销售额超过1000万且回款周期小于60天的合同有哪些？": check_big_contracts,
    "去年第三季度在华东区销售额最高的产品是什么？": check_top_product,
    "产品X在过去三个季度的增长率变化": check_product_x_growth,
}


@pytest.mark.parametrize("example", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_runs_and_finds_something(
    example: dict[str, Any], db: sqlite3.Connection, documents: list[dict[str, Any]]
) -> None:
    results = run_plan(example, db, documents)
    check = SEED_CHECKS.get(example["question"])
    if check:
        check(results, db)


def test_examples_cover_the_plan_shapes() -> None:
    steps = [example["steps"] for example in EXAMPLES]
    assert len(EXAMPLES) >= 8
    assert {e["question"] for e in EXAMPLES} >= set(SEED_CHECKS)
    assert any(len(s) == 3 and not isinstance(s[2]["query"], str) for s in steps)
    assert any(step["source"] == "local" for s in steps for step in s)
    assert any(len(s) == 2 and all(isinstance(step["query"], str) for step in s) for s in steps)


@pytest.mark.parametrize(("month", "monday"), [("2024-03-01", "2024-03-04"), ("2026-03-01", "2026-03-02")])
def test_spotlight_members_graded_a_filed_reports(
    db: sqlite3.Connection, documents: list[dict[str, Any]], month: str, monday: str
) -> None:
    graded_a = {employee_id for (employee_id,) in db.execute(
        "SELECT p.employee_id FROM employee_performance AS p"
        " JOIN project_members AS m ON m.employee_id = p.employee_id AND m.project_name = '星火'"
        " WHERE p.assessment_month = ? AND p.performance_grade = 'A'", (month,))}
    authors = {d["author_id"] for d in documents if d["week_start_date"] == monday}
    assert len(graded_a & authors) >= 2
    assert any("星火" in d["projects_mentioned"] for d in documents
               if d["week_start_date"] == monday and d["author_id"] in graded_a)
