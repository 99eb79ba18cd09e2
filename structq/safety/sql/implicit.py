"""Part of ``check_columns``: no column is read without a column node that names it.

The denied-column and unknown-column checks look at column nodes. Some SQL reads columns that
no node names, and would carry a denied (or undeclared) column past both checks:

- a whole row: PostgreSQL lets a source's name stand for its row — ``SELECT p FROM t p``,
  ``to_json(p)``, ``CAST(p AS text)``, ``ARRAY[p]``, ``ORDER BY p``, ``(p).id_card`` — and
  ``t.*`` anywhere but as a select item means the same (``ARRAY[p.*]``, ``(p.*)::text``,
  ``(p.*).id_card``). A star is expanded (to the allowed columns) only as a select item;
  qualification turns a bare source name into a ``TableColumn`` node;
- a star that qualification could not expand: ``(SELECT p.*)`` correlated to an outer source
  has no FROM of its own, stays a star, and its derived table then has unknown columns, so
  ``z.id_card`` over it passes validation and reaches the engine;
- a field of a composite value (``(x).field``): the sandbox cannot tell which columns a
  composite carries, so field access is refused outright;
- a NATURAL join, or USING, that qualification could not rewrite into ``ON a.x = b.x`` over
  allowed columns: the engine would join on whatever columns the two sides really share,
  denied ones included (``t NATURAL JOIN (SELECT 'x1' AS id_card) s`` is an equality oracle).

``check_before`` runs on the columns as parsed; ``check_after`` on the tree after
``qualify_columns``.
"""

from __future__ import annotations

from sqlglot import exp

from .context import Check
from .walk import Instances

__all__ = ["check_before", "check_after"]

_ROW_HINT = "name the columns you need (t.a, t.b) instead of the whole row"
#: The nodes ``check_after`` looks at.
_WATCHED = Instances(exp.Column, exp.Table, exp.Subquery, exp.TableColumn, exp.Star, exp.Join)


def _whole_row(check: Check, name: str) -> Exception:
    return check.fail("unsupported", f"{name!r} names a table, not a column: a whole row cannot be read", _ROW_HINT)


def check_before(check: Check) -> None:
    """Refuse ``t.*`` outside a select list and any field access."""
    for star in check.stars:  # ``t.*`` is a column whose name is a star (``parse.scan`` lists both)
        column = star.parent
        if not isinstance(column, exp.Column) or column.this is not star:
            continue
        in_select_list = isinstance(column.parent, exp.Select) and column.arg_key == "expressions"
        if not in_select_list:
            raise check.fail(
                "unsupported",
                f"{column.sql(check.dialect)} is allowed only as an item of a select list",
                _ROW_HINT,
            )
    for dot in check.dots:
        if isinstance(dot.expression, exp.Func) or isinstance(dot.parent, exp.DataType):
            continue  # a schema-qualified call or type: the function / type checks refuse it
        raise check.fail(
            "unsupported",
            f"field access {dot.sql(check.dialect)!r} is not supported",
            "read declared columns only (t.column)",
        )


def _sources(nodes: list[exp.Expr]) -> set[str]:
    """Names of the sources (tables, derived tables) whose whole row a bare name would read;
    table functions read no table, and their alias names their value (``generate_series(…) g``)."""
    names = set()
    for node in nodes:
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Func):
                names.add(node.alias_or_name)
        elif node.alias:
            names.add(node.alias)
    return names


def check_after(check: Check, tree: exp.Expr) -> None:
    """After ``qualify_columns``: refuse whole rows, unexpanded stars and unexpanded joins."""
    columns: list[exp.Column] = []
    sources: list[exp.Expr] = []
    for node in _WATCHED(tree):
        if isinstance(node, exp.Column):
            columns.append(node)
        elif isinstance(node, (exp.Table, exp.Subquery)):
            sources.append(node)
        elif isinstance(node, exp.TableColumn):
            raise _whole_row(check, node.name)
        elif isinstance(node, exp.Star):
            if not isinstance(node.parent, exp.Count):
                raise check.fail(
                    "unsupported",
                    f"{(node.parent if isinstance(node.parent, exp.Column) else node).sql(check.dialect)} "
                    "could not be expanded: its columns are not known",
                    "name the columns you need (t.a, t.b); a star is expanded only over declared tables "
                    "and subqueries, not over table functions or a correlated outer source",
                )
        elif isinstance(node, exp.Join) and (node.method == "NATURAL" or node.args.get("using")):
            raise check.fail(
                "unsupported",
                f"the join {node.sql(check.dialect)!r} would join on columns the sandbox cannot see",
                "write the join condition explicitly: JOIN t ON a.x = t.x",
            )
    names = _sources(sources)
    for column in columns:
        if column.table or not isinstance(column.this, exp.Identifier) or column.name not in names:
            continue
        # Only a whole term of a select's own ORDER BY names an output column (``SELECT x AS p
        # … ORDER BY p``); inside an expression (``ORDER BY p || 'x'``) or a window's ORDER BY,
        # PostgreSQL reads the name as the row.
        ordered = column.parent
        order = ordered.parent if isinstance(ordered, exp.Ordered) else None
        select = order.parent if isinstance(order, exp.Order) else None
        if not (isinstance(select, exp.Select) and column.name in select.named_selects):
            raise _whole_row(check, column.name)
