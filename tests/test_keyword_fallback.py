"""The keyword fallback (``--fallback keywords`` / ``STRUCTQ_FALLBACK``) on the real search server.

A small knowledge base on osmem-server: ``kb_notes`` (row-filtered by tenant, a ``team`` field
with declared values) and ``kb_wiki`` (not filtered, ``project`` values in the value index).
Questions in Chinese and English are searched with their periods as date ranges, their known
values as term filters and their other words as phrases — through the sandbox, so the tenant
filter still holds — and the result says it is a keyword search, not an answer.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import ScriptedModel, plan_reply
from search_support import load_indices
from servers import SearchServer
from typer.testing import CliRunner

from structq.agent import Agent, RepairsExhausted
from structq.agent.keywords import keyword_search, keywords
from structq.capabilities import CapabilitySet
from structq.cli import app
from structq.config import Settings
from structq.errors import ConfigError, SandboxViolation
from structq.executors.search import embedded_server
from structq.linking.values import FORMAT_VERSION, ValueIndex, values_fingerprint
from structq.safety import check_dsl

TODAY = dt.date(2026, 11, 30)  # 上个月 / last month = October 2026

MANIFEST = """\
source: kb
kind: opensearch
url: {url}
description: 知识库
limits: {{max_rows: 50, timeout_s: 5}}
policies:
  row_filters:
    - {{index: kb_notes, term: {{tenant_id: ":tenant_id"}}}}
indices:
  - name: kb_notes
    synonyms: [记录, 笔记, notes]
    fields:
      - {{name: tenant_id, type: keyword}}
      - name: team
        type: keyword
        values: {{研发部: 研发团队, 销售部: 销售团队}}
      - {{name: day, type: date}}
      - {{name: title, type: text}}
      - {{name: body, type: text}}
  - name: kb_wiki
    synonyms: [百科, wiki]
    fields:
      - {{name: project, type: keyword, synonyms: [项目]}}
      - {{name: day, type: date}}
      - {{name: body, type: text}}
"""

NOTES = [
    {"_id": "n1", "tenant_id": "t1", "team": "研发部", "day": "2026-10-05", "title": "周记", "body": "本周完成灰度发布，风险可控"},
    {"_id": "n2", "tenant_id": "t1", "team": "销售部", "day": "2026-10-12", "title": "拜访", "body": "客户讨论灰度发布计划"},
    {"_id": "n3", "tenant_id": "t1", "team": "研发部", "day": "2026-09-20", "title": "准备", "body": "灰度发布准备"},
    {"_id": "n4", "tenant_id": "t2", "team": "研发部", "day": "2026-10-06", "title": "回滚", "body": "灰度发布失败，回滚"},
    {"_id": "n5", "tenant_id": "t1", "team": "研发部", "day": "2026-10-20", "title": "db",
     "body": "database migration finished, rollback plan ready"},
    {"_id": "n6", "tenant_id": "t2", "team": "研发部", "day": "2026-10-21", "title": "db", "body": "database migration started"},
    {"_id": "n7", "tenant_id": "t1", "team": "研发部", "day": "2026-10-22", "title": "db", "body": "database cleanup"},
]
WIKI = [
    {"_id": "w1", "project": "星火", "day": "2026-10-03", "body": "星火 灰度发布 指南"},
    {"_id": "w2", "project": "北斗", "day": "2026-10-04", "body": "北斗 灰度发布 说明"},
    {"_id": "w3", "project": "星火", "day": "2026-08-01", "body": "星火 架构"},
]


@pytest.fixture(scope="module")
def kb_dir(search_server: SearchServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manifest on the session's search server, its documents loaded, and a value index for kb_wiki."""
    folder = tmp_path_factory.mktemp("kb")
    (folder / "kb.yaml").write_text(MANIFEST.format(url=search_server.url), encoding="utf-8")
    capabilities = CapabilitySet.from_path(folder)
    manifest = capabilities.get("kb")
    load_indices(search_server.url, [(name, embedded_server.index_mapping(manifest.index(name)), docs)
                                     for name, docs in (("kb_notes", NOTES), ("kb_wiki", WIKI))])
    (folder / ".values").mkdir()
    (folder / ".values" / "kb.json").write_text(json.dumps({
        "version": FORMAT_VERSION, "source": "kb", "fingerprint": values_fingerprint(manifest),
        "columns": [{"table": "kb_wiki", "column": "project", "values": ["星火", "北斗"]}]}, ensure_ascii=False),
        encoding="utf-8")
    return folder


def agent(folder: Path, model: Any = None, **settings: Any) -> Agent:
    config = Settings(llm=None, timezone="Asia/Shanghai", audit_enabled=False, cache_enabled=False, **settings)
    return Agent(CapabilitySet.from_path(folder), llm=model, settings=config)


def hits(answer: Any) -> dict[str, set[str]]:
    """Document ids found, by index."""
    out = {}
    for step in answer.results.steps.values():
        ids = step.columns.index("_id")
        out[step.index] = {row[ids] for row in step.rows}
    return out


@pytest.mark.parametrize(("question", "tenant", "expected"), [
    # a period → range on the date field; the rest → phrases; 记录 names kb_notes: only it is searched
    ("上个月有哪些记录提到了灰度发布？", "t1", {"kb_notes": {"n1", "n2"}}),
    # the tenant filter still holds: t2 sees only its own note
    ("上个月有哪些记录提到了灰度发布？", "t2", {"kb_notes": {"n4"}}),
    # no index named: every index; a declared value → term filter where the field exists
    # (elsewhere it is a word to find)
    ("研发部上个月有哪些提到了灰度发布？", "t1", {"kb_notes": {"n1"}, "kb_wiki": set()}),
    # a stored value from the value index → term filter on kb_wiki
    ("星火有哪些文档提到了灰度发布？", "t1", {"kb_notes": set(), "kb_wiki": {"w1"}}),
    ("上个月提到灰度发布的有哪些？", "t1", {"kb_notes": {"n1", "n2"}, "kb_wiki": {"w1", "w2"}}),
    # English: every remaining word must occur
    ("Which notes mentioned database migration last month?", "t1", {"kb_notes": {"n5"}}),
    ("Which notes mentioned database migration last month?", "t2", {"kb_notes": {"n6"}}),
    ("What did the wiki say about 灰度发布 in October 2026?", "t1", {"kb_wiki": {"w1", "w2"}}),
    ("Which notes mention database in October 2026?", "t1", {"kb_notes": {"n5", "n7"}}),
])
def test_keyword_search_without_a_model(kb_dir: Path, question: str, tenant: str, expected: dict[str, set[str]]) -> None:
    with agent(kb_dir, fallback="keywords") as a:
        answer = a.ask(question, vars={"tenant_id": tenant}, today=TODAY)
    assert answer.plan_source == "keywords" and answer.to_dict()["plan_source"] == "keywords"
    assert hits(answer) == expected
    label = answer.notes[0]
    assert answer.text.startswith(label)
    assert ("不是对问题的回答" in label) if any("\u4e00" <= c <= "\u9fff" for c in question[:3]) else (
        "not an answer to the question" in label)
    assert "no language model is configured" in label


def test_every_step_went_through_the_sandbox(kb_dir: Path) -> None:
    """The queries that ran are the sandbox's rewrites: the tenant filter is in the request."""
    with agent(kb_dir, fallback="keywords") as a:
        answer = a.ask("上个月有哪些记录提到了灰度发布？", vars={"tenant_id": "t1"}, today=TODAY)
    notes_query = json.dumps(answer.results.steps["keywords_kb_kb_notes"].query, ensure_ascii=False)
    assert "tenant_id" in notes_query
    with agent(kb_dir, fallback="keywords") as a, pytest.raises(SandboxViolation, match="tenant_id"):
        a.ask("上个月有哪些记录提到了灰度发布？", vars={}, today=TODAY)  # no tenant: refused, never unfiltered


def test_without_the_setting_nothing_changes(kb_dir: Path) -> None:
    with agent(kb_dir) as a, pytest.raises(ConfigError, match="no language model is configured"):
        a.ask("上个月有哪些记录提到了灰度发布？", vars={"tenant_id": "t1"}, today=TODAY)


def test_nothing_to_search_for_raises_the_planning_error(kb_dir: Path) -> None:
    with agent(kb_dir, fallback="keywords") as a, pytest.raises(ConfigError, match="no language model"):
        a.ask("有哪些？", vars={"tenant_id": "t1"}, today=TODAY)


def test_with_a_model_it_runs_after_the_last_repair(kb_dir: Path) -> None:
    broken = {"steps": [{"output_key": "x", "source": "kb", "index": "kb_notes",
                         "query": {"query": {"term": {"secret": "x"}}}}]}
    model = ScriptedModel(responses=[plan_reply(broken)] * 3)
    with agent(kb_dir, model, fallback="keywords", max_repairs=2) as a:
        answer = a.ask("上个月有哪些记录提到了灰度发布？", vars={"tenant_id": "t1"}, today=TODAY)
    assert model.calls == 3 and answer.plan_source == "keywords"
    assert hits(answer)["kb_notes"] == {"n1", "n2"}
    assert "无法为问题制定查询计划：no working plan after 3 attempts" in answer.text
    model = ScriptedModel(responses=[plan_reply(broken)] * 3)
    with agent(kb_dir, model, max_repairs=2) as a, pytest.raises(RepairsExhausted):
        a.ask("上个月有哪些记录提到了灰度发布？", vars={"tenant_id": "t1"}, today=TODAY)


def test_an_evaluation_never_counts_a_keyword_search(kb_dir: Path) -> None:
    from structq.agent.evaluate import EvalSet, evaluate

    broken = {"steps": [{"output_key": "x", "source": "kb", "index": "kb_notes",
                         "query": {"query": {"term": {"secret": "x"}}}}]}
    questions = EvalSet.model_validate({"today": TODAY, "questions": [
        {"question": "上个月有哪些记录提到了灰度发布？", "vars": {"tenant_id": "t1"}, "expect_rows": [["n1"], ["n2"]]}]})
    model = ScriptedModel(responses=[plan_reply(broken)] * 3)
    with agent(kb_dir, model, fallback="keywords", max_repairs=2) as a:
        [result] = evaluate(a, questions).results
    assert not result.passed and result.plan_source == "keywords"
    assert result.reason.startswith("no plan; a keyword search ran instead")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_cli(kb_dir: Path, tmp_path: Path, how: str) -> None:
    env = {"STRUCTQ_LLM": None, "OPENAI_API_KEY": None, "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
           "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_FALLBACK": "keywords" if how == "env" else None}
    argv = ["ask", "上个月有哪些记录提到了灰度发布？", "-m", str(kb_dir), "--var", "tenant_id=t1",
            "--today", TODAY.isoformat(), "--json", *(["--fallback", "keywords"] if how == "flag" else [])]
    result = CliRunner().invoke(app, argv, env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["plan_source"] == "keywords" and data["answer"].startswith("这是关键词检索的结果，不是对问题的回答")
    audited = json.loads((tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert audited["plan_source"] == "keywords"


def test_cli_refuses_an_unknown_fallback(kb_dir: Path) -> None:
    result = CliRunner().invoke(app, ["ask", "x", "-m", str(kb_dir), "--fallback", "magic"],
                                env={"STRUCTQ_LLM": None, "OPENAI_API_KEY": None})
    assert result.exit_code == 3 and "fallback 'magic' is not known" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("question", "words"), [
    ("2026年10月有哪些周报提到了灰度发布？", ["灰度发布"]),
    ("研发部上个月的周报里提到了哪些风险", ["研发部", "风险"]),
    ("Which weekly reports mentioned the database migration?", ["database", "migration"]),
    ("星火项目的风险和进展", ["星火项目", "风险", "进展"]),
])
def test_keywords_drop_question_words(question: str, words: list[str]) -> None:
    from structq.periods import find_periods

    drop = [p.text for p in find_periods(question, TODAY)] + ["周报", "weekly report", "weekly reports"]
    assert keywords(question, drop) == words


def test_demo_reports_keyword_query(demo_capabilities) -> None:
    """On the demo manifests: the date field and the declared department codes are found."""
    search = keyword_search("研发部上个月的周报里提到了哪些风险", demo_capabilities, TODAY, values=ValueIndex())
    [reports] = search.searches
    body = reports.step["query"]
    assert body["query"]["bool"]["filter"] == [
        {"range": {"week_start_date": {"gte": "2026-10-01", "lte": "2026-10-31"}}},
        {"term": {"department": "研发部"}}]
    assert reports.phrases == ("风险",)


_WORDS = ["上个月", "研发部", "灰度发布", "星火", "Q3 2025", "“", "'", "\"", "{", "}", "*", "?", "\\", " OR ",
          "database", "migration", "notes", "wiki", "从2026年3月到5月", "过去30天", "script", "<x>", "；", " "]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.one_of(st.sampled_from(_WORDS), st.text(max_size=6)), max_size=8),
       today=st.dates(min_value=dt.date(2001, 1, 1), max_value=dt.date(2098, 12, 31)))
def test_every_keyword_search_passes_the_sandbox(kb_dir: Path, parts: list[str], today: dt.date) -> None:
    """Whatever the question, the searches built for it are accepted by the sandbox as they are:
    the fallback never fails on its own query, and any text stays a phrase (data, not syntax)."""
    capabilities = CapabilitySet.from_path(kb_dir)
    question = "".join(parts)
    for search in keyword_search(question, capabilities, today, values=None).searches:
        manifest = capabilities.get(search.source)
        checked = check_dsl(search.step["query"], manifest, search.index, vars={"tenant_id": "t1"})
        assert sorted(_phrases(checked.body)) == sorted(search.phrases)


def _phrases(value: Any) -> list[str]:
    """The texts of every phrase clause in a checked body."""
    if isinstance(value, dict):
        found = [value["multi_match"]["query"]] if "multi_match" in value else []
        return found + [p for k, v in value.items() if k != "multi_match" for p in _phrases(v)]
    if isinstance(value, list):
        return [p for v in value for p in _phrases(v)]
    return []


def test_nothing_to_search_for_says_why_the_fallback_did_not_run(kb_dir: Path) -> None:
    with agent(kb_dir, fallback="keywords") as a, pytest.raises(ConfigError) as raised:
        a.ask("有哪些？", vars={"tenant_id": "t1"}, today=TODAY)
    first_line = raised.value.message.splitlines()[0]
    assert first_line.startswith("no language model is configured; the keyword fallback did not run:")
    assert "no word or known value to search kb.kb_notes, kb.kb_wiki for" in first_line


def test_draft_indices_only_says_they_are_drafts(kb_dir: Path, tmp_path: Path, search_server: SearchServer) -> None:
    """Draft indices are not searched by the fallback (nobody has said what they hold yet)."""
    drafted = MANIFEST.format(url=search_server.url).replace("  - name: kb_notes\n", "  - name: kb_notes\n    draft: true\n")
    drafted = drafted.replace("  - name: kb_wiki\n", "  - name: kb_wiki\n    draft: true\n")
    (tmp_path / "kb.yaml").write_text(drafted, encoding="utf-8")
    with agent(tmp_path, fallback="keywords") as a, pytest.raises(ConfigError) as raised:
        a.ask("上个月有哪些记录提到了灰度发布？", vars={"tenant_id": "t1"}, today=TODAY)
    assert "the keyword fallback did not run: every search index is still a draft (kb.kb_notes, kb.kb_wiki)" \
        in raised.value.message


def test_without_a_search_source_the_cli_says_so(tmp_path: Path) -> None:
    """A SQL-only source set: `--fallback keywords` cannot help, and the error says why (exit 3)."""
    import sqlite3

    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)")
    (tmp_path / "caps").mkdir()
    (tmp_path / "caps" / "shop.yaml").write_text(
        "source: shop\nkind: sql\nurl: sqlite:///../shop.db\n"
        "tables:\n  - name: orders\n    columns:\n      - {name: id, type: integer}\n      - {name: note, type: text}\n",
        encoding="utf-8")
    env = {"STRUCTQ_LLM": None, "OPENAI_API_KEY": None, "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
           "STRUCTQ_CACHE_DIR": str(tmp_path / "cache")}
    argv = ["ask", "哪些订单提到了灰度发布？", "-m", str(tmp_path / "caps"), "--fallback", "keywords"]
    result = CliRunner().invoke(app, argv, env=env)
    assert result.exit_code == 3, result.output
    assert ("no language model is configured; the keyword fallback did not run: no search source is declared "
            "(the sources are shop (sql)), so there is nothing to search") in result.stderr
