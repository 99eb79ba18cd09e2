"""Schema linking: tokenizer, value index (built from real SQLite files), pruning over the FK
graph, the planner's prompt, the repair round that restores a pruned table, and the CLI.

The catalogue is written by the fixture: two SQLite sources with real rows, filler tables so
that a small budget forces pruning, a denied column and a row-filtered table.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import plan_reply, scripted, text_reply
from typer.testing import CliRunner

from structq.agent import Agent
from structq.agent.planner import Planner
from structq.capabilities import CapabilitySet
from structq.cli import app
from structq.config import Settings
from structq.errors import SandboxViolation
from structq.linking import Budget, ValueIndex, names_to_restore, select, terms
from structq.linking.tokens import STOP_WORDS
from structq.sync.values import build_values

TODAY = dt.date(2026, 11, 30)
REPO = Path(__file__).resolve().parent.parent

# --- the tokenizer ----------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("星火项目", ["星", "火", "项", "目", "星火", "火项", "项目"]),
    ("How many singers are there?", ["singer"]),
    ("employeePerformance", ["employee", "performance"]),
    ("performance_grade", ["performance", "grade"]),
    ("HTTPServer IDs", ["http", "server", "id"]),
    ("countries and addresses", ["country", "address"]),
    ("2024年星火的budget", ["2024", "年", "星", "火", "的", "年星", "星火", "火的", "budget"]),
], ids=["chinese", "english-plural", "camel", "snake", "acronyms", "stems", "mixed"])
def test_terms(text: str, expected: list[str]) -> None:
    assert [t for t, _ in terms(text) if not t.startswith("#")] == expected


@pytest.mark.parametrize("compound, part", [("Haustierarten", "haustiere"), ("Automodelle", "modellliste"),
                                            ("highschoolers", "schooler")])
def test_long_words_share_character_grams_with_their_parts(compound: str, part: str) -> None:
    grams = {t: w for t, w in terms(compound) if t.startswith("#")}
    assert grams and all(w < 1.0 for w in grams.values())
    assert set(grams) & {t for t, _ in terms(part)}


def test_cjk_single_characters_weigh_less_than_bigrams() -> None:
    weights = dict(terms("绩效"))
    assert weights["绩效"] == 1.0 and weights["绩"] < 1.0


@pytest.mark.parametrize("text", ["HES", "ises", "thes"])
def test_a_word_that_stems_to_a_stop_word_is_no_term(text: str) -> None:
    assert all(term.startswith("#") for term, _ in terms(text))


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_terms_are_never_blank_or_stop_words(text: str) -> None:
    for term, weight in terms(text):
        assert term.strip("#") and not any(ch.isspace() for ch in term) and term not in STOP_WORDS and weight > 0


# --- a catalogue on real SQLite files -----------------------------------------------------------


def _db(path: Path, script: str) -> None:
    with sqlite3.connect(path) as connection:
        connection.executescript(script)


def _col(name: str, type_: str = "text", **more: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **more}


def write_catalogue(folder: Path, *, deny_name: bool = False) -> Path:
    """crm (customers, orders, products, a row-filtered table, filler) and hr (projects, staff)."""
    folder.mkdir(exist_ok=True)
    audit = "".join(f"CREATE TABLE IF NOT EXISTS audit_log_{i} (entry_id INTEGER PRIMARY KEY, "
                    + ", ".join(f"field_{j} TEXT" for j in range(8)) + ");" for i in range(12))
    _db(folder / "crm.db", audit + """
        CREATE TABLE IF NOT EXISTS customers (customer_id INTEGER PRIMARY KEY, name TEXT, city TEXT, secret_note TEXT);
        CREATE TABLE IF NOT EXISTS products (product_id INTEGER PRIMARY KEY, product_name TEXT);
        CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER, product_id INTEGER, amount REAL);
        CREATE TABLE IF NOT EXISTS tenant_contacts (contact_id INTEGER PRIMARY KEY, tenant_id INTEGER, contact_name TEXT);
        DELETE FROM customers; DELETE FROM products; DELETE FROM orders; DELETE FROM tenant_contacts;
        INSERT INTO customers VALUES (1, 'ACME Corp', '上海', 'TOPSECRET-1'), (2, '李浩华', '北京', 'TOPSECRET-2'),
                                     (3, '王芳', '上海', NULL);
        INSERT INTO products VALUES (1, '产品X'), (2, 'Widget Pro'), (3, '产品Y'), (4, '产品Z'), (5, '产品W'),
                                    (6, '产品V'), (7, '产品U');
        INSERT INTO orders VALUES (1, 1, 1, 10.5), (2, 2, 2, 20.0);
        INSERT INTO tenant_contacts VALUES (1, 7, 'Tenant Seven Person');
    """)
    _db(folder / "hr.db", """
        CREATE TABLE IF NOT EXISTS projects (project_id INTEGER PRIMARY KEY, project_name TEXT);
        CREATE TABLE IF NOT EXISTS staff (staff_id INTEGER PRIMARY KEY, full_name TEXT);
        DELETE FROM projects; DELETE FROM staff;
        INSERT INTO projects VALUES (1, '星火'), (2, '北斗');
        INSERT INTO staff VALUES (1, 'Ada'), (2, 'Grace'), (3, 'Linus');
    """)
    filler = [{"name": f"audit_log_{i}", "description": f"machine audit trail number {i}",
               "columns": [_col("entry_id", "integer", primary_key=True)]
               + [_col(f"field_{j}", description=f"opaque audit attribute {j}") for j in range(8)]}
              for i in range(12)]
    crm = {
        "source": "crm", "kind": "sql", "url": f"sqlite:///{folder / 'crm.db'}", "description": "customers and orders",
        "policies": {"row_filters": [{"table": "tenant_contacts", "where": "tenant_id = :tenant_id"}]},
        "tables": [
            {"name": "customers", "description": "the customers we sell to", "columns": [
                _col("customer_id", "integer", primary_key=True), _col("name", access="deny" if deny_name else "allow"),
                _col("city"), _col("secret_note", access="deny")]},
            {"name": "products", "description": "what we sell", "columns": [
                _col("product_id", "integer", primary_key=True), _col("product_name")]},
            {"name": "orders", "description": "one row per sale", "columns": [
                _col("order_id", "integer", primary_key=True),
                _col("customer_id", "integer", references="customers.customer_id"),
                _col("product_id", "integer", references="products.product_id"), _col("amount", "real")]},
            {"name": "tenant_contacts", "columns": [
                _col("contact_id", "integer", primary_key=True), _col("tenant_id", "integer"), _col("contact_name")]},
            *filler,
        ],
    }
    hr = {
        "source": "hr", "kind": "sql", "url": f"sqlite:///{folder / 'hr.db'}", "description": "internal projects",
        "tables": [
            {"name": "projects", "columns": [_col("project_id", "integer", primary_key=True), _col("project_name")]},
            {"name": "staff", "columns": [_col("staff_id", "integer", primary_key=True), _col("full_name")]},
        ],
    }
    for manifest in (crm, hr):
        (folder / f"{manifest['source']}.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
    return folder


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    return write_catalogue(tmp_path / "company")


@pytest.fixture(scope="module")
def module_catalogue(tmp_path_factory: pytest.TempPathFactory) -> CapabilitySet:
    """The catalogue once per module, for property tests (no value index)."""
    return CapabilitySet.from_path(write_catalogue(tmp_path_factory.mktemp("linking") / "company"))


@pytest.fixture
def built(catalogue: Path) -> CapabilitySet:
    """The catalogue with its value index built through ``structq.sync.values``."""
    capabilities = CapabilitySet.from_path(catalogue)
    for manifest in capabilities:
        build_values(manifest)
    return capabilities


SMALL = Budget(prompt_tokens=300, linked_tokens=300)

# --- the value index ----------------------------------------------------------------------------


@pytest.mark.parametrize("question, column, stored, exact", [
    ("星火项目有多少人？", ("hr", "projects", "project_name"), "星火", True),
    ("李浩华买了什么", ("crm", "customers", "name"), "李浩华", True),
    ("李浩化买了什么", ("crm", "customers", "name"), "李浩华", False),  # a typo: the stored spelling is reported
    ("orders of acme corp", ("crm", "customers", "name"), "ACME Corp", True),
    ("orders of ACME Crop", ("crm", "customers", "name"), "ACME Corp", False),
    ("谁买了产品X", ("crm", "products", "product_name"), "产品X", True),
], ids=["cjk-exact", "name-exact", "name-fuzzy", "latin-case", "latin-fuzzy", "mixed"])
def test_value_index_matches_with_stored_spelling(built, question, column, stored, exact) -> None:
    matches = ValueIndex.load(built).match(question)
    found = [(m.source, m.table, m.column, m.value, m.exact) for m in matches]
    assert (*column, stored, exact) in found
    match = next(m for m in matches if m.value == stored)
    assert match.matched.casefold() in question.casefold() and len(match.matched) == len(stored)  # the typo, whole


@pytest.mark.parametrize("question", ["the annual report", "Adamant", "上", "哪些产品是新的"])
def test_value_index_needs_whole_words_and_length(built, question) -> None:
    """'Ada' is not in 'Adamant'; one character is never a match (too many false hits); a near
    match through an everyday word (产品, in many stored values) is no match (产品是 ≠ 产品X)."""
    assert ValueIndex.load(built).match(question) == []


def test_denied_columns_and_row_filtered_tables_are_never_indexed(built, catalogue) -> None:
    text = (catalogue / ".values" / "crm.json").read_text(encoding="utf-8")
    data = json.loads(text)
    indexed = {(c["table"], c["column"]) for c in data["columns"]}
    assert ("customers", "name") in indexed and ("customers", "city") in indexed
    assert not {("customers", "secret_note"), ("tenant_contacts", "contact_name")} & indexed
    assert "TOPSECRET" not in text and "Tenant Seven" not in text
    assert ValueIndex.load(built).match("TOPSECRET-1 Tenant Seven Person") == []


def test_a_column_denied_after_the_build_drops_out_at_once(built, catalogue) -> None:
    write_catalogue(catalogue, deny_name=True)
    index = ValueIndex.load(CapabilitySet.from_path(catalogue))
    assert not [m for m in index.match("李浩华 and ACME Corp") if m.column == "name"]
    assert any("rebuild" in note for note in index.notes)  # the stale file is reported


def test_columns_with_too_many_values_are_left_out(catalogue) -> None:
    capabilities = CapabilitySet.from_path(catalogue)
    build = build_values(capabilities["hr"], max_distinct=2)
    assert any("staff.full_name" in note for note in build.notes)
    assert ("hr", "staff", "full_name") not in ValueIndex.load(capabilities).columns


# --- pruning ------------------------------------------------------------------------------------


def test_pruning_keeps_the_join_path_and_keys(built) -> None:
    selection = select("Which products did customers in 上海 buy?", built, budget=SMALL)
    assert selection.pruned
    assert selection.keeps("crm", "customers") and selection.keeps("crm", "products")
    orders = selection.kept[("crm", "orders")]
    assert any("join path" in r for r in orders.reasons)  # never mentioned, kept to join the two
    assert not selection.keeps("crm", "audit_log_3")
    text = selection.render()
    assert "table orders" in text and "customer_id integer PK" in text and "tables not shown" in text
    assert "secret_note" not in text


def test_pruning_keeps_tables_of_matched_values(built) -> None:
    from structq.linking import load_values

    selection = select("星火", built, budget=SMALL, values=load_values(built))
    assert selection.keeps("hr", "projects", "project_name")
    assert any("星火" in r for r in selection.kept[("hr", "projects")].reasons)


def _eval_questions() -> list[str]:
    data = yaml.safe_load((REPO / "capabilities" / "eval.yaml").read_text(encoding="utf-8"))
    return [q["question"] for q in data["questions"]]


def test_the_demo_catalogue_is_never_pruned(demo_capabilities) -> None:
    questions = _eval_questions() + [e.question for _, e in demo_capabilities.examples()]
    for question in questions:
        selection = select(question, demo_capabilities)
        assert not selection.pruned, question
        assert selection.render() == demo_capabilities.render()
        assert len(selection.examples()) == len(list(demo_capabilities.examples()))


@given(question=st.text(max_size=40), spare=st.integers(min_value=0, max_value=10_000))
@settings(max_examples=50, deadline=None)
def test_a_catalogue_within_the_budget_is_never_pruned(demo_capabilities, question, spare) -> None:
    from structq.linking import linking_index

    total = linking_index(demo_capabilities).total_tokens
    assert not select(question, demo_capabilities, budget=Budget(prompt_tokens=total + spare)).pruned


# --- the planner's prompt and the repair round ---------------------------------------------------


def test_the_prompt_names_the_values_mentioned_in_the_question(built) -> None:
    planner = Planner(scripted(), built, budget=SMALL)
    prompt = "\n".join(str(m.content) for m in planner.messages("李浩化的订单总额是多少？", today=TODAY))
    assert "Values mentioned in the question" in prompt
    assert "crm.customers.name = '李浩华'" in prompt and "table customers" in prompt


def test_repair_restores_a_pruned_table(built) -> None:
    """The model, not shown hr.staff, writes it under crm; the repair prompt shows it."""
    wrong = {"reasoning": "count staff", "answer_with": "a number",
             "steps": [{"output_key": "n", "source": "crm", "query": "SELECT COUNT(*) AS n FROM staff"}]}
    right = {**wrong, "steps": [{**wrong["steps"][0], "source": "hr"}]}
    model = scripted(plan_reply(wrong), plan_reply(right), text_reply("3 [n]"))
    agent = Agent(built, llm=model, settings=Settings(llm=None, prompt_tokens=300, link_tokens=300, route_tokens=0,
                                                      cache_enabled=False, audit_enabled=False))
    with agent:  # no routing call (route_tokens=0): this is the repair path alone
        answer = agent.ask("How many colleagues work here?", today=TODAY, answer=False)
    assert [tuple(row) for row in answer.results.steps["n"].rows] == [(3,)]
    first, repair = model.prompt_text(0), model.prompt_text(1)
    assert "table staff" not in first
    assert "- hr: projects, staff" in first  # nothing matched: the names-only directory
    assert "unknown_table" in repair and "source hr" in repair and "table staff" in repair


def test_repair_never_restores_a_denied_column(built) -> None:
    error = SandboxViolation("denied_column", "column 'secret_note' may not be read", source="crm")
    restored = names_to_restore(error, None, built)
    assert all(column != "secret_note" for _, _, column in restored)


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_builds_values_and_explains_linking(catalogue, monkeypatch) -> None:
    runner = CliRunner()
    built = runner.invoke(app, ["sync", "--values", "--json", "-m", str(catalogue)])
    assert built.exit_code == 0, built.output
    report = json.loads(built.output)["values"]
    assert {r["source"] for r in report} == {"crm", "hr"} and (catalogue / ".values" / "hr.json").is_file()

    env = {"STRUCTQ_PROMPT_TOKENS": "300", "STRUCTQ_LINK_TOKENS": "300", "STRUCTQ_LLM": None, "OPENAI_API_KEY": None}
    result = runner.invoke(app, ["plan", "星火项目的成员", "--explain-linking", "--json", "-m", str(catalogue)], env=env)
    assert result.exit_code == 0, result.output
    explained = json.loads(result.output)
    assert explained["pruned"] is True
    assert explained["values"][0]["value"] == "星火"
    projects = next(t for t in explained["tables"] if t["table"] == "projects")
    assert any("星火" in r for r in projects["reasons"])

    text = runner.invoke(app, ["plan", "星火项目的成员", "--explain-linking", "-m", str(catalogue)], env=env)
    assert text.exit_code == 0 and "hr.projects.project_name = '星火'" in text.output


def test_cli_explains_an_unpruned_demo_catalogue(demo_env) -> None:
    result = CliRunner().invoke(app, ["plan", "华东区有多少在职员工？", "--explain-linking", "--json",
                                      "-m", str(REPO / "capabilities")],
                                env={"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"]})
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pruned"] is False


# --- a search source on the real search server ------------------------------------------------------------


def test_search_values_are_built_from_keyword_fields_only(search_server, tmp_path: Path) -> None:
    """Keyword fields are read through a terms aggregation; denied fields and analysed text never."""
    from search_support import load_indices

    mapping = {"properties": {"author": {"type": "keyword"}, "secret": {"type": "keyword"},
                              "body": {"type": "text"}}}
    docs = [{"_id": "1", "author": "李浩华", "secret": "TOPSECRET", "body": "周报 one"},
            {"_id": "2", "author": "Grace Hopper", "secret": "TOPSECRET", "body": "周报 two"}]
    load_indices(search_server.url, [("linking_reports", mapping, docs)])
    manifest = {"source": "docs", "kind": "opensearch", "url": search_server.url, "indices": [
        {"name": "linking_reports", "fields": [{"name": "author", "type": "keyword"},
                                               {"name": "secret", "type": "keyword", "access": "deny"},
                                               {"name": "body", "type": "text"}]}]}
    (tmp_path / "docs.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
    capabilities = CapabilitySet.from_path(tmp_path)
    build = build_values(capabilities["docs"])
    assert (build.columns, build.values) == (1, 2)
    text = (tmp_path / ".values" / "docs.json").read_text(encoding="utf-8")
    assert "TOPSECRET" not in text and "周报" not in text
    matches = ValueIndex.load(capabilities).match("grace hopper写的周报")
    assert [(m.table, m.column, m.value) for m in matches] == [("linking_reports", "author", "Grace Hopper")]


def test_linking_imports_no_executor_agent_or_sync() -> None:
    """DESIGN §2: linking sits beside the sandbox and reads manifests and value files only."""
    import subprocess
    import sys

    code = ("import sys, structq.linking as l; l.select; "
            "bad = [m for m in sys.modules if m.startswith(('structq.executors', 'structq.agent', 'structq.sync'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


@given(question=st.text(alphabet=st.sampled_from(list("星火李浩华产品客户订单 abcdeorsuptmn上海")), max_size=30),
       tokens=st.integers(min_value=0, max_value=2000))
@settings(max_examples=60, deadline=None)
def test_a_pruned_prompt_shows_only_lines_of_the_full_one(module_catalogue, question: str, tokens: int) -> None:
    """Pruning only leaves things out: every table and column line it shows is in the full
    catalogue's text (so nothing denied, nothing invented), and the row filters come along."""
    capabilities = module_catalogue
    full = set(capabilities.render().splitlines())
    selection = select(question, capabilities, budget=Budget(prompt_tokens=300, linked_tokens=tokens))
    directory = ("- ", "No table matched") if not selection.kept else ()  # names only, when nothing matched
    for line in selection.render().splitlines():
        assert line in full or line.strip().startswith("(+") or "not shown" in line or line.startswith(directory), line
    if selection.keeps("crm", "tenant_contacts"):
        assert "row filter" in selection.render()

