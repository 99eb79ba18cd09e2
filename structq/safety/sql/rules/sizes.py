"""No string-building function is asked for a huge string by a constant.

``randomblob`` and ``zeroblob`` are off the function allowlist because one call allocates as
much as it is told to. Allowed functions can be told the same: SQLite's
``printf('%.*c', 200000000, 'x')`` builds a 200 MB string inside one call (where no statement
timeout can interrupt it), and so do ``printf('%200000000c', 'x')``, PostgreSQL's
``format('%*s', …)``, and ``repeat`` / ``lpad`` / ``rpad`` / MySQL's ``space`` with a large
count. Refused here:

- a width or precision taken from an argument (``*`` in a ``printf`` / ``format`` format
  string): write the number in the format instead;
- a width, precision or count written as a number larger than ``MAX_WIDTH``;
- a ``printf`` / ``format`` whose format string is not a string literal (its directives could
  not be read), and a count that is not written as a number.

A count computed from columns (``repeat('*', t.stars)``, ``lpad(x, id * 500000)``) is refused
too: the data decides it, and ``repeat('a', id * 500000) LIKE …`` showed that one such call can
build values no timeout interrupts. ``MAX_WIDTH`` leaves room for any padding a report needs;
``growth.py`` bounds what several calls can multiply to.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..context import Check

__all__ = ["check_sizes", "format_padding", "MAX_WIDTH"]

#: The largest width, precision or repeat count a query may write.
MAX_WIDTH = 1000

#: A directive's flags, position, width and precision, up to (not including) its type letter.
_DIRECTIVE = re.compile(r"%[^A-Za-z%]*")
_NUMBER = re.compile(r"\d+")


def _format_string(node: exp.Func) -> exp.Expr | None:
    """The format argument of ``printf`` / ``format``, or None for any other function."""
    if isinstance(node, exp.Format):
        return node.this
    if isinstance(node, exp.Anonymous) and node.name.lower() == "printf":
        return node.expressions[0] if node.expressions else None
    return None


def format_padding(node: exp.Expr) -> int | None:
    """The characters the widths and precisions of a ``printf`` / ``format`` call can add
    (``printf('%10s|%5d', …)``: 15), or None when ``node`` is no such call with a literal format."""
    fmt = _format_string(node) if isinstance(node, exp.Func) else None
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return None
    return sum(max(map(int, _NUMBER.findall(d)), default=0) for d in _DIRECTIVE.findall(fmt.this))


def _count(node: exp.Func) -> exp.Expr | None:
    """The length or count argument of a function that repeats or pads a string."""
    if isinstance(node, exp.Repeat):
        return node.args.get("times")
    if isinstance(node, exp.Pad):
        return node.expression
    if isinstance(node, exp.Space):
        return node.this
    return None


def _check_format(check: Check, node: exp.Func, fmt: exp.Expr) -> None:
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise check.fail(
            "string_size",
            f"the format of {node.sql(check.dialect)!r} must be a string literal",
            "write the format string in the query ('%d items')",
        )
    for directive in _DIRECTIVE.findall(fmt.this):
        if "*" in directive or any(int(n) > MAX_WIDTH for n in _NUMBER.findall(directive)):
            raise check.fail(
                "string_size",
                f"the format directive {directive!r}… asks for a width or precision that is "
                f"taken from an argument or larger than {MAX_WIDTH}",
                f"write widths and precisions as numbers of at most {MAX_WIDTH} in the format string",
            )


def _check_count(check: Check, node: exp.Func, count: exp.Expr) -> None:
    if isinstance(count, exp.Literal) and count.is_int and int(count.this) <= MAX_WIDTH:
        return
    raise check.fail(
        "string_size",
        f"{node.sql(check.dialect)[:200]!r}: the length must be written as a number of at most {MAX_WIDTH}",
        f"repeat or pad to a fixed length of at most {MAX_WIDTH} characters (repeat('-', 20), lpad(code, 6, '0'))",
    )


def check_sizes(check: Check) -> None:
    """Refuse constant requests for huge strings (see the module docstring)."""
    for node in check.functions:
        fmt = _format_string(node)
        if fmt is not None:
            _check_format(check, node, fmt)
            continue
        count = _count(node)
        if count is not None:
            _check_count(check, node, count)
