"""Part of ``resolve.py``: what the resolver decided (``Resolution``), and writing it into the tree.

Planning decides everything first and touches nothing, so that giving up leaves the tree as
parsed; ``apply`` then writes the plan: USING joins as ON conditions (``using.py``),
qualifiers, copies of select expressions for GROUP BY and HAVING references, projections
named as ``qualify_columns`` names them (``qualify_outputs``), and ORDER BY terms that name an
output.
"""

from __future__ import annotations

from collections import Counter

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.optimizer.simplify import simplify_parens

from .select_refs import copy_resolved

__all__ = ["Resolution", "apply", "output_name"]


class Resolution:
    """What the resolver decided; applied to the tree by ``apply``.

    A plain class with slots (one is made per check; its fields built as literals cost less
    than a dataclass's factories)."""

    __slots__ = ("columns", "outputs", "projections", "positions", "created", "copies", "select_positions",
                 "scalar_positions", "joins", "replacements", "renamed", "rewrote")

    def __init__(self) -> None:
        #: ``id(column)`` → the column, the qualifier to write (None: keep the column's own)
        #: and the source node.
        self.columns: dict[int, tuple[exp.Column, exp.Identifier | None, object]] = {}
        #: Output names of each resolved query scope, by ``id(scope)``.
        self.outputs: dict[int, list[str]] = {}
        #: Per select: its expanded projections (stars replaced), in order.
        self.projections: list[tuple[exp.Select, list[exp.Expr]]] = []
        #: Positional ORDER BY terms of set operations: the literal and the output it names.
        self.positions: list[tuple[exp.Expr, str]] = []
        #: The unqualified columns ``apply`` wrote (references to output names).
        self.created: list[exp.Column] = []
        #: GROUP BY terms that name a select expression (by alias or position), each with the
        #: expression whose copy replaces it (``select_refs.py``). (The flag: wrap the copy in
        #: parentheses, then drop them where they change nothing, as ``qualify_columns`` does
        #: for a name but not for a position.)
        self.copies: list[tuple[exp.Expr, exp.Expr, bool]] = []
        #: A select's positional ORDER BY terms: the literal, the select and the output's index.
        self.select_positions: list[tuple[exp.Literal, exp.Select, int]] = []
        #: Per select (``id()``) with unaliased scalar subqueries in its (expanded) list:
        #: their positions, which a set operation's ORDER BY must not name.
        self.scalar_positions: dict[int, list[int]] = {}
        #: USING joins and the ON condition each becomes (``using.py``).
        self.joins: list[tuple[exp.Join, exp.Expr]] = []
        #: Unqualified USING columns and the ``COALESCE`` that replaces each (``using.py``).
        self.replacements: list[tuple[exp.Column, exp.Expr]] = []
        #: Selects whose outputs a CTE column list renames, with the list (``recursive.py``).
        self.renamed: list[tuple[exp.Select, list[str]]] = []
        #: Set by ``apply``: whether it put expressions into the tree other than columns,
        #: aliases and literals (copies, USING conditions) or took some out (an ORDER BY term
        #: written as its output's name) — what ``Check.shared_seen`` no longer lists.
        self.rewrote = False


def output_name(projection: exp.Expr, index: int) -> str:
    return projection.output_name or f"_col_{index}"


def _qualified_output(projection: exp.Expr, index: int) -> exp.Expr:
    """``qualify_outputs``: every projection named, a column by its own name. (A plain column,
    the commonest projection not named yet, is told apart first, by its type: this runs once
    per projection of every select.)"""
    kind = type(projection)
    if kind is exp.Column and not projection.is_star:
        quoted = projection.this.quoted  # a quoted column keeps its quotes in the alias
    elif isinstance(projection, exp.Alias) or projection.is_star:
        return projection
    elif isinstance(projection, exp.Subquery):
        # A scalar subquery is named by an alias of its own, as ``qualify_outputs`` names it.
        if not projection.output_name:
            projection.set("alias", exp.TableAlias(this=exp.to_identifier(f"_col_{index}")))
        return projection
    else:
        source = projection.unnest()
        quoted = isinstance(source, exp.Column) and source.this.quoted
    name = output_name(projection, index)
    force = True if quoted else None  # any other name is quoted only where it must be (``to_identifier``)
    if "alias" in kind.arg_types:
        return exp.alias_(projection, name, quoted=force, copy=False)  # a node that holds its own alias
    # What ``exp.alias_`` builds for any other node, without its parsing and dispatch (half its
    # cost, paid once per projection of every select).
    return exp.Alias(this=projection, alias=exp.to_identifier(name, quoted=force))


def apply(plan: Resolution, dialect: Dialect | None) -> None:
    plan.rewrote = bool(plan.joins or plan.replacements or plan.copies)
    for join, condition in plan.joins:
        join.set("using", None)
        join.set("on", condition)
    for column, replacement in plan.replacements:
        column.replace(replacement)
    for column, qualifier, _ in plan.columns.values():
        if qualifier is not None:
            # A fresh node per column; an identifier holds only strings and flags, so this is
            # what ``qualifier.copy()`` makes, without its generic deep copy.
            column.set("table", exp.Identifier(**qualifier.args))
    for term, expression, wrap in plan.copies:
        copy = copy_resolved(expression, plan.columns)
        if wrap:
            node = term.replace(exp.paren(copy, copy=False))
            simplified = simplify_parens(node, dialect)
            if simplified is not node:
                node.replace(simplified)
        else:
            term.replace(copy)
    renamed = {id(select): names for select, names in plan.renamed} if plan.renamed else None
    for select, projections in plan.projections:
        # An alias (most projections of a resolved select, every column a star stands for) stays
        # as it is: no call for it.
        select.set("expressions", [p if type(p) is exp.Alias else _qualified_output(p, i) for i, p in enumerate(projections)])
        if renamed is not None and id(select) in renamed:
            for projection, name in zip(select.expressions, renamed[id(select)]):
                if name:  # ``qualify_outputs``: the column list's name over the projection's alias
                    projection.set("alias", exp.to_identifier(name))
        if select.args.get("group"):  # most selects have none: no call
            _alias_grouped_order(select, plan)
    for literal, select, index in plan.select_positions:
        reference = exp.column(select.expressions[index].args["alias"].copy())
        literal.replace(reference)
        plan.created.append(reference)
    for literal, name in plan.positions:
        reference = exp.column(name)
        literal.replace(reference)
        plan.created.append(reference)


def _alias_grouped_order(select: exp.Select, plan: Resolution) -> None:
    """In a select with GROUP BY (the caller's test), an ORDER BY term equal to a select
    expression becomes its alias (and the columns of the term it replaces are no longer the
    query's)."""
    order = select.args.get("order")
    if order is None:
        return
    unique = {name for name, count in Counter(select.named_selects).items() if count == 1}
    selects = {s.this: s for s in select.selects if s.alias_or_name in unique}
    for ordered in order.expressions:
        replacement = None if ordered.this.is_int else selects.get(ordered.this)
        if replacement is not None:
            reference = exp.column(replacement.alias_or_name)
            for column in ordered.this.find_all(exp.Column):
                plan.columns.pop(id(column), None)
            ordered.this.replace(reference)
            plan.created.append(reference)
            plan.rewrote = True
