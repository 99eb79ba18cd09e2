"""Pass 7: each read of a table with a row filter becomes a filtered derived table.

``FROM employees e`` becomes ``FROM (SELECT <allowed columns> FROM employees WHERE
<filter>) AS e``, keeping the alias (and the schema qualifier, if any), wherever the read sits: CTEs, subqueries, both sides of a
set operation, either side of an outer join. The filter stays *inside* the derived table so an
outer join keeps its meaning (a filter in the outer WHERE would turn a LEFT JOIN into an inner
one; one in the ON clause would not hide the rows of the preserved side).

The filter's ``:var`` becomes the bound parameter ``var_<name>`` with the caller's value; a
variable the caller did not supply is an error (``missing_variable``), never a silent
no-filter.
"""

from __future__ import annotations

from sqlglot import exp

from .context import Check

__all__ = ["apply_row_filters", "VARIABLE_PREFIX"]

VARIABLE_PREFIX = "var_"


def _bind_variables(check: Check, table: str, predicate: exp.Expr) -> exp.Expr:
    predicate = predicate.copy()
    for placeholder in list(predicate.find_all(exp.Placeholder)):
        name = placeholder.name
        if name not in check.variables:
            raise check.fail(
                "missing_variable",
                f"table {table!r} has a row filter that needs the variable {name!r}, which was not supplied",
                f"pass vars={{{name!r}: …}}; without it the table cannot be read",
            )
        bound = exp.Placeholder(this=VARIABLE_PREFIX + name)
        placeholder.replace(bound)
        check.bind_nodes.append(bound)
        check.params[VARIABLE_PREFIX + name] = check.variables[name]
    return predicate


def apply_row_filters(check: Check) -> None:
    """Replace every read of a filtered table by its filtered derived table."""
    filters = check.names.filters
    if not filters:
        return
    for node, table in check.reads:
        predicate = filters.get(table.name.lower())
        if predicate is None:
            continue
        if node.args.get("pivots") or node.args.get("joins") or node.args.get("laterals"):
            raise check.fail(
                "unsupported",
                f"pivots or lateral joins on the filtered table {table.name!r} are not supported",
                "select from the table in a subquery first",
            )
        inner = exp.Select(expressions=[exp.column(c.name) for c in table.allowed_columns])
        inner = inner.from_(exp.Table(this=node.this.copy(), db=node.args.get("db")), copy=False)
        inner = inner.where(_bind_variables(check, table.name, predicate), copy=False)
        alias = exp.TableAlias(this=exp.to_identifier(node.alias_or_name))
        node.replace(exp.Subquery(this=inner, alias=alias))
