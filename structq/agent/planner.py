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
import math
import re
from collections.abc import Callable
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

__all__ = ["Planner", "Attempt", "template", "extract_json", "relevant_examples", "render_examples", "PLAN_EXAMPLES"]

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


#: Verified examples shown in the planning prompt (``STRUCTQ_PLAN_EXAMPLES``; 0: all of them).
PLAN_EXAMPLES = 3


def relevant_examples(question: str, examples: "list[Example]", limit: int,
                      capabilities: "CapabilitySet | None" = None) -> "list[Example]":
    """The ``limit`` examples most like ``question``, in manifest order. An example scores by
    the words its question shares with this one (BM25 over the examples' questions in linking's
    terms: words, Chinese bigrams) plus how well the linking index ranks the tables it reads
    for this question (both scaled to the best example's): "各大区的战略客户数量" is closer to
    the example about strategic customers per region than to one about sales per region.
    ``limit`` 0 keeps them all. A few close examples teach a plan's shape as well as all of
    them, at a fraction of the prompt."""
    if not limit or len(examples) <= limit:
        return list(examples)
    from structq.linking.tokens import terms

    bags = [dict(terms(example.question)) for example in examples]
    count = len(bags)
    average = sum(sum(b.values()) for b in bags) / count or 1.0
    asked = dict(terms(question))

    def lexical(bag: dict[str, float]) -> float:
        total, length = 0.0, sum(bag.values())
        for term, weight in asked.items():
            tf = bag.get(term, 0.0)
            if tf:
                df = sum(1 for b in bags if term in b)
                idf = math.log(1 + (count - df + 0.5) / (df + 0.5))
                total += weight * idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
        return total

    words = [lexical(bag) for bag in bags]
    tables = _table_relevance(question, examples, capabilities) if capabilities is not None else [0.0] * count
    best_words, best_tables = max(words) or 1.0, max(tables) or 1.0
    scores = [w / best_words + t / best_tables for w, t in zip(words, tables)]
    ranked = sorted(range(count), key=lambda i: (-scores[i], i))[:limit]
    return [examples[i] for i in sorted(ranked)]


def _table_relevance(question: str, examples: "list[Example]", capabilities: "CapabilitySet") -> list[float]:
    """Per example: the linking index's best score, for ``question``, of a table it reads."""
    from structq.linking import linking_index
    from structq.linking.tokens import terms

    index = linking_index(capabilities)
    scored = index.tables.score(dict(terms(question)))
    read = dict(index.examples)
    return [max((scored.get(i, 0.0) for i in read.get(example.question, ())), default=0.0) for example in examples]


def render_examples(examples: "list[Example]", today: dt.date | None = None,
                    filled: "Callable[[Example], dict[str, Any] | None] | None" = None) -> str:
    """The verified examples as question → plan JSON pairs. A slotted example's ``:name``
    parameters are written as the values its own question means on ``today`` (``filled``:
    上个月 → '2026-10-01'), since a plan writes values, never a relative phrase."""
    blocks = []
    for example in examples:
        plan = {k: v for k, v in Plan.from_example(example).to_dict().items() if v not in ("", None)}
        params = filled(example) if (filled is not None and example.slots) else None
        if params:
            for step in plan["steps"]:
                step["query"] = bind_for_display(step["query"], params)
            slots = ""
        else:  # values not known: say what each parameter is, never as a relative phrase
            slots = "".join(f"\n:{name}… is a value such as {slot.example!r}; write the value itself"
                            for name, slot in example.slots.items())
        shown = json.dumps(plan, ensure_ascii=False, separators=(",", ":"))
        blocks.append(f"Question: {example.question}\nPlan: {shown}{slots}")
    return "\n\n".join(blocks) or "(none)"


def bind_for_display(query: Any, params: dict[str, Any]) -> Any:
    """``query`` with each ``:name`` written as its value (SQL literal or JSON value): for the
    prompt only; the engine always binds parameters."""
    if isinstance(query, str):
        def literal(match: re.Match[str]) -> str:
            value = params.get(match.group(1))
            if value is None:
                return match.group()
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)
            return "'" + str(value).replace("'", "''") + "'"

        pieces = re.split(r"('(?:[^']|'')*')", query)  # string literals stay as written
        return "".join(p if i % 2 else re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", literal, p) for i, p in enumerate(pieces))
    if isinstance(query, dict):
        return {k: bind_for_display(v, params) for k, v in query.items()}
    if isinstance(query, list):
        return [bind_for_display(v, params) for v in query]
    return query


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
                 bounds: CallBounds | None = None, examples: int = PLAN_EXAMPLES) -> None:
        self.model = model
        #: Verified examples shown per question (0: all).
        self.examples = examples
        self._templates: Any = None
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
        """Rules, the catalogue (``selection``'s part of it, or all) and the verified examples
        of its tables most like the question (``relevant_examples``)."""
        catalogue = selection.render() if selection is not None else self.capabilities.render()
        candidates = selection.examples() if selection is not None else [e for _, e in self.capabilities.examples()]
        examples = relevant_examples(selection.question if selection is not None else "", candidates, self.examples,
                                     self.capabilities)
        # the rules for JSON request bodies, when a source shown takes them
        searched = any(m.query_dialect is None for m in (selection.manifests() if selection is not None
                                                          else self.capabilities))
        key = (today, catalogue, tuple(e.question for e in examples), searched)
        if key not in self._system_cache:
            self._system_cache[key] = template("plan_system").substitute(
                today=today.isoformat(),
                weekday=_WEEKDAYS[today.weekday()],
                timezone=self.timezone if self.timezone != "local" else (dt.datetime.now().astimezone().tzname() or "local"),
                last_year=today.year - 1,
                capabilities=catalogue,
                search_rules=template("plan_search").template if searched else "",
                examples=render_examples(examples, today, lambda e: self._filled(e, today)),
            )
        return self._system_cache[key]

    def _filled(self, example: "Example", today: dt.date) -> dict[str, Any] | None:
        """The parameters a slotted example's own question binds on ``today`` (None: it abstains)."""
        if self._templates is None:
            from structq.templates import TemplateSet

            self._templates = TemplateSet(self.capabilities, paraphrases=False)  # its own words: never a paraphrase
        found = self._templates.match(example.question, today).match
        return dict(found.params) if found is not None and found.example.question == example.question else None

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
                                                          periods=render_periods(question, today),
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


def render_periods(question: str, today: dt.date) -> str:
    """The periods the question names, resolved against ``today`` ("上个月" → 2026-10-01 to
    2026-10-31): the dates a plan writes, so the model never has to work them out."""
    from structq.periods import find_periods

    found = find_periods(question, today)
    if not found:
        return ""
    lines = "\n".join(f"- “{p.text}” = {p.first.isoformat()}" + (f" to {p.last.isoformat()}" if p.last != p.first else "")
                      + f" ({p.kind})" for p in found)
    return f"Periods in the question (first and last day, inclusive):\n{lines}\n"


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

