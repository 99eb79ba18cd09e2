"""Pass 9: the outermost result is limited to ``max_rows + 1`` rows.

One row more than ``max_rows`` lets the executor tell that the result was truncated. An
integer LIMIT larger than that is lowered, a smaller one kept, a missing one added; OFFSET is
kept. A LIMIT that is not an integer literal (a subquery, an expression, ``ALL``) or a
``FETCH FIRST`` clause cannot be compared safely, so the whole query is wrapped:
``SELECT * FROM (<query>) AS q LIMIT n``.
"""

from __future__ import annotations

from sqlglot import exp

from .context import Check

__all__ = ["enforce_limit"]


def _literal_limit(limit: exp.Expr | None) -> int | None:
    if not isinstance(limit, exp.Limit) or set(k for k, v in limit.args.items() if v) - {"expression"}:
        return None
    value = limit.expression
    if isinstance(value, exp.Literal) and value.is_int:
        return int(value.this)
    return None


def enforce_limit(check: Check) -> None:
    """Add, lower or keep the outermost LIMIT; wrap the query when it cannot be compared."""
    tree = check.tree
    assert isinstance(tree, exp.Query)
    cap = check.max_rows + 1
    limit = tree.args.get("limit")
    if limit is None and not tree.args.get("fetch"):
        tree.set("limit", exp.Limit(expression=exp.Literal.number(cap)))
        return
    current = None if tree.args.get("fetch") else _literal_limit(limit)
    if current is not None:
        if current > cap:
            limit.set("expression", exp.Literal.number(cap))
        return
    outer = exp.Select(expressions=[exp.Star()]).from_(
        exp.Subquery(this=tree, alias=exp.TableAlias(this=exp.to_identifier("q"))), copy=False
    )
    outer.set("limit", exp.Limit(expression=exp.Literal.number(cap)))
    check.tree = outer
