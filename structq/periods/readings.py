"""What a rule's match means: a ``Reading`` (kind, first day, last day) and the resolvers that
turn a match's named groups into one.

The rules of ``zh.py`` and ``en.py`` share these resolvers and one set of group names, so a
period means the same in both languages:

``y`` a year (2025, 二〇二五) · ``ry`` a relative year (去年, last year) · ``m`` a month number ·
``mn`` an English month name · ``rm`` a relative month (上个月) · ``d`` a day of the month ·
``q`` a quarter number · ``o`` an ordinal (third) · ``n`` a count · ``u`` a unit (天, months) ·
``r`` a relative word (last, this, 上, 本) · ``h`` a half (上/下, first/second, 1/2).

A period written without a year (3月, Q3, 上半年, 3月5日) is its most recent occurrence whose
first day is not after today; as the end of a range (3月到5月) it is re-read as the first
occurrence ending on or after the range's start (``Reading.rebase``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

from . import calendar as cal
from .numerals import month_number, to_int

__all__ = ["Reading", "Resolver", "Rule", "range_end", "relative_offset"]


@dataclass(frozen=True)
class Reading:
    """One interpretation of a matched phrase."""

    kind: str
    first: dt.date
    last: dt.date
    #: For a phrase without a year (or month): its span as the first occurrence that ends on or
    #: after a range's start, when it ends a range.
    rebase: Callable[[dt.date], cal.Span] | None = None
    #: A phrase that only means a period as the end of a range (``到10日``, ``… to May``).
    tail_only: bool = False


Resolver = Callable[[re.Match[str], dt.date], Reading]


@dataclass(frozen=True)
class Rule:
    """A pattern and what its matches mean. A named group ``p`` narrows the span to the period
    itself when the pattern needs context around it (``in (March)``)."""

    pattern: re.Pattern[str]
    resolve: Resolver


def rule_table(compile_pattern: Callable[[str], re.Pattern[str]],
               *groups: tuple[Resolver, str, ...]) -> tuple[Rule, ...]:
    """A language's rules from groups ``(resolver, pattern, pattern, …)``, in the order written
    (the order decides between two rules that match the same span), each pattern compiled the
    language's way (flags, word boundaries)."""
    return tuple(Rule(compile_pattern(pattern), resolve) for resolve, *patterns in groups for pattern in patterns)


_ZH_YEARS = {"今": 0, "本": 0, "去": -1, "上": -1, "前": -2, "大": -3, "明": 1, "下": 1, "后": 2}
_EN_RELATIVE = {"last": -1, "previous": -1, "prior": -1, "this": 0, "current": 0, "next": 1}


def relative_offset(word: str) -> int:
    """Periods from the current one for a relative word: 上上 -2, 上 -1, 本/这/当 0, 下 +1;
    last/previous -1, this/current 0, next +1."""
    word = word.strip().lower()
    first = word.split()[0] if word else word
    if first in _EN_RELATIVE:
        return _EN_RELATIVE[first]
    if word.startswith("上上"):
        return -2
    if word.startswith("上"):
        return -1
    if word.startswith("下"):
        return 1
    return 0


def _group(match: re.Match[str], name: str) -> str | None:
    """Group ``name``, or its alternatives ``name2``/``name3`` (Python's ``re`` cannot give two
    alternatives of one pattern the same group name)."""
    groups = match.groupdict()
    for key in (name, f"{name}2", f"{name}3"):
        if groups.get(key) is not None:
            return groups[key]
    return None


def year_of(match: re.Match[str], today: dt.date) -> int | None:
    """The year a match states (absolute or relative), or None when it states none."""
    if (year := _group(match, "y")) is not None:
        return to_int(year)
    if (rel := _group(match, "ry")) is not None:
        rel = rel.strip().lower()
        if rel.split()[0] in _EN_RELATIVE:
            return today.year + _EN_RELATIVE[rel.split()[0]]
        if rel.startswith("the year before last"):
            return today.year - 2
        return today.year + _ZH_YEARS[rel[0]]
    return None


def month_of(match: re.Match[str]) -> int | None:
    """The month number a match states (digits, Chinese numeral or English name)."""
    if (month := _group(match, "m")) is not None:
        return to_int(month)
    if (name := _group(match, "mn")) is not None:
        return month_number(name)
    return None


def _count(match: re.Match[str], name: str = "n") -> int:
    value = _group(match, name)
    return to_int(value) if value is not None else 1


def _yearless(kind: str, span_for: Callable[[int], cal.Span], today: dt.date) -> Reading:
    """The most recent occurrence (first day not after today) of a period written without a year."""
    for year in range(today.year, today.year - 9, -1):
        try:
            first, last = span_for(year)
        except ValueError:
            continue
        if first <= today:
            return Reading(kind, first, last, rebase=lambda anchor: _on_or_after(span_for, anchor))
    raise ValueError("no occurrence before today")


def _on_or_after(span_for: Callable[[int], cal.Span], anchor: dt.date) -> cal.Span:
    for year in range(anchor.year, anchor.year + 9):
        try:
            span = span_for(year)
        except ValueError:
            continue
        if span[1] >= anchor:
            return span
    raise ValueError(f"no occurrence after {anchor.isoformat()}")


def _in_year(kind: str, span_for: Callable[[int], cal.Span], match: re.Match[str], today: dt.date) -> Reading:
    year = year_of(match, today)
    if year is None:
        return _yearless(kind, span_for, today)
    return Reading(kind, *span_for(year))


def _relative_month(match: re.Match[str], today: dt.date) -> tuple[int, int] | None:
    """(year, month) of a relative month word (上个月, last month), or None when there is none."""
    rel = _group(match, "rm")
    if rel is None:
        return None
    offset = -2 if "before last" in rel.lower() else relative_offset(rel)
    return cal.add_months(today.year, today.month, offset)


def range_end(resolve: Resolver) -> Resolver:
    """``resolve`` for a phrase that is a period only as the end of a range (``… to May``)."""

    def resolved(match: re.Match[str], today: dt.date) -> Reading:
        return dataclasses.replace(resolve(match, today), tail_only=True)

    return resolved


# --- resolvers, one per kind of phrase -------------------------------------------------------

def resolve_date(match: re.Match[str], today: dt.date) -> Reading:
    """A calendar day: 2026年3月5日, 3月5日, 上个月5号, March 5, 2026, 2026-03-05."""
    day = to_int(_group(match, "d"))
    if (relative := _relative_month(match, today)) is not None:
        return Reading("date", *cal.day_span(dt.date(*relative, day)))
    month = month_of(match)
    assert month is not None
    return _in_year("date", lambda year: cal.day_span(dt.date(year, month, day)), match, today)


def resolve_day_tail(match: re.Match[str], today: dt.date) -> Reading:
    """A day of the month that ends a range (3月5日到10日): only meaningful after a start."""
    day = to_int(_group(match, "d"))

    def rebase(anchor: dt.date) -> cal.Span:
        for offset in range(3):
            year, month = cal.add_months(anchor.year, anchor.month, offset)
            try:
                candidate = dt.date(year, month, day)
            except ValueError:
                continue
            if candidate >= anchor:
                return candidate, candidate
        raise ValueError(f"no day {day} after {anchor.isoformat()}")

    if not 1 <= day <= 31:
        raise ValueError(f"day {day} is not 1–31")
    return Reading("date", today, today, rebase=rebase, tail_only=True)


def resolve_relative_day(match: re.Match[str], today: dt.date) -> Reading:
    """今天, 昨天, 前天, yesterday, 3天前, 3 days ago."""
    word = _group(match, "w").lower() if _group(match, "w") else ""
    offsets = {"今": 0, "昨": -1, "前": -2, "大": -3, "明": 1, "后": 2, "today": 0, "yesterday": -1,
               "tomorrow": 1, "the day before yesterday": -2}
    offset = -_count(match) if _group(match, "n") else offsets.get(re.sub(r"\s+", " ", word), offsets.get(word[:1], 0))
    return Reading("date", *cal.day_span(today + dt.timedelta(days=offset)))


def resolve_weekday(match: re.Match[str], today: dt.date) -> Reading:
    """上周五, 本周一: a weekday of a relative week."""
    names = "一二三四五六日天"
    day = _group(match, "wd")
    index = 6 if day in "日天" else (int(day) - 1 if day.isdigit() else names.index(day))
    monday = cal.week_span(today)[0] + dt.timedelta(weeks=relative_offset(_group(match, "r")))
    return Reading("date", *cal.day_span(monday + dt.timedelta(days=index)))


def resolve_month(match: re.Match[str], today: dt.date) -> Reading:
    """A month: 2026年3月, 2026-03, 3月, 今年3月, 上个月, March 2026, 3个月前."""
    if (relative := _relative_month(match, today)) is not None:
        return Reading("month", *cal.month_span(*relative))
    if _group(match, "n") is not None:
        return Reading("month", *cal.month_span(*cal.add_months(today.year, today.month, -_count(match))))
    month = month_of(match)
    assert month is not None
    return _in_year("month", lambda year: cal.month_span(year, month), match, today)


def _quarter_number(match: re.Match[str]) -> int:
    value = _group(match, "q") or _group(match, "o")
    assert value is not None
    return to_int(value)


def _run_of(match: re.Match[str], today: dt.date, span_for: Callable[[int, int], cal.Span],
            start: str, end: str) -> Reading:
    """A run of months or quarters written once: from period ``start`` to period ``end`` of one
    year (without a year: from the most recent occurrence of the first); an end before the start
    is in the next year (2025年11月到2月)."""
    first, last = to_int(_group(match, start) or ""), to_int(_group(match, end) or "")
    wrap = 1 if last < first else 0
    reading = _in_year("date_range", lambda year: (span_for(year, first)[0], span_for(year + wrap, last)[1]),
                       match, today)
    return dataclasses.replace(reading, rebase=None)


def resolve_months(match: re.Match[str], today: dt.date) -> Reading:
    """3-5月, 2026年3月到5月, 三至五月, 12-2月."""
    return _run_of(match, today, cal.month_span, "m", "me")


def resolve_quarters(match: re.Match[str], today: dt.date) -> Reading:
    """一至三季度, 第1-3季度, 2025年第二到第四季度."""
    return _run_of(match, today, cal.quarter_span, "q", "qe")


def resolve_days_of_month(match: re.Match[str], today: dt.date) -> Reading:
    """3月5-10日, 2026年3月5日至10日: days of one month."""
    month = month_of(match)
    first_day, last_day = to_int(_group(match, "d") or ""), to_int(_group(match, "de") or "")
    assert month is not None
    if first_day > last_day:
        raise ValueError(f"days {first_day}–{last_day} run backwards")
    reading = _in_year("date_range", lambda year: (dt.date(year, month, first_day), dt.date(year, month, last_day)),
                       match, today)
    return dataclasses.replace(reading, rebase=None)


def resolve_ten_days(match: re.Match[str], today: dt.date) -> Reading:
    """3月上旬 (1–10), 中旬 (11–20), 下旬 (21 to the month's end)."""
    if (relative := _relative_month(match, today)) is not None:
        year, month = relative
    else:
        month = month_of(match) or 0
        year = _in_year("month", lambda y: cal.month_span(y, month), match, today).first.year
    first, last = cal.month_span(year, month)
    part = "上中下".index(_group(match, "x") or "")
    start = first + dt.timedelta(days=10 * part)
    return Reading("date_range", start, last if part == 2 else start + dt.timedelta(days=9))


def resolve_quarter(match: re.Match[str], today: dt.date) -> Reading:
    """A quarter: 2025年第三季度, Q3 2025, 三季度, 去年Q3, the third quarter of 2025."""
    quarter = _quarter_number(match)
    return _in_year("quarter", lambda year: cal.quarter_span(year, quarter), match, today)


def resolve_relative_period(match: re.Match[str], today: dt.date) -> Reading:
    """A period counted from the current one: 上个季度, 本周, last week, 2 quarters ago, 去年."""
    unit = _unit(_group(match, "u"))
    offset = -_count(match) if _group(match, "n") else relative_offset(_group(match, "r"))
    if _group(match, "r") and "before last" in _group(match, "r").lower():
        offset = -2
    if unit == "week":
        first = cal.week_span(today)[0] + dt.timedelta(weeks=offset)
        return Reading("week", *cal.week_span(first))
    if unit == "day":
        return Reading("date", *cal.day_span(today + dt.timedelta(days=offset)))
    months = {"month": 1, "quarter": 3, "year": 12}[unit]
    start_year, start_month = cal.add_months(today.year, today.month - (today.month - 1) % months, offset * months)
    first = dt.date(start_year, start_month, 1)
    end_year, end_month = cal.add_months(start_year, start_month, months - 1)
    return Reading({1: "month", 3: "quarter", 12: "year"}[months], first, cal.month_span(end_year, end_month)[1])


def resolve_year(match: re.Match[str], today: dt.date) -> Reading:
    """A year: 2025年, 今年, 去年, 前年, this year, in 2025."""
    year = year_of(match, today)
    assert year is not None
    return Reading("year", *cal.year_span(year))


def resolve_first_quarters(match: re.Match[str], today: dt.date) -> Reading:
    """今年前三季度, the first three quarters of 2025: 1 January to the end of quarter n."""
    count = _count(match)
    year = year_of(match, today) or today.year
    return Reading("date_range", cal.year_span(year)[0], cal.quarter_span(year, count)[1])


def resolve_first_months(match: re.Match[str], today: dt.date) -> Reading:
    """今年前5个月, the first five months of 2025."""
    count = _count(match)
    year = year_of(match, today) or today.year
    return Reading("date_range", cal.year_span(year)[0], cal.month_span(year, count)[1])


def resolve_half(match: re.Match[str], today: dt.date) -> Reading:
    """上半年, 2025年下半年, the first half of last year, H2 2025."""
    half = _group(match, "h").lower()
    number = 1 if half in ("上", "first", "1") else 2
    return _in_year("date_range", lambda year: cal.half_span(year, number), match, today)


def resolve_month_week(match: re.Match[str], today: dt.date) -> Reading:
    """三月第一周, 2026年3月第2周, 上个月第一周, the first week of March: the n-th Monday-to-Sunday
    week starting in the month (the planner prompt's rule)."""
    ordinal = -1 if _group(match, "o") is None else to_int(_group(match, "o"))  # 最后一周
    if (relative := _relative_month(match, today)) is not None:
        return Reading("week", *cal.nth_week_of_month(*relative, ordinal))
    month = month_of(match)
    assert month is not None
    reading = _in_year("month", lambda year: cal.month_span(year, month), match, today)
    return Reading("week", *cal.nth_week_of_month(reading.first.year, month, ordinal))


def resolve_rolling(match: re.Match[str], today: dt.date) -> Reading:
    """最近7天, 近30天, past 30 days: the n days ending today. 过去三个月, the last 2 quarters:
    the n whole calendar periods before the current one (as the verified plans count
    过去三个季度)."""
    count = _count(match)
    unit = _unit(_group(match, "u"))
    if count < 1:
        raise ValueError("an empty window")
    if unit == "day":
        return Reading("date_range", today - dt.timedelta(days=count - 1), today)
    if unit == "week":
        monday = cal.week_span(today)[0]
        return Reading("date_range", monday - dt.timedelta(weeks=count), monday - dt.timedelta(days=1))
    months = {"month": 1, "quarter": 3, "year": 12}[unit]
    current = dt.date(*cal.add_months(today.year, today.month - (today.month - 1) % months, 0), 1)
    first = dt.date(*cal.add_months(current.year, current.month, -count * months), 1)
    return Reading("date_range", first, current - dt.timedelta(days=1))


def resolve_to_date(match: re.Match[str], today: dt.date) -> Reading:
    """今年以来, 本月至今, year to date: from the start of the current period to today."""
    unit = _unit(_group(match, "u"))
    months = {"month": 1, "quarter": 3, "year": 12}[unit]
    first = dt.date(today.year, today.month - (today.month - 1) % months, 1)
    return Reading("date_range", first, today)


_UNITS = {"天": "day", "日": "day", "day": "day", "周": "week", "星期": "week", "礼拜": "week",
          "week": "week", "月": "month", "month": "month", "季": "quarter", "季度": "quarter",
          "quarter": "quarter", "年": "year", "year": "year", "ytd": "year", "mtd": "month", "qtd": "quarter"}


def _unit(word: str) -> str:
    """The calendar unit a word names (个月 → month, 季度 → quarter, weeks → week)."""
    word = word.strip().lower().lstrip("个本今当这").rstrip("s") or "year"
    if word in _UNITS:
        return _UNITS[word]
    for key, unit in _UNITS.items():
        if key in word:
            return unit
    raise ValueError(f"unknown unit {word!r}")
