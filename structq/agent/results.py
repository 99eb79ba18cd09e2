"""What a run of a plan returns: each step's rows (``StepResult``) and the whole run's
(``PlanResult``). The engine makes them; the answer, the audit log, the observation loop, the
CLI and the HTTP API read them. (An executor's own rows are a ``ResultSet``; see
``structq.agent`` for the vocabulary.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from structq.errors import PlanError

from .plan import Plan

__all__ = ["StepResult", "PlanResult"]


@dataclass(frozen=True)
class StepResult:
    """What one step returned (or why it did not run)."""

    output_key: str
    source: str
    purpose: str = ""
    index: str | None = None
    query: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    elapsed_ms: float = 0.0
    skipped: str | None = None
    #: The executor's notes on what is not exact about ``rows`` (also in the run's notes).
    notes: tuple[str, ...] = ()
    #: Starting the source's server before the query (``ResultSet.startup_ms``); not in ``elapsed_ms``.
    startup_ms: float = 0.0

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def column_values(self, column: str | None) -> list[Any]:
        """The values of one column: the named one, or the only one (none for a step that
        did not run because its result was provably empty)."""
        if self.skipped is not None:
            return []
        if column is None:
            if len(self.columns) != 1:
                raise PlanError(
                    f"<{self.output_key}> needs a single-column result, but the step returns "
                    f"{len(self.columns)} columns ({', '.join(self.columns)})",
                    hint=f"name the column: <{self.output_key}.{self.columns[0] if self.columns else 'column'}>",
                )
            return list(map(itemgetter(0), self.rows))
        i = _column_index(self.columns, column)
        if i is None:
            raise PlanError(
                f"<{self.output_key}.{column}>: step {self.output_key!r} has no column {column!r}",
                hint=f"its columns: {', '.join(self.columns)}",
            )
        return list(map(itemgetter(i), self.rows))

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of ``structq run --json`` (rows as lists in column order)."""
        return {
            "output_key": self.output_key,
            "source": self.source,
            "index": self.index,
            "purpose": self.purpose,
            "query": self.query,
            "params": self.params,
            "columns": list(self.columns),
            "rows": [list(r) for r in self.rows],
            "row_count": self.row_count,
            "truncated": self.truncated,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "startup_ms": round(self.startup_ms, 3),
            "skipped": self.skipped,
        }


@dataclass
class PlanResult:
    """One run of a plan: every step's result by output key (in plan order), and the notes
    for the answer."""

    plan: Plan
    steps: dict[str, StepResult]
    notes: list[str]
    elapsed_ms: float

    @property
    def final(self) -> StepResult:
        """The last step's result: what the question asked for."""
        return self.steps[self.plan.steps[-1].output_key]

    @property
    def truncated(self) -> bool:
        return any(s.truncated for s in self.steps.values())

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps.values()], "notes": list(self.notes)}


def _column_index(columns: tuple[str, ...], name: str) -> int | None:
    """Where column ``name`` is: spelled exactly, or else the one column spelled the same
    without regard to case (PostgreSQL folds ``sbCustId`` to ``sbcustid``, and a plan's
    reference may be written either way)."""
    if name in columns:
        return columns.index(name)
    folded = [i for i, column in enumerate(columns) if column.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None
