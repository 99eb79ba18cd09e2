"""SQLite's double-quoted strings (``WHERE country = "USA"``) become string literals.

SQLite reads ``"x"`` as a column when one of that name is in scope and as the string ``'x'``
otherwise; sqlglot always reads an identifier. Queries written for SQLite (Spider's gold SQL
among them) rely on the fallback, so refusing them as unknown columns would refuse what the
database runs. The sandbox does what SQLite does, but only where it is certain no column is
meant: the name is double-quoted (not ``[x]`` or `` `x` ``), unqualified, not a column of
any declared table (denied ones included), not an alias or a CTE / derived-table column
anywhere in the query, and the query reads no table function (whose columns the manifest
does not list). Anything else is left to the column check, which refuses unknown names with
the hint to use single quotes.

The regenerated query carries a single-quoted literal, so the database can no longer read it as
a column: if the database has a column of that name that the manifest does not declare, the
query sees the string, never the column.
"""

from __future__ import annotations

from sqlglot import exp

from ..context import Check

__all__ = ["read_double_quoted_strings"]


def _query_names(check: Check) -> set[str]:
    """Lower-case names the query itself gives columns: aliases, CTE and derived-table columns
    (the declared columns' names come from ``schema.Derived.column_names``, once per manifest).

    From the aliases ``parse.scan`` listed, not a walk of the tree: the rules since add only
    table aliases without columns (``tables.py``, for a table written in another spelling),
    which give no column a name.
    """
    names: set[str] = set()
    for node in check.aliases:
        if isinstance(node, exp.Alias):
            names.add(node.alias.lower())
        else:
            names.update(c.name.lower() for c in node.columns)
    return names


def _written_text(check: Check, identifier: exp.Identifier) -> str | None:
    """The identifier's text as written, when it was written in double quotes."""
    start, end = identifier.meta.get("start"), identifier.meta.get("end")
    text = check.parsed_text
    if start is None or end is None or text[start : start + 1] != '"' or text[end : end + 1] != '"':
        return None
    return text[start + 1 : end].replace('""', '"')


def read_double_quoted_strings(check: Check) -> None:
    """On SQLite, turn double-quoted names that can only be strings into string literals."""
    if check.sql_dialect != "sqlite" or not check.columns or '"' not in check.parsed_text:
        return  # (a double-quoted name is written with a ``"``: most queries have none)
    if any(isinstance(table.this, exp.Func) for table in check.tables):
        return
    candidates = [c for c in check.columns if not c.table and isinstance(c.this, exp.Identifier) and c.this.quoted]
    if not candidates:
        return
    declared, named = check.names.column_names, _query_names(check)
    replaced: set[int] = set()
    for column in candidates:
        lowered = column.name.lower()
        if lowered in declared or lowered in named:
            continue
        written = _written_text(check, column.this)
        if written is None:
            continue
        column.replace(exp.Literal.string(written))
        replaced.add(id(column))
    if replaced:
        # By identity: ``list.remove`` compares nodes by their whole structure (sqlglot's
        # ``__eq__``), which is slower and can pick another column spelled the same way.
        check.columns[:] = [c for c in check.columns if id(c) not in replaced]
