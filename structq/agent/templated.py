"""Plans from slotted verified examples: the agent's side of ``structq.templates``.

``TemplatePlans.plan`` turns a template match into a ``Plan`` whose ``template`` records the
example and the slot values; the engine binds ``template.params`` as parameters, never as
text. An entity slot's value is looked up in the data through the agent's engine (a one-step
plan, through the sandbox, the words bound as a parameter, with the caller's variables):
``星火`` is a project only when a row says so, and the stored spelling is what the steps bind.
The look-up is a data access like any other: a service's guarded engine checks the caller's
sources first, and what it found is kept per *view* (``Engine.view``: the caller's variables
and sources), so one caller's rows never answer another. ``no_match`` is the error for a
question nothing answers without a model: how to configure one, and the closest verified
questions.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, StructqError
from structq.sources import kind_of

from .llm import HOW_TO_CONFIGURE
from .plan import Plan, TemplateUse

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet
    from structq.templates import Match, TemplateMatch, TemplateSet

    from .engine import Engine

__all__ = ["TemplatePlans", "no_model_error"]

#: Entity values (and columns' value lists) kept per agent, at most (the same few names come back often).
LOOKUP_CACHE = 512

_NOTHING = object()


class _Recent:
    """The most recently used ``LOOKUP_CACHE`` answers by key (thread-safe)."""

    def __init__(self, size: int = LOOKUP_CACHE) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Any:
        with self._lock:
            if key not in self._entries:
                return _NOTHING
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: tuple[str, ...], value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def no_model_error(suggestions: list[str]) -> ConfigError:
    """No verified example answers the question and no model is configured: how to configure
    one, and the closest verified questions (slots as placeholders), in ``suggestions`` too."""
    asked = "; ".join(f"“{s}”" for s in suggestions)
    hint = HOW_TO_CONFIGURE + (f" Or ask a question of a verified example's shape, such as {asked}"
                               " ({…} is a value you choose)." if suggestions else "")
    error = ConfigError("no language model is configured", hint=hint)
    error.suggestions = suggestions  # type: ignore[attr-defined]
    return error


class TemplatePlans:
    """Slotted examples as plans, for one agent's manifests and engine."""

    def __init__(self, capabilities: CapabilitySet, engine: Engine) -> None:
        from structq.templates import TemplateSet

        self.capabilities = capabilities
        self.engine = engine
        self.set: TemplateSet = TemplateSet(capabilities)
        #: (view, column, text) → the stored value or None.
        self._found = _Recent()
        #: (view, column) → all the column's values, when they fit under the row limit (read once), else None.
        self._known = _Recent()

    def outcome(self, question: str, today: dt.date, vars: Mapping[str, Any] | None = None) -> TemplateMatch:
        """The match (or why there is none) for ``question`` on ``today``, entity slots looked
        up in the data the caller with ``vars`` may read."""
        from structq.templates import TemplateMatch

        if not len(self.set) and self.set.paraphrases is None:
            return TemplateMatch(None, "the manifests declare no slotted examples")
        view = self.engine.view(vars)
        return self.set.match(question, today, lambda column, text: self.lookup(column, text, vars, view))

    def plan(self, question: str, today: dt.date, vars: Mapping[str, Any] | None = None) -> Plan | None:
        """The plan of the one slotted example that answers ``question``, or None (abstain)."""
        found = self.outcome(question, today, vars).match
        return plan_for(found) if found is not None else None

    def lookup(self, column: str, text: str, vars: Mapping[str, Any] | None = None, view: str | None = None) -> str | None:
        """``_lookup``, remembered per view (``view``: ``engine.view(vars)``, computed when not given)."""
        view = self.engine.view(vars) if view is None else view
        key = (view, column, text)
        found = self._found.get(key)
        if found is _NOTHING:
            found = self._lookup(column, text, vars, view)
            self._found.put(key, found)
        return found  # type: ignore[no-any-return]

    def no_match(self, question: str) -> ConfigError:
        """The error for ``question`` when nothing answers it without a model."""
        from structq.templates import closest_questions

        return no_model_error(closest_questions(question, self.capabilities, self.set))

    def _lookup(self, column: str, text: str, vars: Mapping[str, Any] | None, view: str) -> str | None:
        """The stored value of ``column`` (``source.table.column``) written exactly as ``text``;
        None when the data has none, or the source cannot be read now (an abstention, not an
        error). A column's values are read once when they fit under the source's row limit;
        otherwise each text is looked up on its own."""
        known = self._values(column, vars, view) if self._lists_values(column) else None
        if known is not None:
            return text if text in known else None
        rows = self._read(column, {"value": text}, vars)
        stored = {row[0] for row in rows or () if row and isinstance(row[0], str)}
        return stored.pop() if len(stored) == 1 else None

    def _lists_values(self, column: str) -> bool:
        """Whether the column's source reads all its values in one query (``SourceKind.lists_values``:
        a search field's are looked up one at a time, an aggregation's buckets being capped)."""
        manifest = self.capabilities.get(column.split(".", 1)[0])
        return manifest is None or kind_of(manifest).lists_values

    def _values(self, column: str, vars: Mapping[str, Any] | None, view: str) -> frozenset[str] | None:
        known = self._known.get((view, column))
        if known is _NOTHING:
            rows = self._read(column, None, vars)
            known = None if rows is None else frozenset(r[0] for r in rows if r and isinstance(r[0], str))
            self._known.put((view, column), known)
        return known  # type: ignore[no-any-return]

    def _read(self, column: str, params: dict[str, str] | None, vars: Mapping[str, Any] | None) -> list[tuple] | None:
        """Rows of the column: those equal to ``params["value"]``, or (``params`` None) all its
        distinct values — None when they do not all fit, or the source cannot be read. A source
        the caller may not use is not an abstention: the engine's refusal goes to the caller."""
        source, container, name = column.split(".", 2)
        manifest = self.capabilities.get(source)
        if manifest is None:
            return None
        step = kind_of(manifest).value_step(manifest, container, name, every=params is None)
        plan = Plan(steps=[step], template=TemplateUse(example=f"values of {column}", params=params or {}))
        try:
            final = self.engine.look_up(plan, vars=vars).final
        except StructqError as exc:
            if exc.refuses_caller:
                raise
            return None
        if final.truncated or name not in final.columns:
            return None
        at = final.columns.index(name)  # a search hit's row starts with _id and _score
        return [(row[at],) for row in final.rows]


def plan_for(match: Match) -> Plan:
    """The example's plan, carrying the example, the slot values and the parameters to bind."""
    plan = Plan.from_example(match.example)
    use = TemplateUse(example=match.example.question, slots=match.shown, params=match.params, how=match.how,
                      score=round(match.score, 2), why=match.why if match.how == "paraphrase" else "")
    return plan.model_copy(update={"template": use})
