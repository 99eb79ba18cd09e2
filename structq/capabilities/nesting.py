"""How deeply a query text nests, read from its tokens before anything parses it.

sqlglot's parser, its tree walks and its generator recurse once or more per level of nesting:
about 500 nested parentheses (2 KB of text), ``NOT`` × 500, ``abs(`` × 500, a chain of 500
``||``, 1,000 ``UNION`` parts or 250 chained CTEs exhaust Python's recursion limit, and a
``RecursionError`` from the depths of a parser is no refusal a caller can act on. So every
layer that parses a query (the SQL sandbox, the plan's reading of a ``local`` step's tables)
first measures its tokens here — one linear pass, no recursion — and refuses what would
recurse too deeply (``too_complex``), well before the parser could.

What counts as a level, for every dialect alike:

- an opening bracket (``(``, ``[``, ``{``) and a ``CASE``, until its closing token;
- a run of prefix operators (``NOT NOT NOT x``, ``- - - x``, ``~ ~ x``);
- each link of an operator chain sqlglot nests rather than flattens (``a || b || c``,
  ``x::t::t``, ``a % b % c``, ``x IS NULL IS NULL``), until a ``,``, ``AND``, ``OR`` or
  ``WHEN``/``THEN``/``ELSE`` ends the expression.

``AND``/``OR``/``+``/``=`` chains and ``IN`` lists are read without recursion: they are
bounded by the query's size alone (``Limits.max_query_bytes`` / ``max_query_tokens``).
The limits sit far above what real queries write (the corpora's deepest nests 9 levels)
and far below where anything recurses out (a test runs every shape at its limit).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_SET_PARTS", "MAX_CTES", "Shape", "measure", "json_depth", "json_values"]

#: Levels of nesting (brackets, CASE, prefix-operator runs, nested operator chains). sqlglot's
#: pure-Python parser (the default install, without the compiled ``[fast]`` build) spends about
#: 25 frames per level of nested calls or brackets: 24 levels stay within Python's recursion
#: limit from a server thread already deep in its stack, so the pre-scan, not the recursion
#: limit, is what refuses (``tests/test_sandbox_bounds.py`` checks the limit itself).
MAX_DEPTH = 24
#: Queries joined by UNION / INTERSECT / EXCEPT, in the whole text.
MAX_SET_PARTS = 100
#: Common table expressions (``WITH name AS (…)``), in the whole text.
MAX_CTES = 50

#: What each token type (by name) does to the nesting; any other type is ``_OTHER``.
_OTHER, _OPEN, _CLOSE, _PREFIX, _CHAIN, _ENDS_EXPRESSION, _SET_OPERATOR, _ALIAS, _L_PAREN = range(9)
_ROLES = {
    **dict.fromkeys(("L_BRACKET", "L_BRACE", "CASE"), _OPEN),
    "L_PAREN": _L_PAREN,
    **dict.fromkeys(("R_PAREN", "R_BRACKET", "R_BRACE", "END"), _CLOSE),
    **dict.fromkeys(("NOT", "DASH", "PLUS", "TILDE"), _PREFIX),
    **dict.fromkeys(("DPIPE", "DCOLON", "MOD", "IS"), _CHAIN),
    **dict.fromkeys(("COMMA", "AND", "OR", "WHEN", "THEN", "ELSE", "SELECT", "FROM", "WHERE"), _ENDS_EXPRESSION),
    **dict.fromkeys(("UNION", "INTERSECT", "EXCEPT"), _SET_OPERATOR),
    "ALIAS": _ALIAS,
}
#: The roles by token type itself, filled on first sight of each type (reading an enum
#: member's ``name`` per token costs more than the rest of the pass).
_role_of: dict[Any, int] = {}


@dataclass(frozen=True)
class Shape:
    """What the tokens of one query text add up to."""

    tokens: int
    depth: int
    set_parts: int
    ctes: int

    def excess(self) -> str | None:
        """What exceeds a limit, in words naming the limit, or None when nothing does."""
        if self.depth > MAX_DEPTH:
            return f"the query nests {self.depth} levels deep (brackets, CASE, chained operators); at most {MAX_DEPTH} are accepted"
        if self.set_parts > MAX_SET_PARTS:
            return f"the query joins {self.set_parts} queries with UNION/INTERSECT/EXCEPT; at most {MAX_SET_PARTS} are accepted"
        if self.ctes > MAX_CTES:
            return f"the query defines {self.ctes} common table expressions; at most {MAX_CTES} are accepted"
        return None


def measure(tokens: Iterable[Any]) -> Shape:
    """The shape of a token stream (sqlglot ``Token``s), in one pass without recursion."""
    opened: list[tuple[int, int]] = []  # per open level: the depth it started at, the chain before it
    base = chain = prefix = deepest = count = set_parts = ctes = 0
    # For ``AS [NOT] [MATERIALIZED] (``: how many tokens since an ``AS`` that may open a CTE.
    since_alias = 99
    roles = _role_of
    for token in tokens:
        count += 1
        kind = token.token_type
        role = roles.get(kind)
        if role is None:
            role = roles[kind] = _ROLES.get(kind.name, _OTHER)
        if role == _L_PAREN or role == _OPEN:
            opened.append((base, chain))
            base = base + chain + prefix + 1
            chain = prefix = 0
            if role == _L_PAREN and since_alias <= 3:
                ctes += 1
        elif role == _CLOSE:
            if opened:
                base, chain = opened.pop()
            prefix = 0
        elif role == _PREFIX:
            prefix += 1
        elif role == _CHAIN:
            chain += 1
            prefix = 0
        else:
            prefix = 0
            if role == _ENDS_EXPRESSION:
                chain = 0
            elif role == _SET_OPERATOR:
                set_parts += 1
        if base + chain + prefix > deepest:
            deepest = base + chain + prefix
        # ``AS (``, ``AS MATERIALIZED (``, ``AS NOT MATERIALIZED (`` open a CTE's body (``CAST(x AS (``
        # is no SQL any dialect writes); any other token in between ends the chance.
        if role == _ALIAS:
            since_alias = 1
        elif since_alias <= 3 and (role == _PREFIX or kind.name == "VAR"):
            since_alias += 1
        else:
            since_alias = 99
    return Shape(tokens=count, depth=deepest, set_parts=set_parts + 1 if set_parts else 0, ctes=ctes)


def json_values(value: Any) -> Iterator[tuple[Any, int]]:
    """Every value of a JSON document (objects' keys included, as strings) with its depth
    (the document itself is depth 1), without recursion: a hostile body may nest deeply."""
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        yield node, level
        if isinstance(node, dict):
            for key, item in node.items():
                stack.append((key, level + 1))
                stack.append((item, level + 1))
        elif isinstance(node, (list, tuple)):
            stack.extend((item, level + 1) for item in node)


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, stopping once past ``limit`` (then ``limit + 1``)."""
    deepest = 0
    for _, level in json_values(value):
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
    return deepest
