"""The SQL sandbox: a query and a manifest in, a checked and rewritten ``SafeQuery`` out.

Like sqlglot's optimizer, the sandbox is a fixed sequence of small passes (``RULES``), each in
its own module; each reads and updates one ``Check`` (see ``context.py``):

1. ``parse``                 size and nesting bounded (``bounds.py``: before any parser
                              recurses); exactly one statement; references become placeholders
   ``record_output_names``   the result columns' names as written (``names.py``; a star's
                              columns are named once ``check_columns`` expanded it)
2. ``check_statement_kind``  a read-only query, with no write/DDL/command/lock/INTO anywhere
3. ``reject_placeholders``   only the sandbox binds values
4. ``resolve_tables``        every real table declared; no qualifier but the manifest's schema
5. ``read_double_quoted_strings``  SQLite's ``"x"`` that can only be a string becomes ``'x'``
6. ``check_columns``         denied columns nowhere; a name that is also an output alias resolves
                              as the engine resolves it (``engine_names.py``: the first wall);
                              every column resolves (sqlglot's ``qualify_columns``); stars
                              expanded; no column read unnamed (``implicit.py``: whole rows, NATURAL)
7. ``check_functions``       per-dialect allowlist plus the manifest's ``functions``
8. ``check_types``           cast targets are value types (no ``regclass``: catalogs)
9. ``check_sizes``           every count and width a string function is given is a small number
   ``check_growth``          strings built from literals stay small; calls multiply data values by
                              at most ``MAX_GROWTH``; no compounding growth in recursive CTEs
   ``check_patterns``        LIKE / GLOB / regular-expression patterns are short literals, never
                              matched against aggregated text
10. ``check_enum_literals``  a literal compared with an enum column is one of its values
11. ``confine_reads``        every read of a declared table goes through a derived table of its
                              allowed columns (and its row filter): the second wall; on
                              PostgreSQL a GROUP BY of a primary key first also lists the
                              columns that depend on it (``keys.py``)
12. ``bind_references``      ``<key>`` / ``<key.column>`` as list or scalar parameters
13. ``enforce_limit``        the outermost result limited to ``max_rows + 1``
14. ``generate``             SQL regenerated from the tree, ``:name`` placeholders, every name
                              quoted that needs it (``quoting.py``)

The order matters: checks run on the tree as written (after qualification), rewrites after
every check has passed, generation last. Every refusal is a ``SandboxViolation`` with a stable
``code``; a reference problem is a ``PlanError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from structq.capabilities import Manifest
from structq.errors import SandboxViolation

from ..bounds import refusal_for
from ..query import SafeQuery
from . import memo
from .calls import check_functions
from .columns import check_columns
from .confine import confine_reads
from .context import Check
from .dialects import dialect
from .enums import check_enum_literals
from .generate import generate
from .growth import check_growth
from .limit import enforce_limit
from .names import record_output_names
from .parse import parse
from .patterns import check_patterns
from .references import bind_references
from .sizes import check_sizes
from .statement import check_statement_kind, reject_placeholders
from .strings import read_double_quoted_strings
from .tables import resolve_tables
from .types import check_types

__all__ = ["check_sql", "RULES", "CODES"]

RULES: tuple[Callable[[Check], None], ...] = (
    parse,
    record_output_names,
    check_statement_kind,
    reject_placeholders,
    resolve_tables,
    read_double_quoted_strings,
    check_columns,
    check_functions,
    check_types,
    check_sizes,
    check_growth,
    check_patterns,
    check_enum_literals,
    confine_reads,
    bind_references,
    enforce_limit,
    generate,
)

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
    source: Manifest,
    *,
    params: Mapping[str, Sequence[Any]] | None = None,
    vars: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    slots: Mapping[str, Any] | None = None,
) -> SafeQuery:
    """Check ``query`` against ``source`` and return the rewritten query that may run.

    ``params`` maps each reference's text (``"members"``, ``"members.employee_id"``) to the
    values the engine resolved; ``vars`` holds the caller's row-filter variables; ``max_rows``
    defaults to ``source.limits.max_rows`` (the engine passes ``max_intermediate_rows`` for a
    step whose result feeds later steps). ``slots`` holds a template plan's parameter values
    (``:name`` in the text), bound like references, never spliced.

    Raises ``SandboxViolation`` when the query may not run and ``PlanError`` when a reference
    cannot be bound, and nothing else: a query that makes a pass fail any other way is refused
    (``bounds.refusal_for``). A query that passed is remembered (``memo.py``): the same query on the
    same manifest, with values of the same shape, is not checked again, only bound again.
    """
    if source.kind != "sql":
        raise SandboxViolation("not_a_query", f"source {source.source!r} is a {source.kind} source, not SQL",
                               hint="send a search request body to a search source", source=source.source)
    rows = source.limits.max_rows if max_rows is None else max_rows
    references, variables, slot_values = params or {}, vars or {}, slots or {}
    try:
        return memo.checked(query, source, rows, references, variables, slot_values,
                            lambda: _check(query, source, rows, references, variables, slot_values))
    except Exception as exc:  # noqa: BLE001 - nothing but a refusal leaves the sandbox (bounds.py)
        refusal = refusal_for(exc, source)
        if refusal is exc:
            raise
        raise refusal from None


def _check(query: str, source: Manifest, rows: int, references: Mapping[str, Sequence[Any]],
           variables: Mapping[str, Any], slots: Mapping[str, Any]) -> tuple[SafeQuery, Check]:
    """Every rule over ``query``: the checked query, and the check's state."""
    name = source.sql_dialect
    check = Check(
        text=query,
        manifest=source,
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
        source=source.source,
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
