"""The planner, the repair loop, answers, the cache, conversation and the audit log — all with
scripted models on the demo company (SQLite + the embedded search server). No network."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from scripted import plan_reply, scripted, text_reply

from structq.agent import Agent, Plan, RepairsExhausted
from structq.agent.cache import normalise_question
from structq.agent.synthesis import unsupported_numbers
from structq.config import Settings
from structq.errors import ConfigError, ModelError, SourceUnavailable

TODAY = dt.date(2026, 11, 30)
#: Not a verified example (those skip the model): same meaning, other words.
SEED_QUESTION = "星火项目组里绩效为A的人，在三月第一周都写了哪些周报？"

SEED_PLAN: dict[str, Any] = {
    "reasoning": "先找星火项目成员，再筛2026年3月绩效为A的，再查这些人三月第一周的周报",
    "steps": [
        {"output_key": "members", "source": "hr", "purpose": "星火项目成员",
         "query": "SELECT employee_id FROM project_members WHERE project_name = '星火'"},
        {"output_key": "top", "source": "hr", "purpose": "三月绩效为A的成员",
         "query": "SELECT employee_id FROM employee_performance WHERE performance_grade = 'A' "
                  "AND assessment_month = '2026-03-01' AND employee_id IN (<members>)"},
        {"output_key": "reports", "source": "reports", "index": "weekly_reports", "purpose": "三月第一周的周报",
         "query": {"query": {"bool": {"filter": [
             {"terms": {"author_id": "<top>"}},
             {"range": {"week_start_date": {"gte": "2026-03-02", "lte": "2026-03-08"}}}]}},
             "_source": ["report_id", "author_name", "week_start_date", "title"]}},
    ],
    "answer_with": "按员工列出周报标题",
}


def with_step(plan: dict[str, Any], index: int, **changes: Any) -> dict[str, Any]:
    """A copy of ``plan`` with step ``index`` changed."""
    out = copy.deepcopy(plan)
    out["steps"][index].update(changes)
    return out


@pytest.fixture(scope="module")
def seed_counts(demo_capabilities) -> dict[str, int]:
    """Row counts of the seed plan's steps, to script an answer that cites real figures."""
    from structq.agent import Engine

    with Engine(demo_capabilities) as engine:
        result = engine.run(Plan.parse(SEED_PLAN))
    counts = {key: step.row_count for key, step in result.steps.items()}
    assert all(counts.values()), counts  # the demo data answers the seed question
    return counts


def seed_answer(counts: dict[str, int]) -> str:
    return (f"星火项目共有 {counts['members']} 名成员 [members]，其中 {counts['top']} 人2026年3月绩效为A [top]；"
            f"他们在三月第一周共写了 {counts['reports']} 份周报 [reports]。")


def audit_lines(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]


# --- the seed question, end to end ---------------------------------------------------------


@pytest.mark.parametrize("tool_calling", [True, False], ids=["tool-call", "json-text"])
def test_seed_question_planned_run_answered_and_audited(make_agent, seed_counts, tmp_path, tool_calling) -> None:
    model = scripted(plan_reply(SEED_PLAN, tool=tool_calling), text_reply(seed_answer(seed_counts)),
                     tool_calling=tool_calling)
    answer = make_agent(model).ask(SEED_QUESTION, today=TODAY)

    assert answer.plan_source == "model"
    assert [c["step"] for c in answer.citations] == ["members", "top", "reports"]
    assert answer.citations[2]["source"] == "reports" and "author_id" in json.dumps(answer.citations[2]["query"])
    assert answer.text == seed_answer(seed_counts) and answer.notes == []
    assert answer.model_calls.count() == 2 and model.calls == 2
    reports = answer.results.steps["reports"]
    assert reports.row_count == seed_counts["reports"] and "author_name" in reports.columns

    prompt = model.prompt_text(0)
    assert "Today is 2026-11-30" in prompt and "performance_grade text" in prompt and SEED_QUESTION in prompt
    assert "A=优秀" in prompt  # enum meanings reach the model
    assert "id_card" not in prompt  # denied columns never do

    [line] = audit_lines(tmp_path)
    assert line["question"] == SEED_QUESTION and line["plan_source"] == "model"
    assert [s["output_key"] for s in line["steps"]] == ["members", "top", "reports"]
    assert line["steps"][1]["params"] == {"members": "list[%d]" % seed_counts["members"]} or line["steps"][1]["params"]
    assert line["answer"] is None and len(line["model_calls"]) == 2  # the answer quotes rows and line["error"] is None
    assert "rows" not in line["steps"][0]  # row contents stay out of the log unless asked for


# --- repairs ----------------------------------------------------------------------------------


REPAIRS = {
    "invented column": (
        with_step(SEED_PLAN, 0, query="SELECT employee_id FROM project_members WHERE project = '星火'"),
        "unknown_column", "project"),
    "hallucinated enum value": (
        with_step(SEED_PLAN, 1, query=SEED_PLAN["steps"][1]["query"].replace("'A'", "'优秀'")),
        "enum_value", "'A'"),
    "reference to a later step": (
        with_step(SEED_PLAN, 0, query="SELECT employee_id FROM project_members WHERE employee_id IN (<top>)"),
        "PlanError", "later step"),
    "script in the DSL": (
        with_step(SEED_PLAN, 2, query={"query": {"script": {"script": {"source": "true"}}}}),
        "script", "script"),
}


@pytest.mark.parametrize("case", list(REPAIRS))
def test_each_failure_is_repaired_on_the_next_call(make_agent, case: str) -> None:
    broken, code, needle = REPAIRS[case]
    model = scripted(plan_reply(broken), plan_reply(SEED_PLAN))
    answer = make_agent(model).ask(SEED_QUESTION, today=TODAY, answer=False)

    assert answer.plan.to_dict()["steps"] == Plan.parse(SEED_PLAN).to_dict()["steps"]
    assert model.calls == 2
    repair_prompt = model.prompt_text(1)
    assert code in repair_prompt and needle in repair_prompt
    assert json.dumps(broken["steps"][0]["output_key"]) in repair_prompt  # the earlier attempt is shown


def test_malformed_json_is_repaired(make_agent) -> None:
    model = scripted(text_reply('{"steps": [{"output_key": "members", "source": "hr", '), plan_reply(SEED_PLAN))
    answer = make_agent(model).ask(SEED_QUESTION, today=TODAY, answer=False)
    assert answer.results.steps["reports"].row_count > 0
    assert "not valid JSON" in model.prompt_text(1)


def test_a_model_that_never_repairs_gives_up_listing_every_attempt(make_agent, tmp_path) -> None:
    broken = REPAIRS["invented column"][0]
    model = scripted(*[plan_reply(broken)] * 3)
    agent = make_agent(model, max_repairs=2)
    with pytest.raises(RepairsExhausted) as info:
        agent.ask(SEED_QUESTION, today=TODAY)
    assert model.calls == 3 and len(info.value.attempts) == 3
    assert str(info.value).count("unknown_column") >= 3 and "attempt 3:" in str(info.value)
    [line] = audit_lines(tmp_path)
    assert line["error"]["type"] == "RepairsExhausted" and line["attempts"] == 3


def test_an_unavailable_source_is_not_sent_for_repair(demo_capabilities, tmp_path) -> None:
    from structq.capabilities import CapabilitySet

    hr = demo_capabilities["hr"]
    missing = hr.model_copy(update={"url": f"sqlite:///{tmp_path}/missing.db", "examples": []})
    caps = CapabilitySet([missing])
    model = scripted(plan_reply({"steps": [SEED_PLAN["steps"][0]]}))
    agent = Agent(caps, llm=model, settings=Settings(), cache=None, audit=None)
    with pytest.raises(SourceUnavailable):
        agent.ask(SEED_QUESTION, today=TODAY)
    assert model.calls == 1


# --- model calls per question --------------------------------------------------------------------


def test_verified_example_makes_no_planning_call(make_agent, demo_capabilities) -> None:
    question = next(ex.question for _, ex in demo_capabilities.examples() if not ex.slots)
    model = scripted(text_reply("回答"))
    answer = make_agent(model).ask(f"  {question.upper()}  ", today=TODAY)
    assert answer.plan_source == "verified"
    assert answer.model_calls.count("plan") == 0 and answer.model_calls.count() == 1  # the answer only


def test_cache_hit_makes_no_planning_call_and_no_answer_is_one_call(make_agent) -> None:
    model = scripted(plan_reply(SEED_PLAN))
    agent = make_agent(model)
    first = agent.ask(SEED_QUESTION, today=TODAY, answer=False)
    assert first.plan_source == "model" and first.model_calls.count() == 1  # --no-answer: plan only
    second = agent.ask(SEED_QUESTION + "  ", today=TODAY, answer=False)
    assert second.plan_source == "cache" and second.model_calls.count() == 0 and model.calls == 1
    # another day resolves relative dates anew: not a cache hit
    model.responses.append(plan_reply(SEED_PLAN))
    third = agent.ask(SEED_QUESTION, today=TODAY + dt.timedelta(days=1), answer=False)
    assert third.plan_source == "model" and model.calls == 2


def test_no_cache_skips_the_cache(make_agent) -> None:
    model = scripted(plan_reply(SEED_PLAN), plan_reply(SEED_PLAN))
    agent = make_agent(model)
    agent.ask(SEED_QUESTION, today=TODAY, answer=False, use_cache=False)
    agent.ask(SEED_QUESTION, today=TODAY, answer=False, use_cache=False)
    assert model.calls == 2


def test_normalisation_folds_width_case_and_punctuation() -> None:
    assert normalise_question("‘星火’项目组里，谁？ ") == normalise_question("'星火'项目组里,谁?")
    assert normalise_question("ＡＢＣ  Def") == "abc def"


# --- answers ---------------------------------------------------------------------------------


def test_an_answer_with_an_invented_number_is_replaced_by_the_results(make_agent, seed_counts) -> None:
    invented = seed_answer(seed_counts).replace(f"{seed_counts['reports']} 份", "987 份")
    model = scripted(plan_reply(SEED_PLAN), text_reply(invented))
    answer = make_agent(model).ask(SEED_QUESTION, today=TODAY)
    assert "987" not in answer.text and "[reports]" in answer.text
    assert any("987" in note for note in answer.notes)


def test_number_check_accepts_result_figures_in_other_units(make_agent, seed_counts) -> None:
    model = scripted(plan_reply(SEED_PLAN))
    answer = make_agent(model).ask(SEED_QUESTION, today=TODAY, answer=False)
    assert unsupported_numbers(seed_answer(seed_counts), answer.results) == []
    assert unsupported_numbers("一共 12345 份", answer.results) == ["12345"]


def test_without_a_model_the_answer_is_a_deterministic_rendering(make_agent, demo_capabilities) -> None:
    question = "去年第三季度在华东区销售额最高的产品是什么？"
    answer = make_agent(None).ask(question, today=TODAY)
    assert answer.model_calls.count() == 0
    summary = answer.text.splitlines()[0]
    # columns named as the manifest describes them, numbers with separators
    assert summary.startswith("结果：产品编号为 PD") and summary.endswith("[top_product]。")
    assert "product_id" not in summary


def test_empty_input_stops_dependents_with_a_note(make_agent) -> None:
    empty = with_step(SEED_PLAN, 0, query="SELECT employee_id FROM project_members WHERE project_name = '不存在'")
    answer = make_agent(None).run(Plan.parse(empty))
    assert answer.results.steps["top"].skipped and answer.results.steps["reports"].skipped
    assert any("'members' (星火项目成员) returned no rows" in n for n in answer.notes)
    assert "没有找到结果" in make_agent(None).run(Plan.parse(empty), question="星火？").text


# --- conversation -------------------------------------------------------------------------------


def test_follow_up_questions_see_the_earlier_turn(make_agent) -> None:
    first_plan = {"steps": [{"output_key": "who", "source": "hr",
                             "query": "SELECT employee_id, name FROM employees WHERE employee_id = 'E0001'"}]}
    follow_plan = {"steps": [{"output_key": "projects", "source": "hr",
                              "query": "SELECT project_name FROM project_members WHERE employee_id = 'E0001'"}]}
    model = scripted(plan_reply(first_plan), plan_reply(follow_plan))
    chat = make_agent(model).conversation()
    first = chat.ask("工号E0001的员工叫什么？", today=TODAY, answer=False)
    name = first.results.final.rows[0][1]
    chat.ask("那他参与了哪些项目？", today=TODAY, answer=False)
    follow_prompt = model.prompt_text(1)
    assert "工号E0001的员工叫什么？" in follow_prompt and name in follow_prompt
    chat.reset()
    assert chat.context() == ""


# --- configuration errors -------------------------------------------------------------------------


def test_no_model_configured_says_how_to_configure(make_agent, monkeypatch) -> None:
    monkeypatch.delenv("STRUCTQ_LLM", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        make_agent(None).ask("一个没有验证过的问题", today=TODAY)
    assert "--llm" in info.value.hint and "STRUCTQ_LLM" in info.value.hint and "OPENAI_API_KEY" in info.value.hint


def test_dead_openai_endpoint_raises_model_error_quickly(make_agent) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0, timeout=2)
    with pytest.raises(ModelError) as info:  # no retry loop: one refused connection ends it
        make_agent(model).ask("一个没有验证过的问题", today=TODAY)
    assert "Connection" in str(info.value)


def test_provider_string_resolves_through_init_chat_model(monkeypatch) -> None:
    from structq.agent.llm import resolve_model

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = resolve_model(None)
    assert type(model).__name__ == "ChatOpenAI" and model.model_name == "gpt-4o-mini"
    assert "127.0.0.1:9" in str(model.openai_api_base or model.root_client.base_url)
