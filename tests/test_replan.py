"""Plan → execute → evaluate: an empty run gives the planner an observation and one more try.

Scripted models on the demo company (SQLite); the stored values are read through the sandbox.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from scripted import plan_reply, scripted, text_reply

from structq.agent import Engine, Plan
from structq.agent.observe import nearest, observe, text_literals
from structq.capabilities import CapabilitySet
from structq.capabilities.loader import load_manifest_text

TODAY = dt.date(2026, 11, 30)
QUESTION = "参与星火项目的都有谁？"  # not a paraphrase of a verified example: it must reach the model
REPO_ROOT = Path(__file__).resolve().parent.parent


def members_plan(project: str) -> dict[str, Any]:
    return {"reasoning": "查项目成员", "steps": [
        {"output_key": "members", "source": "hr", "purpose": "项目成员",
         "query": f"SELECT employee_id FROM project_members WHERE project_name = '{project}'"}]}


@pytest.fixture(scope="module")
def members_of_xinghuo(demo_data) -> list[tuple[str]]:
    with sqlite3.connect(demo_data.directory / "company.db") as db:
        rows = db.execute("SELECT employee_id FROM project_members WHERE project_name = '星火'").fetchall()
    assert rows
    return rows


def test_empty_literal_is_replanned_with_the_stored_value(make_agent, members_of_xinghuo, tmp_path) -> None:
    answer_text = f"星火项目共有 {len(members_of_xinghuo)} 名成员 [members]。"
    model = scripted(plan_reply(members_plan("星火项目")), plan_reply(members_plan("星火")), text_reply(answer_text))
    answer = make_agent(model).ask(QUESTION, today=TODAY, use_cache=False)

    revision_prompt = model.prompt_text(1)
    assert "project_members.project_name = '星火项目' matched nothing" in revision_prompt
    assert "closest stored values: '星火'" in revision_prompt
    assert "members: 0 rows" in revision_prompt
    assert sorted(answer.results.final.rows) == sorted(members_of_xinghuo) and answer.text == answer_text
    assert [c.purpose for c in answer.model_calls.calls] == ["plan", "replan", "answer"]
    assert "'星火'" in answer.plan.steps[0].query and len(answer.rounds) == 1
    assert answer.notes[0].startswith("re-planned after step(s) 'members' came back empty: revised plan ran")
    assert answer.to_dict()["rounds"][0]["observation"]["empty"] == ["members"]

    [line] = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    [logged] = line["rounds"]
    assert "星火项目" in logged["plan"]["steps"][0]["query"] and "matched nothing" in logged["observation"]["unmatched"][0]
    assert "closest stored values" not in json.dumps(logged, ensure_ascii=False)  # row contents stay out of the log


def test_a_count_of_nothing_over_an_unmatched_literal_is_replanned(make_agent, members_of_xinghuo) -> None:
    def count_plan(project: str) -> dict[str, Any]:
        return {"steps": [{"output_key": "n", "source": "hr", "query": "SELECT COUNT(*) AS n FROM project_members "
                                                                     f"WHERE project_name = '{project}'"}]}

    model = scripted(plan_reply(count_plan("星火项目")), plan_reply(count_plan("星火")))
    answer = make_agent(model).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert answer.results.final.rows == [(len(members_of_xinghuo),)] and model.calls == 2
    assert "project_members.project_name = '星火项目' matched nothing" in model.prompt_text(1)


def test_a_real_zero_is_not_replanned(make_agent) -> None:
    plan = {"steps": [{"output_key": "n", "source": "hr", "query": "SELECT COUNT(*) AS n FROM project_members "
                                                                   "WHERE project_name = '星火' AND joined_at > '2099-01-01'"}]}
    model = scripted(plan_reply(plan))  # every literal is a stored value: the 0 is the answer
    answer = make_agent(model).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert answer.rounds == [] and model.calls == 1 and answer.results.final.rows == [(0,)]


@pytest.mark.parametrize("max_replans", [1, 2])
def test_replans_are_bounded(make_agent, max_replans: int) -> None:
    empty_plans = [plan_reply(members_plan(f"不存在{i}")) for i in range(max_replans + 1)]
    model = scripted(*empty_plans, text_reply("没有找到成员 [members]。"))
    answer = make_agent(model, max_replans=max_replans).ask(QUESTION, today=TODAY, use_cache=False)
    assert answer.model_calls.count("replan") == max_replans and len(answer.rounds) == max_replans
    assert answer.results.final.row_count == 0 and model.calls == max_replans + 2


def test_no_replans_when_turned_off_or_when_rows_came_back(make_agent) -> None:
    off = scripted(plan_reply(members_plan("星火项目")), text_reply("没有找到 [members]。"))
    assert make_agent(off, max_replans=0).ask(QUESTION, today=TODAY, use_cache=False).rounds == [] and off.calls == 2
    found = scripted(plan_reply(members_plan("星火")))
    assert make_agent(found).ask(QUESTION, today=TODAY, use_cache=False, answer=False).rounds == [] and found.calls == 1


def test_a_kept_plan_ends_the_loop_and_the_empty_result_stands(make_agent) -> None:
    plan = members_plan("不存在的项目")
    model = scripted(plan_reply(plan), plan_reply(plan))
    answer = make_agent(model, max_replans=3).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert model.calls == 2 and answer.rounds[0].outcome.startswith("the plan was kept")
    assert answer.results.final.row_count == 0


def test_without_an_answer_no_stored_value_reaches_the_model(make_agent) -> None:
    model = scripted(plan_reply(members_plan("星火项目")), plan_reply(members_plan("星火项目")))
    make_agent(model).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert "matched nothing" in model.prompt_text(1) and "closest stored values" not in model.prompt_text(1)


# --- what is observed, and what never is ----------------------------------------------------------


@pytest.mark.parametrize("sql, expected", [
    ("SELECT name FROM employees WHERE name = '张三'", [("employees", "name", "张三")]),
    ("SELECT name FROM employees WHERE '张三' = name", [("employees", "name", "张三")]),
    ("SELECT e.name FROM employees AS e WHERE e.title IN ('工程师', '经理')",
     [("employees", "title", "工程师"), ("employees", "title", "经理")]),
    ("SELECT pm.employee_id FROM project_members pm JOIN employees e ON e.employee_id = pm.employee_id "
     "WHERE pm.project_name = '星火项目'", [("project_members", "project_name", "星火项目")]),
    ("SELECT name FROM employees WHERE department = '研发'", []),  # declared values: the sandbox's job
    ("SELECT name FROM employees WHERE id_card = '1'", []),  # denied: never read
    ("SELECT employee_id FROM project_members WHERE joined_at = '2024-01-01'", []),  # not a text column
    ("SELECT name FROM employees WHERE name LIKE '%张%'", []),
], ids=["eq", "reversed", "in-alias", "join", "enum", "denied", "date", "like"])
def test_text_literals_are_the_allowed_free_text_comparisons(demo_capabilities, sql: str, expected: list) -> None:
    assert list(text_literals(sql, demo_capabilities["hr"])) == expected


def test_nearest_prefers_containment_then_similarity_and_drops_the_unrelated() -> None:
    stored = ["星火", "北斗", "天宫", "星辰大海"]
    assert nearest("星火项目", stored)[0] == "星火"
    assert nearest("zzz", stored) == []


HR_FILTERED = "row_filters:\n    - {table: employees, where: \"department = :dept\"}"


def test_stored_values_respect_row_filters(demo_capabilities, demo_env, demo_data) -> None:
    """A tenant confined to one department is shown names from that department only."""
    text = (REPO_ROOT / "capabilities" / "hr.yaml").read_text(encoding="utf-8").replace("row_filters: []", HR_FILTERED)
    hr, _ = load_manifest_text(text, "<hr>", env=demo_env)
    caps = CapabilitySet([hr.model_copy(update={"examples": []})])
    plan = Plan.parse({"steps": [{"output_key": "who", "source": "hr",
                                  "query": "SELECT employee_id FROM employees WHERE name = '不存在的人'"}]})
    with sqlite3.connect(demo_data.directory / "company.db") as db:
        finance = {r[0] for r in db.execute("SELECT name FROM employees WHERE department = '财务部'")}
        everyone = {r[0] for r in db.execute("SELECT name FROM employees")}
    assert finance and everyone - finance
    with Engine(caps) as engine:
        run = engine.run(plan, vars={"dept": "财务部"})
        from structq.agent.observe import stored_values

        values = stored_values(engine, plan.steps[0], "employees", "name", {"dept": "财务部"})
        observation = observe(run, engine, vars={"dept": "财务部"}, with_values=True)
    assert set(values) == finance
    assert observation is not None and observation.unmatched[0].literal == "不存在的人"
    assert set(observation.unmatched[0].closest) <= finance


# --- replans only when they can help ------------------------------------------------------------


def test_an_empty_result_over_literals_that_all_exist_is_the_answer_and_not_replanned(make_agent) -> None:
    plan = {"steps": [{"output_key": "late", "source": "hr", "query": "SELECT employee_id FROM project_members "
                                                                      "WHERE project_name = '星火' AND joined_at > '2099-01-01'"}]}
    model = scripted(plan_reply(plan))  # '星火' is a stored project: nobody joined after 2099
    answer = make_agent(model).ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert answer.rounds == [] and model.calls == 1 and answer.results.final.row_count == 0


def test_an_empty_aggregate_over_a_filter_is_the_answer_and_not_replanned(make_agent) -> None:
    plan = {"steps": [{"output_key": "sold", "source": "sales", "query":
                       "SELECT product_id, SUM(amount) AS total FROM sales WHERE sale_date > '2099-01-01' "
                       "GROUP BY product_id"}]}
    model = scripted(plan_reply(plan))  # nothing sold: the empty grouping is the answer
    answer = make_agent(model).ask("2099年以后各产品卖了多少？", today=TODAY, use_cache=False, answer=False)
    assert answer.rounds == [] and model.calls == 1 and answer.results.final.row_count == 0


def test_a_revision_that_only_rewords_the_reasoning_is_not_run_again(make_agent) -> None:
    plan = members_plan("不存在的项目")
    reworded = {**plan, "reasoning": "换个说法：还是查这个项目的成员",
                "steps": [{**plan["steps"][0], "purpose": "成员（再查一次）",
                           "query": plan["steps"][0]["query"].replace(" WHERE", "\n  WHERE")}]}
    model = scripted(plan_reply(plan), plan_reply(reworded))
    agent = make_agent(model, max_replans=3)
    answer = agent.ask(QUESTION, today=TODAY, use_cache=False, answer=False)
    assert model.calls == 2 and len(answer.rounds) == 1
    assert answer.rounds[0].outcome.startswith("the plan was kept") and "revised plan ran" not in answer.notes[0]


def test_an_anagram_is_never_the_closest_stored_value() -> None:
    assert nearest("火星", ["星火", "北斗", "天宫"]) == []
    assert nearest("火星计划", ["星火", "火星"]) == ["火星"]
    assert nearest("Alpha Projct", ["Alpha Project", "tcejorP ahplA"]) == ["Alpha Project"]


def test_the_unknown_project_huoxing_gets_no_suggestion_of_xinghuo(make_agent) -> None:
    model = scripted(plan_reply(members_plan("火星")), plan_reply(members_plan("火星")))
    make_agent(model).ask("火星项目有哪些成员？", today=TODAY, use_cache=False)
    assert "'火星' matched nothing" in model.prompt_text(1) and "'星火'" not in model.prompt_text(1).split("What the data said")[1]
