"""Pass 5: every function called is on the dialect's allowlist or in the manifest's ``functions``.

The lists live in ``structq/safety/functions.py``. A schema-qualified call (``evil.lower(x)``,
``pg_catalog.pg_sleep(1)``) is refused whatever its name: the qualifier picks a function the
allowlist never looked at.
"""

from __future__ import annotations

from sqlglot import exp

from ..functions import allowed_families, function_name, is_allowed
from .context import Check

__all__ = ["check_functions"]


def check_functions(check: Check) -> None:
    """Refuse any call that is not allowed for this source's dialect."""
    dialect = check.manifest.sql_dialect
    extra = check.manifest.functions
    for node in check.functions:
        parent = node.parent
        qualified = isinstance(parent, exp.Dot) and node.arg_key == "expression"
        if not qualified and is_allowed(node, dialect, extra):
            continue
        name = function_name(node)
        what = f"the schema-qualified function {parent.sql(check.dialect)!r}" if qualified else f"function {name}()"
        raise check.fail(
            "denied_function",
            f"{what} is not allowed on {dialect} sources",
            f"use allowed functions — {allowed_families(dialect)}; or ask for it to be added to the "
            "manifest's functions: list",
        )
