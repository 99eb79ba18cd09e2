"""Part of ``resolve.py``: ``JOIN … USING (…)``, rewritten as ``qualify_columns`` rewrites it.

sqlglot's ``_expand_using`` turns each USING join into an ON condition over named columns and
drops the USING list: ``a JOIN b USING (k)`` becomes ``a JOIN b ON a.k = b.k``, where ``a`` is
the first source before the join that has ``k`` (of a second USING join with several columns,
the ``COALESCE`` of every earlier source that has it). An unqualified ``k`` anywhere in the
select's own clauses then reads ``COALESCE(a.k, b.k)`` (``AS k`` in the select list), every
source that took part in a USING of ``k`` listed in join order. The plan here builds the same
nodes, from the same allowed columns (a denied column does not exist for either path), so the
SQL that runs names every column it joins on.

What it does not model stays on the full path: a star in the select (the USING columns come
first there, in an order each dialect sets), a USING column in HAVING, a semi or anti join, a
USING list item that is not a plain identifier (MySQL reads ``"k"`` as a string), a USING
column one side lacks (``qualify_columns`` reports it), NATURAL joins (``sources.py``), and a
parenthesised join.
"""

from __future__ import annotations

from sqlglot import exp

from .resolution import Resolution
from .select_refs import Unsupported
from .sources import Sources

__all__ = ["plan_using", "using_reference"]


def _column(name: str, alias: str) -> exp.Column:
    """A new column ``alias.name``, as ``exp.column`` spells it for sqlglot."""
    return exp.column(name, table=alias)


def _recorded(node: exp.Expr, sources: Sources, plan: Resolution) -> exp.Expr:
    """``node`` with each of its columns recorded as reading the source it names. (Recorded
    once built: ``exp.func`` and ``eq`` copy their arguments.)"""
    for column in node.find_all(exp.Column):
        plan.columns[id(column)] = (column, None, sources.by_alias[column.table][0])
    return node


def plan_using(select: exp.Select, sources: Sources, plan: Resolution) -> dict[str, list[str]]:
    """Plan the ON condition of each USING join of ``select`` (``plan.joins``); the USING
    columns, each with the sources (aliases, in join order) its unqualified name coalesces."""
    joins = select.args.get("joins")
    if not joins or not any(join.args.get("using") for join in joins):
        return {}
    if select.is_star:
        raise Unsupported("a star over a USING join")
    from_ = select.args.get("from_")
    if from_ is None or from_.this.args.get("joins") or any(join.this.args.get("joins") for join in joins):
        raise Unsupported("a parenthesised join")
    ordered = [from_.this.alias_or_name]
    first: dict[str, str] = {}  # column name → the first source that has it, of those so far
    for name in sources.by_alias[ordered[0]][1]:
        first.setdefault(name, ordered[0])
    tables: dict[str, dict[str, None]] = {}
    for index, join in enumerate(joins):
        for name in sources.by_alias[ordered[-1]][1]:
            first.setdefault(name, ordered[-1])
        join_table = join.alias_or_name
        ordered.append(join_table)
        using = join.args.get("using")
        if not using:
            continue
        if join.args.get("on") or join.method or join.is_semi_or_anti_join:
            raise Unsupported("a USING join with a condition, a method or a semi / anti kind")
        joined = sources.by_alias[join_table][1]
        conditions = []
        for identifier in using:
            if not isinstance(identifier, exp.Identifier):
                raise Unsupported("a USING item that is not an identifier")
            name = identifier.name
            table = first.get(name)
            if table is None or name not in joined:
                raise Unsupported("a USING column one side lacks")
            lhs: exp.Expr
            if index == 0 or len(using) == 1:
                lhs = _column(name, table)
            else:
                having = [alias for alias in ordered[:-1] if name in sources.by_alias[alias][1]]
                if len(having) > 1:
                    lhs = exp.func("coalesce", *(_column(name, alias) for alias in having))
                else:
                    lhs = _column(name, table)
            conditions.append(lhs.eq(_column(name, join_table)))
            owners = tables.setdefault(name, {})
            owners.setdefault(table)
            owners.setdefault(join_table)
        plan.joins.append((join, _recorded(exp.and_(*conditions, copy=False), sources, plan)))
    return {name: list(owners) for name, owners in tables.items()}


def using_reference(column: exp.Column, aliases: list[str], sources: Sources, plan: Resolution) -> exp.Expr:
    """What an unqualified USING column becomes: the ``COALESCE`` of the sources that joined
    on it, named after it as a select item (``plan.replacements``)."""
    name = column.name
    replacement: exp.Expr = exp.func("coalesce", *(_column(name, alias) for alias in aliases))
    if isinstance(column.parent, exp.Select):
        replacement = exp.alias_(replacement, alias=name, copy=False)
    plan.replacements.append((column, _recorded(replacement, sources, plan)))
    return replacement
