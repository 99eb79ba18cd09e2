"""Verified examples with relative dates, asked on another day.

An example such as 去年第三季度… was resolved for one day (``today:`` in the manifest) into
fixed dates (``2025-07-01``…``2025-09-30``). Asked on a day in another ``period`` (year,
quarter, month, week, day), each ISO date of its plan moves by the number of periods in
between, so the same words keep meaning the same relative period. A date on the last day of
its month stays on the last day (``2025-09-30`` + one quarter is ``2025-12-31``). Texts that
describe the old dates in words (``2025年第三季度``) would now be wrong: they are replaced by a
line saying which day the dates were shifted for.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ..periods.calendar import periods_between, shift_date
from .plan import Plan

__all__ = ["periods_between", "shift_date", "shift_plan"]

_ISO_DATE = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")
#: Words that state a date: a text holding one is stale once the dates move.
_DATE_WORDS = re.compile(r"\d{4}\s*年|\d{4}-\d{2}|\bQ[1-4]\b|第[一二三四1-4]季度|[一二三四五六七八九十\d]+\s*月")


def _shift_text(text: str, count: int, period: str) -> str:
    def repl(match: re.Match[str]) -> str:
        try:
            day = dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            return match.group(0)
        return shift_date(day, count, period).isoformat()

    return _ISO_DATE.sub(repl, text)


def _shift_value(value: Any, count: int, period: str) -> Any:
    if isinstance(value, str):
        return _shift_text(value, count, period)
    if isinstance(value, list):
        return [_shift_value(v, count, period) for v in value]
    if isinstance(value, dict):
        return {k: _shift_value(v, count, period) for k, v in value.items()}
    return value


def shift_plan(plan: Plan, written_for: dt.date, period: str, today: dt.date) -> Plan:
    """``plan`` as it reads when asked on ``today`` (the same plan in the same period)."""
    count = periods_between(written_for, today, period)
    if count == 0:
        return plan
    data = plan.to_dict()
    note = (f"a verified plan written for {written_for.isoformat()}; its dates are moved by {count:+d} {period}(s) "
            f"for {today.isoformat()}")
    steps = []
    for step in data["steps"]:
        step = {**step, "query": _shift_value(step["query"], count, period)}
        purpose = _shift_text(step.get("purpose", ""), count, period)
        step["purpose"] = "" if _DATE_WORDS.search(_ISO_DATE.sub("", purpose)) else purpose
        steps.append(step)
    answer_with = data.get("answer_with", "")
    return Plan.parse({
        "reasoning": note,
        "steps": steps,
        "answer_with": "" if _DATE_WORDS.search(answer_with) else answer_with,
    })
