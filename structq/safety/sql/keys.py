"""PostgreSQL's grouping by a primary key, kept through the second wall (``rules/confine.py``).

PostgreSQL lets a select group by a table's primary key and still read the table's other
columns outside aggregates (``SELECT s.id, s.name, count(*) … GROUP BY s.id``): they depend
on the key, so each group has one value of each. It knows the key of a base table only; once
the table is read through a derived table of its declared columns, the same query fails
(``column "s.name" must appear in the GROUP BY clause``).

So, on PostgreSQL, before the reads are confined: when a select's plain GROUP BY (no ROLLUP,
CUBE or GROUPING SETS) holds every primary-key column (the manifest's ``primary_key``) of a
table it reads, the other columns of that same table the select reads outside aggregates —
its select list, HAVING, ORDER BY, DISTINCT ON, named windows, correlated subqueries among
them — are appended to the GROUP BY. They depend on the key, so the groups, and therefore
the rows, are the ones the query had on the base table. The manifest's ``primary_key`` is
trusted as the database's (``structq init`` reads it from the catalog): a query written for
a key the database does not have fails when the query runs as written, and is not checked here.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from .context import Check

__all__ = ["group_by_dependents"]

#: The clauses of a select PostgreSQL reads per group, where a column needs its key grouped.
_PER_GROUP = frozenset({"expressions", "having", "order", "distinct", "windows"})
#: Calls whose arguments are read per row of a group, not per group (unless used as windows).
_AGGREGATING = (exp.AggFunc, exp.Filter, exp.WithinGroup)
#: What an aggregate call may sit in and still be one aggregate, or a window function.
_WRAPPERS = (exp.Window, exp.Filter, exp.WithinGroup)


def _plain_group(select: exp.Expr) -> exp.Group | None:
    """The select's GROUP BY when it is a plain list of expressions, else None."""
    group = select.args.get("group") if isinstance(select, exp.Select) else None
    if group is None or not group.expressions:
        return None
    if any(value for key, value in group.args.items() if key != "expressions"):
        return None  # ROLLUP, CUBE, GROUPING SETS, WITH TOTALS, GROUP BY ALL / DISTINCT
    return group


def _per_group(column: exp.Column, select: exp.Select) -> bool:
    """Whether ``column`` is read per group of ``select``: in a clause of it PostgreSQL
    evaluates per group, and not inside one of its aggregates (an aggregate of a nested query,
    which reads an outer column per group of the outer select, does not count)."""
    node: exp.Expr = column
    nested = False
    while node.parent is not None and node.parent is not select:
        parent = node.parent
        if isinstance(parent, exp.Query):
            nested = True
        elif not nested and isinstance(parent, _AGGREGATING) and not isinstance(parent.parent, _WRAPPERS):
            return False
        node = parent
    return node.parent is select and node.arg_key in _PER_GROUP


def _extend(scope: Scope, group: exp.Group, keys: dict[int, frozenset[str]]) -> None:
    """Append to ``group`` the columns read per group of each table whose key it holds."""
    select = scope.expression
    grouped = {(c.table, c.name.lower()) for c in group.expressions if isinstance(c, exp.Column)}
    for alias, item in scope.sources.items():  # sqlglot's word for a scope's FROM items
        key = keys.get(id(item))
        if key is None or any((alias, name) not in grouped for name in key):
            continue
        for column in scope.columns:
            name = column.name.lower()
            if column.table != alias or (alias, name) in grouped or not _per_group(column, select):
                continue
            grouped.add((alias, name))
            group.append("expressions", column.copy())


def group_by_dependents(check: Check) -> None:
    """On PostgreSQL, group also by the columns that depend on a grouped primary key."""
    if check.sql_dialect != "postgres":
        return
    keys = {id(node): key for node, table in check.reads
            if (key := frozenset(c.name.lower() for c in table.columns if c.primary_key))}
    if not keys:
        return
    key_names = frozenset().union(*keys.values())
    tree = check.tree
    assert tree is not None
    # A walk of scopes only for a query that groups by a column named like a key.
    if not any(
        isinstance(e, exp.Column) and e.name.lower() in key_names
        for query in check.queries if (group := _plain_group(query)) is not None
        for e in group.expressions
    ):
        return
    for scope in traverse_scope(tree):
        group = _plain_group(scope.expression)
        if group is not None:
            _extend(scope, group, keys)
