"""A literal compared with an enum column (one with ``values``) is one of its legal values.

A model that writes ``performance_grade = '优秀'`` where the column stores ``'A'`` gets an
empty result and a confident wrong answer; refusing with the legal values and their meanings
lets the planner repair the query. Comparisons checked: ``=``, ``!=``/``<>``, ``<=>``,
``IN (…)`` and their negations (``NOT IN`` wraps an ``IN``). Runs after qualification, which
mapped each column to the table it reads in its own scope (``resolution/scopes.py``): a reused alias
cannot point the check at another table's column.

Only values a person wrote or accepted are enforced: a ``draft`` column's ``values`` came from
profiling the data (``structq sync --profile-values``) and are suggestions — a weekday with no
rows yet is still a legal weekday. Where the database compares text case-insensitively (MySQL
and MariaDB's default collations, SQL Server) a literal that differs only in case is legal; where
it does not, it is refused with the stored spelling in the hint, which is what the repair needs.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from structq.capabilities import Column
from structq.capabilities.hints import listing

from ..context import Check

__all__ = ["check_enum_literals", "CASE_INSENSITIVE_DIALECTS"]

#: sqlglot dialects whose default text comparison ignores case (their subclasses too).
CASE_INSENSITIVE_DIALECTS = ("mysql", "tsql")


def _enum_column(check: Check, node: exp.Expr) -> Column | None:
    if not isinstance(node, exp.Column):
        return None
    found = check.column_tables.get(id(node))
    column = found[1].column(node.name) if found else None
    return column if column is not None and column.values and not column.draft else None


def _literals(node: exp.Expr) -> list[exp.Literal]:
    if isinstance(node, exp.In):
        return [e for e in node.expressions if isinstance(e, exp.Literal)]
    return [e for e in (node.this, node.expression) if isinstance(e, exp.Literal)]


def _legal(column: Column, text: str) -> str:
    """The column's values with their meanings; of many, those most like ``text`` (``listing``)."""
    return listing((f"'{key}' ({meaning})" for key, meaning in (column.values or {}).items()), near=text)


def _stored_spelling(column: Column, text: str) -> str | None:
    folded = text.casefold()
    return next((key for key in column.values or {} if key.casefold() == folded), None)


def check_enum_literals(check: Check) -> None:
    """Refuse a literal that is not one of the compared enum column's accepted ``values``."""
    if not check.comparisons:
        return
    enum_tables = check.names.enum_tables
    if not enum_tables or not any(t.name.lower() in enum_tables for _, t in check.reads):
        return
    ignores_case = any(isinstance(check.dialect, type(Dialect.get_or_raise(d))) for d in CASE_INSENSITIVE_DIALECTS)
    for node in check.comparisons:
        sides = [node.this] if isinstance(node, exp.In) else [node.this, node.expression]
        column = next((c for c in (_enum_column(check, s) for s in sides) if c), None)
        if column is None:
            continue
        for literal in _literals(node):
            if literal.is_string or literal.is_int:
                text = str(literal.this)
                if text in column.values:  # type: ignore[operator]
                    continue
                stored = _stored_spelling(column, text)
                if stored is not None and ignores_case:
                    continue
                hint = (f"the stored spelling is '{stored}'; " if stored is not None else "")
                raise check.fail(
                    "enum_value",
                    f"{literal.sql(check.dialect)} is not a value of column {column.name!r}",
                    f"{hint}{column.name} holds only: {_legal(column, text)}",
                )
