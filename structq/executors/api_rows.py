"""An API response as rows: the list of records found in the JSON, each record flattened.

The rows are the list at the declared ``rows:`` path (dotted keys), or else the first list met
walking the response in document order (``data.projects``); a response that is one object is
one row. Nested objects become dotted column names (``owner.name``); a list inside a record
stays one value (JSON). Columns come in the order first seen across the records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from structq.errors import ExecutionError

__all__ = ["flatten", "records_of", "to_table"]


def _first_list(value: Any) -> list[Any] | None:
    stack = [value]
    while stack:
        node = stack.pop(0)
        if isinstance(node, list):
            return node
        if isinstance(node, dict):
            stack[0:0] = list(node.values())
    return None


def records_of(data: Any, path: str | None, source: str) -> list[Any]:
    """The records of a response (see the module docstring)."""
    if path:
        node = data
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ExecutionError(f"source {source!r}: the response has no {path!r} (the declared rows: path)",
                                     source=source, hint="correct rows: in the manifest")
            node = node[part]
        found = node if isinstance(node, list) else [node]
    else:
        found = _first_list(data)
        if found is None:
            found = [data] if isinstance(data, dict) and data else []
    return [r for r in found if r is not None]


def flatten(record: Any, prefix: str = "") -> dict[str, Any]:
    """``{"owner": {"name": "x"}}`` → ``{"owner.name": "x"}``; a scalar record is ``value``."""
    if not isinstance(record, dict):
        return {prefix or "value": record}
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def to_table(records: Iterable[Any], keep: Callable[[str], bool] = lambda _: True) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """Columns and rows of flattened records; a column ``keep`` refuses is dropped."""
    flat = [flatten(r) for r in records]
    columns: dict[str, None] = {}
    for row in flat:
        for name in row:
            if keep(name):
                columns.setdefault(name, None)
    names = tuple(columns)
    return names, [tuple(row.get(name) for name in names) for row in flat]
