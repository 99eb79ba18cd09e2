"""A table function in FROM is a FROM item with known columns.

``json_each(users.profile)``, ``generate_series(…) AS g``, ``jsonb_each_text(…)`` read no
table, but the query reads their columns, and qualification must know them: without them,
SQLite's ``SELECT value FROM users, json_each(users.profile)`` is ambiguous (``value`` could
be a column of either FROM item) and PostgreSQL's ``g`` over ``generate_series(…) g`` unknown.
The columns each function returns are listed with it (``functions.TABLE_FUNCTION_COLUMNS``).

Before qualification, each table function gets an alias (its own name when the query gave it
none, which is what the databases call it then) and, unless the query wrote its own
(``AS g(n)``), the list of its columns. PostgreSQL lets the alias of a one-column function
stand for its value (``jsonb_array_elements(…) AS j`` … ``j ->> 'lvl'``): such a bare alias,
unqualified in the select that reads the function, becomes that column (``j.value``).

After qualification the column lists stay where the dialect accepts them (PostgreSQL: the
query that runs says what each column is) and are removed where it does not (SQLite, whose
table-valued functions take no column list; the columns are the function's own names, so the
query means the same).
"""

from __future__ import annotations

from sqlglot import exp

from ...functions import ALIAS, TABLE_FUNCTION_COLUMNS, table_function
from ..context import Check

__all__ = ["declare_function_columns", "settle_function_columns"]

#: Dialects whose table functions take a column list in their alias (``AS g(n)``).
_COLUMN_LISTS = frozenset({"postgres"})


def _may_have_column(check: Check, item: exp.Expr, name: str) -> bool:
    """Whether another FROM item of the select could have a column ``name`` (in doubt: yes)."""
    if not isinstance(item, exp.Table):
        return True  # a derived table or a CTE: its columns are not known yet
    if isinstance(item.this, exp.Func):
        function = table_function(item.this, check.sql_dialect)
        return function is None or name in TABLE_FUNCTION_COLUMNS[check.sql_dialect][function]
    if check.with_clauses and item.name.lower() not in check.names.columns:
        return True
    return name.lower() in check.names.columns.get(item.name.lower(), {})


def _bare_alias_is_the_value(check: Check, table: exp.Table, alias: str, column: str) -> None:
    """PostgreSQL: ``j`` for the one column of ``jsonb_array_elements(…) AS j`` is ``j.value``
    — unless another FROM item of the select may have a column ``j``, which PostgreSQL would
    read instead (then the name is left alone, and qualification decides)."""
    select = table.find_ancestor(exp.Select)
    if select is None:
        return
    from_ = select.args.get("from_")
    items = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or ()]
    if any(_may_have_column(check, s, alias) for s in items if s is not table):
        return
    for node in check.columns:
        if node.table or node.name != alias or not isinstance(node.this, exp.Identifier):
            continue
        if node.find_ancestor(exp.Select) is select:
            node.set("this", exp.to_identifier(column))
            node.set("table", exp.to_identifier(alias))


def declare_function_columns(check: Check) -> list[exp.TableAlias]:
    """Name every table function and list its columns; returns the lists it added."""
    if not check.functions:
        return []  # a table function, and ``unnest``, is a call: ``parse.scan`` lists every one
    dialect = check.sql_dialect
    added: list[exp.TableAlias] = []
    for table in check.tables:
        func = table.this
        if not isinstance(func, exp.Func):
            continue
        name = table_function(func, dialect)
        if name is None:
            continue  # refused by ``resolve_tables`` already; never reached
        alias = table.args.get("alias")
        if not isinstance(alias, exp.TableAlias):
            alias = exp.TableAlias(this=exp.to_identifier(name))
            table.set("alias", alias)
        if alias.columns:
            continue  # the query named the columns itself
        columns = [alias.name if c == ALIAS else c for c in TABLE_FUNCTION_COLUMNS[dialect][name]]
        if len(columns) == 1 and columns[0] != alias.name and dialect in _COLUMN_LISTS:
            _bare_alias_is_the_value(check, table, alias.name, columns[0])
        alias.set("columns", [exp.to_identifier(c) for c in columns])
        added.append(alias)
    added += _name_unnest_columns(check)
    return added


def _name_unnest_columns(check: Check) -> list[exp.TableAlias]:
    """PostgreSQL's ``unnest(array) AS n`` in FROM, a FROM item of its own in sqlglot: one
    column, named after the alias (``unnest`` without one)."""
    if check.sql_dialect != "postgres":
        return []
    added = []
    for node in check.functions:
        if not isinstance(node, exp.Unnest) or not isinstance(node.parent, (exp.From, exp.Join)):
            continue
        alias = node.args.get("alias")
        if not isinstance(alias, exp.TableAlias):
            alias = exp.TableAlias(this=exp.to_identifier("unnest"))
            node.set("alias", alias)
        if not alias.columns and len(node.expressions) == 1:
            alias.set("columns", [exp.to_identifier(alias.name)])
            added.append(alias)
    return added


def settle_function_columns(check: Check, added: list[exp.TableAlias]) -> None:
    """Remove the column lists ``declare_function_columns`` added where the dialect has none."""
    if not added or check.sql_dialect in _COLUMN_LISTS:
        return
    for alias in added:
        alias.set("columns", None)
