"""The statement is a read-only query, with nothing that writes hidden inside.

The root must be a SELECT or a set operation (UNION / INTERSECT / EXCEPT), possibly with
CTEs. Anywhere in the tree — writable CTEs, subqueries, set-operation branches — there may be
no write, DDL, command, transaction, PRAGMA, ATTACH, COPY, ``INTO``, locking clause or
optimizer hint (``parse.FORBIDDEN`` lists the node kinds): each would change data, lock rows or
steer the database, and the query's text only reads. Placeholders, which ``parse`` lists with
those nodes, are left to ``placeholders.py``.
"""

from __future__ import annotations

from sqlglot import exp

from ..context import Check

__all__ = ["check_statement_kind"]

_QUERY_ROOTS = (exp.Select, exp.Union, exp.Intersect, exp.Except)
#: Transaction-control and maintenance statements that some sqlglot versions parse as a
#: ``Command`` (30.31) and others as a bare name (30.30): the same refusal either way, as for
#: ``COMMIT`` or ``PRAGMA``.
_STATEMENT_COMMANDS = frozenset({"SAVEPOINT", "RELEASE", "REINDEX"})
_READ_ONLY_HINT = "only read-only SELECT queries (optionally WITH … SELECT, UNION, INTERSECT, EXCEPT) are accepted"


def _code(node: exp.Expr) -> str:
    if isinstance(node, exp.Lock):
        return "locking"
    if isinstance(node, exp.Hint):
        return "unsupported"
    if isinstance(node, (exp.Command, exp.Pragma, exp.Attach, exp.Detach, exp.Set, exp.Transaction,
                         exp.Commit, exp.Rollback)):
        if isinstance(node, exp.Command) and str(node.this).upper() not in _STATEMENT_COMMANDS:
            return "unsupported"
        return "not_a_query"
    return "write"


def _describe(node: exp.Expr) -> str:
    if isinstance(node, exp.Command):
        return f"the command {str(node.this).upper()!r}"
    if isinstance(node, exp.Lock):
        return "a locking clause (FOR UPDATE / FOR SHARE)"
    if isinstance(node, exp.Into):
        return "SELECT … INTO"
    if isinstance(node, exp.Hint):
        return "an optimizer hint (/*+ … */)"
    return f"a {node.key.upper()} statement"


def check_statement_kind(check: Check) -> None:
    """Refuse anything but a read-only query, wherever in the tree it hides."""
    tree = check.tree
    assert tree is not None
    if check.forbidden:
        statement = next((n for n in check.forbidden if not isinstance(n, (exp.Placeholder, exp.Parameter,
                                                                         exp.SessionParameter))), None)
        if statement is not None:
            where = "" if statement is tree else " inside the query"
            raise check.fail(_code(statement), f"{_describe(statement)} is not allowed{where}", _READ_ONLY_HINT)
    if not isinstance(tree, _QUERY_ROOTS):
        raise check.fail("not_a_query", f"a {tree.key.upper()} statement is not a query", _READ_ONLY_HINT)

