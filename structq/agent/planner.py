"""The planning prompt and turning the model's reply into a ``Plan``.

The prompt is built from template files (``prompts/*.md``): the manifests the question needs
(``structq.linking`` prunes a large catalogue to them; a small one is shown whole), the
verified examples of those tables as few-shot plans, the rules, today's date, the stored
values the question mentions, and the conversation so far. A repair round re-links with the
names the failed plan reached for, so a table pruned away comes back when it was needed.
The reply is read through tool calling when the model supports it (``bind_tools``), and from
JSON text otherwise; both paths end in ``Plan.parse``. A malformed reply is a ``PlanError``,
which the caller's repair loop sends back to the model like any other retryable error.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Any

from structq.errors import PlanError, SandboxViolation, StructqError

from .llm import CallBounds, CallLog, invoke, reply_text
from .plan import Plan, coerce_search_queries

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from structq.capabilities import CapabilitySet, Example
    from structq.linking import Budget, Selection, ValueIndex
    from structq.linking.route import Route

__all__ = ["Planner", "Attempt", "template", "extract_json"]

PLAN_TOOL = "submit_plan"
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@cache
def template(name: str) -> Template:
    """A prompt template from ``structq/agent/prompts`` (``$name`` placeholders)."""
    text = resources.files("structq.agent").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")
    return Template(text)


@dataclass(frozen=True)
class Attempt:
    """A plan (or the raw reply that did not parse) and the error it ran into."""

    error: StructqError
    plan: Plan | None = None
    raw: str | None = None

    def describe(self) -> str:
        what = str(self.plan) if self.plan is not None else f"(unparsable reply) {self.raw or ''}"[:2000]
        return f"{what}\n  → {type(self.error).__name__}: {self.error}"


def extract_json(text: str) -> Any:
    """The JSON object in a model's text reply (bare, or inside a ```json fence)."""
    fenced = re.search(r"```(?:json|JSON)?\s*(\{.*?\})\s*```", text, re.S)
    start, end = text.find("{"), text.rfind("}")
    if fenced:
        candidate = fenced.group(1)
    elif start < 0:
        raise PlanError("the reply contains no JSON object", hint="return the plan as one JSON object")
    else:  # an unclosed object still goes to the parser, whose message says where it broke off
        candidate = text[start : end + 1] if end > start else text[start:]
    try:
        return json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise PlanError(f"the reply is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                        hint="return the plan as one valid JSON object") from None


def render_examples(examples: "list[Example]") -> str:
    """The verified examples as question → plan JSON pairs."""
    blocks = []
    for example in examples:
        plan = Plan.from_example(example).to_dict()
        # A slotted example's steps hold :name parameters only templates bind; plans write values.
        slots = "".join(f"\n:{name}… stands for {slot.example!r}; write the value itself" for name, slot in example.slots.items())
        blocks.append(f"Question: {example.question}\nPlan: {json.dumps(plan, ensure_ascii=False)}{slots}")
    return "\n\n".join(blocks) or "(none)"


def _plan_tool_schema() -> dict[str, Any]:
    """The OpenAI-style tool the model calls to submit a plan."""
    return {
        "type": "function",
        "function": {
            "name": PLAN_TOOL,
            "description": "Submit the query plan that answers the question.",
            "parameters": Plan.model_json_schema(),
        },
    }


class Planner:
    """Writes plans with a chat model for the sources of a capability set."""

    def __init__(self, model: Any, capabilities: "CapabilitySet", *, timezone: str = "local",
                 budget: "Budget | None" = None, values: "ValueIndex | None" = None,
                 bounds: CallBounds | None = None) -> None:
        self.model = model
        #: Timeout and retries of each call (None: the environment's, read when calling).
        self.bounds = bounds
        self.capabilities = capabilities
        self.timezone = timezone
        self.budget = budget
        self._values = values
        self._tool_model = self._bind_plan_tool(model)
        self._system_cache: dict[tuple[dt.date, str], str] = {}
        #: The routing call's answer per question text (``agent.routing``): one call per question.
        self._routes: dict[str, Route] = {}

    @staticmethod
    def _bind_plan_tool(model: Any) -> Any | None:
        """The model with the plan tool bound, or None when it cannot call tools."""
        try:
            return model.bind_tools([_plan_tool_schema()], tool_choice=PLAN_TOOL)
        except (NotImplementedError, AttributeError, TypeError, ValueError):
            try:
                return model.bind_tools([_plan_tool_schema()])
            except (NotImplementedError, AttributeError, TypeError, ValueError):
                return None

    # --- prompt -----------------------------------------------------------------------

    @property
    def values(self) -> "ValueIndex":
        """The value index next to the manifests (empty when none was built)."""
        if self._values is None:
            from structq.linking import load_values

            self._values = load_values(self.capabilities)
        return self._values

    def link(self, question: str, *, context: str = "", attempts: list[Attempt] = (),
             log: CallLog | None = None) -> "Selection":
        """The sub-catalogue for the question (and the conversation), plus what failed plans named;
        with a ``log``, a selection linking is not confident of is routed (one call per question)."""
        from structq.linking import Budget, names_to_restore, select

        extra = [name for a in attempts for name in names_to_restore(a.error, a.plan, self.capabilities)]
        text = f"{context}\n{question}" if context else question
        selection = select(text, self.capabilities, budget=self.budget, values=self.values, extra=extra,
                           route=self._routes.get(text))
        route_tokens = (self.budget or Budget()).route_tokens
        if not selection.confident and log is not None and route_tokens and text not in self._routes:
            from .routing import route_question

            self._routes[text] = route_question(self.model, question, self.capabilities, selection,
                                                budget_tokens=route_tokens, log=log, bounds=self.bounds)
            if self._routes[text]:
                selection = select(text, self.capabilities, budget=self.budget, values=self.values, extra=extra,
                                   route=self._routes[text])
        return selection

    def system_prompt(self, today: dt.date, selection: "Selection | None" = None) -> str:
        """Rules, the catalogue (``selection``'s part of it, or all) and its verified examples."""
        catalogue = selection.render() if selection is not None else self.capabilities.render()
        key = (today, catalogue)
        if key not in self._system_cache:
            examples = selection.examples() if selection is not None else [e for _, e in self.capabilities.examples()]
            self._system_cache[key] = template("plan_system").substitute(
                today=today.isoformat(),
                weekday=_WEEKDAYS[today.weekday()],
                timezone=self.timezone if self.timezone != "local" else (dt.datetime.now().astimezone().tzname() or "local"),
                last_year=today.year - 1,
                capabilities=catalogue,
                examples=render_examples(examples),
            )
        return self._system_cache[key]

    def messages(self, question: str, *, today: dt.date, context: str = "",
                 attempts: list[Attempt] = (), log: CallLog | None = None) -> "list[BaseMessage]":
        """System prompt, the question (with the conversation so far), then each failed attempt
        (``log``: where a routing call is counted, when linking needs one)."""
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        selection = self.link(question, context=context, attempts=attempts, log=log)
        conversation = f"Conversation so far:\n{context}\n" if context else ""
        out: list[BaseMessage] = [
            SystemMessage(self.system_prompt(today, selection)),
            HumanMessage(template("plan_user").substitute(conversation=conversation, question=question,
                                                          values=render_values(selection))),
        ]
        for attempt in attempts:
            previous = json.dumps(attempt.plan.to_dict(), ensure_ascii=False) if attempt.plan else (attempt.raw or "")
            out.append(AIMessage(previous))
            out.append(HumanMessage(repair_message(attempt.error)))
        return out

    # --- calling ----------------------------------------------------------------------

    def plan(self, question: str, *, today: dt.date, log: CallLog, context: str = "",
             attempts: list[Attempt] = ()) -> Plan:
        """Ask the model for a plan; raise ``PlanError`` (with ``.raw``) when the reply is unusable."""
        messages = self.messages(question, today=today, context=context, attempts=list(attempts), log=log)
        return self.complete(messages, purpose="repair" if attempts else "plan", log=log)

    def complete(self, messages: "list[BaseMessage]", *, purpose: str, log: CallLog) -> Plan:
        """One planning call on prepared ``messages`` (a plan, a repair, a revision)."""
        return self.parse_reply(invoke(self._tool_model or self.model, messages, purpose=purpose, log=log,
                                        bounds=self.bounds))

    def parse_reply(self, reply: Any) -> Plan:
        """A plan from a tool call or, failing that, from JSON in the text."""
        calls = getattr(reply, "tool_calls", None) or []
        raw = reply_text(reply)
        try:
            if calls:
                data = calls[0].get("args") or {}
            else:
                data = extract_json(raw)
            if isinstance(data, dict):
                data = coerce_search_queries(data)
            return Plan.parse(data)
        except PlanError as exc:
            reply_json = json.dumps(calls[0].get("args"), ensure_ascii=False) if calls else raw
            raise exc.replace(raw=reply_json) from exc


def render_values(selection: "Selection") -> str:
    """The "values mentioned in the question" section: stored spellings the model must write."""
    if not selection.matches:
        return ""
    lines = "\n".join(f"- {m.describe()}" for m in selection.matches)
    return f"\nValues mentioned in the question (write them exactly as stored):\n{lines}\n"


def repair_message(error: StructqError) -> str:
    """What the model is told about the error its plan ran into."""
    code = error.code if isinstance(error, SandboxViolation) else type(error).__name__
    step = getattr(error, "step", None) or "(the plan as a whole)"
    hint = f"Hint: {error.hint}\n" if error.hint else ""
    return template("repair").substitute(step=step, code=code, message=error.message, hint=hint)

