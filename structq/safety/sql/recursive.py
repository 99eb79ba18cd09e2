"""Part of ``resolve.py``: the CTEs of ``WITH RECURSIVE``, read as ``qualify_columns`` reads them.

sqlglot's scopes give a CTE of a recursive WITH whose body is a set operation (``WITH RECURSIVE
r AS (base UNION ALL step)``) a source of its own name inside that body: the body's first part
(``base``), whose output names are then the CTE's columns wherever its body reads it
(``_traverse_ctes``). Outside the body the CTE is its whole set operation, as any CTE is. The
plan does the same (``self_source``): a reference from the body's later part reads the first
part's names; one from the first part itself (sqlglot reads the first part's names before they
are settled) is left to the full path.

A CTE's column list (``r(month_start)``) names the outputs of every select of its body, set
operation branches included: ``qualify_outputs`` writes each name over the alias of the
projection at its position (``outer_columns``). A recursive WITH keeps the list as written
(``_pop_table_column_aliases`` skips it); so does the plan, which only renames the outputs
(``renamed_outputs``). That renaming happens before GROUP BY, HAVING and ORDER BY read the
outputs, so a select that is renamed and has any of those is left to the full path, as is
one with an unaliased scalar subquery (named by an alias node of another kind). A column list
in a WITH that is not recursive is popped by ``qualify_columns`` instead: the full path
(``flat.py``).

And in the later parts of a UNION in such a CTE ``_expand_alias_refs`` stops reading the CTE's
column names as select aliases: where the resolver would copy a select alias into GROUP BY or
HAVING there, it gives up (``check_alias_copies``).
"""

from __future__ import annotations

from sqlglot import exp

from .select_refs import Unsupported
from .walk import within

__all__ = ["check_alias_copies", "renamed_outputs", "self_source"]


def self_source(table: exp.Table, cte: exp.CTE) -> exp.Expr:
    """The query whose output names a reference ``table`` to ``cte`` reads (module docstring)."""
    body = cte.this
    with_ = cte.parent
    if not (isinstance(with_, exp.With) and with_.args.get("recursive") and isinstance(body, exp.SetOperation)):
        return body
    if not within(table, body):
        return body
    if not within(table, body.expression):
        raise Unsupported("a recursive CTE read in its own first part")
    return body.this


def _branches(query: exp.Expr) -> list[exp.Select]:
    if isinstance(query, exp.SetOperation):
        return _branches(query.this) + _branches(query.expression)
    if isinstance(query, exp.Select):
        return [query]
    raise Unsupported("a CTE column list over a query that is not a select or set operation")


def renamed_outputs(with_clauses: list[exp.With]) -> dict[int, list[str]]:
    """``id()`` of each select a CTE column list renames → the names, by position ('' for a
    position the list does not reach)."""
    found: dict[int, list[str]] = {}
    for with_ in with_clauses:
        for cte in with_.expressions:
            names = cte.alias_column_names
            if not names:
                continue
            if not with_.args.get("recursive"):
                raise Unsupported("a CTE column list in a WITH that is not recursive")
            for select in _branches(cte.this):
                if any(select.args.get(k) for k in ("group", "having", "order")) or (
                    select.args.get("distinct") and select.args["distinct"].args.get("on")):
                    raise Unsupported("a renamed select with GROUP BY, HAVING, ORDER BY or DISTINCT ON")
                found[id(select)] = names
    return found


def rename(names: list[str], renamed: list[str], projections: list[exp.Expr]) -> list[str]:
    """The output names of a select a column list renames (``qualify_outputs``: the list's
    name where it has one at that position)."""
    if any(isinstance(p, exp.Subquery) for p in projections):
        raise Unsupported("an unaliased scalar subquery in a renamed select")
    return [renamed[i] if i < len(renamed) and renamed[i] else name for i, name in enumerate(names)]


def check_alias_copies(select: exp.Select, copies: list[tuple[exp.Expr, exp.Expr, bool]]) -> None:
    """No select alias is copied (GROUP BY or HAVING by name) in a later part of a UNION
    within a CTE of a recursive WITH: there ``_expand_alias_refs`` drops the aliases that
    share a name with the CTE's columns. (Refused for every alias there, a superset.)"""
    if not any(wrap for _, _, wrap in copies):
        return
    later = False
    child: exp.Expr = select
    node = select.parent
    while node is not None and not isinstance(node, exp.CTE):
        if isinstance(node, exp.Union) and node.expression is child:
            later = True
        child, node = node, node.parent
    if later and node is not None and isinstance(node.parent, exp.With) and node.parent.args.get("recursive"):
        raise Unsupported("a select alias copied in a later part of a UNION in a recursive WITH")
