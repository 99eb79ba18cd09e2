"""The first wall: an unqualified name that is also an output alias resolves as the database resolves it.

``SELECT id, 'k' AS cost_secret FROM products ORDER BY CASE WHEN cost_secret = … END``: the
name ``cost_secret`` is an output alias of the select *and* may be a column of ``products`` that
the manifest does not declare. SQL leaves it to each database which one such a name means, and
the databases differ by clause: inside an ORDER BY expression all three read the table's column;
as a bare ORDER BY term, the alias; MariaDB reads the alias in HAVING and in a window's ORDER BY,
SQLite and PostgreSQL the column. sqlglot's qualification follows one rule for all, so what it
resolved and what the database reads could differ — a declared-looking query reading an
undeclared column, or a rewrite that changes the value the database would have used.

``READINGS`` is the databases' behaviour, written once: per dialect and per place a name can sit
(``Place``), which the database tries first — the select's output aliases or the columns of its
FROM items — and whether it falls back to the other when the first has no such name.
``tests/test_sandbox_database_names.py`` asks the real databases (SQLite, PostgreSQL, MariaDB)
for every entry: a table whose column and an output alias share a name with different values,
and a name that is an alias only.

What ``check_output_names`` does with an unqualified name that is an output alias of its own
select (other than the alias of the very column it names, ``t.x AS x``), before qualification:

- where the database reads the *column* first: if exactly one FROM item of the select declares it,
  the name is qualified with that FROM item, so qualification cannot take it for the alias
  (several, or a FROM item whose columns are not known yet: ``ambiguous_column``). If none
  does, the database would read whatever column the table really has by that name — an
  undeclared one, perhaps. Where the database has no fallback to the alias (PostgreSQL's ORDER BY
  expressions and HAVING, a WHERE everywhere) it would fail or read that column: refused
  (``unknown_column``: write the expression instead of its alias, or rename the alias). Where
  it falls back to the alias (SQLite, MariaDB: ``GROUP BY month``, ``HAVING n > 1``), the
  query as sent has no such column — every table is read through its projection — so the
  database reads the alias; the name is replaced by a copy of the alias's expression, which makes
  that explicit: the text sent never depends on what columns the table really has;
- a name that is also a FROM item's name (``p`` of ``FROM t p``) is left to
  ``rules/columns.py``: where the database reads it, it is a whole row;
- where the database reads the *alias* first: as a bare ORDER BY term (or DISTINCT ON term),
  qualification reads it as the alias too; elsewhere (MariaDB's window clauses, and its HAVING,
  which reads a grouped column before the alias) a name that is also a FROM item's column is
  refused (``ambiguous_column``: rename the alias), as qualification would read the column.

The projection of every table (``rules/confine.py``, the second wall) stands behind this: even a
name resolved wrongly can only reach declared columns.
"""

from __future__ import annotations

from enum import Enum

from sqlglot import exp

from ..context import Check

__all__ = ["Place", "READINGS", "check_output_names", "place_of"]


class Place(str, Enum):
    """Where an unqualified name sits in its select."""

    ORDER_TERM = "order_term"              # ORDER BY x
    ORDER_EXPRESSION = "order_expression"  # ORDER BY x + 0, CASE WHEN x …
    WINDOW = "window"                      # OVER (PARTITION BY x ORDER BY x), in the select list
    ORDER_WINDOW = "order_window"          # ORDER BY … OVER (ORDER BY x)
    GROUP_TERM = "group_term"              # GROUP BY x
    GROUP_EXPRESSION = "group_expression"  # GROUP BY x + 0
    HAVING = "having"                      # HAVING x = 1
    HAVING_AGGREGATE = "having_aggregate"  # HAVING MAX(x) = 1
    DISTINCT_ON = "distinct_on"            # DISTINCT ON (x)
    WHERE = "where"                        # WHERE x = 1, and JOIN … ON
    SELECT = "select"                      # SELECT y AS x, x + 1


ALIAS, COLUMN = "alias", "column"
#: The database picks by a rule of its own: MariaDB's HAVING reads the column when it is grouped,
#: else the alias.
EITHER = "either"

#: Per dialect and place: what the database tries first (``ALIAS``, ``COLUMN`` or ``EITHER``), and
#: whether it falls back to the alias when no column has the name (the check refuses such a name
#: either way; the fallback tells why a database failed or answered). Observed on SQLite 3.40,
#: PostgreSQL 15 and MariaDB 10.11 (``tests/test_sandbox_database_names.py``); a place a
#: dialect does not have (DISTINCT ON outside PostgreSQL) is absent.
READINGS: dict[str, dict[Place, tuple[str, bool]]] = {
    "sqlite": {
        Place.ORDER_TERM: (ALIAS, True),
        Place.ORDER_EXPRESSION: (COLUMN, True),
        Place.WINDOW: (COLUMN, False),
        Place.ORDER_WINDOW: (COLUMN, True),
        Place.GROUP_TERM: (COLUMN, True),
        Place.GROUP_EXPRESSION: (COLUMN, True),
        Place.HAVING: (COLUMN, True),
        Place.HAVING_AGGREGATE: (COLUMN, True),
        Place.WHERE: (COLUMN, True),
        Place.SELECT: (COLUMN, False),
    },
    "postgres": {
        Place.ORDER_TERM: (ALIAS, True),
        Place.ORDER_EXPRESSION: (COLUMN, False),
        Place.WINDOW: (COLUMN, False),
        Place.ORDER_WINDOW: (COLUMN, False),
        Place.GROUP_TERM: (COLUMN, True),
        Place.GROUP_EXPRESSION: (COLUMN, False),
        Place.HAVING: (COLUMN, False),
        Place.HAVING_AGGREGATE: (COLUMN, False),
        Place.DISTINCT_ON: (ALIAS, True),
        Place.WHERE: (COLUMN, False),
        Place.SELECT: (COLUMN, False),
    },
    "mysql": {
        Place.ORDER_TERM: (ALIAS, True),
        Place.ORDER_EXPRESSION: (COLUMN, True),
        Place.WINDOW: (ALIAS, True),
        Place.ORDER_WINDOW: (ALIAS, True),
        Place.GROUP_TERM: (COLUMN, True),
        Place.GROUP_EXPRESSION: (COLUMN, True),
        Place.HAVING: (EITHER, True),
        Place.HAVING_AGGREGATE: (COLUMN, True),
        Place.WHERE: (COLUMN, False),
        Place.SELECT: (COLUMN, False),
    },
}

#: Places where qualification reads an alias name as the alias, as every database does.
_ALIAS_TERMS = (Place.ORDER_TERM, Place.DISTINCT_ON)


def place_of(column: exp.Column) -> tuple[Place, exp.Select] | None:
    """The place of ``column`` in its nearest select, and that select (None: outside one)."""
    child: exp.Expr = column
    node = column.parent
    aggregate = False
    while node is not None:
        if isinstance(node, exp.Window) and child is not node.this:
            place = Place.WINDOW
            while node is not None and not isinstance(node, exp.Select):
                if isinstance(node, exp.Order):
                    place = Place.ORDER_WINDOW
                node = node.parent
            break
        if isinstance(node, exp.AggFunc):
            aggregate = True
        if isinstance(node, exp.Order) and isinstance(node.parent, exp.Select):
            term = isinstance(child, exp.Ordered) and child.this is column
            place = Place.ORDER_TERM if term else Place.ORDER_EXPRESSION
            break
        if isinstance(node, exp.Group):
            place = Place.GROUP_TERM if child is column else Place.GROUP_EXPRESSION
            break
        if isinstance(node, exp.Having):
            place = Place.HAVING_AGGREGATE if aggregate else Place.HAVING
            break
        if isinstance(node, exp.Distinct):
            place = Place.DISTINCT_ON if column.parent is node.args.get("on") else Place.ORDER_EXPRESSION
            break
        if isinstance(node, (exp.Where, exp.Join)):
            place = Place.WHERE
            break
        if isinstance(node, exp.Select):
            return (Place.SELECT, node) if any(child is e for e in node.expressions) else None
        if isinstance(node, exp.Query):
            return None
        child, node = node, node.parent
    else:
        return None
    while node is not None and not isinstance(node, exp.Select):
        node = node.parent
    return (place, node) if node is not None else None


def _output_aliases(select: exp.Select) -> dict[str, exp.Expr]:
    """Lower-case output alias → its expression, but for ``t.x AS x`` (the column it names)."""
    out: dict[str, exp.Expr] = {}
    for projection in select.expressions:
        if isinstance(projection, exp.Alias):
            inner = projection.this
            name = projection.alias.lower()
            if isinstance(inner, exp.Column) and inner.name.lower() == name:
                continue
            out.setdefault(name, inner)
    return out


def _from_item_columns(check: Check, select: exp.Select) -> list[tuple[str, set[str] | None]]:
    """Each FROM item of ``select``: the name it goes by, and its columns (None: not known)."""
    tables = {id(node): table for node, table in check.reads}
    allowed = check.names.allowed
    ctes = {cte.alias.lower(): cte for with_ in check.with_clauses for cte in with_.expressions}
    items: list[tuple[str, set[str] | None]] = []
    from_ = select.args.get("from_")
    nodes = ([from_.this] if from_ is not None else []) + [join.this for join in select.args.get("joins") or []]
    for node in nodes:
        if isinstance(node, exp.Table) and id(node) in tables:
            items.append((node.alias_or_name, set(allowed[tables[id(node)].name.lower()])))
        elif isinstance(node, exp.Table) and node.name.lower() in ctes and not node.args.get("db"):
            items.append((node.alias_or_name, _query_columns(ctes[node.name.lower()])))
        elif isinstance(node, exp.Subquery):
            items.append((node.alias, _query_columns(node)))
        else:
            items.append((node.alias_or_name, None))
    return items


def _query_columns(node: exp.Expr) -> set[str] | None:
    """The output names of a CTE or derived table (None: a star, not known before expansion)."""
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return {c.name.lower() for c in alias.columns}
    query = node.this
    if not isinstance(query, exp.Query):
        return None
    names = query.named_selects
    if any(name == "*" for name in names) or any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
                                                 for e in query.selects):
        return None
    return {name.lower() for name in names}


def _stand_in(expression: exp.Expr) -> exp.Expr:
    """A copy of an alias's expression to write where its name stood, in parentheses unless
    it is one term (``ORDER BY total / 2`` with ``a + b AS total`` is ``(a + b) / 2``)."""
    copy = expression.copy()
    if isinstance(copy, (exp.Column, exp.Literal, exp.Func, exp.Paren, exp.Subquery, exp.Null, exp.Boolean)):
        return copy
    return exp.paren(copy, copy=False)


def check_output_names(check: Check) -> None:
    """Qualify or refuse every unqualified name that is also an output alias (module docstring)."""
    aliases = {a.alias.lower() for a in check.aliases if isinstance(a, exp.Alias)}
    if not aliases:
        return
    rules = READINGS.get(check.sql_dialect)
    if rules is None:
        return
    for column in list(check.columns):
        if column.table or column.name.lower() not in aliases:
            continue
        found = place_of(column)
        if found is None:
            continue
        place, select = found
        outputs = _output_aliases(select)
        name = column.name.lower()
        if name not in outputs:
            continue
        first, fallback = rules.get(place, (COLUMN, False))
        items = _from_item_columns(check, select)
        if any(alias.lower() == name for alias, _ in items):
            continue  # also a FROM item's name: a whole row where the database reads it (``rules/columns.py``)
        owners = [alias for alias, columns in items if columns is not None and name in columns]
        unknown = any(columns is None for _, columns in items)
        if first in (ALIAS, EITHER):
            if first == ALIAS and place in _ALIAS_TERMS:
                continue
            if owners or unknown:
                reads = "the alias" if first == ALIAS else "the column if it is grouped, else the alias"
                raise check.fail(
                    "ambiguous_column",
                    f"{column.name!r} is both an output alias and a column here; the database reads {reads}",
                    f"rename the alias {column.name!r}, or write its expression instead of the name",
                )
            continue
        if len(owners) == 1 and not unknown:
            column.set("table", exp.to_identifier(owners[0]))
            continue
        if owners or unknown:
            raise check.fail(
                "ambiguous_column",
                f"{column.name!r} is an output alias and may be a column of several sources here; the database reads a column",
                f"qualify the column with its table's alias, or rename the alias {column.name!r}",
            )
        if fallback:
            column.replace(_stand_in(outputs[name]))
            continue
        raise check.fail(
            "unknown_column",
            f"{column.name!r} here would be read by the database as a column of the tables, not as the output alias",
            f"write the expression of {column.name!r} instead of its alias, or rename the alias",
        )
