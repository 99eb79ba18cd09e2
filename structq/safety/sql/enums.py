"""Pass 6: a literal compared with an enum column (one with ``values``) must be a legal value.

A model that writes ``performance_grade = '优秀'`` where the column stores ``'A'`` gets an
empty result and a confident wrong answer; refusing with the legal values and their meanings
lets the planner repair the query. Comparisons checked: ``=``, ``!=``/``<>``, ``<=>``,
``IN (…)`` and their negations (``NOT IN`` wraps an ``IN``). Runs after qualification, which
mapped each column to the table it reads in its own scope (``scopes.py``): a reused alias
cannot point the check at another table's column.
"""

from __future__ import annotations

from sqlglot import exp

from structq.capabilities import Column

from .context import Check

__all__ = ["check_enum_literals"]


def _enum_column(check: Check, node: exp.Expr) -> Column | None:
    if not isinstance(node, exp.Column):
        return None
    found = check.column_tables.get(id(node))
    column = found[1].column(node.name) if found else None
    return column if column is not None and column.values else None


def _literals(node: exp.Expr) -> list[exp.Literal]:
    if isinstance(node, exp.In):
        return [e for e in node.expressions if isinstance(e, exp.Literal)]
    return [e for e in (node.this, node.expression) if isinstance(e, exp.Literal)]


def _legal(column: Column) -> str:
    return ", ".join(f"'{key}' ({meaning})" for key, meaning in (column.values or {}).items())


def check_enum_literals(check: Check) -> None:
    """Refuse a literal that is not one of the compared enum column's ``values``."""
    if not check.comparisons or not any(c.values for _, t in check.reads for c in t.columns):
        return
    for node in check.comparisons:
        sides = [node.this] if isinstance(node, exp.In) else [node.this, node.expression]
        column = next((c for c in (_enum_column(check, s) for s in sides) if c), None)
        if column is None:
            continue
        for literal in _literals(node):
            if literal.is_string or literal.is_int:
                if str(literal.this) not in column.values:  # type: ignore[operator]
                    raise check.fail(
                        "enum_value",
                        f"{literal.sql(check.dialect)} is not a value of column {column.name!r}",
                        f"{column.name} holds only: {_legal(column)}",
                    )
