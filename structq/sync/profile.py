"""``--profile-values N``: propose ``values`` for low-cardinality text columns and keyword fields.

The planner may only compare an enum column with its declared ``values``, so a status
column without them forces people to type every code by hand. Sync can read the distinct values
(at most N + 1 rows each, so a high-cardinality column costs one small query) and propose
them with the value itself as its meaning, marked ``draft: true`` for a person to describe.

Never touched: keys (primary or foreign: identifiers, not codes), columns that already have
``values`` (written by a person), denied columns (their contents are none of the planner's
business, not even their distinct values), tables and indices with row filters (their distinct
values would be every tenant's, written into the manifest and from there into every prompt),
and values longer than ``MAX_VALUE_LENGTH`` (free text, not codes). Skipped tables and columns
whose read timed out are named in the sync's warnings.

Reads go through ``connect``: read-only transactions with a statement timeout, one per column,
so one slow column costs its own timeout and not the others'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .connect import engine_index_names, search_client, sql_connection
from .diff import Proposal, SourceDiff
from .snapshot import Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Profile", "propose_values", "MAX_VALUE_LENGTH"]

MAX_VALUE_LENGTH = 64
_ENUM_TYPES = {"sql": "text", "opensearch": "keyword", "elasticsearch": "keyword"}

Target = tuple[str, ...]  # (object, member)


@dataclass
class Profile:
    """What ``--profile-values`` proposes, and what it left out and why."""

    proposals: list[Proposal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _targets(manifest: "Manifest", snapshot: Snapshot, diff: SourceDiff, notes: list[str]) -> list[Target]:
    """Members that exist after the merge, have the enum type, no values, are not denied and
    are not in a row-filtered object (those are named in ``notes``)."""
    wanted = _ENUM_TYPES[manifest.kind]
    dropped = {c.path for c in diff.changes if c.action == "drop"}
    retyped = {c.path: c.new for c in diff.changes if c.action == "change" and c.attribute == "type"}
    out: list[Target] = []
    declared: set[Target] = set()
    objects = manifest.indices if manifest.is_search else manifest.tables
    for obj in objects:
        members = obj.fields if manifest.is_search else obj.columns
        for m in members:
            path = (obj.name, m.name)
            declared.add((obj.name.lower(), m.name.lower()))
            keyish = getattr(m, "primary_key", False) or getattr(m, "references", None)
            if path in dropped or m.values or m.denied or keyish or (obj.name,) in dropped:
                continue
            if retyped.get(path, m.type) == wanted:
                out.append(path)
    filtered = sorted({obj for obj, _ in out if manifest.row_filters_for(obj)})
    notes.extend(f"{obj}: values not profiled, it has row filters (its distinct values would be every tenant's); "
                 "write its values by hand" for obj in filtered)
    out = [path for path in out if path[0] not in filtered]
    for obj in snapshot.objects:
        for m in obj.members:
            keyish = m.primary_key or m.references
            if (obj.name.lower(), m.name.lower()) not in declared and m.type == wanted and not keyish:
                out.append((obj.name, m.name))
    return out


def _sql_distinct(manifest: "Manifest", targets: list[Target], limit: int,
                  notes: list[str]) -> dict[Target, list[Any]]:
    from sqlalchemy import column, select, table
    from sqlalchemy.exc import DBAPIError

    schema = (manifest.sync.schema_ if manifest.sync else None) or manifest.schema_
    found: dict[Target, list[Any]] = {}
    with sql_connection(manifest) as source:
        for path in targets:
            col = column(path[1])
            query = select(col).select_from(table(path[0], schema=schema)).where(col.is_not(None)).distinct().limit(limit + 1)
            try:
                with source.transaction() as connection:
                    found[path] = [row[0] for row in connection.execute(query)]
            except DBAPIError as err:
                if not source.timed_out(err):
                    raise
                notes.append(f"{'.'.join(path)}: values not profiled, reading them took longer than "
                             f"{source.timeout_s:g} s")
    return found


def _search_distinct(manifest: "Manifest", targets: list[Target], limit: int,
                     notes: list[str]) -> dict[Target, list[Any]]:
    # The embedded engine keeps each declared index under a name of its own.
    engine_name = {declared: name for name, declared in engine_index_names(manifest).items()}
    found: dict[Target, list[Any]] = {}
    with search_client(manifest) as client:
        for path in targets:
            body = {"size": 0, "aggs": {"v": {"terms": {"field": path[1], "size": limit + 1}}}}
            result = client.search(index=engine_name.get(path[0], path[0]), body=body)
            agg = result.get("aggregations", {}).get("v", {})
            values = [b["key"] for b in agg.get("buckets", [])]
            if agg.get("sum_other_doc_count"):
                values += [None] * (limit + 1)  # more values than the buckets show
            found[path] = values
    return found


#: How each kind of source reads distinct values: (manifest, targets, limit, notes) → values.
_DISTINCT: dict[str, Callable[["Manifest", list[Target], int, list[str]], dict[Target, list[Any]]]] = {
    "sql": _sql_distinct,
    "opensearch": _search_distinct,
    "elasticsearch": _search_distinct,
}


def propose_values(manifest: "Manifest", snapshot: Snapshot, diff: SourceDiff, limit: int) -> Profile:
    """Proposals for every eligible member with between 1 and ``limit`` distinct values."""
    profile = Profile()
    targets = _targets(manifest, snapshot, diff, profile.notes)
    if not targets or limit < 1:
        return profile
    kind = "field" if manifest.is_search else "column"
    for path, values in _DISTINCT[manifest.kind](manifest, targets, limit, profile.notes).items():
        texts = [str(v) for v in values if v is not None]
        if not values or len(values) > limit or len(texts) != len(values):
            continue
        if any(len(t) > MAX_VALUE_LENGTH or not t.strip() for t in texts):
            continue
        profile.proposals.append(Proposal(kind, path, tuple(sorted(set(texts)))))
    return profile
