"""Calendar arithmetic the period grammar resolves into: whole months, quarters, years, weeks.

Every function is pure (``today`` is always an argument), so a period asked on one day can be
compared with the same words asked on another. The rules follow the planner prompt: quarters
are calendar quarters (Q1 = Jan–Mar), weeks run Monday to Sunday, and a month, quarter, half
or day written without a year is its most recent occurrence whose start is not after today.
"""

from __future__ import annotations

import calendar
import datetime as dt

__all__ = [
    "Span",
    "add_months",
    "day_span",
    "half_span",
    "month_span",
    "most_recent_year",
    "nth_week_of_month",
    "periods_between",
    "quarter_of",
    "quarter_span",
    "shift_date",
    "week_span",
    "year_span",
]

#: An inclusive (first, last) pair of days.
Span = tuple[dt.date, dt.date]

_MONTHS = {"year": 12, "half": 6, "quarter": 3, "month": 1}


def add_months(year: int, month: int, count: int) -> tuple[int, int]:
    """(year, month) ``count`` months after (or before, when negative) ``year``-``month``."""
    index = year * 12 + month - 1 + count
    return index // 12, index % 12 + 1


def month_span(year: int, month: int) -> Span:
    """The first and last day of a month; ``ValueError`` for a month outside 1–12."""
    if not 1 <= month <= 12:
        raise ValueError(f"month {month} is not 1–12")
    return dt.date(year, month, 1), dt.date(year, month, calendar.monthrange(year, month)[1])


def quarter_of(day: dt.date) -> int:
    """The calendar quarter (1–4) ``day`` falls in."""
    return (day.month - 1) // 3 + 1


def quarter_span(year: int, quarter: int) -> Span:
    """The first and last day of a calendar quarter; ``ValueError`` outside 1–4."""
    if not 1 <= quarter <= 4:
        raise ValueError(f"quarter {quarter} is not 1–4")
    return month_span(year, quarter * 3 - 2)[0], month_span(year, quarter * 3)[1]


def half_span(year: int, half: int) -> Span:
    """The first (1) or second (2) half of a year."""
    return month_span(year, half * 6 - 5)[0], month_span(year, half * 6)[1]


def year_span(year: int) -> Span:
    """1 January to 31 December of ``year``."""
    return dt.date(year, 1, 1), dt.date(year, 12, 31)


def day_span(day: dt.date) -> Span:
    """A single day as a span."""
    return day, day


def week_span(day: dt.date) -> Span:
    """The Monday-to-Sunday week holding ``day``."""
    monday = day - dt.timedelta(days=day.weekday())
    return monday, monday + dt.timedelta(days=6)


def nth_week_of_month(year: int, month: int, n: int) -> Span:
    """The ``n``-th week of a month: the first week is the Monday-to-Sunday week that starts on the
    month's first Monday (the planner prompt's rule for 三月第一周), ``n = -1`` the one starting
    on its last Monday; a week that would start after
    the month is a ``ValueError``."""
    first, last = month_span(year, month)
    if n == -1:  # the last week: the one starting on the month's last Monday
        monday = last - dt.timedelta(days=last.weekday())
        return monday, monday + dt.timedelta(days=6)
    monday = first + dt.timedelta(days=(7 - first.weekday()) % 7) + dt.timedelta(weeks=n - 1)
    if n < 1 or monday > last:
        raise ValueError(f"{year}-{month:02d} has no week {n}")
    return monday, monday + dt.timedelta(days=6)


def most_recent_year(today: dt.date, month: int, day: int = 1) -> int:
    """The year of the most recent ``month``/``day`` not after ``today`` (a month or day written
    without a year). 29 February goes back to the last leap year."""
    for year in range(today.year, today.year - 9, -1):
        try:
            if dt.date(year, month, day) <= today:
                return year
        except ValueError:
            continue
    raise ValueError(f"no date {month:02d}-{day:02d} before {today.isoformat()}")


def periods_between(written_for: dt.date, today: dt.date, period: str) -> int:
    """Whole calendar periods from ``written_for``'s period to ``today``'s (negative when earlier)."""
    if period in _MONTHS:
        step = _MONTHS[period]
        return ((today.year * 12 + today.month - 1) // step) - ((written_for.year * 12 + written_for.month - 1) // step)
    if period == "week":
        return (week_span(today)[0] - week_span(written_for)[0]).days // 7
    return (today - written_for).days


def shift_date(day: dt.date, count: int, period: str) -> dt.date:
    """``day`` moved by ``count`` periods; the last day of a month stays the last day."""
    if period in ("week", "day"):
        return day + dt.timedelta(days=count * (7 if period == "week" else 1))
    year, month = add_months(day.year, day.month, count * _MONTHS[period])
    last = calendar.monthrange(year, month)[1]
    at_month_end = day.day == calendar.monthrange(day.year, day.month)[1]
    return dt.date(year, month, last if at_month_end else min(day.day, last))
