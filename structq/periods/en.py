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

#: A year in figures: 1900–2099 (a bare "2000" elsewhere is a count).
_YEAR_DIGITS = r"(?:19|20)\d{2}"
_REL = r"(?:last|previous|prior|this|current|next)"
#: "2025", "this year", "last year": a year qualifying a month, quarter or half.
_YEAR = rf"(?:(?P<y>{_YEAR_DIGITS})|(?P<ry>{_REL}\s+year|the\s+year\s+before\s+last))"
_OF_YEAR = rf"(?:,?\s+(?:of\s+|in\s+)?{_YEAR})"
_DAY = r"(?P<d>\d{1,2})(?:st|nd|rd|th)?"
#: Words before a bare month or year that make it a period (``in March``, ``during 2025``).
_CONTEXT = r"(?:in|during|for|of|since|from|between|year)"
#: Words that make a bare month or year the end of a range only (``… to May``, ``… and 2025``):
#: alone, ``up to 2000`` is a count.
_TAIL_CONTEXT = r"(?:to|and|through|thru|until|till)"
_UNIT = r"(?P<u>day|week|month|quarter|year)s?"


#: A month name or a year standing alone, read only after a ``_CONTEXT`` or ``_TAIL_CONTEXT`` word.
_BARE_MONTH = rf"(?P<p>(?P<mn>{EN_MONTH}))(?!\s*\d)"
_BARE_YEAR = rf"(?P<p>(?P<y>{_YEAR_DIGITS}))(?![-/]\d)"


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"\b{pattern}\b", re.IGNORECASE)


RULES: tuple[Rule, ...] = r.rule_table(
    _compile,
    # days
    (r.resolve_date,
     rf"(?P<mn>{EN_MONTH})\s+{_DAY}{_OF_YEAR}?",
     rf"{_DAY}\s+(?:of\s+)?(?P<mn>{EN_MONTH}){_OF_YEAR}?"),
    (r.resolve_relative_day,
     r"(?P<w>today|yesterday|tomorrow|the\s+day\s+before\s+yesterday)",
     rf"(?P<n>{EN_NUMBER})\s+days?\s+ago"),
    # weeks, months, quarters, years counted from the current one
    (r.resolve_relative_period,
     rf"(?:(?P<r>{_REL})\s+(?P<u>week|month|quarter|year)|(?P<r2>the\s+(?P<u2>week|month|quarter|year)\s+before\s+last))",
     rf"(?P<n>{EN_NUMBER})\s+{_UNIT}\s+ago"),
    (r.resolve_month_week,
     rf"(?:the\s+)?(?P<o>{EN_ORDINAL}|last)\s+week\s+(?:of|in)\s+(?:(?P<mn>{EN_MONTH}){_OF_YEAR}?|(?P<rm>{_REL}\s+month))"),
    # months
    (r.resolve_month, rf"(?P<mn>{EN_MONTH}){_OF_YEAR}", rf"{_CONTEXT}\s+{_BARE_MONTH}"),
    (r.range_end(r.resolve_month), rf"{_TAIL_CONTEXT}\s+{_BARE_MONTH}"),
    (r.resolve_month, rf"(?P<y>{_YEAR_DIGITS})\s+(?P<mn>{EN_MONTH})"),
    # quarters
    (r.resolve_quarter, rf"Q(?P<q>[1-4]){_OF_YEAR}?", rf"(?:the\s+)?(?P<o>{EN_ORDINAL})\s+quarter{_OF_YEAR}?"),
    (r.resolve_first_quarters, rf"(?:the\s+)?first\s+(?P<n>two|three|2|3)\s+quarters(?:\s+of\s+{_YEAR})?"),
    (r.resolve_first_months, rf"(?:the\s+)?first\s+(?P<n>{EN_NUMBER})\s+months\s+of\s+{_YEAR}"),
    # halves and years
    (r.resolve_half, rf"(?:(?:the\s+)?(?P<h>first|second)\s+half|H(?P<h2>[12])){_OF_YEAR}?"),
    (r.resolve_year, rf"{_CONTEXT}\s+{_BARE_YEAR}"),
    (r.range_end(r.resolve_year), rf"{_TAIL_CONTEXT}\s+{_BARE_YEAR}"),
    (r.resolve_year, r"(?P<ry>the\s+year\s+before\s+last)"),
    # windows
    (r.resolve_rolling,
     rf"(?:the\s+)?(?:past|last|previous|recent)\s+(?P<n>{EN_NUMBER})\s+{_UNIT}",
     r"(?:the\s+)?past\s+(?P<u>week|month|quarter|year)"),
    (r.resolve_to_date, r"(?:(?P<u>year|month|quarter)[\s-]to[\s-]date|(?P<u2>ytd|mtd|qtd)|(?P<u3>this\s+year)\s+so\s+far)"),
)
