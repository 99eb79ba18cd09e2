"""Every table read is declared; every other FROM item (a CTE, a table function, DUAL) is what the database reads.

A table name is a CTE reference only where that CTE is visible: in the query body of its
WITH, in later CTEs of the same WITH, and in its own body when the WITH is RECURSIVE. Anywhere
else the name means the real table — ``WITH t AS (SELECT * FROM t)`` reads the real ``t`` —
so the check (and the row filter) applies. In doubt a name counts as a real table: that can
only refuse a query, never let one through unchecked.

The CTEs of a WITH are first written in the order they depend on. In ``WITH RECURSIVE a AS
(SELECT … FROM b), b AS (…)`` the name ``b`` in ``a`` is the later CTE on PostgreSQL and
MariaDB: with RECURSIVE every CTE of the WITH sees every other. SQLite resolves a later CTE's
name so even without RECURSIVE. sqlglot's scopes, and the rule of ``is_cte_reference``, see
only earlier CTEs (and, with RECURSIVE, the CTE itself), so such a query would be refused — ``b`` an undeclared table — or ``b`` checked as a real table
of that name while the database reads the CTE.

Where the database resolves forward references, the order of the CTEs does not change what the
query means, so the CTEs are reordered so that each comes after the ones it names (otherwise
keeping the order written). Every reference then points backwards, and the checks and the
database agree on what each name is — in the query that runs, which is the reordered one. CTEs
that name each other in a cycle are left as written (no database runs mutual recursion; the
names then fail as tables).

A table may be qualified with the manifest's ``schema`` (``consumer_div.users``): that is
where the declared tables live, so the qualified name reaches the same object. Any other
qualifier is refused, the dialect's default schema included (``public.x``, ``main.x``) when
the manifest does not name it: a foreign qualifier may reach a different object of the same
name, and system catalogs (``information_schema``, ``pg_catalog``, ``mysql``) are reached
exactly that way — they stay refused even if a manifest named one as its schema. A catalog
(``db.schema.table``) is always refused. Undeclared unqualified catalogs (``sqlite_master``,
``pg_user``) fail as unknown tables like any other. MySQL's ``FROM DUAL`` is the keyword for
"no table" where it is written unquoted and unqualified; sqlglot would regenerate it as the
quoted `` `dual` ``, which names a real table, so it is written back as the bare keyword.

A table matches its manifest entry without regard to case, and is then written in the
manifest's spelling, quoted when the dialect would otherwise fold it (``"Patient"`` on
PostgreSQL, `` `Patient` `` on MySQL, whose table names are case-sensitive on most
systems). Where the query named the table without an alias and in another spelling, its
old name becomes the alias, so the query's ``name.column`` references still resolve. An
accepted schema qualifier is kept (a reader sees where the table lives) and written in the
manifest's spelling too.

Every declared table the query reads is then written qualified with the manifest's ``schema``
(on PostgreSQL, MySQL/MariaDB and any other dialect but SQLite), whether or not the query
qualified it: an unqualified name resolves through the session's ``search_path`` (or the
connection's current database), where an undeclared table of the same name in ``public`` or
in the URL's database would answer instead of the declared one. The executor pins the session
to the same schema as a second guard. SQLite is left unqualified: its connection holds one
database file (ATTACH is disabled), so a bare name has nowhere else to resolve.

A table reference carries only what reads the table as it is now: an alias, index hints,
``ONLY``, a sample, a partition, ``WITH ORDINALITY``. Temporal clauses (MariaDB's ``FOR
SYSTEM_TIME ALL``, ``AS OF``, ``CHANGES``…) are refused: sqlglot rewrites some into another
dialect's syntax (``FOR TIMESTAMP ALL``), and the row filter's derived table would drop the
clause silently — a filter, or the query's meaning, must never be lost without a word.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from structq.capabilities.hints import closest, listing

from ...functions import TABLE_FUNCTIONS, is_table_function, written_name
from ...query import SYSTEM_SCHEMAS, qualifying_schema
from ..context import Check
from ..schema import identifier

__all__ = ["resolve_tables", "is_cte_reference", "qualify_tables"]



#: What a table reference may carry besides its name (see the module docstring).
_TABLE_ARGS = frozenset(
    "this db catalog alias laterals joins pivots hints ordinality only partition sample indexed".split()
)
_CLAUSE_NAMES = {"version": "FOR SYSTEM_TIME / AS OF", "when": "AT / BEFORE", "system_time": "FOR SYSTEM_TIME"}


def _check_clauses(check: Check, table: exp.Table) -> None:
    for key, value in table.args.items():
        if value and key not in _TABLE_ARGS:
            raise check.fail(
                "unsupported",
                f"the clause {_CLAUSE_NAMES.get(key, key.upper())} on table {table.name!r} is not supported",
                "read the table as it is now, without temporal (FOR SYSTEM_TIME, AS OF) or other clauses",
            )


def _defining(ctes: list[exp.CTE], name: str) -> list[exp.CTE]:
    return [cte for cte in ctes if cte.alias == name]


def visible_ctes(table: exp.Table) -> list[exp.CTE]:
    """The CTEs ``table`` names, of the nearest WITH that defines its name where it stands
    (see the module docstring); none: it is no CTE reference."""
    if table.args.get("db") or table.args.get("catalog"):
        return []
    name = table.name
    child: exp.Expr = table
    parent = table.parent
    while parent is not None:
        found: list[exp.CTE] = []
        if isinstance(parent, exp.With) and isinstance(child, exp.CTE):
            # By identity: ``list.index`` would compare whole CTE bodies for equality.
            position = next(i for i, cte in enumerate(parent.expressions) if cte is child)
            found = _defining(parent.expressions[: position + (1 if parent.args.get("recursive") else 0)], name)
        elif isinstance(parent, exp.Query):
            with_ = parent.args.get("with_")
            if with_ is not None and child is not with_:
                found = _defining(with_.expressions, name)
        if found:
            return found
        child, parent = parent, parent.parent
    return []


def is_cte_reference(table: exp.Table) -> bool:
    """Whether ``table`` names a CTE visible at its position (see the module docstring)."""
    return bool(visible_ctes(table))


def _table_function(check: Check, table: exp.Table) -> None:
    func = table.this
    if not is_table_function(func, check.sql_dialect):
        name = written_name(func, check.parsed_text)
        allowed = TABLE_FUNCTIONS.get(check.sql_dialect, frozenset())
        raise check.fail(
            "denied_function",
            f"the table function {name}() is not allowed in FROM",
            f"read declared tables; table functions allowed here: {', '.join(sorted(allowed)) or 'none'}",
        )


def _is_dual(check: Check, table: exp.Table) -> bool:
    """MySQL's ``FROM DUAL``: the unquoted keyword, unqualified, where no table is declared so."""
    name = table.this
    return (
        check.sql_dialect == "mysql"
        and isinstance(name, exp.Identifier)
        and not name.quoted
        and name.name.lower() == "dual"
        and not any(table.args.get(k) for k in ("db", "catalog", "alias", "joins", "laterals", "pivots"))
        and "dual" not in check.names.tables
    )


def _respell(check: Check, table: exp.Table, name: str) -> None:
    """Write ``table`` as the manifest spells it, keeping what the query called it."""
    if table.name == name:
        return
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name, quoted=table.this.quoted)))
    table.set("this", check.names.identifier(name))


def _check_qualifier(check: Check, table: exp.Table) -> None:
    """Accept only the manifest's schema as a qualifier, and write it in the manifest's spelling.

    Identifiers were normalised (``names_dialect``), so the comparison ignores case as the
    table-name match does.
    """
    schema = check.manifest.schema_
    qualifier = table.text("db")
    if (
        schema is None
        or table.args.get("catalog")
        or qualifier.lower() != schema.lower()
        or qualifier.lower() in SYSTEM_SCHEMAS
    ):
        if schema and schema.lower() not in SYSTEM_SCHEMAS:
            allowed = f"write the table name alone ({table.name!r}) or qualified with this source's schema ({schema}.{table.name})"
        else:
            allowed = f"write the table name alone ({table.name!r}); this source declares no schema to qualify it with"
        if qualifier.lower() in SYSTEM_SCHEMAS:
            allowed = f"{qualifier} is a system schema and is never readable; " + allowed
        declared = listing((t.name for t in check.manifest.tables), near=table.name)
        raise check.fail(
            "unknown_table",
            f"the qualified table name {table.sql(check.dialect)!r} is not allowed",
            f"{allowed}; declared tables: {declared}",
        )
    if qualifier != schema:
        table.set("db", identifier(schema, check.dialect))


def qualify_tables(tree: exp.Expr, schema: str, dialect: Dialect) -> None:
    """Qualify every real, unqualified table of ``tree`` with ``schema`` (row-filter subqueries)."""
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Func) and not table.args.get("db") and not is_cte_reference(table):
            table.set("db", identifier(schema, dialect))


# -- the CTEs of a WITH, in the order they depend on ----------------------------------------

#: Dialects that resolve a later CTE's name without RECURSIVE.
_FORWARD_ALWAYS = frozenset({"sqlite"})


def _dependencies(ctes: list[exp.CTE]) -> list[set[int]]:
    """Per CTE, the positions of the other CTEs of the WITH whose names its body reads."""
    positions = {cte.alias.lower(): i for i, cte in enumerate(ctes)}
    found: list[set[int]] = []
    for i, cte in enumerate(ctes):
        names = {t.name.lower() for t in cte.this.find_all(exp.Table) if not t.args.get("db")}
        found.append({positions[n] for n in names if n in positions and positions[n] != i})
    return found


def _ordered(dependencies: list[set[int]]) -> list[int] | None:
    """A stable topological order, or None for a cycle."""
    done: list[int] = []
    pending = list(range(len(dependencies)))
    while pending:
        ready = next((i for i in pending if dependencies[i] <= set(done)), None)
        if ready is None:
            return None
        done.append(ready)
        pending.remove(ready)
    return done


def order_ctes(check: Check) -> None:
    """Reorder the CTEs of each WITH whose database resolves forward references."""
    for with_ in check.with_clauses:
        if not (with_.args.get("recursive") or check.sql_dialect in _FORWARD_ALWAYS):
            continue
        ctes = list(with_.expressions)
        order = _ordered(_dependencies(ctes))
        if order is not None and order != list(range(len(ctes))):
            with_.set("expressions", [ctes[i] for i in order])


def resolve_tables(check: Check) -> None:
    """Record each real table read with its manifest entry; refuse anything undeclared."""
    assert check.tree is not None  # identifiers were normalised by ``parse.scan``
    if check.with_clauses:
        order_ctes(check)  # forward references to later CTEs become backward ones
    declared = check.names.tables
    schema = qualifying_schema(check.manifest.schema_, check.sql_dialect)
    for table in check.tables:
        _check_clauses(check, table)
        if isinstance(table.this, exp.Func):
            _table_function(check, table)
            continue
        if check.with_clauses and is_cte_reference(table):
            continue  # without a WITH anywhere, no name can be a CTE's
        if _is_dual(check, table):
            table.set("this", exp.Var(this="DUAL"))  # the keyword, written back unquoted
            continue
        if table.args.get("db") or table.args.get("catalog"):
            _check_qualifier(check, table)
        entry = declared.get(table.name.lower())  # ``Manifest.table``, as a dictionary
        if entry is None:
            declared = [t.name for t in check.manifest.tables]
            suggestion = closest(table.name, declared)
            hint = f"did you mean {suggestion!r}? " if suggestion else ""
            raise check.fail(
                "unknown_table",
                f"table {table.name!r} is not declared in source {check.manifest.source!r}",
                hint + f"declared tables: {listing(declared, near=table.name)}",
            )
        if isinstance(table.args.get("alias"), exp.TableAlias) and table.args["alias"].columns:
            raise check.fail(
                "unsupported",
                f"column aliases on table {table.name!r} are not supported",
                "alias the columns in the select list instead (col AS name)",
            )
        _respell(check, table, entry.name)
        if schema is not None and not table.args.get("db"):
            table.set("db", identifier(schema, check.dialect))
        check.reads.append((table, entry))
