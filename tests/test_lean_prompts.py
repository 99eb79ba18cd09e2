"""The planning prompt carries only what the question needs: the few verified examples most like
it (with the values their slots mean today, never a relative phrase), the periods it names
resolved to dates; the answer prompt leaves the search server's ``_id``/``_score`` out unless
asked. Scripted models; the demo company."""

from __future__ import annotations

import datetime as dt
import json

from scripted import plan_reply, scripted, text_reply

from structq.agent import Agent, Plan, PlanResult, StepResult
from structq.agent.planner import Planner, relevant_examples
from structq.agent.synthesis import render_deterministic
from structq.config import Settings

TODAY = dt.date(2026, 11, 30)


def planner(capabilities, examples: int = 3) -> Planner:
    return Planner(scripted(), capabilities, examples=examples)


def shown_examples(prompt: str) -> list[str]:
    examples = prompt.split("# Verified plans of the closest questions", 1)[1].split("# Output", 1)[0]
    return [line.removeprefix("Question: ") for line in examples.splitlines() if line.startswith("Question: ")]


def test_only_the_few_most_relevant_examples_are_shown(demo_capabilities) -> None:
    every = [e for _, e in demo_capabilities.examples()]
    assert len(every) > 20
    [system, _] = planner(demo_capabilities).messages("2026年10月绩效为D的有几个人？", today=TODAY)
    shown = shown_examples(str(system.content))
    assert len(shown) == 3 and "上个月绩效为D的员工有多少人？" in shown
    [system, _] = planner(demo_capabilities, examples=0).messages("2026年10月绩效为D的有几个人？", today=TODAY)
    assert len(shown_examples(str(system.content))) == len(every)


def test_the_number_of_examples_is_a_setting(demo_capabilities, monkeypatch) -> None:
    monkeypatch.setenv("STRUCTQ_PLAN_EXAMPLES", "1")
    with Agent(demo_capabilities, llm=scripted(), settings=Settings.from_env(cache_enabled=False)) as agent:
        [system, _] = agent.planner().messages("2024年每个大区卖了多少钱？", today=TODAY)
    assert shown_examples(str(system.content)) == ["2025年各大区的销售额分别是多少？"]


def test_relevance_ranks_shared_words_and_keeps_manifest_order(demo_capabilities) -> None:
    every = [e for _, e in demo_capabilities.examples()]
    chosen = relevant_examples("去年销售额最高的三个产品", every, 2)
    assert len(chosen) == 2 and all("产品" in e.question or "销售额" in e.question for e in chosen)
    assert [e.question for e in chosen] == [e.question for e in every if e in chosen]  # manifest order


def test_a_slotted_example_shows_the_values_it_means_today_not_a_relative_phrase(demo_capabilities) -> None:
    [system, _] = planner(demo_capabilities, examples=0).messages("上个月绩效为D的有几个人？", today=TODAY)
    prompt = str(system.content)
    assert "stands for" not in prompt and "'上个月'" not in prompt
    assert "assessment_month = '2026-10-01'" in prompt  # 上个月 on 2026-11-30


def test_the_periods_the_question_names_are_resolved_in_the_prompt(demo_capabilities) -> None:
    [_, user] = planner(demo_capabilities).messages("去年第三季度各大区的销售额是多少？", today=TODAY)
    assert "“去年第三季度” = 2025-07-01 to 2025-09-30 (quarter)" in str(user.content)


def test_the_planning_prompt_is_lean(demo_capabilities) -> None:
    """Far from the 25k characters of every example; figures in bench/prompt.py."""
    [system, user] = planner(demo_capabilities).messages("How much did the 华南 region sell in 2024?", today=TODAY)
    assert len(str(system.content)) + len(str(user.content)) < 12_000


# --- the search server's own columns ----------------------------------------------------------


def hits_run() -> PlanResult:
    plan = Plan.parse({"steps": [{"output_key": "hits", "source": "reports", "index": "weekly_reports",
                                  "query": {"query": {"match_all": {}}}}]})
    step = StepResult("hits", "reports", index="weekly_reports", columns=("_id", "_score", "title"),
                      rows=[("xK3f9aQ", 1.7, "周报一"), ("b81LmZ0", 1.2, "周报二")])
    return PlanResult(plan, {"hits": step}, [], 0.0)


def test_id_and_score_stay_out_of_the_answer_prompt_unless_asked(demo_capabilities) -> None:
    from structq.agent.llm import CallLog
    from structq.agent.synthesis import synthesize

    model = scripted(text_reply("有两份周报 [hits]。"), text_reply("周报一的相关度最高 [hits]。"))
    synthesize(model, "有哪些周报？", hits_run(), log=CallLog())
    synthesize(model, "哪份周报的相关度最高？", hits_run(), log=CallLog())
    assert "xK3f9aQ" not in model.prompt_text(0) and "_score" not in model.prompt_text(0).split("Results:")[1]
    assert "xK3f9aQ" in model.prompt_text(1) and "_score" in model.prompt_text(1)
    assert "xK3f9aQ" not in render_deterministic("有哪些周报？", hits_run())


def test_an_answer_through_the_agent_carries_its_checks(make_agent, tmp_path) -> None:
    plan = {"steps": [{"output_key": "n", "source": "hr", "purpose": "在职人数",
                       "query": "SELECT COUNT(*) AS n FROM employees WHERE status = '在职'"}]}
    agent = make_agent(None)
    count = agent.run(Plan.parse(plan)).results.final.rows[0][0]
    model = scripted(plan_reply(plan), text_reply(f"在职员工共 {count} 人 [n]。"))
    answer = make_agent(model).ask("在职员工有多少人？", today=TODAY, use_cache=False)
    assert answer.to_dict()["checks"] == [{"text": str(count), "value": count, "basis": "cell", "steps": ["n"],
                                           "cited": ["n"], "ok": True, "problem": None}]
    lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    # the audit line has the verdict, not what the figure says (the answer is not kept)
    assert json.loads(lines[-1])["checks"] == [{"basis": "cell", "steps": ["n"], "cited": ["n"], "ok": True,
                                                "problem": None}]
