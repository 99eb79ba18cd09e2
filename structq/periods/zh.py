"""Chinese period phrases, and the numeric forms both languages write (2026-03-05, 2026-03,
2025Q3).

Each rule is a pattern with named groups (see ``readings.py``) and the resolver that reads
them. Longer phrases win over the shorter ones inside them (``2026年3月`` over ``2026年``), so a
rule never needs to exclude what a longer rule covers.
"""

from __future__ import annotations

import re

from . import readings as r
from .numerals import NUM, YEAR_DIGITS
from .readings import Rule

__all__ = ["RULES"]

#: Not in the middle of a number (13月 is not 3月, 2025年前 is not 25年前).
_NB = r"(?<![\d零〇○一二两三四五六七八九十百])"
#: A year, absolute or relative: 2025年, 二〇二五年, 2025年度, 今年, 去年, 前年, 明年.
YEAR = (rf"(?:(?P<y>{YEAR_DIGITS})\s*年度?|(?P<ry>今年|本年度?|去年|上一?年度?|大前年|前年|明年|下一?年度?|后年))")
_OPT_YEAR = rf"(?:{YEAR}\s*的?\s*)?"
#: A relative month: 上个月, 上月, 上上个月, 本月, 这个月, 当月, 下个月.
REL_MONTH = r"(?P<rm>上上个?月|上一?个?月|本月份?|这一?个?月|当月|下一?个?月)"
_MONTH = rf"{_NB}(?P<m>{NUM})\s*月份?"
_WEEK = r"(?:周|个?星期|个?礼拜)"
#: Between the two ends of a span written once (3-5月, 一至三季度, 3月5-10日).
_TO = r"(?:-|~|～|—|–|到|至)"
_FROM = r"(?:从|自|由)?"


def _ago(unit: str) -> str:
    """``N unit ago``: 3天前, 两周以前, 5个月前 (``unit`` may name the group ``u``)."""
    return rf"{_NB}(?P<n>{NUM})\s*{unit}(?:以)?前"


#: Where a month, or a relative month, stands before its day, week or ten days.
_SOME_MONTH = rf"(?:{_OPT_YEAR}{_MONTH}|{REL_MONTH})"


RULES: tuple[Rule, ...] = r.rule_table(
    re.compile,
    # days
    (r.resolve_date,
     rf"{_SOME_MONTH}\s*(?P<d>{NUM})\s*[日号]",
     r"(?<![\d.])(?P<y>\d{4})([-/.])(?P<m>\d{1,2})\2(?P<d>\d{1,2})(?![\d])"),
    (r.resolve_day_tail, rf"{_NB}(?P<d>{NUM})\s*[日号](?!\s*[之前后])"),
    (r.resolve_relative_day, r"(?P<w>大前天|前天|昨天|昨日|今天|今日|明天|明日|后天)", _ago("天")),
    (r.resolve_weekday,
     r"(?P<r>上上|上一?个?|本|这一?个?|下一?个?)(?:周|星期|礼拜)(?P<wd>[二三四五六日天1-7]|一(?![共起次下些个直定般样]))"),
    # weeks
    (r.resolve_relative_period,
     rf"(?P<r>上上个?|上一?个?|本|这一?个?|下一?个?)(?P<u>{_WEEK})(?!期)",
     _ago(rf"(?P<u>{_WEEK})")),
    (r.resolve_month_week, rf"{_SOME_MONTH}\s*的?\s*(?:第\s*(?P<o>{NUM})|(?P<final>最后一))\s*{_WEEK}"),
    (r.resolve_days_of_month, rf"{_FROM}{_OPT_YEAR}{_MONTH}\s*(?P<d>{NUM})\s*{_TO}\s*(?P<de>{NUM})\s*[日号]"),
    (r.resolve_ten_days, rf"{_SOME_MONTH}\s*的?\s*(?P<x>上|中|下)旬"),
    # months
    (r.resolve_months, rf"{_FROM}{_OPT_YEAR}{_NB}(?P<m>{NUM})\s*(?:月份?)?\s*{_TO}\s*(?P<me>{NUM})\s*月份?"),
    (r.resolve_month,
     rf"{_OPT_YEAR}{_MONTH}",
     r"(?<![\d./-])(?P<y>\d{4})[-/](?P<m>\d{1,2})(?!\d)(?![-/]\d)",
     REL_MONTH,
     _ago("个月")),
    # quarters
    (r.resolve_quarter,
     rf"{_OPT_YEAR}(?:第\s*(?P<q>{NUM})\s*季度?|{_NB}(?P<q2>{NUM})\s*季度|(?<![A-Za-z])[Qq](?P<q3>[1-4])(?![\d\w]))",
     r"(?<![\d])(?P<y>\d{4})\s*-?\s*[Qq](?P<q>[1-4])(?![\d\w])"),
    (r.resolve_relative_period,
     r"(?P<r>上上个?|上一?个?|本|这一?个?|当|下一?个?)(?P<u>季度|季)(?![节风])",
     _ago("个?(?P<u>季度)")),
    (r.resolve_first_quarters, rf"{_OPT_YEAR}前\s*(?P<n>[1-4一二三四两])\s*个?季度"),
    (r.resolve_first_months, rf"{YEAR}\s*的?\s*前\s*(?P<n>{NUM})\s*个月"),
    (r.resolve_quarters,
     rf"{_FROM}{_OPT_YEAR}(?:第\s*)?{_NB}(?P<q>{NUM})\s*(?:季度)?\s*{_TO}\s*(?:第\s*)?(?P<qe>{NUM})\s*季度"),
    # halves and years
    (r.resolve_half, rf"{_OPT_YEAR}(?P<h>上|下)半年度?"),
    (r.resolve_year, rf"{YEAR}(?:\s*全年)?"),
    (r.resolve_relative_period, _ago("(?P<u>年)")),
    # windows
    (r.resolve_rolling, rf"(?:最近|近|过去|过往)的?\s*(?P<n>{NUM})\s*(?P<u>天|日|个?星期|个?礼拜|周|个?月|个?季度|年)"),
    (r.resolve_to_date, r"(?P<u>今年|本年|年初|本月|月初|本季度?|季初)(?:以来|至今|到现在|迄今)"),
)
