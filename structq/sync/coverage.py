"""What period each date column covers, and how its dates are stored (``coverage:``).

Measured for the date and datetime columns sync adds (``structq init`` adds them all), and
refreshed on every sync for the columns whose manifest entry already has a ``coverage`` (so a
hand-written manifest without one is never read for it). A refresh is written by ``--write``
and listed, but it is not drift: data that grows is not a schema that changed.

Never measured: denied columns, and tables with row filters (their range would be every
tenant's). One ``MIN``/``MAX`` read per table, read-only and time-limited like every sync read.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from structq.sources import per_kind
from structq.sources.graphql import GraphqlKind
from structq.sources.openapi import OpenapiKind
from structq.sources.search import SearchKind
from structq.sources.sql import SqlKind

from .connect import sql_connection
from .diff import Change, SourceDiff
from .samples import Target, by_object

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["measure_coverage", "stored_format"]

_DATE_TYPES = ("date", "datetime")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")


def stored_format(value: Any) -> str:
    """How a stored value writes a date: the planner must write its literals the same way."""
    if isinstance(value, _dt.datetime):
        return "datetime"
    if isinstance(value, _dt.date):
        return "date"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "epoch milliseconds" if abs(value) >= 10**11 else "epoch seconds"
    text = str(value)
    if _ISO_DATE.fullmatch(text):
        return "ISO date text (YYYY-MM-DD)"
    if _ISO_DATETIME.fullmatch(text):
        return "ISO datetime text (YYYY-MM-DD HH:MM:SS)"
    return "text"


def _as_text(value: Any) -> str:
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat(sep=" ") if isinstance(value, _dt.datetime) else value.isoformat()
    return str(value)


def _targets(manifest: "Manifest", diff: SourceDiff) -> Iterator[tuple[Target, bool]]:
    """(path, is new) of the columns to measure."""
    denied = {d.path for d in diff.denials}
    filtered = {t.name.lower() for t in manifest.tables if manifest.row_filters_for(t.name)}
    dropped = {c.path for c in diff.changes if c.action == "drop"}
    for table in manifest.tables:
        for column in table.columns:
            path = (table.name, column.name)
            if column.coverage is not None and not column.denied and path not in dropped and (table.name,) not in dropped \
                    and table.name.lower() not in filtered:
                yield path, False
    for change in diff.added:
        members = change.obj.members if change.obj is not None else (change.member,) if change.member else ()
        table = change.path[0]
        for member in members:
            path = (table, member.name)
            if member.type in _DATE_TYPES and path not in denied and table.lower() not in filtered:
                yield path, True


def measure_coverage(manifest: "Manifest", diff: SourceDiff) -> SourceDiff:
    """``diff`` with the measured coverage: for new columns (written with them) and as refresh
    changes for declared ones whose coverage moved."""
    read = per_kind(_BOUNDS, manifest, "coverage reader")
    if read is None:
        return diff
    targets = list(_targets(manifest, diff))
    if not targets:
        return diff
    notes: list[str] = []
    found = read(manifest, [path for path, _ in targets], notes)
    refreshes = []
    for path, new in targets:
        measured = found.get(path)
        if new or measured is None:
            continue
        current = manifest.object(path[0]).member(path[1]).coverage  # type: ignore[union-attr]
        if current is None or current.model_dump() != measured:
            refreshes.append(Change("change", manifest.member_word, path, attribute="coverage",
                                    old=current.model_dump() if current else None, new=measured, fill=True))
    return diff.with_coverage({p: c for p, c in found.items() if (p, True) in targets}, refreshes, notes)


def _sql_bounds(manifest: "Manifest", paths: list[Target], notes: list[str]) -> dict[Target, dict[str, str]]:
    """``MIN``/``MAX`` of each column, one read per table, and the format the minimum is stored in."""
    from sqlalchemy import column, func, select, table
    from sqlalchemy.exc import DBAPIError

    schema = (manifest.sync.schema_ if manifest.sync else None) or manifest.schema_
    found: dict[Target, dict[str, str]] = {}
    with sql_connection(manifest) as source:
        for name, group in by_object(paths).items():
            bounds = [f(column(p[1])) for p in group for f in (func.min, func.max)]
            query = select(*bounds).select_from(table(name, schema=schema))
            try:
                with source.transaction() as connection:
                    row = connection.execute(query).one()
            except DBAPIError as err:
                if not source.timed_out(err):
                    raise
                notes.append(f"{name}: coverage not measured, reading it took longer than {source.timeout_s:g} s")
                continue
            for i, path in enumerate(group):
                low, high = row[2 * i], row[2 * i + 1]
                if low is not None and high is not None:
                    found[path] = {"min": _as_text(low), "max": _as_text(high), "format": stored_format(low)}
    return found


#: How each kind of source (by its registry name) measures the range of date members; None for
#: a kind whose members carry no ``coverage:`` (search fields).
_BOUNDS: dict[str, Callable[["Manifest", list[Target], list[str]], dict[Target, dict[str, str]]] | None] = {
    SqlKind.name: _sql_bounds,
    SearchKind.name: None,
    GraphqlKind.name: None,
    OpenapiKind.name: None,
}
