"""Every function called is on the dialect's allowlist or in the manifest's ``functions``.

The lists live in ``structq/safety/functions.py``. A schema-qualified call (``evil.lower(x)``,
``pg_catalog.pg_sleep(1)``) is refused whatever its name: the qualifier picks a function the
allowlist never looked at. So is PostgreSQL's ``a OPERATOR(schema.op) b``, which calls the
function behind an operator of any schema; the plain operators (``+``, ``||``, ``->>``) are
nodes of their own and stay allowed.

A function in FROM (``json_each(…)``, ``generate_series(…)``) is a FROM item, not a call:
``resolve_tables`` checked it against the dialect's table functions, so it is not looked up
here again — where it is called as a scalar it is an ordinary call and must be on the list.
"""

from __future__ import annotations

from sqlglot import exp

from ...functions import allowed_families, is_allowed, written_name
from ..context import Check

__all__ = ["check_functions"]


def _refuse_operator(check: Check, node: exp.Operator) -> Exception:
    return check.fail(
        "denied_function",
        f"OPERATOR({node.text('operator')}) is not allowed: it calls whatever function that operator names",
        "write the operator itself (a + b, a || b) instead of OPERATOR(schema.op)",
    )


def check_functions(check: Check) -> None:
    """Refuse any call that is not allowed for this source's dialect."""
    dialect = check.sql_dialect
    extra = check.manifest.functions
    for node in check.functions:
        if isinstance(node, exp.Operator):
            raise _refuse_operator(check, node)
        parent = node.parent
        if isinstance(parent, exp.Table) and node.arg_key == "this":
            continue  # a table function, checked by ``resolve_tables``
        qualified = isinstance(parent, exp.Dot) and node.arg_key == "expression"
        if not qualified and is_allowed(node, dialect, extra):
            continue
        name = written_name(node, check.parsed_text)
        if not qualified and name.lower() in {e.lower() for e in extra}:
            continue  # the manifest lists it as written (``convert_tz``), sqlglot knows it otherwise
        what = f"the schema-qualified function {parent.sql(check.dialect)!r}" if qualified else f"function {name}()"
        raise check.fail(
            "denied_function",
            f"{what} is not allowed on {dialect} sources",
            f"use allowed functions — {allowed_families(dialect)}; or ask for it to be added to the "
            "manifest's functions: list",
        )
