"""Plans from slotted verified examples: the agent's side of ``structq.templates``.

``TemplatePlans.plan`` turns a template match into a ``Plan`` whose ``template`` records the
example and the slot values; the engine binds ``template.params`` as parameters, never as
text. An entity slot's value is looked up in the data through the engine (a one-step plan,
through the sandbox, the words bound as a parameter): ``星火`` is a project only when a row
says so, and the stored spelling is what the steps bind. ``no_match`` is the error for a
question nothing answers without a model: the closest verified questions and how to
configure one.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import TYPE_CHECKING

from structq.errors import ConfigError, StructqError

from .llm import HOW_TO_CONFIGURE
from .plan import Plan, TemplateUse

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet
    from structq.templates import Match, Outcome, TemplateSet

    from .engine import Engine

__all__ = ["NoModelConfigError", "TemplatePlans"]

#: Entity values looked up per agent, at most (the same few names come back often).
LOOKUP_CACHE = 512


class NoModelConfigError(ConfigError):
    """No verified example answers the question and no model is configured.

    ``suggestions`` are the closest verified questions, slots as placeholders.
    """

    def __init__(self, question: str, suggestions: list[str], reason: str) -> None:
        asked = "; ".join(f"“{s}”" for s in suggestions)
        hint = (f"did you mean {asked}? (answered without a model; {{…}} is a value you choose) — or "
                if suggestions else "no verified example answers it; ")
        super().__init__("no language model is configured", hint=hint + HOW_TO_CONFIGURE)
        self.question = question
        self.suggestions = suggestions
        self.reason = reason


class TemplatePlans:
    """Slotted examples as plans, for one agent's manifests and engine."""

    def __init__(self, capabilities: CapabilitySet, engine: Engine) -> None:
        from structq.templates import TemplateSet

        self.capabilities = capabilities
        self.engine = engine
        self.set: TemplateSet = TemplateSet(capabilities)
        self.lookup = lru_cache(maxsize=LOOKUP_CACHE)(self._lookup)

    def outcome(self, question: str, today: dt.date) -> Outcome:
        """The match (or why there is none) for ``question`` on ``today``."""
        from structq.templates import Outcome

        if not len(self.set):
            return Outcome(None, "the manifests declare no slotted examples")
        return self.set.match(question, today, self.lookup)

    def plan(self, question: str, today: dt.date) -> Plan | None:
        """The plan of the one slotted example that answers ``question``, or None (abstain)."""
        found = self.outcome(question, today).match
        return plan_for(found) if found is not None else None

    def no_match(self, question: str, today: dt.date) -> NoModelConfigError:
        from structq.templates import closest_questions

        reason = self.outcome(question, today).reason
        return NoModelConfigError(question, closest_questions(question, self.capabilities, self.set), reason)

    def _lookup(self, column: str, text: str) -> str | None:
        """The stored value of ``column`` (``source.table.column``) equal to ``text``; None when
        the data has none, or the source cannot be read now (an abstention, not an error)."""
        source, container, name = column.split(".", 2)
        manifest = self.capabilities.get(source)
        if manifest is None:
            return None
        plan = Plan(steps=[_lookup_step(manifest, container, name)],
                    template=TemplateUse(example=f"value of {column}", params={"value": text}))
        try:
            rows = self.engine.run(plan).final.rows
        except StructqError:
            return None
        stored = {row[0] for row in rows if row and isinstance(row[0], str)}
        return stored.pop() if len(stored) == 1 else None


def plan_for(match: Match) -> Plan:
    """The example's plan, carrying the example, the slot values and the parameters to bind."""
    plan = Plan.from_example(match.example)
    use = TemplateUse(example=match.example.question, slots=match.shown, params=match.params)
    return plan.model_copy(update={"template": use})


def _lookup_step(manifest, container: str, name: str) -> dict:
    """One query reading ``name`` where it equals ``:value``: SQL built as a tree, or a term query."""
    if manifest.is_search:
        query = {"query": {"term": {name: ":value"}}, "_source": [name], "size": 2}
        return {"output_key": "value", "source": manifest.source, "index": container, "query": query}
    from sqlglot import exp

    column = exp.column(name)
    select = (exp.select(column).distinct().from_(exp.to_table(container))
              .where(exp.EQ(this=column.copy(), expression=exp.Placeholder(this="value"))).limit(2))
    return {"output_key": "value", "source": manifest.source, "query": select.sql(dialect=manifest.sql_dialect)}
