"""Slots of a verified example: the parts of its question a person may change.

``2026年3月各部门绩效为A的人数是多少？`` with a ``month`` slot and a ``grade`` slot also answers
``上个月各部门绩效为B的人数是多少？``: its steps use the slots' values as bound parameters
(``:month_start``, ``:grade``), never as text spliced into the query. Which parameters a slot
gives its steps depends on its kind (``slot_params``):

==============  ======================================  ================================
slot            parameters                              value
==============  ======================================  ================================
``date``        ``:name``                               ISO date ``2026-03-02``
``month``,      ``:name_start``, ``:name_end``,         first and last day (inclusive),
``quarter``,    ``:name_next``                          and the day after the last, ISO
``year``,
``date_range``
``integer``     ``:name``                               a whole number (top N), 1…``max``
``column``      ``:name``                               the value as stored in the column
==============  ======================================  ================================

This module checks what one manifest can tell (names, the example in the question, every
parameter used and declared); ``validate.example_problems`` checks that a column slot names a
declared column, and ``structq.templates`` that a period example reads as its kind.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["PERIOD_KINDS", "SLOT_NAME", "Slot", "check_slots", "slot_params", "step_parameters"]

#: Slot kinds read by the date grammar (``structq.periods``).
PERIOD_KINDS = ("date", "month", "quarter", "year", "date_range")
SLOT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: ``:name`` in SQL outside string literals (``::date`` casts are not parameters).
_SQL_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_SQL_STRING = re.compile(r"'(?:[^']|'')*'")


class Slot(BaseModel):
    """One slot: a kind (``type``) or a column whose values fill it, and the value the example uses.

    ``example`` is the slot's text in the question (``A``, ``5``, ``2026年3月``); a period slot
    may instead give the value (``2026-03`` for a month, ``2026-Q3``, ``2026``,
    ``2026-03-02``, ``2026-03-02..2026-03-08``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    type: Literal["date", "month", "quarter", "year", "date_range", "integer"] | None = None
    #: ``source.table.column`` (or ``source.index.field``): the slot takes that column's values.
    column: str | None = None
    example: str
    #: The largest number an ``integer`` slot accepts.
    max: int = Field(default=100, ge=1, le=1_000_000)

    @field_validator("example", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        """YAML reads ``5`` as a number and ``2026-03-02`` as a date: both are the text written."""
        if isinstance(value, dt.date):
            return value.isoformat()
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _one_kind(self) -> Slot:
        if (self.type is None) == (self.column is None):
            raise ValueError("a slot has either type: (date, month, quarter, year, date_range, integer) "
                             "or column: source.table.column")
        if self.column is not None and self.column.count(".") < 2:
            raise ValueError(f"column {self.column!r} is not source.table.column")
        return self

    @property
    def kind(self) -> str:
        """``column`` or the slot's type."""
        return self.type or "column"


def slot_params(name: str, slot: Slot) -> list[str]:
    """The parameter names a slot gives the steps (see the module table)."""
    if slot.kind in PERIOD_KINDS and slot.kind != "date":
        return [f"{name}_start", f"{name}_end", f"{name}_next"]
    return [name]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def step_parameters(query: str | dict[str, Any]) -> set[str]:
    """The ``:name`` parameters a step's query uses: in SQL outside string literals, in a DSL
    body as whole string values."""
    if isinstance(query, str):
        return set(_SQL_PARAMETER.findall(_SQL_STRING.sub("''", query)))
    return {s[1:] for s in _strings(query) if s.startswith(":") and SLOT_NAME.match(s[1:])}


def check_slots(question: str, slots: dict[str, Slot], queries: list[str | dict[str, Any]]) -> None:
    """Raise ``ValueError`` (pydantic reports it at the example) when the slots and the steps
    disagree: a bad name, an example not in the question, a parameter no slot gives, a slot
    no step uses."""
    given: dict[str, str] = {}
    for name, slot in slots.items():
        if not SLOT_NAME.match(name):
            raise ValueError(f"slot name {name!r} is not an identifier (letters, digits, underscore)")
        if (slot.kind not in PERIOD_KINDS or not _is_period_value(slot.example)) and slot.example not in question:
            raise ValueError(f"slot {name!r}: its example {slot.example!r} does not occur in the question")
        given.update((param, name) for param in slot_params(name, slot))
    used: set[str] = set()
    for query in queries:
        used |= step_parameters(query)
    unknown = sorted(used - set(given))
    if unknown:
        known = ", ".join(f":{p}" for p in given) or "(no slots)"
        raise ValueError(f"the steps use :{unknown[0]}, which no slot gives; slot parameters: {known}")
    unused = sorted(name for name in slots if not any(given[p] == name for p in used))
    if unused:
        params = ", ".join(f":{p}" for p in slot_params(unused[0], slots[unused[0]]))
        raise ValueError(f"slot {unused[0]!r} is not used by any step; bind it as a parameter ({params}), "
                         "never as text in the query")


_PERIOD_VALUE = re.compile(r"^\d{4}(-\d{2}(-\d{2}(\.\.\d{4}-\d{2}-\d{2})?)?|-Q[1-4])?$")


def _is_period_value(text: str) -> bool:
    """``2026``, ``2026-03``, ``2026-Q3``, ``2026-03-02`` or ``2026-03-02..2026-03-08``."""
    return bool(_PERIOD_VALUE.match(text))

