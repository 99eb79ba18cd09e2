"""Periods in questions: 2026年3月, 上个季度, 今年前三季度, 三月第一周, last month, past 30 days.

``find_periods(text, today)`` finds every period a text names and resolves it against
``today`` by the rules the planner prompt states (calendar quarters, Monday-to-Sunday weeks, a
month without a year is its most recent occurrence not after today). Pure: no I/O, no clock,
nothing imported above the standard library, so any layer may use it.
"""

from __future__ import annotations

from .calendar import periods_between, shift_date
from .grammar import KINDS, PeriodMatch, find_periods

__all__ = ["KINDS", "PeriodMatch", "find_periods", "periods_between", "shift_date"]
