"""The organisation: employees with a management chain, and their monthly performance.

Headcount scales with ``scale``, but a fixed skeleton is always there — the general manager,
one head per department, one sales representative per region and 星火's core team — so
that every region can sell and the seed questions have people to be about, at any scale.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from . import story
from .schema import Employee, Performance
from .timeline import END, START, iso, month_starts, random_day
from .vocab import (
    CITY_AREA_CODES,
    DEPARTMENTS,
    GIVEN_NAME_CHARS,
    REGION_CITIES,
    REGION_MARKET_SHARE,
    REGIONS,
    SALARY_BANDS,
    SURNAMES,
    Department,
)

#: Employees beyond the skeleton at scale 1.
BASE_HEADCOUNT = 480

#: Share of staff who leave during the data window.
ATTRITION = 0.14

#: Share of men per department where it differs from the company-wide 55 %.
_MALE_SHARE = {"研发部": 0.72, "运维部": 0.8, "人事部": 0.3, "财务部": 0.35, "市场部": 0.42}

_DEPARTMENTS = {department.name: department for department in DEPARTMENTS}
_GENERAL_OFFICE, _RND, _PRODUCT, _SALES = "总经办", "研发部", "产品部", "销售部"

#: Grade floors: a score at or above the floor earns the grade.
GRADE_FLOORS = (("A", 90.0), ("B", 80.0), ("C", 65.0), ("D", 0.0))


@dataclass
class _Draft:
    """An employee before ids and managers are known (both depend on everyone else)."""

    department: Department
    kind: str  # ceo | head | manager | staff
    title: str
    region: str
    city: str
    hire: date
    leave: date | None = None


def generate_employees(rng: random.Random, scale: float) -> list[Employee]:
    """Everyone on the payroll during the window, numbered E0001… in order of hiring."""
    drafts = _skeleton(rng)
    drafts += [_staff(rng) for _ in range(round(BASE_HEADCOUNT * scale))]
    _promote_managers(rng, drafts)
    drafts.sort(key=lambda draft: (draft.kind != "ceo", draft.hire))
    width = max(4, len(str(len(drafts))))
    ids = [f"E{number:0{width}d}" for number in range(1, len(drafts) + 1)]
    managers = _assign_managers(rng, drafts, ids)
    used_names: set[str] = set()
    employees = []
    for employee_id, draft, manager_id in zip(ids, drafts, managers, strict=True):
        male = rng.random() < _MALE_SHARE.get(draft.department.name, 0.55)
        gender = "男" if male else "女"
        employees.append(
            Employee(
                employee_id=employee_id,
                name=_unique_name(rng, gender, used_names),
                gender=gender,
                id_card=_fake_id_card(rng, draft.city, draft.hire, male),
                department=draft.department.name,
                title=draft.title,
                region=draft.region,
                city=draft.city,
                hire_date=iso(draft.hire),
                leave_date=iso(draft.leave) if draft.leave else None,
                manager_id=manager_id,
                status="离职" if draft.leave else "在职",
                monthly_salary=rng.randrange(*SALARY_BANDS[_band(draft.kind)], 500),
            )
        )
    return employees


def _skeleton(rng: random.Random) -> list[_Draft]:
    """The people who are always there: they never leave and were hired before the window."""
    office = _DEPARTMENTS[_GENERAL_OFFICE]
    drafts = [_Draft(office, "ceo", office.head_title, "华东", "上海", date(2012, 3, 1))]
    for department in DEPARTMENTS:
        if department.name != _GENERAL_OFFICE:
            region = department.offices[0]
            drafts.append(
                _Draft(department, "head", department.head_title, region,
                       REGION_CITIES[region][0], random_day(rng, date(2013, 1, 1), date(2018, 12, 31)))
            )
    sales = _DEPARTMENTS[_SALES]
    for region in REGIONS:
        drafts.append(
            _Draft(sales, "staff", rng.choice(sales.titles), region, REGION_CITIES[region][0],
                   random_day(rng, date(2015, 1, 1), date(2020, 12, 31)))
        )
    core = [_DEPARTMENTS[_RND]] * (story.SPOTLIGHT_CORE_SIZE - 1) + [_DEPARTMENTS[_PRODUCT]]
    for department in core:
        drafts.append(
            _Draft(department, "staff", rng.choice(department.titles[1:]), "华东", "上海",
                   random_day(rng, date(2018, 1, 1), date(2021, 12, 31)))
        )
    return drafts


def _staff(rng: random.Random) -> _Draft:
    """One ordinary employee: most were hired before the window, some leave during it."""
    department = rng.choices(DEPARTMENTS, weights=[d.weight for d in DEPARTMENTS])[0]
    offices = department.offices
    region = rng.choices(offices, weights=[REGION_MARKET_SHARE[r] for r in offices])[0]
    cities = REGION_CITIES[region]
    fields_staff = department.name in (_SALES, "客户成功部")
    city = rng.choices(cities, weights=[3] + [1] * (len(cities) - 1))[0] if fields_staff else cities[0]
    if rng.random() < 0.6:
        hire = random_day(rng, date(2014, 1, 1), START - timedelta(days=1))
    else:
        hire = random_day(rng, START, END - timedelta(days=30))
    leave = None
    earliest_leave = max(hire + timedelta(days=120), START + timedelta(days=30))
    if rng.random() < ATTRITION and earliest_leave < END:
        leave = random_day(rng, earliest_leave, END)
    return _Draft(department, "staff", rng.choice(department.titles), region, city, hire, leave)


def _promote_managers(rng: random.Random, drafts: list[_Draft]) -> None:
    """Make one in nine long-serving staff of each department a manager."""
    by_department: dict[str, list[_Draft]] = defaultdict(list)
    for draft in drafts:
        if draft.kind == "staff" and draft.leave is None and draft.hire < START:
            by_department[draft.department.name].append(draft)
    for name, candidates in by_department.items():
        if name == _GENERAL_OFFICE:
            continue
        for draft in rng.sample(candidates, len(candidates) // 9):
            draft.kind, draft.title = "manager", draft.department.manager_title


def _assign_managers(rng: random.Random, drafts: list[_Draft], ids: list[str]) -> list[str | None]:
    """Each person's manager: staff → a manager of their department (same region first)
    → the department head → the general manager, who reports to no one."""
    ceo = ids[0]
    heads = {d.department.name: i for d, i in zip(drafts, ids, strict=True) if d.kind == "head"}
    managers: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for draft, employee_id in zip(drafts, ids, strict=True):
        if draft.kind == "manager":
            managers[draft.department.name, draft.region].append(employee_id)
            managers[draft.department.name, None].append(employee_id)
    chain: list[str | None] = []
    for draft in drafts:
        department = draft.department.name
        if draft.kind == "ceo":
            chain.append(None)
        elif draft.kind == "head" or department == _GENERAL_OFFICE:
            chain.append(ceo)
        elif draft.kind == "manager":
            chain.append(heads[department])
        else:
            pool = managers[department, draft.region] or managers[department, None]
            chain.append(rng.choice(pool) if pool else heads[department])
    return chain


def _band(kind: str) -> str:
    return {"ceo": "head", "head": "head", "manager": "manager"}.get(kind, "staff")


def _unique_name(rng: random.Random, gender: str, used: set[str]) -> str:
    """A Chinese name no one else in the company has, so names identify people in answers."""
    surname_weights = [1 / (rank + 4) for rank in range(len(SURNAMES))]
    chars = GIVEN_NAME_CHARS[gender]
    while True:
        surname = rng.choices(SURNAMES, weights=surname_weights)[0]
        given = "".join(rng.choice(chars) for _ in range(1 if rng.random() < 0.25 else 2))
        if (name := surname + given) not in used:
            used.add(name)
            return name


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def _fake_id_card(rng: random.Random, city: str, hire: date, male: bool) -> str:
    """An 18-digit identity-card look-alike whose check digit is deliberately wrong,
    so no generated value can be a real person's number."""
    birth = random_day(rng, date(hire.year - 40, 1, 1), date(hire.year - 22, 12, 31))
    sequence = rng.randrange(1 if male else 0, 1000, 2)
    body = f"{CITY_AREA_CODES[city]}{birth:%Y%m%d}{sequence:03d}"
    valid = _ID_CHECK[sum(int(d) * w for d, w in zip(body, _ID_WEIGHTS, strict=True)) % 11]
    return body + rng.choice([digit for digit in "0123456789" if digit != valid])


# --- performance --------------------------------------------------------------------------


def generate_performance(
    rng: random.Random,
    employees: list[Employee],
    forced_a: Mapping[str, frozenset[str]],
) -> Iterator[Performance]:
    """One assessment per employee per month they are at work on its first day.

    Each person has a steady ability plus monthly noise; ``forced_a`` maps an assessment
    month (ISO) to the people who must earn an A in it (see :mod:`.story`).
    """
    months = [iso(month) for month in month_starts()]
    for employee in employees:
        ability = rng.gauss(80.5, 6.0)
        for month in months:
            if not employee.employed_on(month):
                continue
            score = ability + rng.gauss(0.0, 5.0)
            if employee.employee_id in forced_a.get(month, ()):
                score = max(score, rng.uniform(90.5, 97.5))
            score = round(min(max(score, 45.0), 99.5), 1)
            yield Performance(employee.employee_id, month, grade(score), score)


def grade(score: float) -> str:
    """The grade a score earns: A 优秀 ≥ 90, B 良好 ≥ 80, C 合格 ≥ 65, D 待改进 below."""
    return next(letter for letter, floor in GRADE_FLOORS if score >= floor)
