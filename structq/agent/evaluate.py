"""Regression runs over a question set: the way to judge a manifest change or a model.

Each item has a ``question`` and either ``expect_sql`` (execution accuracy: the final step's
rows are compared with the rows of the expected query, run read-only on ``source``) or
``expect_rows``. Rows compare as multisets unless the item is ordered (``ordered: true``, or an
``ORDER BY`` in ``expect_sql``). The answer may carry extra columns: the expected columns are
matched against any choice of the answer's columns, so "the product and its total" passes
a question that expects only the product.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from structq.errors import ConfigError, RepairsExhausted, SourceUnavailable, StructqError

from .plan import Plan

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["EvalItem", "EvalSet", "ItemResult", "EvalReport", "evaluate", "rows_match"]

#: Above this many columns, column matching stops trying every arrangement.
MAX_MATCHED_COLUMNS = 6


class EvalItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str
    expect_sql: str | None = None
    source: str | None = None
    expect_rows: list[list[Any]] | None = None
    ordered: bool | None = None
    vars: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_expectation(self) -> "EvalItem":
        if (self.expect_sql is None) == (self.expect_rows is None):
            raise ValueError("give exactly one of expect_sql or expect_rows")
        if self.expect_sql is not None and not self.source:
            raise ValueError("expect_sql needs the source it runs on (source: NAME)")
        return self

    @property
    def is_ordered(self) -> bool:
        if self.ordered is not None:
            return self.ordered
        return bool(self.expect_sql and re.search(r"\border\s+by\b", self.expect_sql, re.I))


class EvalSet(BaseModel):
    """A question set file: ``today`` (for relative dates) and ``questions``."""

    model_config = ConfigDict(extra="forbid")

    today: dt.date | None = None
    questions: list[EvalItem] = Field(min_length=1)

    @classmethod
    def from_file(cls, path: str | Path) -> "EvalSet":
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read the question set {path}: {exc}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{path}: {where}: {err['msg']}",
                              hint="each item has question and expect_sql (+ source) or expect_rows") from None


@dataclass
class ItemResult:
    item: EvalItem
    passed: bool
    reason: str
    plan: Plan | None = None
    plan_source: str | None = None
    model_calls: int = 0
    elapsed_ms: float = 0.0
    rows: list[list[Any]] = field(default_factory=list)
    #: Not run: the item needs something this run lacks (a model); ``reason`` says what.
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.item.question, "passed": self.passed, "skipped": self.skipped, "reason": self.reason,
                "plan_source": self.plan_source, "model_calls": self.model_calls,
                "elapsed_ms": round(self.elapsed_ms, 1),
                "plan": self.plan.to_dict() if self.plan and not self.passed else None}


@dataclass
class EvalReport:
    results: list[ItemResult]
    elapsed_ms: float

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed - self.skipped

    @property
    def accuracy(self) -> float:
        """Passed over the items that ran (skipped ones are reported, not counted)."""
        ran = len(self.results) - self.skipped
        return self.passed / ran if ran else 0.0

    @property
    def model_calls(self) -> int:
        return sum(r.model_calls for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {"total": len(self.results), "passed": self.passed, "failed": self.failed, "skipped": self.skipped,
                "accuracy": round(self.accuracy, 4),
                "model_calls": self.model_calls, "elapsed_ms": round(self.elapsed_ms, 1),
                "items": [r.to_dict() for r in self.results]}


# --- comparing rows ----------------------------------------------------------------------


def _normalise(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, Decimal)):  # PostgreSQL and MySQL return NUMERIC as Decimal
        return float(f"{float(value):.9g}") if math.isfinite(float(value)) else str(value)
    if isinstance(value, str):
        try:
            return float(f"{float(value):.9g}") if re.fullmatch(r"-?\d+(\.\d+)?", value.strip()) else value
        except ValueError:
            return value
    return str(value)


def _key(row: Sequence[Any]) -> tuple[str, ...]:
    return tuple(repr(v) for v in row)


def rows_match(actual: Sequence[Sequence[Any]], expected: Sequence[Sequence[Any]], *, ordered: bool) -> bool:
    """Whether ``actual`` holds ``expected``'s rows, for some choice of its columns."""
    if len(actual) != len(expected):
        return False
    if not expected:
        return True
    width = len(expected[0])
    actual_n = [[_normalise(v) for v in row] for row in actual]
    expected_n = [_key([_normalise(v) for v in row]) for row in expected]
    columns = len(actual_n[0])
    if columns < width:
        return False
    arrangements: Any = itertools.permutations(range(columns), width)
    if columns > MAX_MATCHED_COLUMNS:
        arrangements = [tuple(range(width))]
    target = expected_n if ordered else sorted(expected_n)
    for arrangement in arrangements:
        projected = [_key([row[i] for i in arrangement]) for row in actual_n]
        if (projected if ordered else sorted(projected)) == target:
            return True
    return False


# --- running -----------------------------------------------------------------------------


def _expected_rows(agent: "Agent", item: EvalItem) -> list[list[Any]]:
    if item.expect_rows is not None:
        return item.expect_rows
    plan = Plan.parse({"steps": [{"output_key": "expected", "source": item.source, "query": item.expect_sql}]})
    result = agent.engine.run(plan, vars=item.vars)
    return [list(r) for r in result.final.rows]


#: Not an item's failure but the run's: no model configured, a source down. They stop the run.
_STOPS_THE_RUN = (ConfigError, SourceUnavailable)


#: Why an item is skipped when no model is configured.
NEEDS_A_MODEL = ("needs a model (no verified example answers it); configure one with --llm, STRUCTQ_LLM or "
                 "OPENAI_API_KEY to run it")


def _needs_a_missing_model(agent: "Agent", item: EvalItem, today: dt.date | None) -> bool:
    """Not a verified example nor of a slotted example's shape, and no model configured at all
    (a configured model that fails to load still stops the run: that is a mistake to fix, not
    a reason to skip)."""
    if agent.verified.get(item.question) is not None or agent.has_model:
        return False
    if agent.templates.plan(item.question, today or dt.date.today()) is not None:
        return False
    try:
        _ = agent.model  # built on first use: raises ConfigError when no model is configured
    except ConfigError:
        return True
    return False


def _run_item(agent: "Agent", item: EvalItem, today: dt.date | None) -> ItemResult:
    if _needs_a_missing_model(agent, item, today):
        return ItemResult(item, False, NEEDS_A_MODEL, skipped=True)
    started = time.perf_counter()
    try:
        expected = _expected_rows(agent, item)
    except _STOPS_THE_RUN:
        raise
    except StructqError as exc:
        return ItemResult(item, False, f"the expected query failed: {exc}")
    try:
        answer = agent.ask(item.question, vars=item.vars, today=today, answer=False, use_cache=False)
    except _STOPS_THE_RUN:
        raise
    except StructqError as exc:
        attempts = exc.attempts if isinstance(exc, RepairsExhausted) else []  # one model call per plan tried
        last_plan = attempts[-1].plan if attempts else None
        return ItemResult(item, False, f"{type(exc).__name__}: {exc.message}", last_plan,
                          model_calls=len(attempts), elapsed_ms=(time.perf_counter() - started) * 1000)
    if answer.plan_source == "keywords":  # the keyword fallback stood in for a plan: never a pass
        return ItemResult(item, False, f"no plan; a keyword search ran instead: {answer.notes[0]}", answer.plan,
                          answer.plan_source, answer.model_calls.count(), (time.perf_counter() - started) * 1000)
    if answer.plan.declined:
        return ItemResult(item, False, f"declined: {answer.plan.cannot_answer}", answer.plan, answer.plan_source,
                          answer.model_calls.count(), (time.perf_counter() - started) * 1000)
    final = answer.results.final
    rows = [list(r) for r in final.rows]
    if final.truncated:
        ok, reason = False, f"the result was truncated at {final.row_count} rows"
    elif rows_match(rows, expected, ordered=item.is_ordered):
        ok, reason = True, "ok"
    else:
        ok, reason = False, f"rows differ: got {len(rows)} rows {rows[:3]}…, expected {len(expected)} rows {expected[:3]}…"
    return ItemResult(item, ok, reason, answer.plan, answer.plan_source, answer.model_calls.count(),
                      (time.perf_counter() - started) * 1000, rows)


def evaluate(agent: "Agent", questions: EvalSet, *,
             progress: Callable[[int, ItemResult], None] | None = None) -> EvalReport:
    """Ask every question (no answer-writing call, no plan cache) and compare the rows.

    An item fails on its own account (wrong rows, a plan that never worked); without a model,
    items that are not verified examples are skipped with the reason; a ``ConfigError`` or a
    ``SourceUnavailable`` is raised, since every later item would fail the same way.
    """
    started = time.perf_counter()
    results = []
    for i, item in enumerate(questions.questions):
        result = _run_item(agent, item, questions.today)
        results.append(result)
        if progress:
            progress(i, result)
    return EvalReport(results, (time.perf_counter() - started) * 1000)
