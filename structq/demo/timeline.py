"""The demo's fixed calendar: the date window, its months and weeks, and business seasons.

The window is fixed (not relative to the clock) so that the same seed always gives the same
data, and so that relative questions asked around 2026-11-30 ("去年第三季度" = 2025 Q3,
"上个季度" = 2026 Q3) fall inside it. Dates are stored as ISO text ('YYYY-MM-DD'), which
sorts and compares correctly as plain strings; the generators rely on that.
"""

from __future__ import annotations

import calendar
import random
from collections.abc import Iterator
from datetime import date, timedelta

#: First and last day any event in the data may fall on.
START = date(2023, 1, 1)
END = date(2026, 10, 31)

#: Relative weight of business activity per calendar month: a Spring Festival dip in
#: February, a National Day dip in October, and year-end budget spending in Q4.
MONTH_SEASON = {
    1: 0.85, 2: 0.60, 3: 1.00, 4: 0.95, 5: 1.00, 6: 1.10,
    7: 0.90, 8: 0.90, 9: 1.05, 10: 0.85, 11: 1.15, 12: 1.40,
}

#: Relative activity per weekday (Monday = 0); weekends are quiet for a B2B seller.
WEEKDAY_ACTIVITY = (1.0, 1.05, 1.05, 1.0, 0.95, 0.25, 0.15)

#: Yearly growth of the business, compounded daily from START.
ANNUAL_GROWTH = 0.18

#: Weeks in which few people write reports: Spring Festival and National Day holidays.
HOLIDAY_WEEKS = frozenset(
    date.fromisoformat(day)
    for day in (
        "2023-01-23", "2023-10-02", "2024-02-12", "2024-09-30",
        "2025-01-27", "2025-09-29", "2026-02-16", "2026-09-28",
    )
)


def iso(day: date) -> str:
    """The storage form of a date."""
    return day.isoformat()


def days(start: date = START, end: date = END) -> Iterator[date]:
    """Every day from ``start`` to ``end``, both included."""
    for offset in range((end - start).days + 1):
        yield start + timedelta(days=offset)


def month_end(day: date) -> date:
    """The last day of ``day``'s month."""
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def month_starts(start: date = START, end: date = END) -> Iterator[date]:
    """The first day of every month whose first day lies in ``[start, end]``."""
    first = start if start.day == 1 else month_end(start) + timedelta(days=1)
    while first <= end:
        yield first
        first = month_end(first) + timedelta(days=1)


def quarter_starts(start: date = START, end: date = END) -> Iterator[date]:
    """The first day of every quarter whose first day lies in ``[start, end]``."""
    return (first for first in month_starts(start, end) if first.month % 3 == 1)


def mondays(start: date = START, end: date = END) -> Iterator[date]:
    """Every Monday in ``[start, end]``: the week starts that weekly reports are filed under."""
    first = start + timedelta(days=(7 - start.weekday()) % 7)
    for offset in range(0, (end - first).days + 1, 7):
        yield first + timedelta(days=offset)


def activity(day: date) -> float:
    """How busy the business is on ``day`` relative to an average day at START."""
    growth: float = (1 + ANNUAL_GROWTH) ** ((day - START).days / 365.25)
    return growth * MONTH_SEASON[day.month] * WEEKDAY_ACTIVITY[day.weekday()]


def random_day(rng: random.Random, start: date, end: date) -> date:
    """A uniformly chosen day in ``[start, end]``."""
    return start + timedelta(days=rng.randint(0, (end - start).days))
