"""No placeholder the author wrote: only the sandbox binds values.

A query may carry values in only two ways: literals written in its text, and references to
earlier steps (``<key>``, ``<key.column>``) that ``references.py`` binds from the values the
``Engine`` resolved. A placeholder the author wrote (``:x``, ``?``, ``%s``, ``$1``, ``@x``,
``@@x``) would be bound by whoever runs the text, with values no rule has seen — or, for
``@@x``, read a server setting. ``parse`` lists them (``Check.forbidden``) with the statements
``statement.py`` refuses; once that rule has passed, only placeholders are left there. A
template plan's slot parameter (``:month_start``) is not one of them: ``parse`` binds it to
the value the template matched.
"""

from __future__ import annotations

from ..context import Check

__all__ = ["reject_placeholders"]


def reject_placeholders(check: Check) -> None:
    """Values reach the query only as references (``<key>``) and row-filter variables."""
    for node in check.forbidden:
        raise check.fail(
            "placeholder",
            f"the query contains the placeholder {node.sql(check.dialect)!r}",
            "write literal values, or <step> / <step.column> to use an earlier step's result; "
            "the sandbox binds all parameters itself",
        )
