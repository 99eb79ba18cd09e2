"""LIKE, GLOB, SIMILAR TO and regular-expression patterns are short literals.

Matching time grows with the pattern and with the text matched, and no database stops one
match once it has started: PostgreSQL's ``LIKE`` ignores ``statement_timeout`` and cancel
until it is done (a 20 MB text against a 2,500-character pattern: 259 s), SQLite's ``LIKE`` /
``GLOB`` run inside one VM step (10 MB against 100 characters: 7 s), and a backtracking regex
matcher (Python's ``re``, which SQLite's ``REGEXP`` used to call) can take exponential time on
a 10-character pattern. So, on every dialect:

- a pattern must be *written in the query*: a string literal, possibly wrapped in
  ``LOWER`` / ``UPPER`` or joined with ``||`` / ``CONCAT`` to other literals, or a list of
  such (``LIKE ANY (ARRAY['a%', 'b%'])``). Patterns taken from columns, references
  (``<step>``), subqueries or computed expressions are refused: their length is whatever the
  data or an earlier step makes it;
- a pattern is at most ``MAX_PATTERN_CHARS`` characters long (the longest pattern among the
  gold queries of the defog, Spider and BIRD corpora is 31 characters);
- PostgreSQL's ``substring(s FROM p)`` is a regular expression when ``p`` is text: its
  argument is a pattern unless it is a number (a numeric literal, column or arithmetic);
- the text a pattern is matched against may not come from a string aggregate
  (``group_concat``, ``string_agg``, ``array_agg``…), whose size grows with the row count:
  ``growth.StringAggregates`` says where one could flow in.

The other half of the bound, the size of the text matched, is ``growth.py``'s. Regular
expressions are matched by the database's own regex library (PostgreSQL's and MariaDB's honour
cancellation or a match limit); on SQLite the executor registers ``REGEXP`` with RE2, which runs
in time linear in the text (``structq/executors/regexp.py``).
"""

from __future__ import annotations

from sqlglot import exp

from ...query import MAX_PATTERN_CHARS
from ..context import Check
from ..walk import Instances
from .growth import StringAggregates

__all__ = ["check_patterns", "MAX_PATTERN_CHARS", "pattern_of"]

#: Binary predicates whose right-hand side is a pattern.
_MATCHES = (exp.Like, exp.ILike, exp.Glob, exp.SimilarTo, exp.RegexpLike, exp.RegexpILike)
#: Every function sqlglot models as a regular-expression call takes its pattern as ``expression``.
_REGEXP_FUNCTIONS = tuple(
    cls for name, cls in vars(exp).items()
    if name.startswith("Regexp") and isinstance(cls, type) and issubclass(cls, exp.Func)
)
#: Nodes a constant pattern may be built of (``LOWER('%Abc%')``, ``'%' || 'abc' || '%'``).
_CONSTANT_PATTERN_NODES = (exp.Literal, exp.Null, exp.Lower, exp.Upper, exp.Paren, exp.DPipe, exp.Concat)
#: Calls whose result is a number whatever their arguments.
_NUMBER_CALLS = (exp.Length, exp.StrPosition, exp.Count, exp.Extract)
#: Arithmetic: a number when all its operands are.
_ARITHMETIC = (exp.Paren, exp.Neg, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Abs, exp.Round, exp.Floor,
               exp.Ceil, exp.Greatest, exp.Least)
_NUMERIC_TYPES = frozenset({"integer", "real", "numeric"})
#: Lists of patterns: ``LIKE ANY (ARRAY[…])``, ``LIKE ALL (…)``.
_PATTERN_LISTS = (exp.Any, exp.All, exp.Array, exp.Tuple, exp.Paren)


def pattern_of(node: exp.Expr) -> tuple[exp.Expr, exp.Expr | None] | None:
    """``(pattern, subject)`` when ``node`` matches a pattern, else None.

    Anonymous calls cover what sqlglot does not model: PostgreSQL's ``regexp_match(s, p)``,
    ``regexp_matches``, ``regexp_split_to_array`` (pattern second) and SQLite's
    ``like(p, s)`` / ``glob(p, s)`` (pattern first).
    """
    if isinstance(node, _MATCHES) or isinstance(node, _REGEXP_FUNCTIONS):
        return node.expression, node.this
    if isinstance(node, exp.Anonymous):
        name, args = node.name.lower(), node.expressions
        if name.startswith("regexp") and len(args) >= 2:
            return args[1], args[0]
        if name in ("like", "glob") and len(args) >= 2:
            return args[0], args[1]
    return None


def _numeric(check: Check, node: exp.Expr) -> bool:
    """Whether ``node`` is certainly a number (so ``substring(s FROM node)`` is a position)."""
    if isinstance(node, exp.Literal):
        return not node.is_string
    if isinstance(node, _NUMBER_CALLS):
        return True
    if isinstance(node, exp.Cast):
        return node.to.is_type(*exp.DataType.NUMERIC_TYPES)
    if isinstance(node, exp.Column):
        found = check.column_tables.get(id(node))
        column = found[1].column(node.name) if found else None
        return column is not None and column.type in _NUMERIC_TYPES
    if isinstance(node, _ARITHMETIC):
        return all(_numeric(check, part) for part in node.iter_expressions())
    return False


def _postgres_substring_pattern(check: Check, node: exp.Expr) -> tuple[exp.Expr, exp.Expr | None] | None:
    """``(pattern, subject)`` for a PostgreSQL ``substring(s FROM p)`` whose ``p`` may be text."""
    if check.sql_dialect != "postgres" or not isinstance(node, exp.Substring):
        return None
    start = node.args.get("start")
    if start is None or _numeric(check, start):
        return None
    return start, node.this


def _literal_length(pattern: exp.Expr) -> int | None:
    """The characters a constant pattern holds, or None when it is not constant."""
    total = 0
    for node in pattern.walk():
        if not isinstance(node, _CONSTANT_PATTERN_NODES):
            return None
        if isinstance(node, exp.Literal):
            if not node.is_string:
                return None
            total += len(node.this)
    return total


def _pattern_lengths(pattern: exp.Expr) -> list[int | None]:
    """One length per pattern ``pattern`` stands for (several for ``ANY (ARRAY[…])``)."""
    if isinstance(pattern, _PATTERN_LISTS):
        items = pattern.expressions or [pattern.this]
        if isinstance(pattern, exp.Paren) and _literal_length(pattern) is not None:
            return [_literal_length(pattern)]
        return [length for item in items for length in _pattern_lengths(item)]
    return [_literal_length(pattern)]


def _refuse(check: Check, node: exp.Expr, why: str) -> Exception:
    return check.fail(
        "pattern",
        f"{node.sql(check.dialect)[:200]!r}: {why}",
        f"write the pattern in the query as a string literal of at most {MAX_PATTERN_CHARS} characters "
        "(name LIKE '%smith%', name ~ '^A[0-9]+$'); to compare with a column or a step's values use = or IN",
    )


#: Every node ``pattern_of`` or ``_postgres_substring_pattern`` may find a pattern in.
_MATCHING = Instances(*_MATCHES, *_REGEXP_FUNCTIONS, exp.Anonymous, exp.Substring, shared=True)


def check_patterns(check: Check) -> None:
    """Refuse patterns that are not short literals, and matches over aggregated text."""
    assert check.tree is not None
    aggregates = StringAggregates(check)
    for node in check.shared_nodes(_MATCHING):
        found = pattern_of(node) or _postgres_substring_pattern(check, node)
        if found is None:
            continue
        pattern, subject = found
        lengths = _pattern_lengths(pattern)
        if any(length is None for length in lengths):
            raise _refuse(check, node, "the pattern is not a string literal written in the query "
                                       "(a column, a reference to a step or a computed value)")
        longest = max(lengths, default=0) or 0
        if longest > MAX_PATTERN_CHARS:
            raise _refuse(check, node, f"the pattern is {longest} characters long, more than {MAX_PATTERN_CHARS}")
        origin = aggregates.origin(node, subject)
        if origin is not None:
            raise check.fail(
                "pattern",
                f"{node.sql(check.dialect)[:200]!r} may match text built by the aggregate "
                f"{origin.sql(check.dialect)[:80]!r}, whose size grows with the number of rows",
                "match the rows before aggregating them (WHERE name LIKE … before GROUP BY), not the aggregated text",
            )
