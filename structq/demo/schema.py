"""The demo database's tables: one row type per table, and the DDL rendered from them.

Each table's columns are declared once, as a ``NamedTuple`` whose annotations give the
column types (``str`` → TEXT, ``int`` → INTEGER, ``float`` → REAL; ``| None`` → nullable).
The generators build these tuples and the writer inserts them as they are, so the column
list, its order and its types cannot drift apart. Dates are ISO text ('YYYY-MM-DD').
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import NamedTuple


class Employee(NamedTuple):
    employee_id: str
    name: str
    gender: str
    id_card: str
    department: str
    title: str
    region: str
    city: str
    hire_date: str
    leave_date: str | None
    manager_id: str | None
    status: str
    monthly_salary: int

    def employed_on(self, day: str) -> bool:
        """Whether the person works here on ``day`` (ISO text)."""
        return self.hire_date <= day and (self.leave_date is None or day < self.leave_date)


class Project(NamedTuple):
    project_id: str
    project_name: str
    description: str
    department: str
    status: str
    start_date: str
    end_date: str | None
    owner_id: str
    budget: float


class ProjectMember(NamedTuple):
    project_name: str
    employee_id: str
    role: str
    joined_at: str


class Performance(NamedTuple):
    employee_id: str
    assessment_month: str
    performance_grade: str
    score: float


class Customer(NamedTuple):
    customer_id: str
    customer_name: str
    industry: str
    region: str
    city: str
    level: str
    owner_id: str


class Product(NamedTuple):
    product_id: str
    product_name: str
    category: str
    unit: str
    unit_price: float
    status: str


class Sale(NamedTuple):
    sale_id: int
    sale_date: str
    region: str
    city: str
    product_id: str
    customer_id: str
    employee_id: str
    quantity: int
    unit_price: float
    amount: float


class Contract(NamedTuple):
    contract_id: str
    contract_name: str
    customer_id: str
    product_id: str
    employee_id: str
    region: str
    amount: float
    signed_at: str
    collection_days: int | None
    status: str


@dataclass(frozen=True)
class Table:
    """A table: its row type, primary key, foreign keys, unique keys and secondary indexes."""

    name: str
    row: type[tuple[object, ...]]  # a NamedTuple class
    primary_key: tuple[str, ...]
    references: dict[str, str] = field(default_factory=dict)  # column → "table(column)"
    unique: tuple[str, ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        fields: tuple[str, ...] = self.row._fields  # type: ignore[attr-defined]
        return fields

    def create_statements(self) -> list[str]:
        """``CREATE TABLE`` followed by one ``CREATE INDEX`` per secondary index."""
        hints = typing.get_type_hints(self.row)
        lines = [f"{name} {_column_type(hints[name])}" for name in self.columns]
        lines.append(f"PRIMARY KEY ({', '.join(self.primary_key)})")
        lines += [f"UNIQUE ({name})" for name in self.unique]
        lines += [
            f"FOREIGN KEY ({column}) REFERENCES {target}"
            for column, target in self.references.items()
        ]
        body = ",\n  ".join(lines)
        statements = [f"CREATE TABLE {self.name} (\n  {body}\n)"]
        statements += [
            f"CREATE INDEX idx_{self.name}_{'_'.join(columns)} ON {self.name} ({', '.join(columns)})"
            for columns in self.indexes
        ]
        return statements

    def insert_statement(self) -> str:
        placeholders = ", ".join("?" * len(self.columns))
        return f"INSERT INTO {self.name} ({', '.join(self.columns)}) VALUES ({placeholders})"


def keys_of(*tables: Table) -> dict[str, str]:
    """References to each table's single-column primary key from a column of the same name:
    ``keys_of(PRODUCTS)`` is ``{"product_id": "products(product_id)"}``."""
    refs = {}
    for table in tables:
        (key,) = table.primary_key
        refs[key] = f"{table.name}({key})"
    return refs


_SQLITE_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL"}


def _column_type(hint: object) -> str:
    """The SQLite column declaration for a row annotation such as ``str | None``."""
    if isinstance(hint, types.UnionType):
        (inner,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
        return _SQLITE_TYPES[inner]
    return f"{_SQLITE_TYPES[hint]} NOT NULL"  # type: ignore[index]


EMPLOYEES = Table(
    "employees",
    Employee,
    primary_key=("employee_id",),
    references={"manager_id": "employees(employee_id)"},
    indexes=(("department",), ("region",), ("name",)),
)
PROJECTS = Table(
    "projects",
    Project,
    primary_key=("project_id",),
    unique=("project_name",),
    references={"owner_id": "employees(employee_id)"},
)
PROJECT_MEMBERS = Table(
    "project_members",
    ProjectMember,
    primary_key=("project_name", "employee_id"),
    references={
        "project_name": "projects(project_name)",
        "employee_id": "employees(employee_id)",
    },
    indexes=(("employee_id",),),
)
EMPLOYEE_PERFORMANCE = Table(
    "employee_performance",
    Performance,
    primary_key=("employee_id", "assessment_month"),
    references=keys_of(EMPLOYEES),
    indexes=(("assessment_month", "performance_grade"),),
)
CUSTOMERS = Table(
    "customers",
    Customer,
    primary_key=("customer_id",),
    references={"owner_id": "employees(employee_id)"},
    indexes=(("region",),),
)
PRODUCTS = Table("products", Product, primary_key=("product_id",), unique=("product_name",))
SALES = Table(
    "sales",
    Sale,
    primary_key=("sale_id",),
    references=keys_of(PRODUCTS, CUSTOMERS, EMPLOYEES),
    indexes=(("sale_date",), ("product_id", "sale_date"), ("region", "sale_date"),
             ("customer_id",), ("employee_id",)),
)
CONTRACTS = Table(
    "contracts",
    Contract,
    primary_key=("contract_id",),
    references=keys_of(CUSTOMERS, PRODUCTS, EMPLOYEES),
    indexes=(("signed_at",), ("region", "signed_at"), ("customer_id",)),
)

#: Every table, in an order where each one's references point to earlier ones.
TABLES = (
    EMPLOYEES, PROJECTS, PROJECT_MEMBERS, EMPLOYEE_PERFORMANCE,
    CUSTOMERS, PRODUCTS, SALES, CONTRACTS,
)


class WeeklyReport(NamedTuple):
    """One document of the ``weekly_reports`` search index (a line of the JSONL file)."""

    report_id: str
    author_id: str
    author_name: str
    department: str
    week_start_date: str
    projects_mentioned: tuple[str, ...]
    title: str
    content: str
