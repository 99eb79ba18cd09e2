"""The SQL sandbox: a query and a manifest in, a checked and rewritten ``SafeQuery`` out.

Like sqlglot's optimizer, the sandbox is a fixed sequence of small rules: ``rules/`` holds one
module per rule, and ``rules.RULES`` is the one order they run in (its docstring says why).
Each rule reads and updates one ``Check`` (``context.py``). Name resolution — which FROM item
and column each name reads — is the package ``resolution/``, behind the invariant its
docstring states. Beside them, the helpers the rules share: ``context.py`` (the state of one
check), ``dialects.py`` (sqlglot's objects, built once), ``schema.py`` (what a manifest
derives once), ``walk.py`` (one walk for several rules), ``quoting.py`` (names that need
quotes), ``keys.py`` (PostgreSQL's grouping by a primary key, for the second wall) and
``memo.py`` (checks remembered).

Before any parser runs, ``safety/bounds.py`` bounds the text. Every refusal is a
``SandboxViolation`` with a stable ``code`` (``CODES``); a reference problem is a ``PlanError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from structq.capabilities import Manifest
from structq.errors import SandboxViolation

from ..bounds import refusal_for
from ..query import SafeQuery
from . import memo
from .context import Check
from .dialects import dialect
from .rules import RULES

__all__ = ["check_sql", "RULES", "CODES"]

#: Every ``SandboxViolation.code`` this sandbox raises.
CODES = (
    "parse_error",
    "multiple_statements",
    "unsupported",
    "not_a_query",
    "write",
    "locking",
    "placeholder",
    "unknown_table",
    "unknown_column",
    "ambiguous_column",
    "denied_column",
    "denied_function",
    "string_size",
    "pattern",
    "enum_value",
    "missing_variable",
    "row_filter",
    "too_large",
    "too_complex",
    "invalid_text",
)


def check_sql(
    query: str,
    manifest: Manifest,
    *,
    params: Mapping[str, Sequence[Any]] | None = None,
    vars: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    slots: Mapping[str, Any] | None = None,
) -> SafeQuery:
    """Check ``query`` against ``manifest`` and return the rewritten query that may run.

    ``params`` maps each reference's text (``"members"``, ``"members.employee_id"``) to the
    values ``Engine`` resolved; ``vars`` holds the caller's row-filter variables; ``max_rows``
    defaults to ``manifest.limits.max_rows`` (``Engine`` passes ``max_intermediate_rows`` for a
    step whose result feeds later steps). ``slots`` holds a template plan's parameter values
    (``:name`` in the text), bound like references, never spliced.

    Raises ``SandboxViolation`` when the query may not run and ``PlanError`` when a reference
    cannot be bound, and nothing else: a query that makes a rule fail any other way is refused
    (``bounds.refusal_for``). A query that passed is remembered (``memo.py``): the same query
    on the same manifest, with values of the same shape, is not checked again, only bound again.
    """
    if manifest.kind != "sql":
        raise SandboxViolation("not_a_query", f"source {manifest.source!r} is a {manifest.kind} source, not SQL",
                               hint="send a search request body to a search source", source=manifest.source)
    rows = manifest.limits.max_rows if max_rows is None else max_rows
    references, variables, slot_values = params or {}, vars or {}, slots or {}
    try:
        return memo.checked(query, manifest, rows, references, variables, slot_values,
                            lambda: _check(query, manifest, rows, references, variables, slot_values))
    except Exception as exc:  # noqa: BLE001 - nothing but a refusal leaves the sandbox (bounds.py)
        refusal = refusal_for(exc, manifest)
        if refusal is exc:
            raise
        raise refusal from None


def _check(query: str, manifest: Manifest, rows: int, references: Mapping[str, Sequence[Any]],
           variables: Mapping[str, Any], slots: Mapping[str, Any]) -> tuple[SafeQuery, Check]:
    """Every rule over ``query``: the checked query, and the check's state."""
    name = manifest.sql_dialect
    check = Check(
        text=query,
        manifest=manifest,
        dialect=dialect(name),
        sql_dialect=name,
        references=references,
        variables=variables,
        max_rows=rows,
        slots=slots,
    )
    for rule in RULES:
        rule(check)
    safe = SafeQuery.built(
        source=manifest.source,
        kind="sql",
        limit=rows + 1,
        max_rows=rows,
        text=check.sql,
        dialect=name,
        params=check.params,
        expanding=frozenset(check.expanding),
        switches=dict(check.switches),
        tables=tuple(sorted({table.name for _, table in check.reads})),
        columns=tuple(sorted(check.read_columns)),
        names=check.output_names,
    )
    return safe, check
