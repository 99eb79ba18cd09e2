"""Finding periods in a question: every rule's matches, the longest kept, then ranges joined.

1. Every rule of ``zh.RULES`` and ``en.RULES`` is tried at every position; a resolver may
   refuse a match (month 13, a week past the month's end).
2. Candidates are kept longest first (ties: leftmost), skipping any that overlaps one kept:
   ``2026年3月5日`` is one date, never a year, a month and a day. A refused match keeps its
   span too and then yields nothing: ``2026年2月30日`` is no date, and not February either.
3. Two kept periods joined by a range word (从…到…, 至, ~, between … and …, from … to …) become
   one ``date_range`` from the first's first day to the second's last day; a period followed by
   以来/至今 or preceded by ``since`` runs to today. The end of a range written without a year
   (3月到5月) or month (3月5日到10日) is read after the start.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from . import en, zh
from .readings import Reading, Rule

__all__ = ["KINDS", "PeriodMatch", "find_periods"]

#: Every ``PeriodMatch.kind``.
KINDS = ("date", "month", "quarter", "year", "date_range", "week")

_RULES: tuple[Rule, ...] = zh.RULES + en.RULES

_RANGE_PREFIX = re.compile(r"(?:从|自|由|\b(?i:between|from)\s+)$")
_RANGE_JOIN = re.compile(r"\s*(?:到|至|~|～|—|–|－|-)\s*|\s+(?i:to|through|thru|until|till)\s+")
_BETWEEN_JOIN = re.compile(r"\s*(?:和|与)\s*|\s+(?i:and)\s+")
_BETWEEN_END = re.compile(r"\s*之间")
#: ``since X`` / ``自X`` run to today on their own; ``从X`` only with a suffix (从X以来), as
#: ``从上个月的周报里`` reads "from last month's reports".
_SINCE_PREFIX = re.compile(r"(?:自|\b(?i:since)\s+)$")
_SINCE_PREFIX_WITH_SUFFIX = re.compile(r"(?:自|从)$")
_SINCE_SUFFIX = re.compile(r"\s*(?:开始)?(?:以来|至今|到现在|迄今)")


@dataclass(frozen=True)
class PeriodMatch:
    """A period found in a text: where (``start``:``end``, ``text``), what kind, and the inclusive
    days it covers."""

    start: int
    end: int
    kind: str
    first: dt.date
    last: dt.date
    text: str


@dataclass(frozen=True)
class _Candidate:
    start: int
    end: int
    #: None for a phrase that reads as a period but names none (2026年2月30日, Q5): it still
    #: claims its span, so no shorter period inside it (2026年2月) is read instead.
    reading: Reading | None


def _candidates(text: str, today: dt.date) -> list[_Candidate]:
    found: list[_Candidate] = []
    for rule in _RULES:
        pos = 0
        while (match := rule.pattern.search(text, pos)) is not None:
            pos = match.start() + 1
            try:
                reading: Reading | None = rule.resolve(match, today)
            except (ValueError, KeyError, OverflowError):
                reading = None
            start, end = match.span("p") if "p" in rule.pattern.groupindex else match.span()
            if end > start:
                found.append(_Candidate(start, end, reading))
    return found


def _longest(candidates: list[_Candidate]) -> list[_Candidate]:
    kept: list[_Candidate] = []
    taken: set[int] = set()
    for cand in sorted(candidates, key=lambda c: (c.start - c.end, c.start)):
        cells = set(range(cand.start, cand.end))
        if not cells & taken:
            kept.append(cand)
            taken |= cells
    return sorted((c for c in kept if c.reading is not None), key=lambda c: c.start)


def _join(text: str, a: _Candidate, b: _Candidate) -> _Candidate | None:
    """``a`` and ``b`` as one range when the text between them joins them, else None."""
    gap = text[a.end:b.start]
    prefix = _RANGE_PREFIX.search(text, 0, a.start)
    start = prefix.start() if prefix else a.start
    end = b.end
    if _RANGE_JOIN.fullmatch(gap):
        pass
    elif _BETWEEN_JOIN.fullmatch(gap):
        tail = _BETWEEN_END.match(text, b.end)
        english_between = prefix is not None and prefix.group(0).lower().startswith("between")
        if tail:
            end = tail.end()
        elif not english_between:
            return None
    else:
        return None
    last_span = (b.reading.first, b.reading.last)
    if b.reading.rebase is not None:
        try:
            last_span = b.reading.rebase(a.reading.first)
        except ValueError:
            return None
    if a.reading.tail_only or last_span[1] < a.reading.first:
        return None
    return _Candidate(start, end, Reading("date_range", a.reading.first, last_span[1]))


def _since(text: str, cand: _Candidate, today: dt.date) -> _Candidate:
    """``cand`` running to today when the text says 以来 / since around it."""
    suffix = _SINCE_SUFFIX.match(text, cand.end)
    prefix = (_SINCE_PREFIX_WITH_SUFFIX if suffix else _SINCE_PREFIX).search(text, 0, cand.start)
    if cand.reading.tail_only or cand.reading.first > today or not (suffix or prefix):
        return cand
    start = prefix.start() if prefix else cand.start
    end = suffix.end() if suffix else cand.end
    return _Candidate(start, end, Reading("date_range", cand.reading.first, today))


def find_periods(text: str, today: dt.date) -> list[PeriodMatch]:
    """Every period ``text`` names, resolved against ``today``: non-overlapping, left to right."""
    kept = _longest(_candidates(text, today))
    joined: list[_Candidate] = []
    i = 0
    while i < len(kept):
        pair = _join(text, kept[i], kept[i + 1]) if i + 1 < len(kept) else None
        if pair is not None:
            joined.append(pair)
            i += 2
            continue
        if not kept[i].reading.tail_only:
            joined.append(_since(text, kept[i], today))
        i += 1
    return [PeriodMatch(c.start, c.end, c.reading.kind, c.reading.first, c.reading.last, text[c.start:c.end])
            for c in joined]
