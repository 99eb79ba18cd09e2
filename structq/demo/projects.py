"""Internal projects and who works on them.

The project list itself is fixed (see :data:`.vocab.PROJECTS`); the seed decides when each
one runs, who leads it and who joins. Only people at work while a project runs join it,
and their role follows from their department and title.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import date, timedelta

from . import story
from .schema import Employee, Project, ProjectMember
from .timeline import END, START, iso, random_day
from .vocab import PROJECTS, ROLE_DEPARTMENTS, ProjectSpec

#: Departments whose people staff projects.
_PROJECT_DEPARTMENTS = frozenset(department for departments in ROLE_DEPARTMENTS.values()
                                 for department in departments)
_LAST_START = date(2026, 6, 30)


def generate_projects(
    rng: random.Random, employees: list[Employee], scale: float
) -> tuple[list[Project], list[ProjectMember]]:
    """Every project with its members; the owner is the member whose role is 负责人."""
    projects: list[Project] = []
    members: list[ProjectMember] = []
    for number, spec in enumerate(PROJECTS, start=1):
        start, end, status = _schedule(rng, spec)
        last = end or END
        staff = [e for e in employees if e.department in _PROJECT_DEPARTMENTS
                 and e.hire_date <= iso(last) and (e.leave_date is None or e.leave_date > iso(start))]
        core = _core_team(rng, spec, staff, start)
        owner = _owner(rng, spec, core or staff, start, last)
        team = [owner] + [e for e in core if e != owner]
        others = [e for e in staff if e not in team]
        size = max(3, round(spec.team * scale))
        team += rng.sample(others, max(0, min(size - len(team), len(others))))
        projects.append(
            Project(
                project_id=f"P{number:03d}",
                project_name=spec.name,
                description=spec.description,
                department=spec.department,
                status=status,
                start_date=iso(start),
                end_date=iso(end) if end else None,
                owner_id=owner.employee_id,
                budget=float(rng.randrange(50, 801) * 10_000),
            )
        )
        for employee in team:
            joined = _joined(rng, employee, start, last, early=employee in core or employee == owner)
            role = "负责人" if employee == owner else _role(employee)
            members.append(ProjectMember(spec.name, employee.employee_id, role, iso(joined)))
    return projects, members


def _schedule(rng: random.Random, spec: ProjectSpec) -> tuple[date, date | None, str]:
    """Start, end (``None`` while running or paused) and status of a project."""
    if spec.name == story.SPOTLIGHT_PROJECT:
        return story.SPOTLIGHT_PROJECT_START, None, "进行中"
    start = random_day(rng, START, _LAST_START)
    end = start + timedelta(days=rng.randint(150, 720))
    if end < END:
        return start, end, "已完成"
    return start, None, "已暂停" if rng.random() < 0.15 else "进行中"


def _core_team(
    rng: random.Random, spec: ProjectSpec, staff: list[Employee], start: date
) -> list[Employee]:
    """星火's long-serving core: hired before it started, at work through every spotlight week
    and still here today. Other projects have no core."""
    if spec.name != story.SPOTLIGHT_PROJECT:
        return []
    spotlight_days = [iso(monday) for _, monday in story.SPOTLIGHT_WEEKS] + [iso(END)]
    veterans = [e for e in staff if e.hire_date < iso(start)
                and all(e.employed_on(day) for day in spotlight_days)]
    return rng.sample(veterans, min(story.SPOTLIGHT_CORE_SIZE, len(veterans)))


def _owner(
    rng: random.Random, spec: ProjectSpec, candidates: Iterable[Employee], start: date, last: date
) -> Employee:
    """The project lead: someone of the owning department at work from start to finish,
    falling back to anyone on the candidate list."""
    candidates = list(candidates)
    throughout = [e for e in candidates if e.employed_on(iso(start)) and e.employed_on(iso(last))]
    for pool in ([e for e in throughout if e.department == spec.department], throughout, candidates):
        if pool:
            return rng.choice(pool)
    raise ValueError(f"no one can staff project {spec.name!r}; the organisation is empty")


def _joined(rng: random.Random, employee: Employee, start: date, last: date, *, early: bool) -> date:
    """When someone joined: the lead and the core within the first month, most others soon
    after they could, the rest at any time they were at work while the project ran."""
    earliest = max(start, date.fromisoformat(employee.hire_date))
    latest = last
    if employee.leave_date is not None:
        latest = min(last, date.fromisoformat(employee.leave_date) - timedelta(days=1))
    latest = max(earliest, latest)
    if early:
        return min(latest, earliest + timedelta(days=rng.randint(0, 30)))
    if rng.random() < 0.6:
        return min(latest, earliest + timedelta(days=rng.randint(0, 45)))
    return random_day(rng, earliest, latest)


def _role(employee: Employee) -> str:
    """The project role someone's title and department imply."""
    if "测试" in employee.title:
        return "测试"
    if "架构" in employee.title:
        return "架构师"
    if "设计" in employee.title:
        return "设计"
    return {"产品部": "产品", "运维部": "运维"}.get(employee.department, "开发")
