"""The period grammar: Chinese and English, absolute and relative, resolved against ``today`` by
the planner prompt's rules; properties over many days (month ends, year ends, leap days)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structq.periods import (
    KINDS,
    PeriodMatch,
    find_periods,
    periods_between,
    shift_date,
)

D = dt.date.fromisoformat
DEMO = D("2026-11-30")  # the demo's today (a Monday)
LEAP = D("2024-02-29")  # a Thursday in a leap year
NEW_YEAR = D("2025-01-01")  # a Wednesday: "last" periods fall in the previous year
YEAR_END = D("2026-12-31")  # a Thursday
MARCH_FIRST = D("2024-03-01")  # a Friday, the day after a leap day


def one(text: str, today: dt.date) -> PeriodMatch:
    found = find_periods(text, today)
    assert len(found) == 1, f"{text!r}: {found}"
    return found[0]


# (text, today, kind, first, last): the same forms over several days.
CASES = [
    # months, absolute and without a year
    ("2026年3月", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("2026-03", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("2026/3", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("二〇二五年十二月", DEMO, "month", "2025-12-01", "2025-12-31"),
    ("2024年2月份", DEMO, "month", "2024-02-01", "2024-02-29"),
    ("3月", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("三月", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("十二月", DEMO, "month", "2025-12-01", "2025-12-31"),  # not after today: last year's
    ("12月", YEAR_END, "month", "2026-12-01", "2026-12-31"),
    ("3月", LEAP, "month", "2023-03-01", "2023-03-31"),
    ("3月", MARCH_FIRST, "month", "2024-03-01", "2024-03-31"),
    ("今年3月", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("今年12月", LEAP, "month", "2024-12-01", "2024-12-31"),
    ("去年3月", NEW_YEAR, "month", "2024-03-01", "2024-03-31"),
    ("上个月", DEMO, "month", "2026-10-01", "2026-10-31"),
    ("上月", NEW_YEAR, "month", "2024-12-01", "2024-12-31"),
    ("上个月", MARCH_FIRST, "month", "2024-02-01", "2024-02-29"),
    ("本月", LEAP, "month", "2024-02-01", "2024-02-29"),
    ("这个月", YEAR_END, "month", "2026-12-01", "2026-12-31"),
    ("下个月", YEAR_END, "month", "2027-01-01", "2027-01-31"),
    ("上上个月", NEW_YEAR, "month", "2024-11-01", "2024-11-30"),
    ("3个月前", DEMO, "month", "2026-08-01", "2026-08-31"),
    ("March 2026", DEMO, "month", "2026-03-01", "2026-03-31"),
    ("Sept. 2025", DEMO, "month", "2025-09-01", "2025-09-30"),
    ("March of last year", DEMO, "month", "2025-03-01", "2025-03-31"),
    ("last month", NEW_YEAR, "month", "2024-12-01", "2024-12-31"),
    ("this month", LEAP, "month", "2024-02-01", "2024-02-29"),
    ("next month", YEAR_END, "month", "2027-01-01", "2027-01-31"),
    ("2 months ago", DEMO, "month", "2026-09-01", "2026-09-30"),
    # quarters
    ("2025年第三季度", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("2025年第3季度", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("2025年Q4", DEMO, "quarter", "2025-10-01", "2025-12-31"),
    ("去年第三季度", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("去年第三季度", NEW_YEAR, "quarter", "2024-07-01", "2024-09-30"),
    ("今年一季度", LEAP, "quarter", "2024-01-01", "2024-03-31"),
    ("第四季度", LEAP, "quarter", "2023-10-01", "2023-12-31"),
    ("Q1", LEAP, "quarter", "2024-01-01", "2024-03-31"),
    ("上个季度", DEMO, "quarter", "2026-07-01", "2026-09-30"),
    ("上季度", NEW_YEAR, "quarter", "2024-10-01", "2024-12-31"),
    ("本季度", LEAP, "quarter", "2024-01-01", "2024-03-31"),
    ("下个季度", YEAR_END, "quarter", "2027-01-01", "2027-03-31"),
    ("Q3 2025", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("2025 Q3", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("2025Q3", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("Q3 of last year", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("the third quarter of 2025", DEMO, "quarter", "2025-07-01", "2025-09-30"),
    ("last quarter", NEW_YEAR, "quarter", "2024-10-01", "2024-12-31"),
    ("this quarter", DEMO, "quarter", "2026-10-01", "2026-12-31"),
    # years
    ("2025年", DEMO, "year", "2025-01-01", "2025-12-31"),
    ("2025年度", DEMO, "year", "2025-01-01", "2025-12-31"),
    ("去年", DEMO, "year", "2025-01-01", "2025-12-31"),
    ("去年", NEW_YEAR, "year", "2024-01-01", "2024-12-31"),
    ("今年", LEAP, "year", "2024-01-01", "2024-12-31"),
    ("前年", DEMO, "year", "2024-01-01", "2024-12-31"),
    ("明年", YEAR_END, "year", "2027-01-01", "2027-12-31"),
    ("this year", DEMO, "year", "2026-01-01", "2026-12-31"),
    ("last year", NEW_YEAR, "year", "2024-01-01", "2024-12-31"),
    ("the year before last", DEMO, "year", "2024-01-01", "2024-12-31"),
    # ranges of a year
    ("今年前三季度", DEMO, "date_range", "2026-01-01", "2026-09-30"),
    ("去年前三季度", DEMO, "date_range", "2025-01-01", "2025-09-30"),
    ("2025年前5个月", DEMO, "date_range", "2025-01-01", "2025-05-31"),
    ("the first three quarters of 2025", DEMO, "date_range", "2025-01-01", "2025-09-30"),
    ("上半年", DEMO, "date_range", "2026-01-01", "2026-06-30"),
    ("下半年", LEAP, "date_range", "2023-07-01", "2023-12-31"),
    ("去年下半年", DEMO, "date_range", "2025-07-01", "2025-12-31"),
    ("H1 2025", DEMO, "date_range", "2025-01-01", "2025-06-30"),
    ("the second half of last year", DEMO, "date_range", "2025-07-01", "2025-12-31"),
    # weeks
    ("三月第一周", DEMO, "week", "2026-03-02", "2026-03-08"),
    ("3月第1周", LEAP, "week", "2023-03-06", "2023-03-12"),
    ("2024年3月第一周", DEMO, "week", "2024-03-04", "2024-03-10"),
    ("三月的第二个星期", DEMO, "week", "2026-03-09", "2026-03-15"),
    ("上个月第一周", DEMO, "week", "2026-10-05", "2026-10-11"),
    ("2026年3月最后一周", DEMO, "week", "2026-03-30", "2026-04-05"),
    ("the first week of March", DEMO, "week", "2026-03-02", "2026-03-08"),
    ("the first week of March 2024", DEMO, "week", "2024-03-04", "2024-03-10"),
    ("上周", DEMO, "week", "2026-11-23", "2026-11-29"),
    ("上周", NEW_YEAR, "week", "2024-12-23", "2024-12-29"),
    ("本周", LEAP, "week", "2024-02-26", "2024-03-03"),
    ("这个星期", YEAR_END, "week", "2026-12-28", "2027-01-03"),
    ("下周", YEAR_END, "week", "2027-01-04", "2027-01-10"),
    ("上个礼拜", DEMO, "week", "2026-11-23", "2026-11-29"),
    ("last week", DEMO, "week", "2026-11-23", "2026-11-29"),
    ("this week", NEW_YEAR, "week", "2024-12-30", "2025-01-05"),
    ("2周前", DEMO, "week", "2026-11-16", "2026-11-22"),
    # days
    ("昨天", NEW_YEAR, "date", "2024-12-31", "2024-12-31"),
    ("今天", LEAP, "date", "2024-02-29", "2024-02-29"),
    ("前天", MARCH_FIRST, "date", "2024-02-28", "2024-02-28"),
    ("上周五", DEMO, "date", "2026-11-27", "2026-11-27"),
    ("本周日", DEMO, "date", "2026-12-06", "2026-12-06"),
    ("2026年3月5日", DEMO, "date", "2026-03-05", "2026-03-05"),
    ("2026-03-05", DEMO, "date", "2026-03-05", "2026-03-05"),
    ("2026/3/5", DEMO, "date", "2026-03-05", "2026-03-05"),
    ("3月5号", DEMO, "date", "2026-03-05", "2026-03-05"),
    ("十二月三十一日", DEMO, "date", "2025-12-31", "2025-12-31"),
    ("2月29日", DEMO, "date", "2024-02-29", "2024-02-29"),  # the most recent leap day
    ("上个月5号", NEW_YEAR, "date", "2024-12-05", "2024-12-05"),
    ("3天前", MARCH_FIRST, "date", "2024-02-27", "2024-02-27"),
    ("yesterday", MARCH_FIRST, "date", "2024-02-29", "2024-02-29"),
    ("today", DEMO, "date", "2026-11-30", "2026-11-30"),
    ("March 5, 2026", DEMO, "date", "2026-03-05", "2026-03-05"),
    ("5 March 2026", DEMO, "date", "2026-03-05", "2026-03-05"),
    ("Dec 31st", LEAP, "date", "2023-12-31", "2023-12-31"),
    # windows
    ("最近7天", DEMO, "date_range", "2026-11-24", "2026-11-30"),
    ("近30天", MARCH_FIRST, "date_range", "2024-02-01", "2024-03-01"),
    ("过去三个季度", DEMO, "date_range", "2026-01-01", "2026-09-30"),
    ("最近两周", DEMO, "date_range", "2026-11-16", "2026-11-29"),
    ("近3个月", NEW_YEAR, "date_range", "2024-10-01", "2024-12-31"),
    ("past 30 days", DEMO, "date_range", "2026-11-01", "2026-11-30"),
    ("the last 7 days", NEW_YEAR, "date_range", "2024-12-26", "2025-01-01"),
    ("the past 2 quarters", DEMO, "date_range", "2026-04-01", "2026-09-30"),
    ("今年以来", DEMO, "date_range", "2026-01-01", "2026-11-30"),
    ("本月至今", LEAP, "date_range", "2024-02-01", "2024-02-29"),
    ("year to date", DEMO, "date_range", "2026-01-01", "2026-11-30"),
    # ranges between two periods
    ("从2026年3月到5月", DEMO, "date_range", "2026-03-01", "2026-05-31"),
    ("2025年11月至2026年2月", DEMO, "date_range", "2025-11-01", "2026-02-28"),
    ("2025年11月到2月", DEMO, "date_range", "2025-11-01", "2026-02-28"),  # the end follows the start
    ("3月5日到10日", DEMO, "date_range", "2026-03-05", "2026-03-10"),
    ("2026-03-01~2026-03-31", DEMO, "date_range", "2026-03-01", "2026-03-31"),
    ("在2025年和2026年之间", DEMO, "date_range", "2025-01-01", "2026-12-31"),
    ("between March 2026 and May 2026", DEMO, "date_range", "2026-03-01", "2026-05-31"),
    ("from Q1 2025 to Q2 2025", DEMO, "date_range", "2025-01-01", "2025-06-30"),
    ("2026年3月以来", DEMO, "date_range", "2026-03-01", "2026-11-30"),
    ("since March 2026", DEMO, "date_range", "2026-03-01", "2026-11-30"),
    ("from March to May", DEMO, "date_range", "2026-03-01", "2026-05-31"),
    ("3-5月", DEMO, "date_range", "2026-03-01", "2026-05-31"),
    ("12-2月", DEMO, "date_range", "2025-12-01", "2026-02-28"),  # the end follows the start
    ("三至五月", LEAP, "date_range", "2023-03-01", "2023-05-31"),
    ("一至三季度", DEMO, "date_range", "2026-01-01", "2026-09-30"),
    ("2025年第二到第四季度", DEMO, "date_range", "2025-04-01", "2025-12-31"),
    ("3月5-10日", DEMO, "date_range", "2026-03-05", "2026-03-10"),
    ("2024年2月下旬", DEMO, "date_range", "2024-02-21", "2024-02-29"),
    ("上个月中旬", NEW_YEAR, "date_range", "2024-12-11", "2024-12-20"),
    ("3月上旬", DEMO, "date_range", "2026-03-01", "2026-03-10"),
    ("between 2024 and 2025", DEMO, "date_range", "2024-01-01", "2025-12-31"),
    ("from 2024 through 2025", DEMO, "date_range", "2024-01-01", "2025-12-31"),
]


@pytest.mark.parametrize(("text", "today", "kind", "first", "last"), CASES,
                         ids=[f"{c[0]}@{c[1]}" for c in CASES])
def test_forms_resolve(text: str, today: dt.date, kind: str, first: str, last: str) -> None:
    found = one(text, today)
    assert (found.kind, found.first.isoformat(), found.last.isoformat()) == (kind, first, last)


@pytest.mark.parametrize(("question", "spans"), [
    ("2025年11月各部门绩效为B的人数是多少？", ["2025年11月"]),
    ("‘星火’项目组里，绩效为A的员工在三月第一周写了哪些周报？", ["三月第一周"]),
    ("去年第三季度在华东区销售额最高的产品是什么？", ["去年第三季度"]),
    ("上周一共写了几篇周报", ["上周"]),  # 上周一 would be a Monday, but 一共 is "in total"
    ("比较2025年和2024年的销售额", ["2025年", "2024年"]),  # 和 without 之间 is no range
    ("sales in March vs in April 2025", ["March", "April 2025"]),
    ("What were total sales in 2025?", ["2025"]),
    ("从上个月的周报里找风险", ["上个月"]),  # 从 alone does not mean "since"
    ("从3月到5月的销售额", ["从3月到5月"]),
    ("2026年3-5月各部门的人数", ["2026年3-5月"]),
])
def test_spans_in_questions(question: str, spans: list[str]) -> None:
    assert [m.text for m in find_periods(question, DEMO)] == spans
    for m in find_periods(question, DEMO):
        assert question[m.start:m.end] == m.text


@pytest.mark.parametrize("text", [
    "各部门绩效为A的人数", "本周期的指标", "3个月的平均值", "工龄25年以上", "top 10 products",
    "May I see the 2000 employees", "2026.5 million", "第13月", "2025年13月", "2026年2月30日",
    "the fifth week of February 2026", "Q5 2025", "march forward", "up to 2000 rows", "and May we ask",
    "3月10-5日", "13-2月",
])
def test_no_period_is_invented(text: str) -> None:
    """Precision over recall: numbers, words and impossible dates are not periods, and an
    impossible date is not read as the shorter period inside it (2026年2月30日 is not February)."""
    assert find_periods(text, DEMO) == []


# --- properties -------------------------------------------------------------------------------

_DAYS = st.dates(min_value=dt.date(2001, 1, 1), max_value=dt.date(2098, 12, 31))
_PHRASES = [c[0] for c in CASES] + ["各部门", "绩效为A", " sales ", "，", "的", "到", " and ", "从", "between "]

#: Relative phrases and the calendar unit they move by from one day to another.
RELATIVE = [
    ("上个月", "month"), ("本月", "month"), ("下个月", "month"), ("上上个月", "month"), ("last month", "month"),
    ("3个月前", "month"), ("上个季度", "quarter"), ("本季度", "quarter"), ("last quarter", "quarter"),
    ("去年", "year"), ("今年", "year"), ("前年", "year"), ("this year", "year"), ("去年第三季度", "year"),
    ("今年前三季度", "year"), ("去年3月", "year"), ("上周", "week"), ("本周", "week"), ("last week", "week"),
    ("上周五", "week"), ("昨天", "day"), ("今天", "day"), ("yesterday", "day"), ("最近7天", "day"),
    ("past 30 days", "day"), ("过去三个季度", "quarter"), ("近3个月", "month"), ("今年以来", None),
]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_PHRASES), max_size=6), today=_DAYS)
def test_matches_are_ordered_disjoint_and_well_formed(parts: list[str], today: dt.date) -> None:
    text = "".join(parts)
    found = find_periods(text, today)
    end = 0
    for m in found:
        assert m.kind in KINDS
        assert m.first <= m.last
        assert end <= m.start < m.end
        assert text[m.start:m.end] == m.text
        end = m.end


@pytest.mark.parametrize(("phrase", "unit"), [r for r in RELATIVE if r[1]], ids=[r[0] for r in RELATIVE if r[1]])
@settings(max_examples=60, deadline=None)
@given(day1=_DAYS, day2=_DAYS)
def test_relative_phrases_move_with_today(phrase: str, unit: str, day1: dt.date, day2: dt.date) -> None:
    """Asked on two days, a relative phrase moves by the number of whole periods in between."""
    a, b = one(phrase, day1), one(phrase, day2)
    count = periods_between(day1, day2, unit)
    assert a.kind == b.kind
    if phrase == "上周五" or unit == "day" or unit == "week":
        assert (b.first - a.first).days == (b.last - a.last).days == count * (7 if unit == "week" else 1)
    else:
        assert (shift_date(a.first, count, unit), shift_date(a.last, count, unit)) == (b.first, b.last)


@settings(max_examples=300, deadline=None)
@given(today=_DAYS, month=st.integers(1, 12))
def test_a_month_without_a_year_is_the_most_recent_one(today: dt.date, month: int) -> None:
    numerals = "一二三四五六七八九十"
    chinese = numerals[month - 1] if month <= 10 else "十" + numerals[month - 11]
    for text in (f"{month}月", f"{chinese}月"):
        found = one(text, today)
        assert found.first.month == month and found.first <= today
        assert (today - found.first).days < 366


@settings(max_examples=300, deadline=None)
@given(day=_DAYS, today=_DAYS)
def test_absolute_dates_in_every_spelling(day: dt.date, today: dt.date) -> None:
    for text in (f"{day.year}年{day.month}月{day.day}日", day.isoformat(), f"{day:%B} {day.day}, {day.year}",
                 f"{day.day} {day:%b} {day.year}", f"{day.year}/{day.month}/{day.day}"):
        found = one(text, today)
        assert (found.kind, found.first, found.last) == ("date", day, day), text


@settings(max_examples=200, deadline=None)
@given(today=_DAYS, count=st.integers(1, 365))
def test_rolling_days_end_today(today: dt.date, count: int) -> None:
    for text in (f"最近{count}天", f"近{count}天", f"past {count} days"):
        found = one(text, today)
        assert found.last == today and (found.last - found.first).days == count - 1


@settings(max_examples=200, deadline=None)
@given(start=_DAYS, length=st.integers(0, 400), today=_DAYS)
def test_ranges_cover_both_ends(start: dt.date, length: int, today: dt.date) -> None:
    end = start + dt.timedelta(days=length)
    for text in (f"从{start.isoformat()}到{end.isoformat()}", f"between {start.isoformat()} and {end.isoformat()}",
                 f"{start.year}年{start.month}月{start.day}日至{end.year}年{end.month}月{end.day}日"):
        found = one(text, today)
        assert (found.kind, found.first, found.last, found.text) == ("date_range", start, end, text)
