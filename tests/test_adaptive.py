"""Adaptive runs: the model sees each step's observation and continues, revises the rest, or stops.

Scripted models on the demo company (SQLite); every query goes through the sandbox.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from scripted import plan_reply, scripted, text_reply

from structq.agent.adaptive import parse_decision
from structq.config import Settings
from structq.errors import PlanError

TODAY = dt.date(2026, 11, 30)
QUESTION = "名字里带“星”的项目有哪些成员？"
PROJECTS = {"output_key": "projects", "source": "hr", "purpose": "名字带星的项目",
            "query": "SELECT DISTINCT project_name FROM project_members WHERE project_name LIKE '%星%'"}


def members(project: str) -> dict[str, Any]:
    return {"output_key": "members", "source": "hr", "purpose": "项目成员",
            "query": f"SELECT employee_id FROM project_members WHERE project_name = '{project}'"}


PLAN = {"reasoning": "先找项目，再找成员", "steps": [PROJECTS, members("星火项目")]}
CONTINUE = text_reply('{"decision": "continue"}')


@pytest.fixture(scope="module")
def xinghuo(demo_data) -> list[tuple[str]]:
    with sqlite3.connect(demo_data.directory / "company.db") as db:
        rows = db.execute("SELECT employee_id FROM project_members WHERE project_name = '星火'").fetchall()
        projects = db.execute("SELECT DISTINCT project_name FROM project_members WHERE project_name LIKE '%星%'").fetchall()
    assert rows and projects == [("星火",)]
    return rows


def test_a_revision_uses_the_value_the_first_step_found(make_agent, xinghuo, tmp_path: Path) -> None:
    revise = text_reply(json.dumps({"decision": "revise", "steps": [members("星火")]}, ensure_ascii=False))
    model = scripted(plan_reply(PLAN), revise, text_reply("星火项目的成员见 [members]。"))
    answer = make_agent(model, adaptive=True).ask(QUESTION, today=TODAY, use_cache=False)

    seen = model.prompt_text(1)
    assert "Step projects has just run" in seen and "projects: 1 rows" in seen and '"project_name": "星火"' in seen
    assert sorted(answer.results.final.rows) == sorted(xinghuo) and "'星火'" in answer.plan.steps[1].query
    # max_replans (1) revisions spent: the revised step runs without another question.
    assert [c.purpose for c in answer.model_calls.calls] == ["plan", "adaptive", "answer"]
    assert [r.outcome for r in answer.rounds] == ["revised the remaining steps: members"]
    assert answer.notes[0] == "adaptive run: after step 'projects', revised the remaining steps: members"
    [line] = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert "星火项目" in line["rounds"][0]["plan"]["steps"][1]["query"]


def test_continue_costs_one_call_per_step_and_changes_nothing(make_agent) -> None:
    model = scripted(plan_reply(PLAN), CONTINUE, CONTINUE)
    adaptive = make_agent(model, adaptive=True).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    plain = make_agent(scripted(plan_reply(PLAN), plan_reply(PLAN)), max_replans=0).ask(
        QUESTION, today=TODAY, use_cache=False, answer=False)
    assert model.calls == 1 + len(PLAN["steps"]) and adaptive.rounds == []
    assert adaptive.plan == plain.plan
    assert {k: r.rows for k, r in adaptive.results.steps.items()} == {k: r.rows for k, r in plain.results.steps.items()}


def test_stop_answers_with_the_steps_that_ran(make_agent) -> None:
    stop = text_reply('{"decision": "stop", "reason": "找到的项目已回答问题"}')
    model = scripted(plan_reply(PLAN), stop)
    answer = make_agent(model, adaptive=True).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert model.calls == 2 and list(answer.results.steps) == ["projects"]
    assert answer.results.final.rows == [("星火",)] and [s.output_key for s in answer.plan.steps] == ["projects"]
    assert answer.rounds[0].outcome == "stopped: 找到的项目已回答问题"


def test_a_plan_the_run_cut_short_is_not_cached(make_agent) -> None:
    """Replayed from the cache, a plan stopped on one day's data would skip the model's judgment."""
    stop = text_reply('{"decision": "stop", "reason": "找到的项目已回答问题"}')
    agent = make_agent(scripted(plan_reply(PLAN), stop), adaptive=True)
    agent.ask(QUESTION, today=TODAY, answer=False)
    assert len(agent.cache) == 0


def test_a_plan_the_model_let_run_is_cached(make_agent) -> None:
    agent = make_agent(scripted(plan_reply(PLAN), CONTINUE, CONTINUE), adaptive=True)
    agent.ask(QUESTION, today=TODAY, answer=False)
    assert len(agent.cache) == 1


@pytest.mark.parametrize("max_replans", [1, 2])
def test_revisions_are_bounded_and_the_rest_runs_without_asking(make_agent, xinghuo, max_replans: int) -> None:
    """Every step is revised into another step plus one more; past the bound nothing is asked."""
    def revise(n: int) -> Any:
        steps = [members("星火") | {"output_key": f"m{n}"}, members("星火") | {"output_key": f"m{n + 1}"}]
        return text_reply(json.dumps({"decision": "revise", "steps": steps}, ensure_ascii=False))

    model = scripted(plan_reply(PLAN), *(revise(2 * i) for i in range(max_replans)))
    answer = make_agent(model, adaptive=True, max_replans=max_replans).ask(
        QUESTION, today=TODAY, use_cache=False, answer=False)
    assert model.calls == 1 + max_replans and len(answer.rounds) == max_replans
    assert len(answer.plan.steps) == 2 + max_replans and sorted(answer.results.final.rows) == sorted(xinghuo)


def test_an_unusable_decision_keeps_the_plan(make_agent) -> None:
    bad = text_reply(json.dumps({"decision": "revise", "steps": [PROJECTS]}, ensure_ascii=False))  # repeats a key
    model = scripted(plan_reply(PLAN), bad, CONTINUE)
    answer = make_agent(model, adaptive=True).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert answer.plan.steps[1].output_key == "members" and answer.rounds == []
    assert any(n.startswith("adaptive run: the decision after step 'projects' was not usable") for n in answer.notes)


def test_without_answers_no_rows_reach_the_model(make_agent) -> None:
    """--no-answer: the model sees counts and columns only, as in the empty-result loop."""
    model = scripted(plan_reply(PLAN), CONTINUE, CONTINUE)
    make_agent(model, adaptive=True).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    seen = model.prompt_text(1).split("Step projects has just run")[1]
    assert "projects: 1 rows, columns ['project_name']" in seen
    assert "Rows of" not in seen and "星火" not in seen.replace("星火项目", "")


@pytest.mark.parametrize("reply", ['{"decision": "maybe"}', '{"decision": "revise", "steps": []}', "no json"])
def test_a_malformed_decision_is_a_plan_error(reply: str) -> None:
    with pytest.raises(PlanError):
        parse_decision(text_reply(reply))


@pytest.mark.parametrize(("env", "expected"), [({}, False), ({"STRUCTQ_ADAPTIVE": "1"}, True)])
def test_adaptive_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: bool) -> None:
    monkeypatch.delenv("STRUCTQ_ADAPTIVE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert Settings.from_env().adaptive is expected
