"""Query plans: ordered steps, each a query against one source, passing results on by reference.

A ``Plan`` is what the planner (or a person, or a verified example) writes and what the engine
runs. References ``<key>`` / ``<key.column>`` name an earlier step's result; they are bound as
parameters by the sandbox, never spliced into query text. ``Plan.validate`` checks everything
that can be known before running: sources and indices exist, output keys are unique
identifiers, references point backwards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from structq.capabilities.hints import closest, listing
from structq.capabilities.model import ExampleStep
from structq.capabilities.nesting import json_depth
from structq.errors import PlanError
from structq.capabilities.references import LOCAL_DIALECT, LOCAL_SOURCE, Reference, find_references, local_inputs

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Example

__all__ = ["Plan", "Step", "TemplateUse", "Reference", "LOCAL_SOURCE", "step_dialect"]


#: How deeply a DSL body may nest; far beyond any real query, well within Python's recursion.
MAX_QUERY_DEPTH = 100


class Step(ExampleStep):
    """One query: SQL text for SQL and ``local`` sources, a DSL body for search sources.

    The same shape as a manifest example's step (a verified plan is a plan), plus what the
    engine needs to know about it.
    """

    @field_validator("query")
    @classmethod
    def _not_too_deep(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        if isinstance(value, dict) and json_depth(value, MAX_QUERY_DEPTH) > MAX_QUERY_DEPTH:
            raise ValueError(f"the query nests deeper than {MAX_QUERY_DEPTH} levels")
        return value

    @property
    def query_text(self) -> str:
        """The query as text (a DSL body as compact JSON; an API step's operation and params,
        or its document and variables), for display."""
        if self.operation is not None:
            return json.dumps({"operation": self.operation, "params": self.params or {}}, ensure_ascii=False)
        text = self.query if isinstance(self.query, str) else json.dumps(self.query, ensure_ascii=False)
        if self.variables:
            text += "\nvariables: " + json.dumps(self.variables, ensure_ascii=False)
        return text

    def references(self, dialect: str) -> list[Reference]:
        """The references in this step's query (SQL read as ``dialect``) and in an API step's
        variables or params, in order of first appearance, without repeats: ``<…>`` inside a
        literal or a comment is text."""
        found = find_references(self.query, dialect) if self.query is not None else []
        for values in (self.variables, self.params):
            if values:
                found += find_references(values, dialect)
        return list(dict.fromkeys(found))

    def local_inputs(self, earlier: list[str]) -> list[str]:
        """For a ``local`` step: the earlier output keys its SQL reads as tables."""
        return local_inputs(self.query, earlier) if isinstance(self.query, str) else []


class TemplateUse(BaseModel):
    """Which verified example a template plan comes from, and what its slots were filled with.

    ``slots`` is for people (slot → the value read and the words it was read from);
    ``params`` is what the sandbox binds for each ``:name`` in the steps (never spliced).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    example: str
    slots: dict[str, str] = Field(default_factory=dict)
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    #: How the question matched: ``words`` (the example's wording, other values) or
    #: ``paraphrase`` (its words in other wording; ``score`` and ``why`` say how close).
    how: str = "words"
    score: float = 1.0
    why: str = ""


class Plan(BaseModel):
    """Reasoning, steps in order, and how the answer should be written.

    Or an honest refusal: ``cannot_answer`` holds the reason (denied data, data no source
    holds, a question too ambiguous to plan) and ``steps`` is empty. A refusal is an answer,
    not an error: nothing runs and nothing is repaired.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    reasoning: str = ""
    steps: list[Step] = Field(default_factory=list)
    answer_with: str = ""
    cannot_answer: str | None = Field(
        default=None,
        description="Only when the question cannot be answered from the sources: why, in the question's "
                    "language, and what can be asked instead. Then steps is empty.")
    #: Set only on a plan made from a slotted verified example (``structq.templates``); not
    #: part of the schema the model is shown.
    template: SkipJsonSchema[TemplateUse | None] = None

    @model_validator(mode="after")
    def _steps_or_reason(self) -> "Plan":
        if self.cannot_answer is not None:
            if not self.cannot_answer.strip():
                raise ValueError("cannot_answer needs the reason the question cannot be answered")
            if self.steps:
                raise ValueError("a plan that declines (cannot_answer) has no steps")
        elif not self.steps:
            raise ValueError("a plan needs at least one step, or cannot_answer with the reason and no steps")
        return self

    @property
    def declined(self) -> bool:
        """Whether this plan declines to answer (``cannot_answer``) instead of querying."""
        return self.cannot_answer is not None

    # --- construction -----------------------------------------------------------------

    @classmethod
    def parse(cls, data: Any) -> "Plan":
        """A plan from a mapping (LLM output, YAML, JSON). Raises ``PlanError`` on a bad shape."""
        if isinstance(data, Plan):
            return data
        if not isinstance(data, dict):
            raise PlanError("a plan is a mapping with 'steps' (and optional 'reasoning', 'answer_with')")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            raise PlanError(f"malformed plan at {where}: {err['msg']}",
                            hint="each step has output_key, source, query (and index for search sources)") from None

    @classmethod
    def from_text(cls, text: str) -> "Plan":
        """A plan from YAML or JSON text."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PlanError(f"the plan is not valid YAML/JSON: {exc}") from None
        return cls.parse(data)

    @classmethod
    def from_file(cls, path: str | Path) -> "Plan":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise PlanError(f"cannot read plan file {path}: {exc.strerror}") from None
        return cls.from_text(text)

    @classmethod
    def from_example(cls, example: "Example") -> "Plan":
        """The plan of a verified manifest example."""
        return cls.parse(
            {
                "reasoning": example.reasoning,
                "answer_with": example.answer_with,
                "steps": [s.model_dump(exclude_none=True) for s in example.steps],
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_defaults=False, exclude_none=True)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), allow_unicode=True, sort_keys=False, width=100)

    # --- structure --------------------------------------------------------------------

    def __iter__(self) -> Iterator[Step]:  # type: ignore[override]
        return iter(self.steps)

    def step(self, key: str) -> Step:
        for step in self.steps:
            if step.output_key == key:
                return step
        raise KeyError(key)

    def dependencies(self, capabilities: "CapabilitySet") -> dict[str, list[str]]:
        """Each step's output key → the earlier keys it needs (references, or tables of a local step)."""
        deps: dict[str, list[str]] = {}
        earlier: list[str] = []
        for step in self.steps:
            needed = [r.key for r in step.references(step_dialect(step, capabilities))]
            needed += _tables_read(step, capabilities, earlier)
            deps[step.output_key] = list(dict.fromkeys(needed))
            earlier.append(step.output_key)
        return deps

    def read_as_tables(self, capabilities: "CapabilitySet") -> set[str]:
        """Output keys that a later step reads as a whole table (it needs their columns)."""
        earlier: list[str] = []
        read: set[str] = set()
        for step in self.steps:
            read.update(_tables_read(step, capabilities, earlier))
            earlier.append(step.output_key)
        return read

    def consumed(self, capabilities: "CapabilitySet") -> set[str]:
        """Output keys whose results feed later steps (they get the intermediate row cap)."""
        return {key for needed in self.dependencies(capabilities).values() for key in needed}

    # --- validation -------------------------------------------------------------------

    def validate_against(self, capabilities: "CapabilitySet") -> "Plan":
        """Check sources, indices, keys and reference order; raise ``PlanError`` naming the step."""
        from structq.sources import builtin_sources

        earlier: list[str] = []
        for step in self.steps:
            key = step.output_key
            if key in earlier:
                raise PlanError(f"duplicate output_key {key!r}", step=key, hint="every step needs its own output_key")
            if key in builtin_sources():
                raise PlanError(f"{key!r} cannot be an output_key: it names a source", step=key)
            self._check_source(step, capabilities, earlier)
            for ref in step.references(step_dialect(step, capabilities)):
                if ref.key not in earlier:
                    later = ref.key in [s.output_key for s in self.steps]
                    reason = "a later step" if later else "an unknown step"
                    raise PlanError(
                        f"reference {ref} points to {reason}",
                        step=key,
                        hint=f"references may name earlier steps only: {', '.join(earlier) or '(none yet)'}",
                    )
            earlier.append(key)
        return self

    @staticmethod
    def _check_source(step: Step, capabilities: "CapabilitySet", earlier: list[str]) -> None:
        """The step's source exists, and the step fits its kind (index, query type)."""
        from structq.sources import builtin_sources, step_kind

        try:
            kind = step_kind(step.source, capabilities)
        except KeyError:
            names = [*capabilities.names, *builtin_sources()]
            suggestion = closest(step.source, names)
            hint = f"did you mean {suggestion!r}?" if suggestion else f"sources: {listing(names, near=step.source)}"
            raise PlanError(f"unknown source {step.source!r}", step=step.output_key, hint=hint) from None
        kind.validate_step(step, capabilities.get(step.source), earlier)

    # --- display ----------------------------------------------------------------------

    def __str__(self) -> str:
        lines = [f"Plan: {self.reasoning}" if self.reasoning else "Plan:"]
        if self.cannot_answer is not None:
            lines.append(f"  cannot answer: {self.cannot_answer}")
        for i, step in enumerate(self.steps, 1):
            where = f"{step.source}/{step.index}" if step.index else step.source
            purpose = f" — {step.purpose}" if step.purpose else ""
            lines.append(f"  {i}. {step.output_key} @ {where}{purpose}")
            lines.append(f"     {step.query_text}")
        if self.answer_with:
            lines.append(f"  answer: {self.answer_with}")
        return "\n".join(lines)


def _tables_read(step: Step, capabilities: "CapabilitySet", earlier: list[str]) -> list[str]:
    """The earlier output keys ``step`` reads as whole tables, by its source's kind (none for
    a source that does not exist: validation reports it)."""
    from structq.sources import step_kind

    try:
        kind = step_kind(step.source, capabilities)
    except KeyError:
        return []
    return kind.tables_read(step, earlier)


def step_dialect(step: ExampleStep, capabilities: "CapabilitySet") -> str:
    """The SQL dialect a step's query is read in (a search body's is never used)."""
    manifest = capabilities.get(step.source)
    return (manifest.query_dialect if manifest is not None else None) or LOCAL_DIALECT


#: The start of a JSON object: ``{`` then a key or ``}`` (a GraphQL document opens ``{ name``).
_JSON_OBJECT = re.compile(r"\s*\{\s*[\"}]")


def coerce_search_queries(data: dict[str, Any]) -> dict[str, Any]:
    """LLMs sometimes send a DSL body as a JSON string; decode it so validation sees an object."""
    for step in data.get("steps") or []:
        query = step.get("query") if isinstance(step, dict) else None
        if isinstance(query, str) and _JSON_OBJECT.match(query):  # not a GraphQL document: { projects … }
            try:
                step["query"] = json.loads(query)
            except RecursionError:
                raise PlanError(f"step {step.get('output_key')!r}: the DSL body nests too deeply") from None
            except json.JSONDecodeError as exc:
                raise PlanError(f"step {step.get('output_key')!r}: the DSL body is not valid JSON: {exc}") from None
    return data
