"""English period phrases (case-insensitive, on word boundaries).

A bare month name or year is read only after a preposition (``in March``, ``during 2025``):
"may" is also a verb and "2000" also a count. The named group ``p`` then narrows the span to
the period itself.
"""

from __future__ import annotations

import re

from . import readings as r
from .numerals import EN_MONTH, EN_NUMBER, EN_ORDINAL
from .readings import Rule

__all__ = ["RULES"]

_REL = r"(?:last|previous|prior|this|current|next)"
#: "2025", "this year", "last year": a year qualifying a month, quarter or half.
_YEAR = rf"(?:(?P<y>(?:19|20)\d{{2}})|(?P<ry>{_REL}\s+year|the\s+year\s+before\s+last))"
_OF_YEAR = rf"(?:,?\s+(?:of\s+|in\s+)?{_YEAR})"
_DAY = r"(?P<d>\d{1,2})(?:st|nd|rd|th)?"
#: Words before a bare month or year that make it a period (``in March``, ``during 2025``).
_CONTEXT = r"(?:in|during|for|of|since|from|between|year)"
#: Words that make a bare month or year the end of a range only (``… to May``, ``… and 2025``):
#: alone, ``up to 2000`` is a count.
_TAIL_CONTEXT = r"(?:to|and|through|thru|until|till)"
_UNIT = r"(?P<u>day|week|month|quarter|year)s?"


def _rule(pattern: str, resolve: r.Resolver) -> Rule:
    return Rule(re.compile(rf"\b{pattern}\b", re.IGNORECASE), resolve)


RULES: tuple[Rule, ...] = (
    # days
    _rule(rf"(?P<mn>{EN_MONTH})\s+{_DAY}{_OF_YEAR}?", r.resolve_date),
    _rule(rf"{_DAY}\s+(?:of\s+)?(?P<mn>{EN_MONTH}){_OF_YEAR}?", r.resolve_date),
    _rule(r"(?P<w>today|yesterday|tomorrow|the\s+day\s+before\s+yesterday)", r.resolve_relative_day),
    _rule(rf"(?P<n>{EN_NUMBER})\s+days?\s+ago", r.resolve_relative_day),
    # weeks, months, quarters, years counted from the current one
    _rule(rf"(?:(?P<r>{_REL})\s+(?P<u>week|month|quarter|year)|(?P<r2>the\s+(?P<u2>week|month|quarter|year)\s+before\s+last))",
          r.resolve_relative_period),
    _rule(rf"(?P<n>{EN_NUMBER})\s+{_UNIT}\s+ago", r.resolve_relative_period),
    _rule(rf"(?:the\s+)?(?P<o>{EN_ORDINAL}|last)\s+week\s+(?:of|in)\s+(?:(?P<mn>{EN_MONTH}){_OF_YEAR}?|(?P<rm>{_REL}\s+month))",
          r.resolve_month_week),
    # months
    _rule(rf"(?P<mn>{EN_MONTH}){_OF_YEAR}", r.resolve_month),
    _rule(rf"{_CONTEXT}\s+(?P<p>(?P<mn>{EN_MONTH}))(?!\s*\d)", r.resolve_month),
    _rule(rf"{_TAIL_CONTEXT}\s+(?P<p>(?P<mn>{EN_MONTH}))(?!\s*\d)", r.range_end(r.resolve_month)),
    _rule(rf"(?P<y>(?:19|20)\d{{2}})\s+(?P<mn>{EN_MONTH})", r.resolve_month),
    # quarters
    _rule(rf"Q(?P<q>[1-4]){_OF_YEAR}?", r.resolve_quarter),
    _rule(rf"(?:the\s+)?(?P<o>{EN_ORDINAL})\s+quarter{_OF_YEAR}?", r.resolve_quarter),
    _rule(rf"(?:the\s+)?first\s+(?P<n>two|three|2|3)\s+quarters(?:\s+of\s+{_YEAR})?", r.resolve_first_quarters),
    _rule(rf"(?:the\s+)?first\s+(?P<n>{EN_NUMBER})\s+months\s+of\s+{_YEAR}", r.resolve_first_months),
    # halves and years
    _rule(rf"(?:(?:the\s+)?(?P<h>first|second)\s+half|H(?P<h2>[12])){_OF_YEAR}?",
          r.resolve_half),
    _rule(rf"{_CONTEXT}\s+(?P<p>(?P<y>(?:19|20)\d{{2}}))(?![-/]\d)", r.resolve_year),
    _rule(rf"{_TAIL_CONTEXT}\s+(?P<p>(?P<y>(?:19|20)\d{{2}}))(?![-/]\d)", r.range_end(r.resolve_year)),
    _rule(r"(?P<ry>the\s+year\s+before\s+last)", r.resolve_year),
    # windows
    _rule(rf"(?:the\s+)?(?:past|last|previous|recent)\s+(?P<n>{EN_NUMBER})\s+{_UNIT}", r.resolve_rolling),
    _rule(r"(?:the\s+)?past\s+(?P<u>week|month|quarter|year)", r.resolve_rolling),
    _rule(r"(?:(?P<u>year|month|quarter)[\s-]to[\s-]date|(?P<u2>ytd|mtd|qtd)|(?P<u3>this\s+year)\s+so\s+far)",
          r.resolve_to_date),
)

