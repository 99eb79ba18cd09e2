"""Verified examples with slots: each slot kind reads its values (Chinese and English, relative
periods on several days), matching abstains whenever it is not sure, values are bound as
parameters on a real SQLite database, and manifests with inconsistent slots do not load.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from structq import Agent
from structq.capabilities import CapabilitySet, load_manifest_text
from structq.config import Settings
from structq.errors import ConfigError, ManifestError, SandboxViolation
from structq.safety import check_dsl, check_sql
from structq.templates import TemplateSet

TODAY = dt.date(2026, 11, 30)

MANIFEST = """
source: office
kind: sql
url: sqlite:///{db}
tables:
  - name: staff
    columns:
      - {{name: id, type: text, primary_key: true}}
      - {{name: name, type: text, synonyms: [姓名, 名字]}}
      - name: dept
        type: text
        synonyms: [部门, 团队]
        values: {{研发部: 研发, 销售部: 销售}}
      - name: grade
        type: text
        values: {{A: 优秀, B: 良好}}
      - {{name: hired, type: date}}
  - name: projects
    columns:
      - {{name: title, type: text, primary_key: true}}
      - {{name: owner, type: text}}
      - {{name: started, type: date}}
examples:
  - question: 2026年3月研发部绩效为A的有几人？
    slots:
      month: {{type: month, example: 2026-03}}
      dept: {{column: office.staff.dept, example: 研发部}}
      grade: {{column: office.staff.grade, example: A}}
    steps:
      - output_key: n
        source: office
        query: >-
          SELECT COUNT(*) AS n FROM staff WHERE dept = :dept AND grade = :grade
          AND hired >= :month_start AND hired <= :month_end
  - question: 张三负责哪些项目？
    slots:
      person: {{column: office.staff.name, example: 张三}}
    steps:
      - output_key: mine
        source: office
        query: SELECT p.title FROM projects AS p JOIN staff AS s ON s.id = p.owner WHERE s.name = :person
  - question: 最近立项的5个项目是哪些？
    slots:
      n: {{type: integer, example: 5, max: 20}}
    steps:
      - output_key: latest
        source: office
        query: SELECT title FROM projects ORDER BY started DESC LIMIT :n
  - question: 2026年3月2日入职的员工有哪些？
    slots:
      day: {{type: date, example: 2026-03-02}}
    steps:
      - output_key: joined
        source: office
        query: SELECT name FROM staff WHERE hired = :day
  - question: 2026年第一季度入职了多少人？
    slots:
      q: {{type: quarter, example: 2026-Q1}}
    steps:
      - output_key: joined
        source: office
        query: SELECT COUNT(*) AS n FROM staff WHERE hired >= :q_start AND hired < :q_next
  - question: Who joined the team in 2025?
    slots:
      year: {{type: year, example: "2025"}}
    steps:
      - output_key: joined
        source: office
        query: SELECT name FROM staff WHERE hired >= :year_start AND hired <= :year_end
  - question: 去年第三季度立项的项目有哪些？
    slots:
      period: {{type: date_range, example: 去年第三季度}}
    steps:
      - output_key: started
        source: office
        query: SELECT title FROM projects WHERE started >= :period_start AND started <= :period_end
  - question: 星火的负责人是谁？
    slots:
      project: {{column: office.projects.title, example: 星火}}
    steps:
      - output_key: owner
        source: office
        query: SELECT owner FROM projects WHERE title = :project
  - question: 研发部的负责人是谁？
    slots:
      team: {{column: office.staff.dept, example: 研发部}}
    steps:
      - output_key: owner
        source: office
        query: SELECT MIN(id) AS owner FROM staff WHERE dept = :team
"""

STAFF = [
    ("E1", "张三", "研发部", "A", "2026-03-02"),
    ("E2", "李四", "研发部", "B", "2026-03-15"),
    ("E3", "王五", "销售部", "A", "2025-10-08"),
    ("E4", "Amy Chen", "销售部", "A", "2026-02-20"),
]
PROJECTS = [("星火", "E1", "2025-08-01"), ("北斗", "E2", "2026-01-10"), ("研发部", "E3", "2024-05-05"),
            ("天宫", "E1", "2025-09-30"), ("神舟", "E4", "2026-06-01")]


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> CapabilitySet:
    folder = tmp_path_factory.mktemp("office")
    db = folder / "office.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE staff (id TEXT PRIMARY KEY, name TEXT, dept TEXT, grade TEXT, hired TEXT)")
        connection.execute("CREATE TABLE projects (title TEXT PRIMARY KEY, owner TEXT, started TEXT)")
        connection.executemany("INSERT INTO staff VALUES (?, ?, ?, ?, ?)", STAFF)
        connection.executemany("INSERT INTO projects VALUES (?, ?, ?)", PROJECTS)
    (folder / "office.yaml").write_text(MANIFEST.format(db=db), encoding="utf-8")
    return CapabilitySet.from_path(folder)


@pytest.fixture(scope="module")
def agent(office: CapabilitySet):
    with Agent(office, settings=Settings(cache_enabled=False, audit_enabled=False)) as made:
        yield made


def outcome(agent: Agent, question: str, today: dt.date = TODAY):
    return agent.templates.outcome(question, today)


def params(agent: Agent, question: str, today: dt.date = TODAY) -> dict[str, Any] | None:
    found = outcome(agent, question, today).match
    return found.params if found is not None else None


# --- each slot kind ---------------------------------------------------------------------------


def _month(day: dt.date, back: int) -> tuple[str, str]:
    """First and last day of the month ``back`` months before ``day``'s (an oracle apart from the grammar)."""
    index = day.year * 12 + day.month - 1 - back
    first = dt.date(index // 12, index % 12 + 1, 1)
    following = dt.date((index + 1) // 12, (index + 1) % 12 + 1, 1)
    return first.isoformat(), (following - dt.timedelta(days=1)).isoformat()


@pytest.mark.parametrize("today", [dt.date(2026, 1, 15), dt.date(2026, 3, 31), dt.date(2026, 11, 30),
                                   dt.date(2027, 12, 31)])
@pytest.mark.parametrize(("words", "back"), [("上个月", 1), ("这个月", 0), ("本月", 0), ("last month", 1)])
def test_relative_month_on_several_days(agent: Agent, today: dt.date, words: str, back: int) -> None:
    first, last = _month(today, back)
    found = params(agent, f"{words} 研发部绩效为A的有几人？", today)
    assert found == {"month_start": first, "month_end": last,
                     "month_next": (dt.date.fromisoformat(last) + dt.timedelta(days=1)).isoformat(),
                     "dept": "研发部", "grade": "A"}


@pytest.mark.parametrize(("words", "month"), [
    ("2025年11月", "2025-11"), ("2025年11月份", None), ("March 2026", "2026-03"), ("Nov 2025", "2025-11"),
    ("今年3月", "2026-03"), ("3月", "2026-03"), ("12月", "2025-12"),
])
def test_month_slot_reads_chinese_and_english_months(agent: Agent, words: str, month: str | None) -> None:
    found = params(agent, f"{words} 研发部绩效为A的有几人？")
    if month is None:  # not a form the grammar reads as one month: no answer rather than a guess
        assert found is None or found["month_start"].startswith("2025-11")
        return
    assert found is not None and found["month_start"] == f"{month}-01"


@pytest.mark.parametrize(("words", "code"), [("A", "A"), ("a", "A"), ("优秀", "A"), ("良好", "B"), ("B", "B")])
def test_coded_column_slot_takes_codes_and_meanings(agent: Agent, words: str, code: str) -> None:
    found = params(agent, f"2026年3月研发部绩效为{words}的有几人？")
    assert found is not None and found["grade"] == code


@pytest.mark.parametrize(("words", "n"), [("5", 5), ("3", 3), ("十", 10), ("十二", 12), ("两", 2), ("20", 20)])
def test_integer_slot_in_digits_and_chinese_numerals(agent: Agent, words: str, n: int) -> None:
    assert params(agent, f"最近立项的{words}个项目是哪些？") == {"n": n}


@pytest.mark.parametrize("words", ["0", "21", "一百", "3.5", "-1"])
def test_integer_slot_out_of_range_or_not_whole_abstains(agent: Agent, words: str) -> None:
    assert params(agent, f"最近立项的{words}个项目是哪些？") is None


@pytest.mark.parametrize(("words", "day"), [("2026年3月2日", "2026-03-02"), ("2025年10月8日", "2025-10-08")])
def test_date_slot(agent: Agent, words: str, day: str) -> None:
    assert params(agent, f"{words}入职的员工有哪些？") == {"day": day}


@pytest.mark.parametrize(("words", "first", "last"), [
    ("2026年第一季度", "2026-01-01", "2026-03-31"), ("2025年第四季度", "2025-10-01", "2025-12-31"),
    ("上个季度", "2026-07-01", "2026-09-30"), ("本季度", "2026-10-01", "2026-12-31"),
])
def test_quarter_slot(agent: Agent, words: str, first: str, last: str) -> None:
    found = params(agent, f"{words}入职了多少人？")
    assert found is not None and (found["q_start"], found["q_end"]) == (first, last)
    assert found["q_next"] == (dt.date.fromisoformat(last) + dt.timedelta(days=1)).isoformat()


@pytest.mark.parametrize(("words", "year"), [("2024", 2024), ("2025", 2025), ("last year", 2025), ("this year", 2026)])
def test_year_slot_in_english(agent: Agent, words: str, year: int) -> None:
    found = params(agent, f"Who joined the team in {words}?")
    assert found == {"year_start": f"{year}-01-01", "year_end": f"{year}-12-31", "year_next": f"{year + 1}-01-01"}


@pytest.mark.parametrize(("today", "words", "first", "last"), [
    (dt.date(2026, 11, 30), "去年第三季度", "2025-07-01", "2025-09-30"),
    (dt.date(2028, 2, 1), "去年第三季度", "2027-07-01", "2027-09-30"),
    (dt.date(2026, 11, 30), "今年前三季度", "2026-01-01", "2026-09-30"),
    (dt.date(2026, 11, 30), "去年", "2025-01-01", "2025-12-31"),
    (dt.date(2026, 5, 20), "上个季度", "2026-01-01", "2026-03-31"),
    (dt.date(2026, 11, 30), "三月第一周", "2026-03-02", "2026-03-08"),
    (dt.date(2026, 11, 30), "2025年8月", "2025-08-01", "2025-08-31"),
])
def test_date_range_slot_takes_any_period(agent: Agent, today: dt.date, words: str, first: str, last: str) -> None:
    found = params(agent, f"{words}立项的项目有哪些？", today)
    assert found is not None and (found["period_start"], found["period_end"]) == (first, last)


@pytest.mark.parametrize(("question", "value"), [("李四负责哪些项目？", "李四"), ("amy chen负责哪些项目？", None),
                                                 ("Amy Chen负责哪些项目？", "Amy Chen")])
def test_entity_slot_is_looked_up_in_the_data(agent: Agent, question: str, value: str | None) -> None:
    found = params(agent, question)
    assert (found or {}).get("person") == value


# --- abstention ---------------------------------------------------------------------------------


@pytest.mark.parametrize("question", [
    "2026年3月研发部绩效为A的有几人？请按城市列出",          # extra words after
    "请问2026年3月研发部绩效为A的有几人？",                 # extra words before
    "2026年3月研发部绩效为A或B的有几人？",                 # two values in one slot
    "2026年3月研发部绩效不为A的有几人？",                  # a negation
    "最近立项的5个项目中有哪些已暂停？",                    # a word no example has
])
def test_extra_words_abstain(agent: Agent, question: str) -> None:
    assert outcome(agent, question).match is None


def test_words_that_change_nothing_match_as_a_paraphrase_only(agent: Agent) -> None:
    found = outcome(agent, "最近立项的5个项目中有哪些？").match  # 中 and 有: fillers
    assert found is not None and found.how == "paraphrase" and found.params == {"n": 5}
    assert TemplateSet(agent.capabilities, paraphrases=False).match("最近立项的5个项目中有哪些？", TODAY).match is None


def test_two_candidate_examples_abstain(agent: Agent) -> None:
    # 研发部 is both a department code and a project's name: two examples fit.
    result = outcome(agent, "研发部的负责人是谁？")
    assert result.match is None and "more than one verified example" in result.reason
    # One reading only: each example answers its own values.
    assert params(agent, "北斗的负责人是谁？") == {"project": "北斗"}
    assert params(agent, "销售部的负责人是谁？") == {"team": "销售部"}


@pytest.mark.parametrize("question", ["赵六负责哪些项目？", "星火负责哪些项目？", "不存在的人负责哪些项目？"])
def test_unknown_entity_abstains(agent: Agent, question: str) -> None:
    assert outcome(agent, question).match is None


@pytest.mark.parametrize("question", [
    "2026年3月A绩效为研发部的有几人？",     # values swapped between columns
    "2026年3月销售绩效为A的有几人？",       # a meaning of another code set? 销售 is a meaning of dept: still dept
    "2026年3月研发部绩效为C的有几人？",     # not a value of the column
    "2026年3月星火绩效为A的有几人？",       # an entity of another column
])
def test_value_of_the_wrong_column_abstains(agent: Agent, question: str) -> None:
    found = outcome(agent, question).match
    if question.startswith("2026年3月销售"):
        assert found is not None and found.params["dept"] == "销售部"  # 销售 is dept's own meaning
    else:
        assert found is None


@pytest.mark.parametrize("question", ["2026年13月研发部绩效为A的有几人？", "研发部绩效为A的有几人？",
                                      "2026年第一季度研发部绩效为A的有几人？"])
def test_a_period_of_another_kind_or_none_abstains(agent: Agent, question: str) -> None:
    assert outcome(agent, question).match is None


def test_synonyms_of_one_column_are_interchangeable_and_nothing_else(office: CapabilitySet) -> None:
    from structq.templates.pattern import synonym_groups

    groups = synonym_groups(office)
    assert groups["部门"] == {"部门", "团队"} and groups["姓名"] == {"姓名", "名字"}
    assert "绩效" not in groups


# --- bound, never spliced -----------------------------------------------------------------------


def test_slot_values_are_bound_as_parameters(agent: Agent) -> None:
    answer = agent.ask("2026年3月研发部绩效为良好的有几人？", today=TODAY, answer=False)
    assert answer.plan_source == "template" and answer.model_calls.count() == 0
    assert answer.plan.template is not None and answer.plan.template.example == "2026年3月研发部绩效为A的有几人？"
    assert answer.plan.template.slots["grade"] == "B (良好)"
    (step,) = answer.results.steps.values()
    assert "'B'" not in step.query and "研发部" not in step.query and ":slot_grade" in step.query
    assert step.params["slot_grade"] == "B" and step.params["slot_month_start"] == "2026-03-01"
    assert [list(r) for r in answer.results.final.rows] == [[1]]


def test_integer_slot_limits_rows_and_json_names_the_example(agent: Agent) -> None:
    answer = agent.ask("最近立项的两个项目是哪些？", today=TODAY, answer=False)
    assert [r[0] for r in answer.results.final.rows] == ["神舟", "北斗"]
    document = answer.to_dict()
    assert document["plan_source"] == "template"
    assert document["plan"]["template"] == {"example": "最近立项的5个项目是哪些？", "slots": {"n": "2"},
                                             "params": {"n": 2}, "how": "words", "score": 1.0, "why": ""}


def test_entity_value_is_bound_with_its_stored_spelling(agent: Agent) -> None:
    answer = agent.ask("李四负责哪些项目？", today=TODAY, answer=False)
    assert [r[0] for r in answer.results.final.rows] == ["北斗"]


@pytest.mark.parametrize("hostile", ["x' OR '1'='1", "'; DROP TABLE staff; --"])
def test_a_hostile_slot_value_is_data(office: CapabilitySet, hostile: str) -> None:
    query = check_sql("SELECT title FROM projects WHERE title = :project", office["office"], slots={"project": hostile})
    assert hostile not in query.text and query.params["slot_project"] == hostile


def test_an_unbound_placeholder_is_still_refused(office: CapabilitySet) -> None:
    with pytest.raises(SandboxViolation) as caught:
        check_sql("SELECT title FROM projects WHERE title = :other", office["office"], slots={"project": "x"})
    assert caught.value.code == "placeholder"


def test_search_body_slot_is_a_whole_string(demo_capabilities: CapabilitySet) -> None:
    body = {"query": {"range": {"week_start_date": {"gte": ":s", "lte": ":e"}}}, "size": ":n"}
    safe = check_dsl(body, demo_capabilities["reports"], "weekly_reports", slots={"s": "2026-01-01", "e": "2026-01-31", "n": 3})
    assert safe.body["query"]["range"]["week_start_date"] == {"gte": "2026-01-01", "lte": "2026-01-31"}
    assert safe.body["size"] == 3
    partial = {"query": {"match": {"content": "x :s"}}}
    assert check_dsl(partial, demo_capabilities["reports"], "weekly_reports", slots={"s": "y"}).body["query"]["match"]["content"] == "x :s"


# --- without a model ----------------------------------------------------------------------------


def test_without_a_model_an_unmatched_question_lists_the_closest_examples(agent: Agent) -> None:
    with pytest.raises(ConfigError) as caught:
        agent.ask("2026年3月研发部绩效为A的有几个人，分别是谁？", today=TODAY)  # a paraphrase, and another question
    assert caught.value.message == "no language model is configured"
    assert "{month}{dept}绩效为{grade}的有几人" in caught.value.hint and "--llm" in caught.value.hint
    assert caught.value.suggestions[0] == "{month}{dept}绩效为{grade}的有几人"


# --- manifests that cannot load -----------------------------------------------------------------


def _example(slots: dict[str, Any], query: str, question: str = "2026年3月研发部绩效为A的有几人？") -> str:
    manifest = yaml.safe_load(MANIFEST.format(db="x.db"))
    manifest["examples"] = [{"question": question, "slots": slots,
                             "steps": [{"output_key": "n", "source": "office", "query": query}]}]
    return yaml.safe_dump(manifest, allow_unicode=True)


@pytest.mark.parametrize(("slots", "query", "message"), [
    ({"grade": {"column": "office.staff.grade", "example": "C"}}, "SELECT 1 FROM staff WHERE grade = :grade",
     "does not occur in the question"),
    ({"grade": {"column": "office.staff.grade", "example": "A"}}, "SELECT 1 FROM staff WHERE grade = 'A'",
     "is not used by any step"),
    ({"grade": {"column": "office.staff.grade", "example": "A"}}, "SELECT 1 FROM staff WHERE grade = :grad",
     "which no slot gives"),
    ({"month": {"type": "month", "example": "2026-03"}}, "SELECT 1 FROM staff WHERE hired = :month",
     "which no slot gives"),
    ({"grade": {"type": "integer", "column": "office.staff.grade", "example": "A"}}, "SELECT :grade",
     "either type"),
    ({}, "SELECT 1 FROM staff WHERE grade = :grade", "declares no slots"),
])
def test_inconsistent_slots_do_not_load(slots: dict[str, Any], query: str, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(_example(slots, query), "office.yaml")
    assert message in str(caught.value)


@pytest.mark.parametrize(("column", "message"), [("office.staff.grad", "is not declared"),
                                                 ("office.staf.grade", "declares no 'staf'"),
                                                 ("offic.staff.grade", "unknown source")])
def test_a_column_slot_names_a_declared_column(tmp_path: Path, column: str, message: str) -> None:
    (tmp_path / "office.yaml").write_text(
        _example({"grade": {"column": column, "example": "A"}}, "SELECT 1 FROM staff WHERE grade = :grade"), encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        CapabilitySet.from_path(tmp_path)
    assert message in str(caught.value)


def test_a_period_example_that_is_not_in_the_question_does_not_build(office: CapabilitySet, tmp_path: Path) -> None:
    (tmp_path / "office.yaml").write_text(
        _example({"month": {"type": "month", "example": "2026-04"}}, "SELECT 1 FROM staff WHERE hired = :month_start"),
        encoding="utf-8")
    with pytest.raises(ManifestError, match="not in the question"):
        TemplateSet(CapabilitySet.from_path(tmp_path))


# --- the same binding on every database -----------------------------------------------------------


@pytest.mark.parametrize("server", ["sqlite", "pg_hr", "mariadb_hr"])
def test_slot_parameters_bind_on_every_database(server: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Dates as ISO text against a DATE column, a text value, and ``LIMIT :n``, bound by each driver."""
    from sandbox_support import database, manifest

    from structq.agent import Engine, Plan
    from structq.agent.plan import TemplateUse

    if server == "sqlite":
        path = tmp_path / "hr.db"
        target = sqlite3.connect(path)
        database().backup(target)
        target.close()
        source = manifest("sqlite", filters=False).model_copy(update={"url": f"sqlite:///{path}", "schema_": None})
    else:
        _, reader = request.getfixturevalue(server)
        source = manifest("postgres" if server == "pg_hr" else "mysql", filters=False).model_copy(update={"url": reader})
    plan = Plan(steps=[{"output_key": "graded", "source": source.source, "query": (
        "SELECT employee_id FROM employee_performance WHERE performance_grade = :grade "
        "AND assessment_month >= :month_start AND assessment_month <= :month_end ORDER BY employee_id LIMIT :n")}],
        template=TemplateUse(example="x", params={"grade": "A", "month_start": "2024-03-01",
                                                   "month_end": "2024-03-31", "n": 2}))
    with Engine(CapabilitySet([source])) as engine:
        result = engine.run(plan)
    assert [row[0] for row in result.final.rows] == ["E1", "E3"]
    assert result.final.params == {"slot_grade": "A", "slot_month_start": "2024-03-01",
                                   "slot_month_end": "2024-03-31", "slot_n": 2}


# --- every month and grade, as a property -------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(day=st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2099, 12, 31)),
       grade=st.sampled_from([("A", "A"), ("优秀", "A"), ("B", "B"), ("良好", "B")]),
       dept=st.sampled_from(["研发部", "销售部"]))
def test_any_month_and_grade_reads_as_written(agent: Agent, day: dt.date, grade: tuple[str, str], dept: str) -> None:
    words, code = grade
    found = params(agent, f"{day.year}年{day.month}月{dept}绩效为{words}的有几人？")
    first, last = _month(day, 0)
    assert found is not None
    assert (found["month_start"], found["month_end"], found["dept"], found["grade"]) == (first, last, dept, code)


# --- the CLI and the audit line -----------------------------------------------------------------


@pytest.fixture
def demo_cli(demo_env: dict[str, str], tmp_path: Path):
    from typer.testing import CliRunner

    from structq.cli import app

    env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_LLM": None, "OPENAI_API_KEY": None,
           "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"), "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"),
           "STRUCTQ_DEBUG": None, "STRUCTQ_MANIFESTS": None, "COLUMNS": "200"}
    capabilities = Path(__file__).resolve().parents[1] / "capabilities"
    return lambda *args: CliRunner().invoke(app, [args[0], "-m", str(capabilities), *args[1:]], env=env)


def test_cli_without_a_model_suggests_three_examples_and_exits_3(demo_cli) -> None:
    result = demo_cli("ask", "上个月绩效为A的人数", "--today", "2026-11-30")
    assert result.exit_code == 3
    first, hint = result.stderr.splitlines()[:2]
    assert first == "structq: error: no language model is configured"
    assert hint.count("“") == 3 and "{month}" in hint and "{grade}" in hint and "--llm" in hint


def test_cli_says_which_example_and_values_answered(demo_cli, tmp_path: Path) -> None:
    import json

    result = demo_cli("ask", "天宫项目的成员有哪些？", "--no-answer")
    assert result.exit_code == 0, result.output
    assert "plan: template; model calls: 0" in result.stdout
    assert "from the verified example '星火项目的成员有哪些？' with project = 天宫" in result.stdout
    document = json.loads(demo_cli("ask", "天宫项目的成员有哪些？", "--json", "--no-answer").stdout)
    assert document["plan_source"] == "template" and document["plan"]["template"]["slots"] == {"project": "天宫"}
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines and all(line["plan_source"] == "template" for line in lines)
    assert lines[-1]["plan"]["template"] == {"example": "星火项目的成员有哪些？", "slots": {"project": "天宫"},
                                             "params": {"project": "天宫"}, "how": "words", "score": 1.0, "why": ""}
