"""Model calls per question, and what re-planning costs, over the demo's eval set.

Every model is scripted (nothing is called over a network): the "planner" replies with the eval
item's own expected SQL, so the figures are the loop's overhead, not a model's skill.

Scenarios, over the items that have ``expect_sql``:

- ``happy``: the plan is right the first time → plan + answer = 2 calls (0 for verified examples);
- ``wrong literal``: the first plan compares a free-text column with a literal the data does
  not hold (the item's literal with ``项目`` appended); the run comes back empty, the planner
  sees the observation with the closest stored values and replies with the right plan
  → plan + replan + answer = 3 calls, correct rows;
- ``wrong literal, max_replans=0``: the same first plan without the loop → 2 calls, wrong rows.

Only items whose expected SQL compares a free-text column with a literal take part in the last
two. Prints calls per question, the share of correct rows and the mean wall time per question.

Run: ``STRUCTQ_DEMO_DIR=… python bench/loop.py`` (builds the demo in a temp dir when unset).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structq.agent import Agent, Plan
from structq.agent.evaluate import EvalItem, EvalSet, rows_match
from structq.agent.observe import text_literals
from structq.capabilities import CapabilitySet
from structq.config import Settings

REPO = Path(__file__).resolve().parents[1]
ANSWER = "结果见 [result]。"


def scripted(*plans: dict[str, Any], answer: bool = True) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    replies = [AIMessage(json.dumps(p, ensure_ascii=False)) for p in plans]
    return FakeMessagesListChatModel(responses=[*replies, *([AIMessage(ANSWER)] if answer else [])])


def plan_of(item: EvalItem, sql: str) -> dict[str, Any]:
    return {"steps": [{"output_key": "result", "source": item.source, "query": sql}]}


def wrong_literal(item: EvalItem, caps: CapabilitySet) -> str | None:
    """The item's SQL with one free-text literal changed into one the data does not hold."""
    found = next(iter(text_literals(item.expect_sql or "", caps[item.source or ""])), None)
    if found is None:
        return None
    literal = found[2]
    return re.sub(f"'{re.escape(literal)}'", f"'{literal}项目'", item.expect_sql or "", count=1)


@dataclass
class Tally:
    questions: int = 0
    calls: int = 0
    correct: int = 0
    elapsed_ms: float = 0.0

    def row(self, name: str) -> str:
        if not self.questions:
            return f"{name:<32} (no eligible questions)"
        return (f"{name:<32} {self.questions:>4} {self.calls / self.questions:>10.2f} "
                f"{self.correct / self.questions:>9.0%} {self.elapsed_ms / self.questions:>9.1f}")


def run(caps: CapabilitySet, item: EvalItem, model: Any, today: Any, max_replans: int, tally: Tally) -> None:
    settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=max_replans)
    with Agent(caps, llm=model, settings=settings) as agent:
        expected = [list(r) for r in agent.engine.run(Plan.parse(plan_of(item, item.expect_sql or "")),
                                                       vars=item.vars).final.rows]
        started = time.perf_counter()
        answer = agent.ask(item.question, vars=item.vars, today=today, use_cache=False)
        tally.elapsed_ms += (time.perf_counter() - started) * 1000
    tally.questions += 1
    tally.calls += answer.model_calls.count()
    rows = [list(r) for r in answer.results.final.rows] if not answer.plan.declined else []
    tally.correct += rows_match(rows, expected, ordered=item.is_ordered)


def main() -> None:
    if not os.environ.get("STRUCTQ_DEMO_DIR"):
        from structq.demo import build_demo

        os.environ["STRUCTQ_DEMO_DIR"] = str(build_demo(Path(tempfile.mkdtemp()) / "demo").directory)
    caps = CapabilitySet.from_path(REPO / "capabilities")
    questions = EvalSet.from_file(REPO / "capabilities" / "eval.yaml")
    happy, fixed, unfixed = Tally(), Tally(), Tally()
    for item in questions.questions:
        if item.expect_sql is None:
            continue
        good = plan_of(item, item.expect_sql)
        run(caps, item, scripted(good), questions.today, 1, happy)
        bad_sql = wrong_literal(item, caps)
        if bad_sql is None:
            continue
        bad = plan_of(item, bad_sql)
        run(caps, item, scripted(bad, good), questions.today, 1, fixed)
        run(caps, item, scripted(bad), questions.today, 0, unfixed)
    print(f"{'scenario':<32} {'n':>4} {'calls/q':>10} {'correct':>9} {'ms/q':>9}")
    print(happy.row("happy"))
    print(fixed.row("wrong literal, max_replans=1"))
    print(unfixed.row("wrong literal, max_replans=0"))


if __name__ == "__main__":
    main()
