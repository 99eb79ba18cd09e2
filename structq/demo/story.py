"""The facts the demo's seed questions rely on, planted so they hold for every seed.

Random data answers most questions somehow, but the four seed questions of the demo must
have a meaningful answer whatever the seed (at the default scale):

* "‘星火’项目组里，绩效为A的员工在三月第一周写了哪些周报？" — 星火 runs through both March
  2024 and March 2026, has a core of long-serving members, some of whom get an A in each
  spotlight month, and every member at work then files a report that week.
* "2023年第四季度，华东区销售额超过1000万且回款周期小于60天的合同有哪些？" — ordinary
  contracts stay below 10 million; that quarter and region get a fixed set of big deals, only
  some of them collected within 60 days.
* "去年第三季度在华东区销售额最高的产品是什么？" — answered by the ordinary sales data.
* "产品X在过去三个季度的增长率变化" — 产品X launches in April 2025 and ramps up along a
  fixed monthly curve, so its quarter-on-quarter growth in 2026 Q1–Q3 is positive but slows.

The generators read these constants; nothing else in the demo is special-cased.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from datetime import date

from .schema import Employee, ProjectMember

# --- 星火 and the first week of March -------------------------------------------------

SPOTLIGHT_PROJECT = "星火"
SPOTLIGHT_PROJECT_START = date(2023, 2, 13)

#: (assessment month, Monday of that month's first week) pairs the question is asked about.
SPOTLIGHT_WEEKS = (
    (date(2024, 3, 1), date(2024, 3, 4)),
    (date(2026, 3, 1), date(2026, 3, 2)),
)

#: How many long-serving people form 星火's core team (they join in its first weeks).
SPOTLIGHT_CORE_SIZE = 4

#: How many of the members at work in a spotlight month are graded A (at least; others may
#: earn an A by chance).
SPOTLIGHT_A_COUNT = 3


def spotlight_cohort(
    members: Iterable[ProjectMember],
    employees: Mapping[str, Employee],
    month: date,
    monday: date,
) -> list[str]:
    """The 星火 members, by employee id, who are at work for both ``month`` and ``monday``.

    The performance generator picks the A grades from this cohort and the report generator
    makes every one of them file a report that week, so both sides agree on who qualifies.
    """
    first_day, week_day = month.isoformat(), monday.isoformat()
    return sorted(
        member.employee_id
        for member in members
        if member.project_name == SPOTLIGHT_PROJECT
        and member.joined_at <= first_day
        and employees[member.employee_id].employed_on(first_day)
        and employees[member.employee_id].employed_on(week_day)
    )


def spotlight_a_grades(
    rng: random.Random,
    members: Iterable[ProjectMember],
    employees: Mapping[str, Employee],
) -> dict[str, frozenset[str]]:
    """For each spotlight month (ISO), the cohort members who must be graded A in it."""
    members = list(members)
    chosen: dict[str, frozenset[str]] = {}
    for month, monday in SPOTLIGHT_WEEKS:
        cohort = spotlight_cohort(members, employees, month, monday)
        chosen[month.isoformat()] = frozenset(rng.sample(cohort, min(SPOTLIGHT_A_COUNT, len(cohort))))
    return chosen


# --- big contracts in 华东, 2023 Q4 ------------------------------------------------------

#: "销售额超过1000万": ordinary contracts never reach this amount, only big deals do.
BIG_DEAL_AMOUNT = 10_000_000
ORDINARY_CONTRACT_CAP = 9_800_000

BIG_DEAL_REGION = "华东"
BIG_DEAL_QUARTER = (date(2023, 10, 1), date(2023, 12, 31))

#: Collection periods (days) of the big deals signed in that region and quarter: five are
#: collected in under 60 days, three are not, so the collection filter matters.
BIG_DEAL_COLLECTION_DAYS = (23, 35, 41, 52, 58, 64, 97, 133)

# --- 产品X's launch ----------------------------------------------------------------------

PRODUCT_X = "产品X"

#: 产品X's popularity per month since its launch (April 2025 = month 0), as a multiple of its
#: steady-state popularity; later months keep the last value. A sales push at the start of
#: 2026 lifts it sharply, then it levels off, so — seasons included — its quarter-on-quarter
#: growth over 2026 Q1, Q2, Q3 stays positive but slows each quarter.
PRODUCT_X_RAMP = (
    0.10, 0.15, 0.20,  # 2025 Q2
    0.25, 0.30, 0.35,  # 2025 Q3
    0.45, 0.50, 0.55,  # 2025 Q4
    1.00, 1.10, 1.20,  # 2026 Q1
    1.15, 1.20, 1.25,  # 2026 Q2
    1.38, 1.43, 1.48,  # 2026 Q3
)


def product_x_ramp(months_since_launch: int) -> float:
    """产品X's popularity multiplier ``months_since_launch`` months after its launch."""
    return PRODUCT_X_RAMP[min(months_since_launch, len(PRODUCT_X_RAMP) - 1)]

