"""Part of ``resolve.py``: a query of plain selects, split into its selects without scopes.

``traverse_scope`` builds a scope per query node, and each scope walks its whole subtree to
list its columns, sources and subqueries; on a query of two or three small selects (``… EXCEPT
…``, ``WHERE x NOT IN (SELECT …)``, two scalar subqueries) that and the planning over scopes
cost 1.3-2.3× a parse, against ~0.6× for one select planned from its FROM / JOIN tables. Most
multi-select queries of the corpora are *flat*: selects, set operations of them, subqueries in
a select's expressions (WHERE, HAVING, the select list; correlated or not), derived tables and
CTEs (recursive ones and CTE column lists as ``recursive.py`` reads them) — and no column
lists on derived tables. Each select is one scope whose
sources are its own FROM / JOIN tables, derived tables and CTE references, and each column
belongs to the nearest select above it, so the column lists ``parse.scan`` made are split by
walking up from each column (a few parents) instead of down from every scope.

A derived table's or a CTE's columns are the output names of its query, planned (on demand)
before the select that reads it. A qualified column whose qualifier no source of its own select
has names a source of the nearest enclosing select that has one
(``resolve._FlatQuery.outer_source``), as sqlglot looks through the enclosing scopes.
``tests/test_sandbox_resolver.py`` compares the result with ``qualify_columns`` over every
corpus and generated shapes.
"""

from __future__ import annotations

from sqlglot import exp

from .select_refs import Unsupported

__all__ = ["FlatPart", "FlatParts", "flat_parts"]

#: A select or set operation to plan, and the columns whose nearest select (or set operation)
#: it is.
FlatPart = tuple[exp.Select | exp.SetOperation, list[exp.Column]]
#: The parts of a query by ``id()`` of their node, inner queries first (so that a set
#: operation's branches precede it): what the planner looks a part up by.
FlatParts = dict[int, FlatPart]
_PLANNED = (exp.Select, exp.SetOperation)
#: Where a subquery is a source of its own: a derived table.
_SOURCE = (exp.From, exp.Join)


def flat_parts(queries: list[exp.Query], columns: list[exp.Column]) -> FlatParts:
    """The selects and set operations of a flat query (module docstring) with their columns;
    raises ``Unsupported`` for any other query. ``queries`` lists every query node of the tree
    parents first (``Check.queries``), ``columns`` every column node."""
    for query in queries:
        if isinstance(query, exp.Subquery):
            if not isinstance(query.this, _PLANNED) or isinstance(query.parent, exp.SetOperation):
                raise Unsupported("a parenthesised query")
            if isinstance(query.parent, _SOURCE):
                alias = query.args.get("alias")
                if not isinstance(alias, exp.TableAlias) or alias.columns or any(
                    value for key, value in query.args.items() if key not in ("this", "alias")
                ):
                    raise Unsupported("a derived table with column names or clauses of its own")
            elif any(value for key, value in query.args.items() if key != "this"):
                raise Unsupported("a subquery with an alias or clauses of its own")
        elif isinstance(query, exp.SetOperation):
            if not isinstance(query.this, _PLANNED) or not isinstance(query.expression, _PLANNED):
                raise Unsupported("a set operation over something other than selects")
        elif not isinstance(query, exp.Select):
            raise Unsupported(f"a {query.key} query")
    owned: dict[int, list[exp.Column]] = {}
    for column in columns:
        # Its owner: the nearest select or set operation above it (a few parents; walked
        # here, not in a function, as this runs per column).
        node = column.parent
        while node is not None and not isinstance(node, _PLANNED):
            node = node.parent
        if node is None:
            raise Unsupported("a column outside every select")
        found = owned.get(id(node))
        if found is None:
            owned[id(node)] = [column]
        else:
            found.append(column)
    parts: FlatParts = {}
    for query in reversed(queries):  # children after their parents in ``queries``
        if isinstance(query, _PLANNED):
            found = owned.pop(id(query), None)  # no default list made for each query that has one
            parts[id(query)] = (query, found if found is not None else [])
    if owned:
        raise Unsupported("a column whose select is not listed")
    return parts
