"""What the data said: the observation a plan's run gives the planner for a revised plan.

A plan can be valid and still ask the wrong thing: ``project_name = '星火项目'`` when the data
says ``'星火'``. After a run, an empty step (no rows where the plan expected some, so its
dependents did not run either, or the final result is empty) yields an observation: per step
its row count, columns, truncation and whether it ran; and for each text literal an empty
SQL step compares a column with (``=`` or ``IN``), the closest values stored in that column.

The stored values come from a bounded ``SELECT DISTINCT column FROM table LIMIT n`` that goes
through the sandbox like every other query: denied columns are refused there (and skipped
here before asking), row filters apply with the caller's variables, so a tenant sees only
its own values. Columns with ``values:`` in the manifest are skipped: the sandbox already
holds their literals to the declared codes. Stored values are row contents, so they reach the
model only when row contents would anyway (``with_values``; never with ``--no-answer``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structq.errors import StructqError

from .plan import Step

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest

    from .engine import Engine, PlanResult

__all__ = ["Observation", "Unmatched", "observe", "step_summaries", "legitimately_empty", "nearest", "edit_distance",
           "DISTINCT_LIMIT", "CLOSEST"]

#: Distinct stored values read per column, and how many of the closest are shown.
DISTINCT_LIMIT = 500
CLOSEST = 5


@dataclass(frozen=True)
class Unmatched:
    """A text literal an empty step compared a column with, and the closest stored values."""

    step: str
    table: str
    column: str
    literal: str
    closest: tuple[str, ...] = ()

    def describe(self, with_values: bool = True) -> str:
        where = f"step {self.step!r}: {self.table}.{self.column} = {self.literal!r} matched nothing"
        if not self.closest or not with_values:
            return where
        return f"{where}; closest stored values: {', '.join(repr(v) for v in self.closest)}"


@dataclass(frozen=True)
class Observation:
    """Why a revised plan may help, as text for the planner and data for the trace."""

    empty: tuple[str, ...]
    steps: tuple[dict[str, Any], ...]
    unmatched: tuple[Unmatched, ...] = field(default=())

    def text(self) -> str:
        lines = ["Per step:"]
        for s in self.steps:
            state = f"not run ({s['skipped']})" if s["skipped"] else \
                f"{s['row_count']} rows{', truncated' if s['truncated'] else ''}, columns {s['columns']}"
            lines.append(f"- {s['output_key']}: {state}")
        lines += [f"- {u.describe()}" for u in self.unmatched]
        return "\n".join(lines)

    def to_dict(self, with_values: bool = True) -> dict[str, Any]:
        """The trace's shape; ``with_values=False`` leaves the stored values (row contents) out."""
        return {"empty": list(self.empty), "steps": list(self.steps),
                "unmatched": [u.describe(with_values) for u in self.unmatched]}


def _nothing(result: Any) -> bool:
    """No rows, or the one row an aggregate gives over no rows (every value NULL or 0)."""
    if result.row_count == 0:
        return True
    return result.row_count == 1 and all(v is None or v == 0 for v in result.rows[0])


def empty_steps(run: "PlanResult", capabilities: "CapabilitySet") -> list[str]:
    """Steps that ran and found nothing, when that matters: the final result, or an input
    of later steps."""
    consumed = run.plan.consumed(capabilities)
    last = run.plan.steps[-1].output_key
    return [key for key, r in run.steps.items()
            if r.skipped is None and _nothing(r) and (key == last or key in consumed)]


def observe(run: "PlanResult", engine: "Engine", *, vars: Mapping[str, Any],
            with_values: bool) -> Observation | None:
    """The observation of ``run``, or None when nothing came back empty.

    A single row of NULL/0 aggregates is observed only when one of its text literals matches no
    stored value (otherwise the zero is the answer); a step with no rows likewise, unless the
    emptiness is the answer (``legitimately_empty``). Stored values are read to decide that
    even when they may not be shown (``with_values=False``)."""
    if not run.plan.steps:
        return None
    empty: list[str] = []
    unmatched: list[Unmatched] = []
    for key in empty_steps(run, engine.capabilities):
        step = run.plan.step(key)
        matched, found = _literals(step, engine, vars, with_values, run.steps[key].row_count > 0)
        if found or (run.steps[key].row_count == 0 and not legitimately_empty(step, matched, engine.capabilities)):
            empty.append(key)
            unmatched += found
    if not empty:
        return None
    return Observation(tuple(empty), step_summaries(run), tuple(unmatched))


def step_summaries(run: "PlanResult") -> tuple[dict[str, Any], ...]:
    """Per step that has run: row count, columns, truncation, why it did not run — no rows."""
    return tuple({"output_key": k, "row_count": r.row_count, "columns": list(r.columns),
                  "truncated": r.truncated, "skipped": r.skipped} for k, r in run.steps.items())


def _literals(step: Step, engine: "Engine", vars: Mapping[str, Any], with_values: bool,
              had_rows: bool) -> tuple[int, list[Unmatched]]:
    """How many of the step's free-text literals a stored value equals, and the ones none does.
    When the column holds more distinct values than were read, absence proves nothing: such a
    literal counts as unmatched only for a step that returned no rows at all."""
    manifest = engine.capabilities.get(step.source)
    if manifest is None or manifest.query_dialect is None or not isinstance(step.query, str):
        return 0, []  # a built-in source's tables are earlier results; a search body has no SQL literals
    matched, unmatched = 0, []
    for table, column, literal in text_literals(step.query, manifest):
        stored = stored_values(engine, step, table, column, vars)
        if literal in stored:
            matched += 1
        elif not (had_rows and len(stored) >= DISTINCT_LIMIT):
            unmatched.append(Unmatched(step.output_key, table, column, literal,
                                       tuple(nearest(literal, stored)) if with_values else ()))
    return matched, unmatched


def legitimately_empty(step: Step, matched: int, capabilities: "CapabilitySet") -> bool:
    """Whether a step with no rows (and no unmatched literal) found the true answer, so a
    revised plan cannot help: its text literals matched stored values ("星火" is a project; no
    member joined after 2099), or it is an aggregate over a filter (nothing was sold). Only SQL
    steps of a declared source are judged; a search body is always observed."""
    manifest = capabilities.get(step.source)
    if manifest is None or manifest.query_dialect is None or not isinstance(step.query, str):
        return False
    return matched > 0 or _aggregates(step.query, manifest.sql_dialect)


def _aggregates(sql: str, dialect: str) -> bool:
    """Whether the outermost SELECT groups or aggregates (unparsable SQL: no)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.ParseError:
        return False
    if not isinstance(tree, exp.Select):
        return False
    return tree.args.get("group") is not None or any(
        projection.find(exp.AggFunc) is not None for projection in tree.expressions)


def text_literals(sql: str, manifest: "Manifest") -> Iterator[tuple[str, str, str]]:
    """``(table, column, literal)`` for each ``column = 'text'`` / ``column IN ('text', …)``
    on an allowed text column without declared ``values``. Unparsable SQL yields nothing
    (it ran, so this is rare; the observation then has counts only)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=manifest.sql_dialect)
    except sqlglot.errors.ParseError:
        return
    aliases = {t.alias_or_name.lower(): t.name for t in tree.find_all(exp.Table)}
    seen: set[tuple[str, str, str]] = set()
    for node in tree.find_all(exp.EQ, exp.In):
        if isinstance(node, exp.EQ):
            pairs = [(node.left, node.right), (node.right, node.left)]
            candidates = [(c, [lit]) for c, lit in pairs if isinstance(c, exp.Column)]
        else:
            candidates = [(node.this, node.expressions)] if isinstance(node.this, exp.Column) else []
        for column_node, literals in candidates:
            texts = [lit.this for lit in literals if isinstance(lit, exp.Literal) and lit.is_string]
            target = _text_column(column_node, aliases, manifest)
            if target is None:
                continue
            for text in texts:
                item = (*target, text)
                if item not in seen:
                    seen.add(item)
                    yield item


def _text_column(node: Any, aliases: Mapping[str, str], manifest: "Manifest") -> tuple[str, str] | None:
    """The declared (table, column) a column reference names, if it is an allowed free-text column."""
    qualifier = node.table.lower()
    tables = [aliases[qualifier]] if qualifier in aliases else ([] if qualifier else list(dict.fromkeys(aliases.values())))
    for name in tables:
        table = manifest.table(name)
        column = table.column(node.name) if table else None
        if column is not None and table is not None:
            if column.type != "text" or column.denied or column.values:
                return None
            return table.name, column.name
    return None


def stored_values(engine: "Engine", step: Step, table: str, column: str, vars: Mapping[str, Any]) -> list[str]:
    """Up to ``DISTINCT_LIMIT`` distinct values of ``table.column``, read through the sandbox
    (row filters with ``vars``; a refusal or a failure gives none)."""
    from sqlglot import exp

    manifest = engine.capabilities[step.source]
    query = (exp.select(exp.column(column, quoted=True)).distinct()
             .from_(exp.table_(table, quoted=True)).limit(DISTINCT_LIMIT).sql(dialect=manifest.sql_dialect))
    probe = Step(output_key="stored_values", source=step.source, query=query)
    try:
        safe = engine.prepare(probe, {}, vars=vars, max_rows=DISTINCT_LIMIT)
        result = engine.fetch(probe, safe, {})
    except StructqError:
        return []
    return [str(row[0]) for row in result.rows if row and row[0] is not None]


def nearest(literal: str, stored: list[str], limit: int = CLOSEST) -> list[str]:
    """The stored values closest to ``literal``: containment either way first, then the fewest
    edits in order (``edit_distance``), so the same characters in another order are far apart
    ('火星' is not '星火'). A floor keeps unrelated values out: better no suggestion than a
    misleading one."""
    wanted = literal.lower()

    def score(value: str) -> float:
        candidate = value.lower()
        if sorted(candidate) == sorted(wanted):
            return 0.0  # an anagram names something else
        contained = 1.0 if wanted and candidate and (wanted in candidate or candidate in wanted) else 0.0
        return contained + 1.0 - edit_distance(wanted, candidate) / max(len(wanted), len(candidate), 1)

    scored = sorted(((score(value), value) for value in set(stored) if value != literal),
                    key=lambda item: (-item[0], item[1]))
    return [value for s, value in scored[:limit] if s >= NEAREST_FLOOR]


#: The least score (containment 1 + similarity 0–1) a suggested stored value needs.
NEAREST_FLOOR = 0.4


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, in order."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]
