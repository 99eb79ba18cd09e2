"""Bounded checking: what a query may cost the sandbox before the sandbox reads it.

Both sandboxes refuse, before any parser or walk sees the query:

- text that cannot be written as UTF-8 (a lone UTF-16 surrogate, legal as a JSON escape)
  — ``invalid_text``: it could reach no database, log line or response intact;
- a query larger than the manifest's ``limits.max_query_bytes`` (SQL text, or a search body
  as JSON), or SQL of more than ``limits.max_query_tokens`` tokens — ``too_large``: the
  check's cost grows with the size (a 200 KB query took 1.6 s of CPU to check);
- SQL nested deeper than the parser can recurse (``capabilities.nesting``: brackets, CASE,
  prefix-operator runs, nested operator chains, UNION parts, CTEs) — ``too_complex``;
- a search body holding a number no search server reads alike (``NaN``, ``Infinity``, an integer
  outside 64 bits) — ``invalid_value``.

And the last line behind the rules: ``refusal_for`` turns whatever else a rule raises on a
hostile query (a ``RecursionError`` the pre-scan did not foresee, a sqlglot ``OptimizeError``)
into a refusal, so that ``check_sql`` and ``check_dsl`` raise nothing but ``SandboxViolation``
and ``PlanError``: a query the sandbox cannot analyse is refused, never run and never a crash.
``refusal_of`` names the limits a checked query can still run into on its way (a database's
parser stack, a value too large to bind): ``Engine`` reports those as refusals with these
codes, not as a failing database with Python's words.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from structq.capabilities.model import Manifest
from structq.capabilities.nesting import json_values, measure
from structq.errors import PlanError, SandboxViolation

__all__ = ["check_text", "check_tokens", "check_body", "refusal_for", "refusal_of", "INT64"]

log = logging.getLogger("structq.safety")

#: The integers every database and search server stores alike (SQLite's INTEGER, PostgreSQL's bigint, a search long).
INT64 = (-(2**63), 2**63 - 1)
#: How much of a refusal's cause its message quotes.
_QUOTED = 200


def check_text(text: str, source: Manifest) -> None:
    """Refuse SQL ``text`` that is not UTF-8-writable or larger than ``max_query_bytes``."""
    size = _utf8_size(text, source)
    limit = source.limits.max_query_bytes
    if size > limit:
        raise SandboxViolation("too_large", f"the query is {size} bytes; at most {limit} are accepted",
                               hint=f"write a shorter query (limits.max_query_bytes: {limit}); pass long "
                                    "lists of values from an earlier step by reference (<key.column>)",
                               source=source.source)


def check_tokens(tokens: Iterable[Any], source: Manifest) -> None:
    """Refuse SQL of more than ``max_query_tokens`` tokens or nested too deeply to parse safely."""
    shape = measure(tokens)
    limit = source.limits.max_query_tokens
    if shape.tokens > limit:
        raise SandboxViolation("too_large", f"the query has {shape.tokens} tokens; at most {limit} are accepted",
                               hint=f"write a shorter query (limits.max_query_tokens: {limit})", source=source.source)
    excess = shape.excess()
    if excess is not None:
        raise SandboxViolation("too_complex", excess,
                               hint="write it flatter: fewer nested brackets and calls, a join or a CTE "
                                    "instead of deep nesting, IN (…) instead of chained UNIONs",
                               source=source.source)


def check_body(body: Mapping[str, Any], source: Manifest) -> None:
    """Refuse a search body larger than ``max_query_bytes`` (as JSON, roughly), with text that
    is not UTF-8-writable, or with a number that is not a finite JSON number of 64 bits."""
    limit = source.limits.max_query_bytes
    size = 0
    for value, _ in json_values(body):
        if isinstance(value, str):
            size += _utf8_size(value, source) + 3
        elif isinstance(value, float) and not math.isfinite(value):
            raise SandboxViolation("invalid_value", f"the body holds the number {value!r}, which JSON cannot carry",
                                   hint="write finite numbers only", source=source.source)
        elif isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
            raise SandboxViolation("invalid_value", f"the body holds the integer {str(value)[:40]}…, outside 64 bits",
                                   hint="write integers between -2^63 and 2^63-1", source=source.source)
        else:
            size += 8
        if size > limit:
            raise SandboxViolation("too_large", f"the request body is larger than {limit} bytes",
                                   hint=f"send a smaller body (limits.max_query_bytes: {limit})", source=source.source)


def _utf8_size(text: str, source: Manifest) -> int:
    """Bytes of ``text`` as UTF-8; refuses text that has none (a lone surrogate)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise SandboxViolation("invalid_text", f"the query holds U+{ord(exc.object[exc.start]):04X}, a lone "
                               "UTF-16 surrogate that is no character", hint="send the text as valid Unicode",
                               source=source.source) from None


#: What the databases say when a query nests past their parser's or planner's own limits
#: (SQLite's parser stack of about 100 entries overflows at 19 nested subqueries; PostgreSQL's
#: ``max_stack_depth``; MariaDB's thread stack): the query's shape, not a failing database.
_DATABASE_NESTING = ("parser stack overflow", "expression tree is too large", "stack depth limit exceeded",
                   "thread stack overrun", "too many levels of nesting", "too high level of nesting")


def refusal_of(exc: BaseException, source: str | None) -> SandboxViolation | None:
    """The refusal a limit ``exc`` stands for, when it stands for one: Python's recursion limit
    or a database's nesting limit (``too_complex``), text with no UTF-8 form (``invalid_text``),
    a number a database or search server cannot hold (``invalid_value``). None for any other error."""
    if isinstance(exc, RecursionError):
        return SandboxViolation("too_complex", "the query nests too deeply to be checked or run",
                                hint="write it flatter: fewer nested brackets, calls and subqueries", source=source)
    if isinstance(exc, UnicodeError):
        return SandboxViolation("invalid_text", "the query or a value holds text with no UTF-8 form (a lone "
                                "UTF-16 surrogate)", hint="send the text as valid Unicode", source=source)
    if isinstance(exc, OverflowError):
        return SandboxViolation("invalid_value", "a value is too large for the database (integers are 64-bit)",
                                hint="write integers between -2^63 and 2^63-1", source=source)
    cause = str(getattr(exc, "cause", None) or "").lower()
    if cause and any(words in cause for words in _DATABASE_NESTING):
        return SandboxViolation("too_complex", "the query nests deeper than the database's parser allows",
                                hint="write it flatter: fewer nested subqueries, CASEs and calls (SQLite "
                                     "parses about 18 nested subqueries at most)", source=source)
    return None


def refusal_for(exc: Exception, source: Manifest) -> SandboxViolation | PlanError:
    """The refusal a check that raised ``exc`` ends in: ``exc`` itself when it is one already,
    the limit it stands for (``refusal_of``), else ``unsupported`` (logged in one line: a query
    the sandbox cannot analyse is refused, and the cause is worth a look)."""
    if isinstance(exc, (SandboxViolation, PlanError)):
        return exc
    limit = refusal_of(exc, source.source)
    if limit is not None:
        return limit
    log.warning("the sandbox could not analyse a query of %s: %s: %s", source.source, type(exc).__name__,
                str(exc)[:_QUOTED])
    return SandboxViolation("unsupported", f"the sandbox could not analyse this query ({type(exc).__name__}: "
                            f"{str(exc)[:_QUOTED]})", hint="write it more plainly: distinct aliases, no exotic "
                            "syntax", source=source.source)
