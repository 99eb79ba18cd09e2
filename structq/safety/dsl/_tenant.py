"""Tenant-blind search: on an index with a row filter, one tenant's answer may not depend on
other tenants' documents.

A row filter keeps other tenants' documents out of the hits, but a search server computes more than
hits from the whole index: relevance scores use index-wide term statistics (a ``match`` on a
word only another tenant writes scores the own documents differently, and ``min_score`` turns
that into a yes/no answer), and expanding queries pick their terms from the whole term
dictionary before any filter applies (``match_phrase_prefix`` takes the first
``max_expansions`` terms with the prefix, ``fuzzy`` the most similar ones: another tenant's
terms crowd out the own). The invariant, tested on the search server by comparing an index holding
only one tenant's documents with one holding everybody's: **for every body the sandbox
accepts on a row-filtered index, the answer is identical** — hits, order, scores, totals,
aggregations.

Two mechanisms hold it:

1. **Filter context.** ``apply_row_filters`` puts the query itself in ``bool.filter`` beside
   the row filters: documents match or not, no relevance is scored (every hit scores the same),
   so no term statistics are read. Relevance ranking is the price; sort by a field instead.
2. **Refusals** (code ``index_statistics``, checked wherever a clause stands: query,
   ``post_filter``, aggregation filters, ``highlight_query``) of what decides *which*
   documents match from index-wide data even in filter context: ``min_score`` (top level and
   in ``function_score``), ``fuzzy`` and ``fuzziness`` (term expansion by similarity),
   ``match_phrase_prefix`` and ``multi_match`` of type ``phrase_prefix`` (prefix expansion
   capped by ``max_expansions``), and the ``fvh`` highlighter (fragments weighed by document
   frequencies). ``simple_query_string`` keeps its syntax but loses the fuzzy
   operator (``word~2``): its ``flags`` are set to every operator but ``FUZZY``.

Refused on every index already, for the same reason (``REASONS`` in ``_context``):
``significant_terms``/``significant_text``, ``suggest``, ``explain``, ``profile``,
``rescore``, ``more_like_this``, ``global``, and ``terms`` with ``min_doc_count: 0``.
Left alone because they read only the matching documents: ``prefix``/``wildcard`` (the
default rewrite matches every term with the prefix, without a cap), metrics and bucket
aggregations (``cardinality`` and ``percentiles`` sketch the hits' values only), and the
``unified`` and ``plain`` highlighters (fragments ranked by in-document statistics).
"""

from __future__ import annotations

from typing import Any, NoReturn

from ._context import Context, JsonPath
from ._grammar import Check, data

__all__ = ["unless_row_filtered", "min_score", "fuzziness", "multi_match_type", "simple_query_string_flags",
           "highlighter_type", "SAFE_SIMPLE_FLAGS"]

#: ``simple_query_string`` operators, all but ``FUZZY`` (``NEAR``/``SLOP`` are the phrase ``~N``).
SAFE_SIMPLE_FLAGS = ("AND", "ESCAPE", "NEAR", "NOT", "OR", "PHRASE", "PRECEDENCE", "PREFIX", "SLOP",
                     "WHITESPACE")
_NOT_FUZZY = frozenset({*SAFE_SIMPLE_FLAGS, "NONE"})

#: ``multi_match`` types whose last word expands over the whole index's terms.
_EXPANDING_TYPES = frozenset({"phrase_prefix"})


def refuse_statistics(ctx: Context, what: str, path: JsonPath, instead: str) -> NoReturn:
    """Refuse a feature whose answer depends on documents outside the row filter."""
    ctx.refuse("index_statistics",
               f"{what} on row-filtered index {ctx.index.name!r} depends on other tenants' documents "
               "(index-wide term statistics or expansions)", path, instead)


def unless_row_filtered(check: Check, what: str, instead: str) -> Check:
    """``check`` on an index without row filters; a refusal on one with them (after
    ``check``, so a denied or unknown field is named first: that is the bigger mistake)."""

    def checked(ctx: Context, value: Any, path: JsonPath) -> Any:
        out = check(ctx, value, path)
        if ctx.row_filtered:
            refuse_statistics(ctx, what, path, instead)
        return out

    return checked


#: ``min_score`` (request and ``function_score``): a threshold on scores that are not computed
#: on a row-filtered index (and would leak if they were).
min_score: Check = unless_row_filtered(
    data, "min_score", "row-filtered indices match without relevance scores, so there is nothing to "
    "threshold: narrow the query with filters instead")

_EXACT = ("search exact words with match, match_phrase or term, or word beginnings with prefix "
          "or wildcard (they match every term, without a cap)")


def fuzziness(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``fuzziness``: any edit distance but 0 expands to the most similar terms of the whole
    index (at most ``max_expansions``), so on a row-filtered index only 0 is accepted."""
    checked = data(ctx, value, path)
    if ctx.row_filtered and checked not in (0, "0"):
        refuse_statistics(ctx, f"fuzziness {checked!r}", path, _EXACT)
    return checked


def multi_match_type(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``multi_match.type``: ``phrase_prefix`` expands like ``match_phrase_prefix``."""
    checked = data(ctx, value, path)
    if ctx.row_filtered and checked in _EXPANDING_TYPES:
        refuse_statistics(ctx, f"multi_match type {checked!r}", path,
                          'use type "phrase" (exact words), or a bool of prefix queries')
    return checked


def highlighter_type(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``highlight.type``: the fast vector highlighter weighs each term by its document
    frequency in the segment (other tenants' documents included) to pick and rank fragments;
    ``unified`` (the default) and ``plain`` rank them by in-document statistics only."""
    checked = data(ctx, value, path)
    if ctx.row_filtered and checked == "fvh":
        refuse_statistics(ctx, "the fvh highlighter", path, 'leave type out (unified), or write "plain"')
    return checked


def simple_query_string_flags(shape: Check) -> Check:
    """``simple_query_string`` on a row-filtered index: ``flags`` without ``FUZZY`` (an absent
    or ``ALL`` value becomes every other operator, so ``word~2`` is plain text)."""

    def checked(ctx: Context, value: Any, path: JsonPath) -> Any:
        out = shape(ctx, value, path)
        if not ctx.row_filtered:
            return out
        given = out.get("flags", "ALL")
        names = given.upper().split("|") if isinstance(given, str) else None
        if names is None or not all(n in _NOT_FUZZY or n == "ALL" for n in names):
            refuse_statistics(ctx, f"simple_query_string flags {given!r}", (*path, "flags"),
                              "leave flags out, or combine " + "|".join(SAFE_SIMPLE_FLAGS)
                              + " (the fuzzy operator word~N is not available)")
        if "ALL" in names:
            names = list(SAFE_SIMPLE_FLAGS)
        return {**out, "flags": "|".join(names)}

    return checked
