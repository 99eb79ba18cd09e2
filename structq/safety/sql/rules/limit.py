"""The outermost result is limited to ``max_rows + 1`` rows.

One row more than ``max_rows`` lets the executor tell that the result was truncated. An
integer LIMIT larger than that is lowered, a smaller one kept, a missing one added; OFFSET is
kept. A LIMIT that is not an integer literal (a subquery, an expression, ``ALL``) or a
``FETCH FIRST`` clause cannot be compared safely, so the whole query is wrapped:
``SELECT * FROM (<query>) AS q LIMIT n``.

A derived table needs distinct column names on MySQL and MariaDB ("Duplicate column name"),
and ``SELECT a.id, b.id … FETCH FIRST 5 ROWS ONLY`` has two ``id`` columns. So before wrapping,
a name that repeats (case-insensitively, as MySQL compares them) gets an alias with a suffix,
as the local executor names duplicate columns: ``id``, ``id_2``. Every dialect does the same,
so one plan returns the same columns on every database.
"""

from __future__ import annotations

from sqlglot import exp

from ..context import Check

__all__ = ["enforce_limit"]


def _literal_limit(limit: exp.Expr | None) -> int | None:
    if not isinstance(limit, exp.Limit) or set(k for k, v in limit.args.items() if v) - {"expression"}:
        return None
    value = limit.expression
    if isinstance(value, exp.Literal) and value.is_int:
        return int(value.this)
    return None


def _output_name(projection: exp.Expr, check: Check) -> str:
    """The column name a projection gets: its alias or column name, else (as MySQL names an
    unaliased expression) its text."""
    return projection.alias_or_name or projection.sql(dialect=check.dialect)


def _leftmost_select(query: exp.Expr) -> exp.Expr:
    """The SELECT whose projections name a query's columns (the first of a set operation)."""
    while isinstance(query, exp.SetOperation):
        query = query.this
    return query


def _alias_repeated_names(query: exp.Query, check: Check) -> None:
    """Alias the second and later projections of a repeated output name ``name_2``, ``name_3``…
    (skipping names already taken), so the query is a legal derived table everywhere."""
    select = _leftmost_select(query)
    if not isinstance(select, exp.Select):
        return
    names = [_output_name(p, check) for p in select.expressions]
    taken = {name.lower() for name in names}
    seen: set[str] = set()
    for projection, name in zip(list(select.expressions), names):
        if name.lower() not in seen:
            seen.add(name.lower())
            continue
        suffix = 2
        while f"{name}_{suffix}".lower() in taken:
            suffix += 1
        unique = f"{name}_{suffix}"
        taken.add(unique.lower())
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        projection.replace(exp.alias_(inner.copy(), exp.to_identifier(unique)))


def enforce_limit(check: Check) -> None:
    """Add, lower or keep the outermost LIMIT; wrap the query when it cannot be compared."""
    tree = check.tree
    assert isinstance(tree, exp.Query)
    cap = check.max_rows + 1
    limit = tree.args.get("limit")
    if limit is None and not tree.args.get("fetch"):
        # ``exp.Literal.number(cap)`` builds this node (``cap`` is positive) at three times the cost.
        tree.set("limit", exp.Limit(expression=exp.Literal(this=str(cap), is_string=False)))
        return
    current = None if tree.args.get("fetch") else _literal_limit(limit)
    if current is not None:
        if current > cap:
            limit.set("expression", exp.Literal.number(cap))
        return
    _alias_repeated_names(tree, check)
    outer = exp.Select(expressions=[exp.Star()]).from_(
        exp.Subquery(this=tree, alias=exp.TableAlias(this=exp.to_identifier("q"))), copy=False
    )
    outer.set("limit", exp.Limit(expression=exp.Literal.number(cap)))
    check.tree = outer
