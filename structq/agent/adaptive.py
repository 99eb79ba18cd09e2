"""Adaptive runs: the model looks at each step's result and decides how the plan goes on.

For questions whose next query depends on what the last one found (``--adaptive``,
``STRUCTQ_ADAPTIVE=1``): the plan runs one step at a time, in plan order (every reference
points to an earlier step, so that is a dependency order). After each step the model sees the
observation of what has run (``observe``: row counts, columns, truncation, unmatched literals;
the latest step's first rows and the stored-value suggestions only when row contents may
reach the model) and answers ``continue``, ``revise`` (new remaining steps, validated as a
plan whose earlier steps are the ones that ran) or ``stop`` (answer with what there is).

Cost: one extra model call per step while revisions are left; after ``max_replans``
revisions the rest runs without asking. Each revision and a stop is a ``Round`` in the trace
and the audit log. A reply that does not parse, or a revision that does not validate, keeps
the plan as it was (with a note): the run never gets worse for asking.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.errors import PlanError, StructqError

from .engine import PlanResult, StepResult
from .llm import invoke, reply_text
from .loop import Round
from .observe import Observation, observe, step_summaries
from .plan import Plan, Step, coerce_search_queries
from .planner import extract_json, template

if TYPE_CHECKING:
    import datetime as dt

    from .engine import Engine
    from .llm import CallLog
    from .planner import Planner

__all__ = ["Decision", "AdaptiveRound", "run_adaptive", "parse_decision", "SAMPLE_ROWS"]

#: Rows of the latest step shown to the model (only when row contents may reach it).
SAMPLE_ROWS = 5

DECISIONS = ("continue", "revise", "stop")


@dataclass(frozen=True)
class Decision:
    """The model's word after a step: go on, replace the remaining steps, or answer now."""

    kind: str
    steps: tuple[Step, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class AdaptiveRound(Round):
    """A revision or a stop after a step, with what the model saw."""

    after: str = ""

    def note(self) -> str:
        return f"adaptive run: after step {self.after!r}, {self.outcome}"


def parse_decision(reply: Any) -> Decision:
    """The decision in a model reply; ``PlanError`` when it is not one of the three shapes."""
    calls = getattr(reply, "tool_calls", None) or []
    data = calls[0].get("args") if calls else extract_json(reply_text(reply))
    kind = data.get("decision") if isinstance(data, dict) else None
    if kind not in DECISIONS:
        raise PlanError(f"the decision must be one of {', '.join(DECISIONS)}, not {kind!r}",
                        hint='reply {"decision": "continue"}, {"decision": "stop", "reason": "…"} '
                             'or {"decision": "revise", "steps": [...]}')
    if kind != "revise":
        return Decision(kind, reason=str(data.get("reason") or ""))
    steps = coerce_search_queries({"steps": data.get("steps")}).get("steps")
    if not isinstance(steps, list) or not steps:
        raise PlanError("a revision needs the remaining steps as a non-empty list",
                        hint='{"decision": "revise", "steps": [{"output_key": …, "source": …, "query": …}]}')
    return Decision(kind, tuple(Plan.parse({"steps": steps}).steps))


def observation_of(results: PlanResult, engine: "Engine", *, vars: dict[str, Any], with_values: bool) -> Observation:
    """The loop's observation of a partial run; one with no empty step when nothing was empty."""
    found = observe(results, engine, vars=vars, with_values=with_values)
    return found or Observation((), step_summaries(results))


def _shown(observation: Observation, latest: StepResult, with_values: bool) -> str:
    text = observation.text()
    if not with_values or not latest.rows:
        return text
    rows = [dict(zip(latest.columns, row)) for row in latest.rows[:SAMPLE_ROWS]]
    more = f" (first {SAMPLE_ROWS} of {latest.row_count})" if latest.row_count > SAMPLE_ROWS else ""
    return f"{text}\nRows of {latest.output_key}{more}: {json.dumps(rows, ensure_ascii=False, default=str)}"


async def run_adaptive(planner: "Planner", engine: "Engine", question: str, plan: Plan, *, vars: dict[str, Any],
                       today: "dt.date", context: str, log: "CallLog", max_replans: int,
                       with_values: bool) -> tuple[Plan, PlanResult, list[Round]]:
    """Run ``plan`` step by step, asking the model after each step while revisions are left."""
    from langchain_core.messages import AIMessage, HumanMessage

    done: dict[str, StepResult] = {}
    notes: list[str] = []
    rounds: list[Round] = []
    revisions, elapsed = 0, 0.0
    while len(done) < len(plan.steps):
        upto = len(done) + 1 if revisions < max_replans else None
        results = await engine.arun(plan, vars=vars, done=done, upto=upto)
        notes += results.notes
        elapsed += results.elapsed_ms
        done = dict(results.steps)
        if upto is None:
            break
        latest = plan.steps[len(done) - 1].output_key
        observation = await engine.call(observation_of, results, engine, vars=vars, with_values=with_values)
        remaining = [s.output_key for s in plan.steps[len(done):]]
        messages = planner.messages(question, today=today, context=context)
        messages.append(AIMessage(json.dumps(plan.to_dict(), ensure_ascii=False)))
        messages.append(HumanMessage(template("adaptive").substitute(
            step=latest, observation=_shown(observation, results.steps[latest], with_values),
            remaining=", ".join(remaining) or "none")))
        reply = await engine.call(invoke, planner.model, messages, purpose="adaptive", log=log,
                                  bounds=planner.bounds)
        try:
            decision = parse_decision(reply)
            if decision.kind == "revise":
                revised = Plan(reasoning=plan.reasoning, answer_with=plan.answer_with,
                               steps=[*plan.steps[:len(done)], *decision.steps]).validate_against(engine.capabilities)
        except StructqError as exc:
            notes.append(f"adaptive run: the decision after step {latest!r} was not usable "
                         f"({exc.message}); the plan went on unchanged")
            continue
        if decision.kind == "stop":
            rounds.append(AdaptiveRound(plan, observation, f"stopped: {decision.reason or 'answered with what ran'}",
                                        after=latest))
            plan = Plan(reasoning=plan.reasoning, answer_with=plan.answer_with, steps=plan.steps[:len(done)])
            break
        if decision.kind == "revise":
            revisions += 1
            rounds.append(AdaptiveRound(plan, observation, "revised the remaining steps: "
                                        + ", ".join(s.output_key for s in decision.steps), after=latest))
            plan = revised
    return plan, PlanResult(plan, {s.output_key: done[s.output_key] for s in plan.steps}, notes, elapsed), rounds
