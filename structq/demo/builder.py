"""Building the demo company: generate each table in dependency order and write it.

Each generator gets its own random stream, derived from the seed and the stream's name, so
a change to one generator does not reshuffle the others' data, and nothing depends on the
global ``random`` state or the clock: the same seed and scale always give the same rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from . import story
from .commerce import CustomerPicker, SalesForce, generate_contracts, generate_customers, generate_products
from .org import generate_employees, generate_performance
from .projects import generate_projects
from .reports import generate_reports
from .sales import generate_sales, plan_volume
from .schema import (
    CONTRACTS,
    CUSTOMERS,
    EMPLOYEE_PERFORMANCE,
    EMPLOYEES,
    PRODUCTS,
    PROJECT_MEMBERS,
    PROJECTS,
    SALES,
)
from .store import Progress, bulk_loading, staged, write_jsonl, write_table

DATABASE_NAME = "company.db"
REPORTS_NAME = "weekly_reports.jsonl"
#: The search index the reports file is loaded into.
REPORTS_INDEX = "weekly_reports"


@dataclass(frozen=True)
class DemoPaths:
    """Where a built demo lives."""

    directory: Path
    database: Path  # SQLite file with every table
    reports: Path  # JSONL documents of the ``weekly_reports`` index

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL of the database."""
        return f"sqlite:///{self.database}"


def build_demo(
    directory: Path,
    *,
    scale: float = 1.0,
    seed: int = 42,
    progress: Progress | None = None,
) -> DemoPaths:
    """Generate the demo company into ``directory`` (created if missing).

    ``scale`` multiplies the row counts (1.0 gives about 220,000 sales lines); ``seed``
    picks one of many equally plausible companies. Existing demo files are replaced only
    once the new ones are complete. ``progress(stage, done, total)`` is called as stages
    advance, for a progress bar.
    """
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = DemoPaths(directory, directory / DATABASE_NAME, directory / REPORTS_NAME)
    report = progress or _quiet

    def stream(name: str) -> random.Random:
        return random.Random(f"structq-demo:{seed}:{name}")

    with staged(paths.database, paths.reports) as (database, reports), bulk_loading(database) as db:
        employees = generate_employees(stream("employees"), scale)
        write_table(db, EMPLOYEES, employees, report)
        by_id = {employee.employee_id: employee for employee in employees}

        projects, members = generate_projects(stream("projects"), employees, scale)
        write_table(db, PROJECTS, projects, report)
        write_table(db, PROJECT_MEMBERS, members, report)

        a_grades = story.spotlight_a_grades(stream("spotlight"), members, by_id)
        performance = list(generate_performance(stream("performance"), employees, a_grades))
        write_table(db, EMPLOYEE_PERFORMANCE, performance, report)

        sales_force = SalesForce(employees)
        customers = generate_customers(stream("customers"), scale, sales_force)
        write_table(db, CUSTOMERS, customers, report)
        products = generate_products()
        write_table(db, PRODUCTS, products, report)

        picker = CustomerPicker(customers)
        sales_rng = stream("sales")
        volume = plan_volume(sales_rng, scale)
        sales = generate_sales(sales_rng, volume, picker, sales_force)
        write_table(db, SALES, sales, report, total=sum(count for _, count in volume))

        contracts = generate_contracts(stream("contracts"), scale, picker, sales_force)
        write_table(db, CONTRACTS, contracts, report)

        documents = list(generate_reports(stream("reports"), employees, projects, members, customers))
        write_jsonl(reports, documents, REPORTS_INDEX, report)
    return paths


def _quiet(stage: str, done: int, total: int) -> None:
    """The progress callback used when the caller passes none."""
