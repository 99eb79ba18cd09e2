"""The second wall: every read of a declared table becomes a derived table of its allowed columns.

``FROM employees e`` becomes ``FROM (SELECT <allowed columns> FROM employees [WHERE <filter>])
AS e``, keeping the alias (and the schema qualifier, index hints, ``ONLY``, a sample), wherever
the read sits: CTEs, subqueries, both sides of a set operation, either side of an outer join.
The filter stays *inside* the derived table so an outer join keeps its meaning (a filter in the
outer WHERE would turn a LEFT JOIN into an inner one; one in the ON clause would not hide the
rows of the preserved side).

Every table is read this way, not only those with a row filter or a denied column: the rules
before this one resolve each name (the first wall, ``check_columns``) and refuse every way
they know of to read a column that no column node names (``columns.py``: whole rows, ``t.*``
in an expression, NATURAL joins). This rewrite is
the wall behind them: whatever name the database resolves differently than the checks did —
an output alias inside an ORDER BY expression that is also an undeclared column, a whole-row
value, a NATURAL join's common columns — it can only find the declared, allowed columns; an
undeclared column does not exist in the query the database runs. SQLite, PostgreSQL and MariaDB
merge such a derived table into the outer query (``tests/test_sandbox_plans.py`` compares
the plans over the corpora), so it costs nothing at run time.

Tables a filter's own subqueries read are qualified with the manifest's schema like the
query's (``tables.py``). The filter's ``:var`` becomes the bound parameter ``var_<name>``
(``safety.query.variable_parameter``) with the caller's value; a variable the caller did not supply is an error (``missing_variable``), never a silent
no-filter.

PostgreSQL does not see a table's primary key through a derived table: a select that groups
by the key and reads the table's other columns would fail once confined, so those columns
are first added to its GROUP BY (``keys.py``), which leaves its groups as they were.
"""

from __future__ import annotations

from sqlglot import exp

from structq.capabilities import Table

from ...query import qualifying_schema, variable_parameter
from ..context import Check
from ..keys import group_by_dependents
from .tables import qualify_tables

__all__ = ["confine_reads"]


def _bind_variables(check: Check, table: str, predicate: exp.Expr) -> exp.Expr:
    predicate = predicate.copy()
    schema = qualifying_schema(check.manifest.schema_, check.sql_dialect)
    if schema is not None:
        qualify_tables(predicate, schema, check.dialect)  # a filter's own subqueries, if any
    for placeholder in list(predicate.find_all(exp.Placeholder)):
        name = placeholder.name
        if name not in check.variables:
            raise check.fail(
                "missing_variable",
                f"table {table!r} has a row filter that needs the variable {name!r}, which was not supplied",
                f"pass vars={{{name!r}: …}}; without it the table cannot be read",
            )
        parameter = variable_parameter(name)
        bound = exp.Placeholder(this=parameter)
        placeholder.replace(bound)
        check.bind_nodes.append(bound)
        check.bind(parameter, check.variables[name], ("var", name))
    return predicate


def _confined(check: Check, node: exp.Table, table: Table, predicate: exp.Expr | None) -> exp.Subquery:
    """The derived table that stands for ``node``: its allowed columns, its filtered rows."""
    if node.args.get("pivots") or node.args.get("joins") or node.args.get("laterals"):
        raise check.fail(
            "unsupported",
            f"pivots or lateral joins on the table {table.name!r} are not supported",
            "select from the table in a subquery first",
        )
    names = check.names
    item = node.copy()
    item.set("alias", None)
    inner = exp.Select(expressions=[exp.Column(this=names.identifier(c.name)) for c in table.allowed_columns])
    inner = inner.from_(item, copy=False)
    if predicate is not None:
        inner = inner.where(_bind_variables(check, table.name, predicate), copy=False)
    written = node.args.get("alias")
    alias = written.this.copy() if isinstance(written, exp.TableAlias) else exp.to_identifier(node.alias_or_name)
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=alias))


def confine_reads(check: Check) -> None:
    """Replace every read of a declared table by its derived table."""
    group_by_dependents(check)  # PostgreSQL sees no primary key through a derived table
    filters = check.names.filters
    for node, table in check.reads:
        node.replace(_confined(check, node, table, filters.get(table.name.lower())))
