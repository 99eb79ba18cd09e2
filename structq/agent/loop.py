"""Plan → execute → evaluate: revising a plan on what the data said.

Repairs (``Agent``) answer errors; this answers a plan that ran and found nothing. After a
model-written plan runs, ``observe`` looks for an empty step and the text literals behind it;
the planner sees the observation (and the closest stored values, when row contents may reach
the model) and may return a revised plan, which then runs. At most ``max_replans`` rounds
(``STRUCTQ_MAX_REPLANS``, default 1; each costs one model call); every round is kept for the
trace and the audit log. The earlier result stands when the model keeps its plan (the same
steps, whatever its reasoning now says: nothing is run again), declines, or the revision
fails: an honest empty answer beats a failed one. No round at all when the emptiness is the
answer (``observe.legitimately_empty``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.errors import StructqError

from .observe import Observation, observe
from .planner import template

if TYPE_CHECKING:
    import datetime as dt

    from .engine import Engine, PlanResult
    from .llm import CallLog
    from .plan import Plan
    from .planner import Planner

__all__ = ["Round", "revise", "same_steps"]


def same_steps(a: "Plan", b: "Plan") -> bool:
    """Whether two plans would run the same queries: same steps (key, source, index, query;
    SQL compared with its whitespace collapsed), whatever their reasoning, purposes or
    answer_with say. A revision that only rewords is not worth a run."""
    def queries(plan: "Plan") -> list[tuple[Any, ...]]:
        return [(s.output_key, s.source, s.index, " ".join(s.query.split()) if isinstance(s.query, str) else s.query)
                for s in plan.steps]

    return queries(a) == queries(b) and a.template == b.template


@dataclass(frozen=True)
class Round:
    """One evaluation: the plan that ran, what was observed, and what came of it."""

    plan: "Plan"
    observation: Observation
    outcome: str

    def to_dict(self, with_values: bool = True) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "observation": self.observation.to_dict(with_values),
                "outcome": self.outcome}

    def note(self) -> str:
        return f"re-planned after step(s) {', '.join(repr(k) for k in self.observation.empty)} came back empty: {self.outcome}"


def revision_messages(planner: "Planner", question: str, plan: "Plan", observation: Observation, *,
                      today: "dt.date", context: str) -> list[Any]:
    """The planning conversation, the plan that ran, and what its run said."""
    from langchain_core.messages import AIMessage, HumanMessage

    messages = planner.messages(question, today=today, context=context)
    messages.append(AIMessage(json.dumps(plan.to_dict(), ensure_ascii=False)))
    messages.append(HumanMessage(template("observe").substitute(
        empty=", ".join(observation.empty), observation=observation.text())))
    return messages


async def revise(planner: "Planner", engine: "Engine", question: str, plan: "Plan", results: "PlanResult", *,
                 vars: dict[str, Any], today: "dt.date", context: str, log: "CallLog", max_replans: int,
                 with_values: bool) -> tuple["Plan", "PlanResult", list[Round]]:
    """Evaluate ``results`` and revise the plan while it helps, at most ``max_replans`` times."""
    rounds: list[Round] = []
    while len(rounds) < max_replans:
        observation = await engine.call(observe, results, engine, vars=vars, with_values=with_values)
        if observation is None:
            break
        messages = revision_messages(planner, question, plan, observation, today=today, context=context)
        try:
            revised = await engine.call(planner.complete, messages, purpose="replan", log=log)
            if revised.declined or same_steps(revised, plan):
                rounds.append(Round(plan, observation, "the plan was kept; the empty result stands"))
                break
            revised_results = await engine.arun(revised, vars=vars)
        except StructqError as exc:
            rounds.append(Round(plan, observation, f"the revised plan failed ({type(exc).__name__}: "
                                                   f"{exc.message}); the earlier result stands"))
            break
        counts = ", ".join(f"{k}: {r.row_count} rows" for k, r in revised_results.steps.items())
        rounds.append(Round(plan, observation, f"revised plan ran ({counts})"))
        plan, results = revised, revised_results
    return plan, results, rounds
