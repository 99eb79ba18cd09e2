"""Pass 4: every column resolves against the manifest, and denied columns appear nowhere.

Denied columns first, by name, before qualification: a column spelled like a denied column of
a table the query reads is refused when its qualifier points at such a table, or when it has
no qualifier at all (it could bind to the denied one; the hint says to qualify it). This is
deliberately conservative: it never depends on how a database resolves ambiguous names.

A derived table without an alias (SQLite's ``SELECT a FROM (SELECT …)``) gets one first
(``_d1``…): its columns can then be qualified like any other source's, and the query means
the same.

Then every name that is also an output alias is resolved as the engine resolves it
(``engine_names.py``, the first wall): qualified with its source where the engine reads the
column, refused where the engine would read a column the manifest does not declare.

Then every column is resolved against the **allowed** columns only, so a denied column does
not exist as far as resolution knows: sqlglot's ``qualify_columns`` (with a schema of the
allowed columns) and ``validate_qualify_columns`` make every column ``alias.column``, expand
``SELECT *`` / ``t.*`` to the allowed columns, and report anything unresolved, which is refused
(a shape ``qualify_columns`` itself cannot handle, where it fails an assertion, is refused as
``unsupported``). Only those two steps of ``qualify`` run (identifiers were normalised by
``resolve_tables``; aliasing every table and quoting every identifier buy nothing here).

Table functions in FROM are sources with known columns (``table_functions.py``).

Qualification names every projection (``COUNT(*) AS _col_0``); on the outermost select those
invented aliases are removed again so result columns keep the names the database gives them.
The columns a star of the outermost select expanded to are named last (``names.name_expanded``).

Columns read without a column node naming them — whole rows (PostgreSQL's ``to_json(t)``),
``t.*`` outside a select list, stars qualification could not expand, NATURAL / USING joins it
could not rewrite — are refused by ``implicit.py``.

Names match without regard to case (``schema.py``). Last, each column is mapped to the table
it reads, scope by scope (``scopes.py``), for the enum check and for ``SafeQuery.columns``,
and written in the manifest's spelling, quoted where needed (``"Name"`` on PostgreSQL).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify_columns import qualify_columns, validate_qualify_columns

from structq.capabilities.hints import closest, listing

from structq.capabilities import Table

from . import implicit
from .context import Check
from .engine_names import check_output_names
from .names import name_expanded
from .scopes import column_tables
from .table_functions import declare_function_columns, settle_function_columns

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

    The table part names a source of the query (the row filter may have replaced the table
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
    implicit.check_after(check, tree)
    return column_tables(tree, check.reads)


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
    implicit.check_before(check)
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
            # without that column (an outer alias shadowed by an inner one): the engine would
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
