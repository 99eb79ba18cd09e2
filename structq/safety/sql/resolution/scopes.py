"""Which manifest table each qualified column reads, decided scope by scope.

An alias means different tables in different scopes (``FROM employees e`` in the outer query,
``FROM departments e`` in a subquery), so a flat alias → table map can mislabel a column — and
then check an enum literal against the wrong column, or report the wrong column as read. After
qualification every column names a FROM item of its own scope, or of an enclosing one when the
subquery is correlated; sqlglot's scopes say which.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from structq.capabilities import Table

__all__ = ["column_tables"]


def _from_item(scope: Scope | None, name: str) -> object:
    """The FROM item ``name`` stands for in ``scope``, looking outwards for correlated columns."""
    while scope is not None:
        item = scope.sources.get(name)  # sqlglot's word for the FROM items of a scope
        if item is not None:
            return item
        scope = scope.parent
    return None


def column_tables(tree: exp.Expr, reads: list[tuple[exp.Table, Table]]) -> dict[int, tuple[exp.Column, Table]]:
    """``id(column)`` → the column and the manifest table it reads, for each real-table column."""
    entries = {id(node): table for node, table in reads}
    found: dict[int, tuple[exp.Column, Table]] = {}
    for scope in traverse_scope(tree):
        for column in scope.columns:
            if column.table:
                table = entries.get(id(_from_item(scope, column.table)))
                if table is not None:
                    found[id(column)] = (column, table)
    return found
