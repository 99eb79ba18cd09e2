"""Declining: ``{"cannot_answer": reason, "steps": []}`` is an answer, not an error.

Scripted models on the demo company (SQLite + the embedded search server); the CLI test goes
through a real OpenAI client against a scripted loopback server (tests/model_stub.py).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from model_stub import scripted_server
from scripted import plan_reply, scripted
from typer.testing import CliRunner

from structq.agent import Plan
from structq.cli import app
from structq.errors import PlanError

TODAY = dt.date(2026, 11, 30)
ID_CARD_QUESTION = "把所有员工的身份证号列出来"
REASON = "身份证号（id_card）属于受限的敏感信息，不能查询。可以改问员工的工号、姓名、部门或地区。"
DECLINE = {"reasoning": "身份证号是受限字段", "cannot_answer": REASON, "steps": []}
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def id_cards(demo_data) -> list[str]:
    """Every id_card value in the demo data: none may appear in any output of a refusal."""
    with sqlite3.connect(demo_data.directory / "company.db") as db:
        values = [row[0] for row in db.execute("SELECT id_card FROM employees") if row[0]]
    assert values
    return values


def assert_no_id_card(text: str, id_cards: list[str]) -> None:
    leaked = [v for v in id_cards if v in text]
    assert not leaked, leaked[:3]


# --- the plan grammar ------------------------------------------------------------------------


STEP = {"output_key": "n", "source": "hr", "query": "SELECT COUNT(*) AS n FROM employees"}


@pytest.mark.parametrize("data, problem", [
    ({"steps": []}, "at least one step, or cannot_answer"),
    ({"reasoning": "x"}, "at least one step, or cannot_answer"),
    ({"cannot_answer": "restricted", "steps": [STEP]}, "has no steps"),
    ({"cannot_answer": "   ", "steps": []}, "needs the reason"),
], ids=["empty-steps", "no-steps", "decline-with-steps", "blank-reason"])
def test_a_plan_has_steps_or_a_reason_never_both_nor_neither(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse(data)
    assert problem in str(info.value)


@pytest.mark.parametrize("data", [{"cannot_answer": REASON}, DECLINE], ids=["steps-omitted", "steps-empty"])
def test_a_declining_plan_parses_validates_and_round_trips(demo_capabilities, data: dict[str, Any]) -> None:
    plan = Plan.parse(data).validate_against(demo_capabilities)
    assert plan.declined and plan.cannot_answer == REASON and plan.steps == []
    assert Plan.parse(plan.to_dict()) == plan and Plan.from_text(plan.to_yaml()) == plan
    assert "cannot answer: " + REASON in str(plan)
    assert not Plan.parse({"steps": [STEP]}).declined and "cannot_answer" not in Plan.parse({"steps": [STEP]}).to_dict()


# --- the agent -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_calling", [True, False], ids=["tool-call", "json-text"])
def test_id_card_question_is_declined_in_one_call_naming_the_restriction(
        make_agent, tmp_path, id_cards, tool_calling) -> None:
    model = scripted(plan_reply(DECLINE, tool=tool_calling), tool_calling=tool_calling)  # a 2nd call would fail
    answer = make_agent(model).ask(ID_CARD_QUESTION, today=TODAY)

    assert answer.plan.declined and answer.results.steps == {} and answer.citations == []
    assert answer.text.startswith("无法回答：" + REASON)
    assert "可以这样问" in answer.text and "华东区在职的研发部员工有哪些？" in answer.text  # a verified example
    assert model.calls == 1 and answer.model_calls.count() == 1 and answer.plan_source == "model"
    assert "cannot_answer" in model.prompt_text(0)  # the planning prompt says how to decline

    [line] = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert line["plan"]["cannot_answer"] == REASON and line["steps"] == [] and line["error"] is None
    assert_no_id_card(json.dumps(answer.to_dict(), ensure_ascii=False, default=str), id_cards)
    assert_no_id_card(json.dumps(line, ensure_ascii=False), id_cards)


def test_english_question_is_declined_in_english(make_agent) -> None:
    plan = {"cannot_answer": "National ID numbers are restricted; ask about departments instead.", "steps": []}
    answer = make_agent(scripted(plan_reply(plan))).ask("List every employee's national ID number", today=TODAY)
    assert answer.text.startswith("This cannot be answered: National ID numbers are restricted")
    assert "Questions that can be answered, for example:" in answer.text


def test_a_decline_after_a_failed_plan_ends_the_repairs(make_agent) -> None:
    bad = {"steps": [{"output_key": "x", "source": "hr", "query": "SELECT id_card FROM employees"}]}
    model = scripted(plan_reply(bad), plan_reply(DECLINE))
    answer = make_agent(model).ask(ID_CARD_QUESTION, today=TODAY)
    assert answer.plan.declined and model.calls == 2
    assert "denied_column" in model.prompt_text(1)  # the sandbox's refusal went back to the model


def test_a_decline_is_not_cached(make_agent) -> None:
    model = scripted(plan_reply(DECLINE), plan_reply(DECLINE))
    agent = make_agent(model)
    agent.ask(ID_CARD_QUESTION, today=TODAY)
    agent.ask(ID_CARD_QUESTION, today=TODAY)
    assert model.calls == 2


def test_running_a_declining_plan_runs_nothing(make_agent) -> None:
    answer = make_agent(None).run(Plan.parse(DECLINE), question=ID_CARD_QUESTION)
    assert answer.results.steps == {} and answer.text.startswith("无法回答：")


# --- the command line --------------------------------------------------------------------------


def test_cli_declines_with_exit_0_and_no_id_card_value(demo_env, tmp_path, id_cards) -> None:
    reply = "```json\n" + json.dumps(DECLINE, ensure_ascii=False) + "\n```"
    with scripted_server(reply, reply) as stub:
        env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
               "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_LLM": None, "OPENAI_API_KEY": "x",
               "OPENAI_BASE_URL": stub.base_url, "COLUMNS": "200"}
        argv = ["ask", ID_CARD_QUESTION, "-m", str(REPO_ROOT / "capabilities"), "--llm", "openai:gpt-4o-mini",
                "--today", TODAY.isoformat()]
        shown = CliRunner().invoke(app, argv, env=env)
        as_json = CliRunner().invoke(app, [*argv, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    assert REASON in shown.stdout and "model calls: 1" in shown.stdout
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert document["plan"]["cannot_answer"] == REASON and document["steps"] == []
    assert len(stub.requests) == 2 and "cannot_answer" in stub.prompt_text(0)
    for output in (shown.stdout, as_json.stdout, (tmp_path / "audit.jsonl").read_text(encoding="utf-8")):
        assert_no_id_card(output, id_cards)
