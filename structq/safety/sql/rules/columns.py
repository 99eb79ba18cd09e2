"""Every column resolves against the manifest, none is read unnamed, and denied ones appear nowhere.

Denied columns first, by name, before qualification: a column spelled like a denied column of
a table the query reads is refused when its qualifier points at such a table, or when it has
no qualifier at all (it could bind to the denied one; the hint says to qualify it). This is
deliberately conservative: it never depends on how a database resolves ambiguous names.

A derived table without an alias (SQLite's ``SELECT a FROM (SELECT …)``) gets one first
(``_d1``…): its columns can then be qualified like any other FROM item's, and the query means
the same.

Then the names are resolved (``resolution/``, behind its invariant): every name that is also
an output alias as the database resolves it (``resolution/database_names.py``, the first wall),
table functions in FROM as FROM items with known columns (``resolution/table_functions.py``),
and every column against the **allowed** columns only, so a denied column does not exist as
far as resolution knows: sqlglot's ``qualify_columns`` (with a schema of the allowed columns)
and ``validate_qualify_columns`` make every column ``alias.column``, expand ``SELECT *`` /
``t.*`` to the allowed columns, and report anything unresolved, which is refused (a shape
``qualify_columns`` itself cannot handle, where it fails an assertion, is refused as
``unsupported``). Only those two steps of ``qualify`` run (identifiers were normalised by
``resolve_tables``; aliasing every table and quoting every identifier buy nothing here).

Qualification names every projection (``COUNT(*) AS _col_0``); on the outermost select those
invented aliases are removed again so result columns keep the names the database gives them.
The columns a star of the outermost select expanded to are named last
(``output_names.name_expanded``).

No column is read without a column node that names it. The denied-column and unknown-column
checks look at column nodes; some SQL reads columns that no node names, and would carry a
denied (or undeclared) column past both checks:

- a whole row: PostgreSQL lets a FROM item's name stand for its row — ``SELECT p FROM t p``,
  ``to_json(p)``, ``CAST(p AS text)``, ``ARRAY[p]``, ``ORDER BY p``, ``(p).id_card`` — and
  ``t.*`` anywhere but as a select item means the same (``ARRAY[p.*]``, ``(p.*)::text``,
  ``(p.*).id_card``). A star is expanded (to the allowed columns) only as a select item;
  qualification turns a bare FROM item's name into a ``TableColumn`` node;
- a star that qualification could not expand: ``(SELECT p.*)`` correlated to an outer FROM
  item has no FROM of its own, stays a star, and its derived table then has unknown columns,
  so ``z.id_card`` over it passes validation and reaches the database;
- a field of a composite value (``(x).field``): the sandbox cannot tell which columns a
  composite carries, so field access is refused outright;
- a NATURAL join, or USING, that qualification could not rewrite into ``ON a.x = b.x`` over
  allowed columns: the database would join on whatever columns the two sides really share,
  denied ones included (``t NATURAL JOIN (SELECT 'x1' AS id_card) s`` is an equality oracle).

``t.*`` outside a select list and field access are refused on the columns as parsed
(``_refuse_unnamed_before``); whole rows, stars left unexpanded and joins left unrewritten on
the tree after ``qualify_columns`` (``_refuse_unnamed_after``).

Names match without regard to case (``schema.py``). Last, each column is mapped to the table
it reads, scope by scope (``resolution/scopes.py``), for the enum check and for
``SafeQuery.columns``, and written in the manifest's spelling, quoted where needed (``"Name"``
on PostgreSQL).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify_columns import qualify_columns, validate_qualify_columns

from structq.capabilities.hints import closest, listing

from structq.capabilities import Table

from ..context import Check
from ..resolution.database_names import check_output_names
from ..resolution.scopes import column_tables
from ..resolution.table_functions import declare_function_columns, settle_function_columns
from ..walk import Instances
from .output_names import name_expanded

__all__ = ["check_columns"]

_NAME_IN_ERROR = re.compile(
    r"(?:Column '([^']+)'|Ambiguous column '([^']+)'|(?:Unknown (?:output )?column: |Cannot automatically join: )([^'\s.]+))")


def _aliases(check: Check) -> dict[str, set[str]]:
    """Alias (or bare name) → the real tables it may stand for, across all scopes."""
    out: dict[str, set[str]] = {}
    for node, table in check.reads:
        out.setdefault(node.alias_or_name, set()).add(table.name.lower())
    return out


def _check_denied(check: Check) -> None:
    denied = check.names.denied
    if not denied:
        return
    read = {table.name.lower() for _, table in check.reads}
    aliases = _aliases(check)
    for column in check.columns:
        deniers = denied.get(column.name.lower(), frozenset()) & read
        if not deniers:
            continue
        qualifier = column.table
        if qualifier and not (aliases.get(qualifier, set()) & deniers):
            continue
        table = sorted(deniers)[0]
        allowed = [c.name for c in check.manifest.table(table).allowed_columns]  # type: ignore[union-attr]
        extra = " (or qualify it with another table's alias if you meant that table)" if not qualifier else ""
        raise check.fail(
            "denied_column",
            f"column {column.name!r} of table {table!r} may not be read, in any clause",
            f"remove it{extra}; readable columns of {table}: {listing(allowed, near=column.name)}",
        )


def _unknown(check: Check, exc: OptimizeError) -> Exception:
    match = _NAME_IN_ERROR.search(str(exc))
    if match is None:  # not about one column (sqlglot's "Alias already used", …): fail closed, saying why
        return check.fail(
            "unsupported",
            f"the columns of this query could not be resolved: {exc}",
            "give every table read in one FROM its own alias, and every output column its own name",
        )
    name = next(g for g in match.groups() if g)
    denied = check.names.denied
    read = {table.name.lower() for _, table in check.reads}
    if denied.get(name.lower(), frozenset()) & read:
        table = sorted(denied[name.lower()] & read)[0]
        return check.fail(
            "denied_column",
            f"column {name!r} of table {table!r} may not be read, in any clause",
            "remove it; it is not readable through this source",
        )
    owners = {table.name for _, table in check.reads if table.column(name) and not table.column(name).denied}
    if str(exc).startswith("Ambiguous column") or len(owners) > 1:
        return check.fail(
            "ambiguous_column",
            f"column {name!r} is ambiguous",
            f"qualify it with its table's alias; it is a column of {', '.join(sorted(owners)) or 'several sources'}",
        )
    options = {c.name: table.name for _, table in check.reads for c in table.allowed_columns}
    suggestion = closest(name, list(options))
    tables = sorted({table.name for _, table in check.reads})
    columns = "; ".join(
        f"{t}: {listing((c.name for c in check.manifest.table(t).allowed_columns), near=name)}"  # type: ignore[union-attr]
        for t in tables
    )
    hint = f"did you mean {options[suggestion]}.{suggestion}? " if suggestion else ""
    if f'"{name.lower()}"' in check.text.lower() or not columns:
        hint = "string values go in single quotes ('…'); double quotes name a column. " + hint
    return check.fail(
        "unknown_column",
        f"column {name!r} does not exist in the tables this query reads",
        hint + (f"columns: {columns}" if columns else ""),
    )


def _outer_selects(tree: exp.Expr) -> list[exp.Select]:
    """The selects whose projections name the result columns."""
    if isinstance(tree, exp.Select):
        return [tree]
    if isinstance(tree, exp.SetOperation):
        return _outer_selects(tree.left)
    return []


def _drop_invented_aliases(outer: list[exp.Select], unnamed: set[int]) -> None:
    """Unwrap ``expr AS _col_0`` that qualification added, unless the alias is referred to."""
    for select in outer:
        for projection in select.expressions:
            if isinstance(projection, exp.Alias) and id(projection.this) in unnamed:
                alias = projection.alias
                if not any(c.name == alias and not c.table for c in select.find_all(exp.Column)):
                    projection.replace(projection.this)


def _name_derived_tables(check: Check) -> None:
    """Give each derived table without an alias a fresh one that no name in the query uses."""
    if not check.subqueries:
        return
    unnamed = [s for s in check.subqueries if not s.alias and isinstance(s.parent, (exp.From, exp.Join))]
    if not unnamed:
        return
    taken = {t.alias_or_name.lower() for t in check.tables} | {c.table.lower() for c in check.columns}
    taken |= {s.alias.lower() for s in check.subqueries}
    counter = 0
    for subquery in unnamed:
        counter += 1
        while f"_d{counter}" in taken:
            counter += 1
        subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"_d{counter}")))


def _strip_schema_qualifiers(check: Check) -> None:
    """``schema.table.column`` → ``table.column`` for the manifest's schema; refuse any other.

    The table part names a FROM item of the query (the row filter may have replaced the table
    with a derived table of that alias), so the schema part adds nothing but a way to point
    elsewhere.
    """
    schema = (check.manifest.schema_ or "").lower()
    for column in check.columns:
        if not (column.args.get("db") or column.args.get("catalog")):
            continue
        if column.args.get("catalog") or not schema or column.text("db").lower() != schema:
            raise check.fail(
                "unknown_column",
                f"the qualified column name {column.sql(check.dialect)!r} is not allowed",
                "qualify a column with its table's name or alias only (t.column)",
            )
        column.set("db", None)


def _qualify(check: Check) -> dict[int, tuple[exp.Column, Table]]:
    """Qualify every column; map each real-table column to its table."""
    tree = check.tree
    assert tree is not None
    names = check.names
    check.shared_wanted = True  # it may write nodes the query did not have (``Check.shared_nodes``)
    check.shared_seen_current = False
    try:
        qualify_columns(tree, names.schema, dialect=names.names_dialect)
        validate_qualify_columns(tree)
    except OptimizeError as exc:
        raise _unknown(check, exc) from None
    except Exception:  # noqa: BLE001 - sqlglot's own assertion (a star over same-named columns)
        # ``qualify_columns`` fails on a shape it does not expect: fail closed.
        raise check.fail(
            "unsupported",
            "the columns of this query could not be resolved",
            "name the columns you need (t.a, t.b) and give every output column its own name",
        ) from None
    _refuse_unnamed_after(check, tree)
    return column_tables(tree, check.reads)


# -- no column read unnamed ---------------------------------------------------------------

_ROW_HINT = "name the columns you need (t.a, t.b) instead of the whole row"
#: The nodes ``_refuse_unnamed_after`` looks at.
_WATCHED = Instances(exp.Column, exp.Table, exp.Subquery, exp.TableColumn, exp.Star, exp.Join)


def _whole_row(check: Check, name: str) -> Exception:
    return check.fail("unsupported", f"{name!r} names a table, not a column: a whole row cannot be read", _ROW_HINT)


def _refuse_unnamed_before(check: Check) -> None:
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


def _row_names(nodes: list[exp.Expr]) -> set[str]:
    """Names of the FROM items (tables, derived tables) whose whole row a bare name would read;
    table functions read no table, and their alias names their value (``generate_series(…) g``)."""
    names = set()
    for node in nodes:
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Func):
                names.add(node.alias_or_name)
        elif node.alias:
            names.add(node.alias)
    return names


def _refuse_unnamed_after(check: Check, tree: exp.Expr) -> None:
    """After ``qualify_columns``: refuse whole rows, unexpanded stars and unexpanded joins."""
    columns: list[exp.Column] = []
    from_items: list[exp.Expr] = []
    for node in _WATCHED(tree):
        if isinstance(node, exp.Column):
            columns.append(node)
        elif isinstance(node, (exp.Table, exp.Subquery)):
            from_items.append(node)
        elif isinstance(node, exp.TableColumn):
            raise _whole_row(check, node.name)
        elif isinstance(node, exp.Star):
            if not isinstance(node.parent, exp.Count):
                raise check.fail(
                    "unsupported",
                    f"{(node.parent if isinstance(node.parent, exp.Column) else node).sql(check.dialect)} "
                    "could not be expanded: its columns are not known",
                    "name the columns you need (t.a, t.b); a star is expanded only over declared tables "
                    "and subqueries, not over table functions or a correlated outer FROM item",
                )
        elif isinstance(node, exp.Join) and (node.method == "NATURAL" or node.args.get("using")):
            raise check.fail(
                "unsupported",
                f"the join {node.sql(check.dialect)!r} would join on columns the sandbox cannot see",
                "write the join condition explicitly: JOIN t ON a.x = t.x",
            )
    names = _row_names(from_items)
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


def _respell(column: exp.Column, name: str, quoted: bool) -> None:
    """Write ``column`` as the manifest spells it (``schema.Derived.identifier``): its own
    identifier rewritten, which no other node holds, rather than a new one made."""
    identifier = column.this
    if isinstance(identifier, exp.Identifier):
        identifier.set("this", name)
        identifier.set("quoted", quoted)
    else:
        column.set("this", exp.Identifier(this=name, quoted=quoted))


def check_columns(check: Check) -> None:
    """Refuse denied and unknown columns; qualify every column; expand stars."""
    tree = check.tree
    assert tree is not None
    _check_denied(check)
    _refuse_unnamed_before(check)
    _strip_schema_qualifiers(check)
    _name_derived_tables(check)
    check_output_names(check)
    functions = declare_function_columns(check)
    outer = _outer_selects(tree)
    unnamed = {id(e) for select in outer for e in select.expressions if not isinstance(e, (exp.Alias, exp.Column, exp.Star))}
    written = check.written_names
    before = list(outer[0].expressions) if written is not None and outer else []
    check.column_tables = _qualify(check)
    settle_function_columns(check, functions)
    if unnamed:
        _drop_invented_aliases(outer, unnamed)
    readable = check.names.readable
    read = check.read_columns
    of_tables: dict[int, dict[str, tuple[str, bool, str]]] = {}  # per manifest table: ``readable``
    for column, table in check.column_tables.values():
        of_table = of_tables.get(id(table))
        if of_table is None:
            of_table = of_tables[id(table)] = readable[table.name.lower()]
        found = of_table.get(column.name.lower())  # ``table.column``, if it may be read
        if found is None:
            # Qualification wrote a qualifier that, in the column's own scope, names a table
            # without that column (an outer alias shadowed by an inner one): the database would
            # read whatever that table really has. Refuse rather than guess.
            raise check.fail(
                "ambiguous_column",
                f"column {column.sql(check.dialect)!r} does not name a readable column of {table.name!r} in its scope",
                "give the tables of a subquery aliases that differ from the outer query's, and qualify the column",
            )
        spelling, quoted, read_name = found
        if spelling != column.name or (quoted and not column.this.quoted):
            # Also a name that needs quotes where a node came without them: ``qualify_columns``
            # writes the columns a star over a USING join expands to unquoted (``a.a b``).
            _respell(column, spelling, quoted)
        read.add(read_name)
    if written is not None and len(before) == len(written):
        name_expanded(check, written, before, outer[0].expressions)
