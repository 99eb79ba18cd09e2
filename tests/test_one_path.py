"""``Agent.ask``, ``aask``, ``run`` and ``Conversation.ask`` go one way: one audit line per call,
success or failure, and a conversation gains one turn per question. The demo company (SQLite +
the embedded search server); the questions are verified examples (slotted or not), so no model is
involved."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from structq.agent import Agent, Answer, Plan
from structq.errors import ConfigError, SandboxViolation

TODAY = dt.date(2026, 11, 30)
#: A verified example of the demo manifests: planned without a model.
EXAMPLE = "2025年各大区的销售额分别是多少？"


def audit_lines(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "audit.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def example_plan(agent: Agent) -> Plan:
    return agent.plan(EXAMPLE, today=TODAY)


#: Each way in, as ``(agent, question or plan) -> Answer``.
ENTRIES: dict[str, Callable[[Agent], Answer]] = {
    "ask": lambda agent: agent.ask(EXAMPLE, today=TODAY),
    "aask": lambda agent: asyncio.run(agent.aask(EXAMPLE, today=TODAY)),
    "run": lambda agent: agent.run(example_plan(agent), question=EXAMPLE),
    "conversation": lambda agent: agent.conversation().ask(EXAMPLE, today=TODAY),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_every_way_in_writes_one_audit_line(make_agent, tmp_path: Path, entry: str) -> None:
    answer = ENTRIES[entry](make_agent(None))
    [line] = audit_lines(tmp_path)
    assert line["question"] == EXAMPLE and line["error"] is None and line["attempts"] == 1
    assert line["plan_source"] == answer.plan_source
    assert answer.plan_source == "given" if entry == "run" else answer.plan_source in {"verified", "template"}
    assert [s["output_key"] for s in line["steps"]] == list(answer.results.steps) != []
    assert [s["row_count"] for s in line["steps"]] == [s.row_count for s in answer.results.steps.values()]


def test_a_given_plan_that_fails_is_audited_too(make_agent, tmp_path: Path) -> None:
    """``Agent.run`` used to write no audit line at all, failing or not."""
    bad = Plan.parse({"steps": [{"output_key": "ids", "source": "hr", "query": "DELETE FROM employees"}]})
    with pytest.raises(SandboxViolation):
        make_agent(None).run(bad, question="delete everyone", vars={"tenant_id": 7})
    [line] = audit_lines(tmp_path)
    assert line["question"] == "delete everyone" and line["error"]["type"] == "SandboxViolation"
    assert line["plan_source"] == "given" and line["plan"]["steps"][0]["query"] == "DELETE FROM employees"
    assert line["vars"] == {"tenant_id": 7} and line["sources"] == ["hr"]  # the values: which rows were readable


@pytest.mark.parametrize("entry", ["conversation", "agent"])
def test_a_conversation_gains_one_turn_per_question(make_agent, entry: str) -> None:
    """Both turns are a verified example: a question whole in itself answers the same in a conversation."""
    agent = make_agent(None)
    chat = agent.conversation()
    for _ in range(2):
        if entry == "conversation":
            chat.ask(EXAMPLE, today=TODAY, answer=False)
        else:
            agent.ask(EXAMPLE, today=TODAY, answer=False, conversation=chat)
    assert [turn.question for turn in chat.turns] == [EXAMPLE, EXAMPLE]
    assert "Q: " + EXAMPLE in chat.context()


def test_a_failed_question_adds_no_turn(make_agent) -> None:
    agent = make_agent(None)
    chat = agent.conversation()
    with pytest.raises(ConfigError):  # no model configured: the question cannot be planned
        chat.ask("一个没有验证过的问题", today=TODAY)
    assert chat.turns == []


def test_the_removed_former_names_are_gone() -> None:
    """0.x drops old names outright (``CHANGELOG.md`` says what replaces each)."""
    import structq.agent
    from structq.agent import Engine

    assert not hasattr(structq.agent, "RunResult") and not hasattr(Engine, "execute")


def test_structq_run_goes_the_agents_way_and_is_audited(make_agent, demo_env: dict[str, str], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from structq.cli import app

    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(example_plan(make_agent(None)).to_dict(), ensure_ascii=False), encoding="utf-8")
    env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_AUDIT_LOG": str(tmp_path / "run-audit.jsonl"),
           "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_LLM": None, "OPENAI_API_KEY": None}
    manifests = Path(__file__).resolve().parent.parent / "capabilities"
    result = CliRunner().invoke(app, ["run", str(saved), "-m", str(manifests), "--json"], env=env)
    assert result.exit_code == 0, result.output
    [line] = [json.loads(x) for x in (tmp_path / "run-audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert line["plan_source"] == "given" and line["error"] is None
    assert [s["output_key"] for s in line["steps"]] == [s["output_key"] for s in json.loads(result.stdout)["steps"]]
