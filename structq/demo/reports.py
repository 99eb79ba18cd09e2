"""Weekly reports: who files one each week, and what it says.

People of the reporting departments file a report in some weeks (fewer in holiday weeks).
Engineers write about the projects they are on that week; business people about the
customers of their region and the products on sale. The reports for the spotlight weeks of
:mod:`.story` are always filed by 星火's cohort, and mention 星火.
"""

from __future__ import annotations

import random
import string
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, timedelta
from functools import cache, partial
from itertools import cycle

from . import phrases, story
from .commerce import on_sale
from .schema import Customer, Employee, Project, ProjectMember, WeeklyReport
from .timeline import END, HOLIDAY_WEEKS, iso, mondays
from .vocab import INDUSTRIES, PRODUCTS, PROJECTS, REGION_CITIES

#: How much less likely a report is in a holiday week.
_HOLIDAY_FACTOR = 0.3

_Assignment = tuple[str, str, str]  # (joined_at, last day, project name)

_KEYWORDS = {spec.name: spec.keywords for spec in PROJECTS}


def generate_reports(
    rng: random.Random,
    employees: list[Employee],
    projects: list[Project],
    members: list[ProjectMember],
    customers: list[Customer],
) -> Iterator[WeeklyReport]:
    """Reports in week order, then author order, numbered R000001…"""
    assignments = _assignments(projects, members)
    by_id = {employee.employee_id: employee for employee in employees}
    spotlight = {
        iso(monday): frozenset(story.spotlight_cohort(members, by_id, month, monday))
        for month, monday in story.SPOTLIGHT_WEEKS
    }
    by_region: dict[str, list[str]] = defaultdict(list)
    for customer in customers:
        by_region[customer.region].append(customer.customer_name)
    number = 0
    for monday in mondays():
        week = iso(monday)
        forced = spotlight.get(week, frozenset())
        holiday = _HOLIDAY_FACTOR if monday in HOLIDAY_WEEKS else 1.0
        for author in employees:
            rate = phrases.REPORTING_RATE.get(author.department)
            if rate is None or not author.employed_on(week):
                continue
            if author.employee_id not in forced and rng.random() >= rate * holiday:
                continue
            active = [name for joined, last, name in assignments[author.employee_id]
                      if joined <= week <= last]
            chosen = rng.sample(active, min(2, len(active)))
            if author.employee_id in forced:
                others = [p for p in chosen if p != story.SPOTLIGHT_PROJECT]
                chosen = [story.SPOTLIGHT_PROJECT, *others[:1]]
            customer_names = by_region[author.region] or [c.customer_name for c in customers]
            number += 1
            yield _write(rng, f"R{number:06d}", author, monday, chosen, customer_names)


def _assignments(projects: list[Project], members: list[ProjectMember]) -> dict[str, list[_Assignment]]:
    """For each employee, the projects they are on and from when to when."""
    last_day = {p.project_name: p.end_date or iso(END) for p in projects}
    assignments: dict[str, list[_Assignment]] = defaultdict(list)
    for member in members:
        assignments[member.employee_id].append(
            (member.joined_at, last_day[member.project_name], member.project_name)
        )
    return assignments


def _write(
    rng: random.Random,
    report_id: str,
    author: Employee,
    monday: date,
    projects: Sequence[str],
    customer_names: Sequence[str],
) -> WeeklyReport:
    """One report: a title, 本周进展, 风险与问题 and 下周计划."""
    engineering = author.department in phrases.ENGINEERING
    fill = _Filler(_vocabulary(rng, author, monday, projects, customer_names))
    progress, risks, plans = (
        (phrases.ENGINEERING_PROGRESS, phrases.ENGINEERING_RISKS, phrases.ENGINEERING_PLANS)
        if engineering
        else (phrases.BUSINESS_PROGRESS, phrases.BUSINESS_RISKS, phrases.BUSINESS_PLANS)
    )
    # The first item is about the author's first project, so every listed project that
    # the reports index says is mentioned really is.
    first = rng.choice([t for t in progress if "{project}" in t] if projects else progress)
    more = rng.sample([t for t in progress if t != first], rng.randint(0, 2))
    done = [fill(template) for template in (first, *more)]
    risk = fill(rng.choice(risks))
    planned = [fill(template) for template in rng.sample(plans, rng.randint(1, 2))]
    titles = phrases.TITLES if projects else [t for t in phrases.TITLES if "{project}" not in t]
    title = fill(rng.choice(titles))
    content = "\n".join(
        ["本周进展：", *_numbered(done), "风险与问题：", risk, "下周计划：", *_numbered(planned)]
    )
    return WeeklyReport(
        report_id=report_id,
        author_id=author.employee_id,
        author_name=author.name,
        department=author.department,
        week_start_date=iso(monday),
        projects_mentioned=tuple(p for p in projects if p in content or p in title),
        title=title,
        content=content,
    )


def _vocabulary(
    rng: random.Random,
    author: Employee,
    monday: date,
    projects: Sequence[str],
    customer_names: Sequence[str],
) -> dict[str, Callable[[], object]]:
    """What each template field may be filled with, for one author in one week."""
    keywords = [keyword for project in projects for keyword in _KEYWORDS[project]]
    on_sale_names = [spec.name for spec in PRODUCTS if on_sale(spec, iso(monday))]
    return {
        "author": lambda: author.name,
        "department": lambda: author.department,
        "week_start": lambda: iso(monday),
        "week_end": lambda: iso(monday + timedelta(days=4)),
        "week_number": lambda: monday.isocalendar().week,
        "project": partial(next, cycle(projects or [rng.choice(phrases.WORKSTREAMS)])),
        "term": lambda: rng.choice(keywords if keywords and rng.random() < 0.6 else phrases.TECH_TERMS),
        "module": partial(rng.choice, phrases.MODULES),
        "task": partial(rng.choice, phrases.TASKS),
        "team": partial(rng.choice, phrases.TEAMS),
        "quarter": partial(rng.choice, phrases.QUARTERS),
        "customer": partial(rng.choice, customer_names),
        "product": partial(rng.choice, on_sale_names),
        "city": partial(rng.choice, REGION_CITIES[author.region]),
        "industry": partial(rng.choice, INDUSTRIES),
        "n": partial(rng.randint, 3, 30),
        "small": partial(rng.randint, 1, 8),
        "percent": partial(rng.randint, 60, 98),
        "amount": partial(rng.randint, 5, 300),
    }


class _Filler:
    """Fills a template, drawing each field it names once (a field used twice repeats)."""

    def __init__(self, vocabulary: Mapping[str, Callable[[], object]]) -> None:
        self._vocabulary = vocabulary

    def __call__(self, template: str) -> str:
        return template.format(**{name: self._vocabulary[name]() for name in _field_names(template)})


@cache
def _field_names(template: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(
        name for _, name, _, _ in string.Formatter().parse(template) if name
    ))


def _numbered(lines: Sequence[str]) -> list[str]:
    return [f"{i}. {line}" for i, line in enumerate(lines, start=1)]
