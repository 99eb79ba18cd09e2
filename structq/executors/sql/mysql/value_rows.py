"""A long text list sent to MariaDB as rows (``IN (VALUES ('a'),('b'),…)``) where that is the
same condition, so that the server looks each value up in the column's index.

MariaDB rewrites a long ``IN`` list itself (``in_predicate_conversion_threshold``, 1,000
values): ``col IN (SELECT … FROM (VALUES …))``, which it can join through an index. It skips
that rewrite when the list's collation is not the column's, as when the connection speaks
``utf8mb4_general_ci`` (what ``charset=utf8mb4`` gives on 10.x) and the tables use another:
the ``IN`` is then tested against every row of the table (a binary search of the sorted list
per row). Past about 16,000 values (``optimizer_max_sel_args``) not even a range is tried.
100,000 codes against 1.2 million rows: 1.1–2.0 s as a list, 0.4 s as rows, about the JOIN.

The rows form is sent only where it is the same condition as the list:

- the server is MariaDB 10.3.3 or later (table value constructors in ``IN``);
- the list holds at least ``ROWS_FROM`` values, all ``str`` (no NULL, no numbers), and its
  rows fit in the server's in-memory temporary tables (``fits_in_memory``): past that the
  server writes them, and the list's matches, to temporary tables on disk (600,000 codes:
  16 s as rows, 4.6 s as a list; a million: 31 s against 7.4 s; the JOIN 4–6 s);
- the ``IN`` is one of the conditions ANDed in a ``WHERE`` or ``ON`` (``_joined``) of the
  statement or of a derived table, CTE or set operation in it, not of a subquery
  (``_run_once``), in a statement with no outer join, where the server joins the rows to the
  table once; under ``NOT`` or ``OR``, in a subquery run per row or beside a ``LEFT``/``RIGHT``
  join, it would scan them again for every row;
- the value they are compared with is a column of a table (through the sandbox's derived
  tables, ``(SELECT id, code FROM t) AS t``, when they pass the column on unchanged) whose
  type is text (``CHAR``, ``VARCHAR``, ``*TEXT``) in the connection's character set, read
  from ``information_schema`` on the same connection, just before the statement.

A text list compared with a number, a date or a column of another character set is compared
otherwise as rows than as a list (``'1.50'`` with an ``INT``; a ``latin1`` column refuses rows
of ``utf8mb4``), so it stays a list. Between texts of one character set the table column's
collation decides the comparison either way, as it does against the list's literals:
``tests/test_mysql_value_rows.py`` compares both forms over collations, column kinds and
hostile texts, through both drivers and both ways of reading backslashes.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlglot import exp

__all__ = ["ROWS_FROM", "ColumnPath", "compared_column", "fits_in_memory", "rows_allowed", "rows_fit"]

#: Lists of at least this many values may go as rows: MariaDB's own threshold for the same
#: rewrite (``in_predicate_conversion_threshold``'s default).
ROWS_FROM = 1000

#: The widest ``VARCHAR`` (in characters) a temporary table keeps as such; wider ones become
#: text columns (MariaDB's ``CONVERT_IF_BIGGER_TO_BLOB``).
VARCHAR_IN_MEMORY = 512

#: The column types whose comparison with a text value is a comparison of texts.
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})

#: (database or None for the current one, table, column).
ColumnPath = tuple["str | None", str, str]

_MARIADB_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)-MariaDB")


def rows_allowed(server_info: str) -> bool:
    """Whether a server that says ``server_info`` (the handshake's version, e.g.
    ``10.11.6-MariaDB-0+deb12u1`` or ``5.5.5-10.11.6-MariaDB``) reads ``IN (VALUES …)``:
    MariaDB 10.3.3 or later (MySQL writes rows otherwise, ``VALUES ROW(…)``)."""
    found = _MARIADB_VERSION.search(server_info or "")
    return found is not None and tuple(map(int, found.groups())) >= (10, 3, 3)


@functools.lru_cache(maxsize=512)
def compared_column(text: str, name: str) -> ColumnPath | None:
    """The base-table column that the list parameter ``name`` of ``text`` (``<column> IN
    :name``, ANDed in a ``WHERE`` or ``ON``) is compared with, or None when it is anything
    else (an expression, a column of a union, a CTE or a derived table that changes it), the
    ``IN`` stands elsewhere, the statement has an outer join, or it cannot be told."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.optimizer.scope import traverse_scope

    try:
        tree = sqlglot.parse_one(text, read="mysql")
        tests = [node for node in tree.find_all(exp.In)
                 if isinstance(node.args.get("field"), exp.Placeholder) and node.args["field"].name == name]
        if len(tests) != 1 or not isinstance(tests[0].this, exp.Column) or not _joined(tests[0]):
            return None
        if any(with_.args.get("recursive") for with_ in tree.find_all(exp.With)):
            return None  # a recursive CTE runs its part again per round
        if any(join.side for join in tree.find_all(exp.Join)):
            return None  # an outer join scans the rows again per row of its other side (5,000 codes: 32 s, a list 0.2 s)
        owner = next((scope for scope in traverse_scope(tree) if _in_scope(scope, tests[0])), None)
        if owner is None or not _run_once(owner):
            return None
        return _base_column(owner, tests[0].this)
    except Exception:  # noqa: BLE001 - what cannot be told (SqlglotError, RecursionError, …) keeps the list
        return None


def _joined(test: "exp.In") -> bool:
    """Whether ``test`` is one of the conditions ANDed in a ``WHERE`` or a join's ``ON``: where
    MariaDB joins an ``IN (VALUES …)`` to its table (a semi-join). Anywhere else (under ``NOT``,
    ``OR``, in ``HAVING`` or a selected expression) the server tests the rows again for every
    row of the table, with no index: 5,000 codes under ``NOT IN`` took 20 s."""
    from sqlglot import exp

    node: exp.Expression = test
    while isinstance(node.parent, (exp.And, exp.Paren)):
        node = node.parent
    parent = node.parent
    return isinstance(parent, exp.Where) or (isinstance(parent, exp.Join) and node.arg_key == "on")


def _run_once(scope: Any) -> bool:
    """Whether ``scope`` is the statement itself, or reached from it through derived tables,
    CTEs and set operations only, never through a subquery: a subquery may run once per row
    of the query around it (correlated), and the rows in it are then scanned each time (2,000
    rows of an outer query around 5,000 codes: 0.7 s where the list takes milliseconds)."""
    from sqlglot.optimizer.scope import ScopeType

    kept = {ScopeType.ROOT, ScopeType.DERIVED_TABLE, ScopeType.CTE, ScopeType.SET_OPERATION}
    while scope is not None:
        if scope.scope_type not in kept:
            return False
        scope = scope.parent
    return True


def _in_scope(scope: Any, node: "exp.Expression") -> bool:
    return any(found is node for found in scope.walk())


def _base_column(scope: Any, column: "exp.Column", depth: int = 0) -> ColumnPath | None:
    """``column`` of ``scope`` followed through derived tables that select it unchanged, to
    the table it comes from."""
    from sqlglot import exp
    from sqlglot.optimizer.scope import Scope

    if depth > 16:
        return None
    sources = scope.sources
    if column.table:
        source = sources.get(column.table)
    elif len(sources) == 1:
        source = next(iter(sources.values()))
    else:
        return None  # an unqualified column among several sources: not told here
    if isinstance(source, exp.Table):
        if not isinstance(source.this, exp.Identifier) or source.args.get("catalog"):
            return None
        return (source.db or None, source.name, column.name)
    if not isinstance(source, Scope) or not isinstance(source.expression, exp.Select) or source.is_cte:
        return None
    selected = [p for p in source.expression.expressions if p.alias_or_name == column.name]
    if len(selected) != 1:
        return None
    inner = selected[0].unalias() if isinstance(selected[0], exp.Alias) else selected[0]
    if not isinstance(inner, exp.Column):
        return None
    return _base_column(source, inner, depth + 1)


def fits_in_memory(count: int, widest: int, limit: int) -> bool:
    """Whether ``count`` rows of one text column at most ``widest`` characters wide fit in a
    MEMORY temporary table of ``limit`` bytes (the lesser of ``tmp_table_size`` and
    ``max_heap_table_size``), as the server holds the rows and then the matching rows' ids.

    A MEMORY row has a fixed width: the column's characters at 4 bytes each (utf8mb4), its
    length and NULL bytes, rounded up to 8, and about 16 bytes of the table's own per row.
    Measured on MariaDB 10.11 with 16 MiB: 400,000 seven-character codes stayed in memory,
    600,000 went to disk; this counts 48 bytes a row for them, so it switches a little early
    (at about 350,000). A value wider than ``VARCHAR_IN_MEMORY`` characters makes the column
    a text one, which a MEMORY table cannot hold.
    """
    if widest > VARCHAR_IN_MEMORY:
        return False
    row = -(-(4 * widest + 3) // 8) * 8 + 16
    return count * row <= limit


def rows_fit(dbapi_connection: Any, path: ColumnPath, count: int, widest: int) -> bool:
    """Whether ``path`` is a text column in the connection's character set, as the server
    says now (``information_schema.COLUMNS``, on this connection), and ``count`` rows of
    ``widest`` characters fit in its in-memory temporary tables (``fits_in_memory``)."""
    database, table, column = path
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(
            "SELECT DATA_TYPE, CHARACTER_SET_NAME = @@character_set_connection,"
            " LEAST(@@tmp_table_size, @@max_heap_table_size) FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s AND COLUMN_NAME = %s",
            (database, table, column))
        found = cursor.fetchall()
    except dbapi_connection.Error:  # the server would not say: the list, which is always right
        return False
    finally:
        cursor.close()
    if len(found) != 1:
        return False
    data_type, same_charset, limit = found[0]
    return str(data_type).lower() in _TEXT_TYPES and same_charset == 1 and fits_in_memory(count, widest, int(limit))
