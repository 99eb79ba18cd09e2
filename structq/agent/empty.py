"""When an empty input provably makes a step's result empty (so the step need not run).

Skipping a step whose input is empty saves a pointless query, but only where the answer is
the same: ``NOT IN (<k>)`` over an empty ``k`` keeps every row, and ``COUNT(*) … WHERE x IN
(<k>)`` is one row holding 0. A step is provably empty when a reference to the empty step is

- SQL: a top-level conjunct ``col IN (<k>)`` / ``col IN (<k.column>)`` of the WHERE clause of
  the outermost SELECT (not a set operation), and that SELECT makes no row out of nothing:
  no aggregate without GROUP BY, no HAVING without GROUP BY, no ROLLUP/CUBE/GROUPING SETS;
- search: a ``terms`` filter on the reference at the top of the query (itself, or an entry of
  the top ``bool``'s ``filter``/``must``), in a body without aggregations.

Everything else runs with the empty list bound. Pure functions of the step's query.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from structq.capabilities.model import ExampleStep
from structq.capabilities.references import Reference, replace_references, value_reference

__all__ = ["empty_when_input_empty"]

_AGGREGATIONS = ("aggs", "aggregations")


def empty_when_input_empty(step: ExampleStep, key: str, dialect: str) -> bool:
    """Whether ``step`` returns no rows whenever step ``key`` returned none."""
    if isinstance(step.query, str):
        return key in _sql_emptied_by(step.query, dialect)
    return _body_emptied_by(step.query, key)


# --- SQL -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _sql_emptied_by(sql: str, dialect: str) -> frozenset[str]:
    """The step keys whose emptiness empties ``sql``'s result (see the module docstring)."""
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import ParseError, TokenError

    keys: list[str] = []

    def placeholder(reference: Reference) -> str:
        keys.append(reference.key)
        return f" :structq_ref_{len(keys) - 1} "

    try:
        statements = [s for s in Dialect.get_or_raise(dialect).parse(replace_references(sql, dialect, placeholder)) if s]
    except (ParseError, TokenError):
        return frozenset()
    if len(statements) != 1 or not isinstance(statements[0], exp.Select) or _makes_a_row(statements[0]):
        return frozenset()
    where = statements[0].args.get("where")
    if where is None:
        return frozenset()
    emptied = set()
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        conjunct = conjunct.unnest()
        if isinstance(conjunct, exp.In) and not conjunct.args.get("query") and len(conjunct.expressions) == 1:
            only = conjunct.expressions[0].unnest()
            if isinstance(only, exp.Placeholder) and only.name.startswith("structq_ref_"):
                emptied.add(keys[int(only.name.rsplit("_", 1)[1])])
    return frozenset(emptied)


def _makes_a_row(select: Any) -> bool:
    """Whether the SELECT can return a row with no input rows (an aggregate without groups)."""
    from sqlglot import exp

    group = select.args.get("group")
    if group is not None:
        return any(group.args.get(kind) for kind in ("rollup", "cube", "grouping_sets")) or \
            group.find(exp.Rollup, exp.Cube, exp.GroupingSets) is not None
    if select.args.get("having") is not None:
        return True
    for projection in select.expressions:
        for agg in projection.find_all(exp.AggFunc):
            if not _inside(agg, (exp.Window, exp.Subquery, exp.Select), stop=select):
                return True
    return False


def _inside(node: Any, kinds: tuple[type, ...], stop: Any) -> bool:
    """Whether a node of ``kinds`` lies between ``node`` and its ancestor ``stop``."""
    parent = node.parent
    while parent is not None and parent is not stop:
        if isinstance(parent, kinds):
            return True
        parent = parent.parent
    return False


# --- search ----------------------------------------------------------------------------------


def _body_emptied_by(body: Mapping[str, Any], key: str) -> bool:
    if not isinstance(body, Mapping) or any(name in body for name in _AGGREGATIONS):
        return False
    query = body.get("query")
    if not isinstance(query, Mapping):
        return False
    clauses: list[Any] = [query]
    boolean = query.get("bool")
    if len(query) == 1 and isinstance(boolean, Mapping):
        for occurrence in ("filter", "must"):
            found = boolean.get(occurrence)
            clauses += found if isinstance(found, list) else [found]
    return any(_terms_on(clause, key) for clause in clauses)


def _terms_on(clause: Any, key: str) -> bool:
    """``{"terms": {field: "<key…>"}}``: matches nothing when the reference is empty."""
    if not isinstance(clause, Mapping) or len(clause) != 1 or not isinstance(clause.get("terms"), Mapping):
        return False
    values = [v for name, v in clause["terms"].items() if name != "boost"]
    return len(values) == 1 and (ref := value_reference(values[0])) is not None and ref.key == key
