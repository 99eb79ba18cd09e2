"""A query builds no string much larger than the data it reads.

One call that builds a huge value (``repeat('a', id * 500000)``) or matches a pattern against
one runs inside a single step no database interrupts: PostgreSQL's ``LIKE`` ignores cancel until
it is done, SQLite checks its interrupt flag only between VM steps, MariaDB its kill flag only
between rows. ``sizes.py`` makes every count and width a number of at most ``MAX_WIDTH``; this
rule bounds what those numbers can add up to:

- **constants**: a string built only from literals (``repeat(repeat('a', 1000), 1000)``,
  thousands of ``repeat('x', 1000) || …``) is at most ``MAX_CONSTANT_CHARS`` characters;
- **data**: the calls that multiply the size of a value computed from the data —
  ``repeat(x, n)`` (× n), ``replace(x, from, to)`` (× len(to) / len(from)),
  ``regexp_replace(x, p, r)`` (× 1 + len(r), back-references included) — multiply, over the
  whole query, to at most ``MAX_GROWTH``. The whole query, not one nesting chain: a CTE or a
  derived table hands a grown value on under a new column name, and the product over every
  call bounds every chain, whatever names it goes through. The replacement of ``replace`` /
  ``regexp_replace`` must be a literal (a column could be as long as the data). A
  concatenation (``||``, ``concat``, ``printf``…) counts too, as the number of values it joins,
  when it joins one value twice (``x || x || x``) or joins values of a CTE, a derived table
  or a subquery (which may have been grown already): concatenating distinct table columns
  only rebuilds a row, but ``c.x || c.x || …`` repeated thousands of times would not;
- **recursion**: the recursive member of ``WITH RECURSIVE`` runs once per row it produced,
  so growth there compounds: it may not call a multiplying function on data, and a
  concatenation (``||``, ``concat``, ``printf``, JSON/array constructors) may use at most one
  column that does not read a declared table directly (``s || s`` doubles per iteration);
- **aggregates**: text built by a string aggregate (``group_concat``, ``string_agg``,
  ``array_agg``, ``json_agg``…) grows with the row count (a cross join squares it), so it may
  not be fed to a multiplying call or a pattern match (``patterns.py``): not inside the call,
  and not from another query level (a CTE, a derived table or a subquery) of the same query.

``lpad`` / ``rpad`` / ``space`` build exactly the length they are given (a number of at most
``MAX_WIDTH``), so they grow nothing. Plain concatenation adds sizes, bounded by the text of
the query. What is left — a table that already holds huge values — is the data's own size,
bounded by the databases' limits (SQLite values ≤ 10 MB) and the statement timeout.
"""

from __future__ import annotations

from sqlglot import exp

from ..context import Check
from .sizes import MAX_WIDTH, format_padding
from ..walk import Instances

__all__ = ["check_growth", "StringAggregates", "MAX_GROWTH", "MAX_CONSTANT_CHARS"]

#: The largest factor by which the calls of one query may multiply the size of data values.
MAX_GROWTH = 10
#: The longest string a query may build from literals alone.
MAX_CONSTANT_CHARS = 10_000

#: Aggregates whose result is text (or an array or JSON text) as long as all their rows.
STRING_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.GroupConcat, exp.ArrayAgg, exp.JSONArrayAgg, exp.JSONObjectAgg, exp.JSONBObjectAgg,
    exp.ArrayConcatAgg, exp.ObjectAgg,
)
#: Nodes that build one value out of several (``s || s``), watched in recursive members.
_BUILDERS: tuple[type[exp.Expr], ...] = (
    exp.DPipe, exp.Concat, exp.ConcatWs, exp.Format, exp.JSONArray, exp.JSONObject, exp.Array,
    exp.ArrayConcat,
)
_ANONYMOUS_BUILDERS = frozenset({"printf", "format", "concat", "concat_ws", "json_array", "json_object",
                                 "jsonb_build_object", "json_build_object", "json_build_array",
                                 "jsonb_build_array"})
#: What makes an expression depend on the data: it is not a constant.
_DATA = (exp.Column, exp.Placeholder, exp.Parameter, exp.Query, exp.Subquery, exp.Star, exp.AggFunc,
         exp.Window)


def _literal_text(node: exp.Expr | None) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def _count(node: exp.Expr | None) -> int:
    """A count ``sizes.py`` let through: a number of at most ``MAX_WIDTH`` (else the maximum)."""
    if isinstance(node, exp.Literal) and node.is_int:
        return max(0, int(node.this))
    return MAX_WIDTH


def _replace_factor(check: Check, node: exp.Replace | exp.RegexpReplace) -> int:
    """How many times a replacement can multiply the size of its input (see the docstring)."""
    replacement = node.args.get("replacement")
    to = _literal_text(replacement) if replacement is not None else ""
    if to is None:
        raise check.fail(
            "string_size",
            f"{node.sql(check.dialect)[:200]!r}: the replacement must be a string literal",
            "write the replacement text in the query: replace(name, '-', ' ')",
        )
    if isinstance(node, exp.RegexpReplace):
        return 1 + len(to)  # each match may become the replacement with \0 / \& copies of itself
    replaced = _literal_text(node.expression)
    if not replaced:
        return max(1, len(to))
    return max(1, -(-len(to) // len(replaced)))


def _factor(check: Check, node: exp.Expr) -> int | None:
    """How many times ``node`` can multiply the size of its input, or None if it is no such call."""
    if isinstance(node, exp.Repeat):
        return _count(node.args.get("times"))
    if isinstance(node, (exp.Replace, exp.RegexpReplace)):
        return _replace_factor(check, node)
    return None


def _constant_size(check: Check, node: exp.Expr, sizes: dict[int, int | None]) -> int | None:
    """An upper bound on the characters of ``node`` when it is built from literals only."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    parts = [] if isinstance(node, _DATA) else [_constant_size(check, c, sizes) for c in node.iter_expressions()]
    size: int | None
    if isinstance(node, _DATA) or None in parts:
        size = None
    elif isinstance(node, exp.Literal):
        size = len(node.this)
    elif isinstance(node, (exp.Pad, exp.Space)):
        size = _count(node.expression if isinstance(node, exp.Pad) else node.this)
    else:
        factor = _factor(check, node)
        if factor is None:
            size = sum(p or 0 for p in parts) + (format_padding(node) or 0)
        else:
            inner = sizes.get(id(node.this)) or 0
            replacement = _literal_text(node.args.get("replacement")) or ""
            size = inner * factor + len(replacement)
    sizes[key] = size
    return size


def _scope(node: exp.Expr) -> exp.Expr | None:
    """The query level ``node`` belongs to: its nearest enclosing SELECT (or set operation)."""
    return node.find_ancestor(exp.Query)


#: The string aggregates of a tree, listed by the shared walk (``StringAggregates``).
_AGGREGATES = Instances(*STRING_AGGREGATES, shared=True)


class StringAggregates:
    """Where text built by a string aggregate could come from, for the nodes of one check.

    The aggregates of the tree, and the query level of each, are found once (on the first
    question) rather than once per node asked about: a query with many calls would otherwise
    walk the whole tree for each of them. They are a shared filter (``walk.py``): the callers
    ask only about nodes of the shared walk, which lists the aggregates too, so no walk of
    their own is made.
    """

    def __init__(self, check: Check) -> None:
        self.check = check
        self._found: list[tuple[exp.Expr, exp.Expr | None]] | None = None

    def origin(self, node: exp.Expr, subject: exp.Expr | None) -> exp.Expr | None:
        """A string aggregate whose text could reach ``node`` (a match or a multiplying call):
        one inside ``subject``, else the first of another query level than ``node``'s. (A tree
        without any has none inside ``subject`` either: no search of it.)"""
        found = self._found
        if found is None:
            found = self._found = [(a, _scope(a)) for a in self.check.shared_nodes(_AGGREGATES)]
        if not found:
            return None
        if subject is not None:
            inside = subject.find(*STRING_AGGREGATES)
            if inside is not None:
                return inside
        level = _scope(node)
        for aggregate, scope in found:
            if scope is not level:
                return aggregate
        return None


#: Calls whose result is a string at least as long as their string input.
_CARRIERS: tuple[type[exp.Expr], ...] = (exp.Repeat, exp.Replace, exp.RegexpReplace, exp.Paren, exp.Lower, exp.Upper)


def _grows_string(node: exp.Expr | None) -> bool:
    """Whether ``node`` builds a string out of its arguments (where constant sizes add up)."""
    return node is not None and (isinstance(node, _CARRIERS) or _is_builder(node))


def _is_builder(node: exp.Expr) -> bool:
    if isinstance(node, _BUILDERS):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in _ANONYMOUS_BUILDERS


def _concat_factor(check: Check, node: exp.Expr) -> int:
    """How many times an outermost concatenation can multiply the size of the data it joins:
    1 when it joins distinct columns of declared tables, else the number of values joined."""
    if node.parent is not None and _is_builder(node.parent):
        return 1
    columns = list(node.find_all(exp.Column))
    queries = list(node.find_all(exp.Query))
    seen = {(c.table, c.name) for c in columns}
    derived = any(id(c) not in check.column_tables for c in columns)
    if not queries and not derived and len(seen) == len(columns):
        return 1
    return len(columns) + len(queries)


def _check_recursive_member(check: Check, member: exp.Expr) -> None:
    """No compounding growth in the recursive member of a ``WITH RECURSIVE`` CTE."""
    for node in member.walk():
        if _factor(check, node) not in (None, 1) and _constant_size(check, node, {}) is None:
            raise check.fail(
                "string_size",
                f"{node.sql(check.dialect)[:200]!r} multiplies a value on every step of a recursive query",
                "grow values in a recursive query by appending literals or table columns (path || '/' || name)",
            )
        if not _is_builder(node) or (node.parent is not None and _is_builder(node.parent)):
            continue
        derived = [c for c in node.find_all(exp.Column) if id(c) not in check.column_tables]
        if len(derived) > 1:
            raise check.fail(
                "string_size",
                f"{node.sql(check.dialect)[:200]!r} joins {len(derived)} values of the recursive query "
                "itself, which can double their size on every step",
                "append literals or table columns to at most one value of the recursive query",
            )


def _recursive_members(check: Check) -> list[exp.Expr]:
    members = []
    for with_ in check.with_clauses:
        if not with_.args.get("recursive"):
            continue
        for cte in with_.expressions:
            body = cte.this
            if isinstance(body, exp.Union):
                members.append(body.expression)
    return members


#: Every node ``check_growth`` may act on: a multiplying call (``_factor``), a builder
#: (``_is_builder``), padding (``Pad``, ``Space``) or a ``printf`` / ``format`` (``format_padding``).
_SIZED = Instances(exp.Repeat, exp.Replace, exp.RegexpReplace, exp.Pad, exp.Space, exp.Format, exp.Anonymous,
                   *_BUILDERS, shared=True)


def check_growth(check: Check) -> None:
    """Refuse queries that can build strings far larger than their data (module docstring)."""
    assert check.tree is not None
    sizes: dict[int, int | None] = {}
    product = 1
    aggregates = StringAggregates(check)
    for node in check.shared_nodes(_SIZED):
        factor = _factor(check, node)
        if factor is None and _is_builder(node) and _constant_size(check, node, sizes) is None:
            factor = _concat_factor(check, node)
        sized = factor is not None or isinstance(node, (exp.Pad, exp.Space)) or format_padding(node) is not None
        if not sized:
            continue
        constant = _constant_size(check, node, sizes)
        if constant is not None:
            top = node
            while _grows_string(top.parent) and _constant_size(check, top.parent, sizes) is not None:
                top = top.parent
            total = _constant_size(check, top, sizes) or 0
            if total > MAX_CONSTANT_CHARS:
                raise check.fail(
                    "string_size",
                    f"{top.sql(check.dialect)[:200]!r} builds a string of up to {total:,} characters",
                    f"build constant strings of at most {MAX_CONSTANT_CHARS:,} characters",
                )
            continue
        if factor is None:
            continue  # padding and widths: a fixed number of characters, added to the data's
        origin = aggregates.origin(node, node if _is_builder(node) else node.this)
        if origin is not None and factor > 1:
            raise check.fail(
                "string_size",
                f"{node.sql(check.dialect)[:200]!r} may multiply text built by the aggregate "
                f"{origin.sql(check.dialect)[:80]!r}, whose size grows with the number of rows",
                "transform the values before aggregating them",
            )
        # A call that shrinks values (``repeat(x, 0)``) offsets no other: the product bounds
        # every chain of calls, and a factor below 1 would let a later call grow unchecked.
        product *= max(factor, 1)
        if product > MAX_GROWTH:
            raise check.fail(
                "string_size",
                f"{node.sql(check.dialect)[:200]!r}: the calls of this query could make values read from "
                f"the data {product} times larger (at most {MAX_GROWTH} is allowed)",
                "repeat or replace to grow values by a small factor, or return the values and format them later",
            )
    for member in _recursive_members(check):
        _check_recursive_member(check, member)
