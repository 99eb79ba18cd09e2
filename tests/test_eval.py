"""The demo question set (capabilities/eval.yaml), ``evaluate`` and ``structq eval``, with a
scripted model that plans every question right (or one of them wrong); and ``rows_match``.

``structq eval`` takes ``--llm`` strings only, so the CLI tests hand it the scripted model by
replacing ``resolve_model`` where the agent looks it up."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from scripted import plan_reply, scripted
from typer.testing import CliRunner

from structq.agent import Agent
from structq.agent.cache import VerifiedPlans
from structq.agent.evaluate import EvalItem, EvalSet, evaluate, rows_match
from structq.cli import app
from structq.config import Settings
from structq.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = REPO_ROOT / "capabilities"
EVAL_FILE = CAPABILITIES / "eval.yaml"


def sql_plan(source: str, *queries: str) -> dict[str, Any]:
    """A plan of SQL steps on ``source``, keyed s1, s2, … (a later step may read ``<s1>``)."""
    return {"steps": [{"output_key": f"s{i}", "source": source, "query": q} for i, q in enumerate(queries, 1)]}


#: Plans that differ from the item's ``expect_sql`` and still answer it: other SQL, other column
#: order, extra columns, another row order, several steps, the search index.
EQUIVALENT_PLANS: dict[str, dict[str, Any]] = {
    "各部门分别有多少在职员工？": sql_plan(
        "hr", "SELECT COUNT(*) AS n, department FROM employees WHERE status = '在职' GROUP BY department ORDER BY n DESC"),
    "预算最高的3个项目是哪些？": sql_plan(
        "hr", "SELECT project_id, project_name, status, budget FROM projects ORDER BY budget DESC LIMIT 3"),
    "What was the average performance score of the R&D department (研发部) in September 2026?": sql_plan(
        "hr", "SELECT SUM(p.score) / COUNT(*) AS average FROM employee_performance AS p "
              "WHERE p.assessment_month = '2026-09-01' "
              "AND p.employee_id IN (SELECT employee_id FROM employees WHERE department = '研发部')"),
    "北斗项目的负责人是谁？": sql_plan(
        "hr", "SELECT employee_id, name FROM employees "
              "WHERE employee_id = (SELECT owner_id FROM projects WHERE project_name = '北斗')"),
    "How many members does each project led by the 运维部 have?": sql_plan(
        "hr", "SELECT project_name FROM projects WHERE department = '运维部'",
        "SELECT project_name, COUNT(employee_id) AS members FROM project_members "
        "WHERE project_name IN (<s1>) GROUP BY project_name ORDER BY members"),
    "How many different customers bought 产品X last year?": sql_plan(
        "sales", "SELECT product_id FROM products WHERE product_name = '产品X'",
        "SELECT COUNT(DISTINCT customer_id) FROM sales "
        "WHERE product_id = <s1> AND sale_date BETWEEN '2025-01-01' AND '2025-12-31'"),
    "去年每个月的销售额是多少？": sql_plan(
        "sales", "SELECT substr(sale_date, 1, 7) AS month, SUM(amount) AS total, COUNT(*) AS lines FROM sales "
                 "WHERE sale_date LIKE '2025-%' GROUP BY month ORDER BY month"),
    "李玲倩在2026年10月写了哪些周报？": {"steps": [{
        "output_key": "reports", "source": "reports", "index": "weekly_reports",
        "query": {"query": {"bool": {"filter": [
            {"term": {"author_name": "李玲倩"}},
            {"range": {"week_start_date": {"gte": "2026-10-01", "lte": "2026-10-31"}}}]}},
            "_source": ["report_id", "week_start_date", "title"], "sort": [{"week_start_date": "desc"}]}}]},
}

#: A plausible mistake: every employee of the region, not only those still employed.
WRONG_QUESTION = "华东区有多少在职员工？"
WRONG_PLAN = sql_plan("hr", "SELECT COUNT(*) FROM employees WHERE region = '华东'")
#: Refused by the sandbox every time: the model never finds a working plan.
REFUSED_PLAN = sql_plan("hr", "SELECT COUNT(id_card) FROM employees WHERE region = '华东' AND status = '在职'")


def right_plan(item: EvalItem) -> dict[str, Any]:
    if item.question in EQUIVALENT_PLANS:
        return EQUIVALENT_PLANS[item.question]
    assert item.expect_sql, f"write a plan for {item.question!r} in EQUIVALENT_PLANS"
    return sql_plan(item.source, item.expect_sql)


@pytest.fixture(scope="module")
def eval_set() -> EvalSet:
    return EvalSet.from_file(EVAL_FILE)


@pytest.fixture(scope="module")
def planned_items(eval_set: EvalSet, demo_capabilities) -> list[EvalItem]:
    """The items the model plans: verified examples, and questions of a slotted example's
    shape, are answered from the manifests."""
    verified = VerifiedPlans(demo_capabilities)
    with Agent(demo_capabilities, settings=Settings(cache_enabled=False, audit_enabled=False)) as agent:
        return [item for item in eval_set.questions if verified.get(item.question) is None
                and agent.templates.plan(item.question, eval_set.today) is None]


def scripted_planner(items: list[EvalItem], wrong: dict[str, dict[str, Any]] | None = None):
    """A model that plans ``items`` in order: right, except the plans ``wrong`` gives."""
    wrong = wrong or {}
    return scripted(*(plan_reply(wrong.get(item.question) or right_plan(item)) for item in items))


def one_question() -> EvalSet:
    """The question ``WRONG_PLAN`` and ``REFUSED_PLAN`` answer, alone."""
    item = EvalItem(question=WRONG_QUESTION, source="hr", expect_sql="SELECT 1")
    return EvalSet(today=dt.date(2026, 11, 30), questions=[item])


@pytest.fixture
def make_agent(demo_capabilities):
    agents: list[Agent] = []

    def make(model: Any) -> Agent:
        agent = Agent(demo_capabilities, llm=model, settings=Settings(cache_enabled=False, audit_enabled=False))
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.close()


# --- the question set ----------------------------------------------------------------------


def test_the_demo_set_is_large_and_varied(eval_set: EvalSet, planned_items: list[EvalItem]) -> None:
    questions = [item.question for item in eval_set.questions]
    assert len(questions) >= 20 and len(set(questions)) == len(questions)
    assert eval_set.today == dt.date(2026, 11, 30)
    assert {"hr", "sales"} <= {item.source for item in eval_set.questions}
    assert any(item.expect_rows for item in eval_set.questions)
    assert any(item.is_ordered for item in eval_set.questions) and any(not item.is_ordered for item in eval_set.questions)
    english = [q for q in questions if q[0].isascii()]
    assert 5 <= len(english) < len(questions)
    assert 0 < len(planned_items) < len(questions)  # some are verified examples


def test_every_expected_query_runs_and_returns_rows(eval_set: EvalSet, make_agent) -> None:
    from structq.agent.evaluate import _expected_rows

    agent = make_agent(None)
    for item in eval_set.questions:
        assert _expected_rows(agent, item), item.question


# --- evaluate() ----------------------------------------------------------------------------


def test_right_plans_score_100_percent(eval_set: EvalSet, planned_items: list[EvalItem], make_agent) -> None:
    model = scripted_planner(planned_items)
    report = evaluate(make_agent(model), eval_set)
    failures = [(r.item.question, r.reason) for r in report.results if not r.passed]
    assert failures == []
    assert report.accuracy == 1.0 and report.passed == len(eval_set.questions)
    assert report.model_calls == model.calls == len(planned_items)
    sources = {r.item.question: r.plan_source for r in report.results}
    assert sorted(set(sources.values())) == ["model", "template"]


def test_a_wrong_plan_fails_its_item_and_keeps_the_plan(eval_set: EvalSet, planned_items: list[EvalItem],
                                                         make_agent) -> None:
    model = scripted_planner(planned_items, {WRONG_QUESTION: WRONG_PLAN})
    report = evaluate(make_agent(model), eval_set)
    [failed] = [r for r in report.results if not r.passed]
    assert failed.item.question == WRONG_QUESTION
    assert failed.reason.startswith("rows differ")
    assert failed.plan is not None and failed.plan.steps[0].query == WRONG_PLAN["steps"][0]["query"]
    assert report.passed == len(eval_set.questions) - 1
    item = next(i for i in report.to_dict()["items"] if not i["passed"])
    assert item["plan"]["steps"][0]["query"] == WRONG_PLAN["steps"][0]["query"]


def test_a_plan_that_never_works_fails_its_item_with_the_last_plan(make_agent) -> None:
    attempts = Settings().max_repairs + 1
    report = evaluate(make_agent(scripted(*[plan_reply(REFUSED_PLAN)] * attempts)), one_question())
    [result] = report.results
    assert not result.passed and result.reason.startswith("RepairsExhausted: no working plan after 3 attempts")
    assert "[denied_column]" in result.reason
    assert result.plan is not None and result.plan.steps[0].query == REFUSED_PLAN["steps"][0]["query"]
    assert result.model_calls == report.model_calls == attempts


def test_without_a_model_an_item_that_needs_one_is_skipped_with_the_reason(make_agent) -> None:
    report = evaluate(make_agent(None), one_question())
    [result] = report.results
    assert result.skipped and not result.passed and result.reason.startswith("needs a model")
    assert (report.passed, report.failed, report.skipped) == (0, 0, 1)


@pytest.mark.parametrize("item, problem", [
    ({"question": "q"}, "exactly one of expect_sql or expect_rows"),
    ({"question": "q", "expect_sql": "SELECT 1"}, "needs the source"),
    ({"question": "q", "expect_rows": [[1]], "expected": 1}, "questions.0.expected: Extra inputs"),
])
def test_a_malformed_question_set_is_a_config_error(tmp_path: Path, item: dict, problem: str) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump({"questions": [item]}, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError, match=problem):
        EvalSet.from_file(path)


# --- structq eval --------------------------------------------------------------------------


@pytest.fixture
def eval_cli(demo_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``run(model, *args)``: ``structq eval`` with ``model`` as the configured model."""
    env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
           "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_LLM": None, "OPENAI_API_KEY": None,
           "COLUMNS": "200"}

    def run(model: Any, *args: str):
        monkeypatch.setattr("structq.agent.agent.resolve_model", lambda spec, settings=None: model)
        return CliRunner().invoke(app, ["eval", *args, "-m", str(CAPABILITIES)], env=env)

    return run


def test_cli_eval_prints_100_percent(eval_cli, planned_items: list[EvalItem], eval_set: EvalSet) -> None:
    result = eval_cli(scripted_planner(planned_items), str(EVAL_FILE))
    assert result.exit_code == 0, result.output
    total = len(eval_set.questions)
    assert f"accuracy 100.0% ({total}/{total}), {len(planned_items)} model calls" in result.stdout
    assert result.stdout.count("pass ") == total and "FAIL" not in result.stdout


@pytest.fixture
def two_questions(tmp_path: Path, eval_set: EvalSet, planned_items: list[EvalItem]) -> tuple[Path, list[EvalItem]]:
    """A small set: the question the wrong plan answers, and one more the model plans."""
    items = [i for i in planned_items if i.question == WRONG_QUESTION] + planned_items[-1:]
    path = tmp_path / "two.eval.yaml"
    document = {"today": eval_set.today.isoformat(), "questions": [i.model_dump(exclude_defaults=True) for i in items]}
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return path, items


def test_cli_eval_shows_a_failure_with_its_plan_and_exits_1(eval_cli, two_questions) -> None:
    path, items = two_questions
    result = eval_cli(scripted_planner(items, {WRONG_QUESTION: WRONG_PLAN}), str(path))
    assert result.exit_code == 1
    assert f"FAIL   1. {WRONG_QUESTION}" in result.stdout
    assert "rows differ" in result.stdout and WRONG_PLAN["steps"][0]["query"] in result.stdout
    assert "accuracy 50.0% (1/2)" in result.stdout


def test_cli_eval_json_items_carry_the_failing_plan(eval_cli, two_questions) -> None:
    path, items = two_questions
    result = eval_cli(scripted_planner(items, {WRONG_QUESTION: WRONG_PLAN}), str(path), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert set(report) == {"total", "passed", "failed", "skipped", "accuracy", "model_calls", "elapsed_ms", "items"}
    assert (report["total"], report["passed"], report["accuracy"], report["model_calls"]) == (2, 1, 0.5, 2)
    assert (report["failed"], report["skipped"]) == (1, 0)
    failed, passed = report["items"]
    assert set(failed) == {"question", "passed", "skipped", "reason", "plan_source", "model_calls", "elapsed_ms",
                           "plan"}
    assert failed["passed"] is False and failed["plan"]["steps"][0]["query"] == WRONG_PLAN["steps"][0]["query"]
    assert passed["passed"] is True and passed["plan"] is None


def test_cli_eval_prints_reasons_and_plans_verbatim(eval_cli, two_questions) -> None:
    path, items = two_questions
    attempts = Settings().max_repairs + 1
    model = scripted(*[plan_reply(REFUSED_PLAN)] * attempts, *(plan_reply(right_plan(i)) for i in items[1:]))
    result = eval_cli(model, str(path))
    assert result.exit_code == 1
    assert "[denied_column] column 'id_card'" in result.stdout  # not swallowed as markup
    assert REFUSED_PLAN["steps"][0]["query"] in result.stdout


def test_cli_eval_without_a_model_and_nothing_it_can_run_is_a_config_error(demo_env: dict[str, str],
                                                                              two_questions) -> None:
    path, _ = two_questions
    env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_LLM": None, "OPENAI_API_KEY": None,
           "STRUCTQ_AUDIT": "0"}
    result = CliRunner().invoke(app, ["eval", str(path), "-m", str(CAPABILITIES)], env=env)
    assert result.exit_code == 3
    assert "structq: error: no item of the question set could run without a model" in result.stderr
    assert result.stdout.count("skip ") == 2


def test_cli_eval_without_a_model_runs_the_verified_questions_and_skips_the_rest(
        demo_env: dict[str, str], demo_capabilities, eval_set: EvalSet) -> None:
    env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_LLM": None, "OPENAI_API_KEY": None,
           "STRUCTQ_AUDIT": "0", "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["eval", str(EVAL_FILE), "-m", str(CAPABILITIES), "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    with Agent(demo_capabilities, settings=Settings(cache_enabled=False, audit_enabled=False)) as agent:
        offline = {q.question for q in eval_set.questions if agent.verified.get(q.question) is not None
                   or agent.templates.plan(q.question, eval_set.today) is not None}
    ran = [item["question"] for item in report["items"] if not item["skipped"]]
    assert ran and set(ran) == offline
    assert report["passed"] == len(ran) and report["failed"] == 0
    skipped = [item for item in report["items"] if item["skipped"]]
    assert skipped and all(item["reason"].startswith("needs a model") for item in skipped)


# --- rows_match ----------------------------------------------------------------------------


@pytest.mark.parametrize("actual, expected, ordered", [
    ([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], False),
    ([["a", 1], ["b", 2]], [["a", 1], ["b", 2]], True),
    ([["P1", "a", 1, "x"], ["P2", "b", 2, "y"]], [["a", 1], ["b", 2]], True),       # extra columns
    ([[1, "a"], [2, "b"]], [["a", 1], ["b", 2]], False),                           # other column order
    ([[0.1 + 0.2]], [[0.3]], False),                                               # float noise
    ([[79.83111111111107]], [[79.8311111111111]], False),
    ([[3]], [[3.0]], False),
    ([["3"]], [[3]], False),                                                       # numeric text
    ([[Decimal("1.50")]], [[1.5]], False),                                         # NUMERIC columns
    ([[None, True]], [[None, True]], False),
    ([["2026-03-01"]], [[dt.date(2026, 3, 1)]], False),                            # YAML dates
    ([], [], False),
])
def test_rows_that_match(actual: list, expected: list, ordered: bool) -> None:
    assert rows_match(actual, expected, ordered=ordered)


@pytest.mark.parametrize("actual, expected, ordered", [
    ([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], True),                            # order matters
    ([["a", 1]], [["a", 1], ["a", 1]], False),                                     # multiset, not set
    ([["a", 1], ["a", 1], ["b", 2]], [["a", 1], ["b", 2], ["b", 2]], False),
    ([["a"]], [["a", 1]], False),                                                  # missing column
    ([[0.3001]], [[0.3]], False),
    ([[1], [2]], [[1, 2]], False),
    ([["x"]], [], False),
    ([[True]], [[1]], False),                                                      # a bool is not a number
])
def test_rows_that_do_not_match(actual: list, expected: list, ordered: bool) -> None:
    assert not rows_match(actual, expected, ordered=ordered)


@pytest.mark.parametrize("expect_sql, ordered, is_ordered", [
    ("SELECT a FROM t", None, False),
    ("SELECT a FROM t ORDER BY a", None, True),
    ("SELECT a FROM t\nORDER  BY a", None, True),
    ("SELECT a FROM t ORDER BY a", False, False),
    ("SELECT a FROM t", True, True),
])
def test_an_item_is_ordered_by_flag_or_by_order_by(expect_sql: str, ordered: bool | None, is_ordered: bool) -> None:
    assert EvalItem(question="q", source="s", expect_sql=expect_sql, ordered=ordered).is_ordered is is_ordered
