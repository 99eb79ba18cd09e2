"""The slots a planned question's values can become, for a plan kept as a verified example
(``structq feedback promote``).

A value the question names that a step compares a declared free-text column with
(``WHERE customer = '星火'`` for 客户星火的订单) becomes a column slot, its query binding
``:customer``: the example then answers the same question about another customer, without a
model. Only what is certain is proposed — a missing slot costs a model call later, a wrong one
a wrong answer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

__all__ = ["propose_slots", "slots_compile"]


def _quoted(literal: str) -> str:
    """The literal as an SQL string (``'`` doubled)."""
    return "'" + literal.replace("'", "''") + "'"


def _slot_name(column: str, taken: set[str]) -> str:
    name, n = column, 2
    while name in taken:
        name, n = f"{column}_{n}", n + 1
    return name


def propose_slots(question: str, steps: list[dict[str, Any]],
                  capabilities: "CapabilitySet") -> tuple[dict[str, dict[str, str]], list[dict[str, Any]]]:
    """The column slots the question's values make in ``steps``, and the steps with each such
    value bound as ``:name``. A value becomes a slot only when every step that holds it
    compares one declared free-text column with it (``observe.text_literals``, the literals the
    empty-result check looks up), it occurs once in the question, and nowhere else in a query;
    anything else stays as written (a missing slot costs a model call, a wrong one a wrong answer)."""
    from structq.templates.pattern import word_pattern
    from structq.templates.text import match_text

    from .observe import text_literals

    columns: dict[str, set[str]] = {}
    for step in steps:
        manifest = capabilities.get(step["source"])
        if manifest is None or manifest.query_dialect is None or not isinstance(step["query"], str):
            continue
        for table, column, literal in text_literals(step["query"], manifest):
            columns.setdefault(literal, set()).add(f"{step['source']}.{table}.{column}")
    text = match_text(question)
    slots: dict[str, dict[str, str]] = {}
    bound = [dict(step) for step in steps]
    for literal, found in sorted(columns.items()):
        # once in the question, and not inside a longer word or number ("A1" in "A12")
        if len(found) != 1 or literal not in question or len(re.findall(word_pattern(match_text(literal)), text, re.IGNORECASE)) != 1:
            continue
        holding = [s for s in bound if _quoted(literal) in str(s["query"])]
        if not all(isinstance(s["query"], str) and s["query"].count(_quoted(literal)) == 1 for s in holding):
            continue  # a search body, or the value also outside the comparison: keep it as text
        column = next(iter(found))
        name = _slot_name(column.rsplit(".", 1)[1], set(slots))
        slots[name] = {"column": column, "example": literal}
        for step in holding:
            step["query"] = step["query"].replace(_quoted(literal), f":{name}")
    return slots, bound


def slots_compile(example: dict[str, Any], capabilities: "CapabilitySet", source: str) -> bool:
    """Whether ``example`` with its slots compiles as a template of ``source`` (one reading of
    each slot in the question)."""
    from structq.capabilities import Example
    from structq.errors import StructqError
    from structq.templates.pattern import Template, synonym_groups

    try:
        Template.build(capabilities[source], Example.model_validate(example), capabilities, synonym_groups(capabilities))
    except (StructqError, ValueError):
        return False
    return True
