"""Foreign keys a database does not declare, inferred by name and type and verified by data.

Many databases declare no foreign keys (every defog database, most SQLite files, warehouses
where constraints are not enforced); the planner then guesses every join from names. ``structq
init`` proposes the obvious ones, on evidence a person can check:

1. **by name and type**: a column of one table named like another table's single-column
   primary key — the same name (``orders.customer_id`` → ``customers.customer_id``,
   ``Track.GenreId`` → ``Genre.GenreId``), or ``<table>_id`` / ``<table>Id`` when that key is
   just ``id`` (``orders.customer_id`` → ``customer.id``, singular or plural) — of a compatible
   type (both integers, or both text);
2. **by data**: every distinct non-null value of the column among the first ``SAMPLE`` of them
   exists in the parent key (one bounded read of each side, through the read-only, time-limited
   session sync always uses). A column with no values proves nothing and gets no reference.

What passes is written as ``references`` with ``inferred: true`` (drafts, like everything init
writes); ``structq sync`` keeps it, since a reference the database has no constraint for is not
drift. A column that could join two parents is left alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .connect import sql_connection
from .profile import is_key_name
from .snapshot import DbObject, Member, Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["infer_references", "SAMPLE"]

#: Distinct child values checked against the parent key.
SAMPLE = 1000
_INTEGER = {"integer", "bigint", "smallint", "int"}


def _family(type_: str) -> str:
    return "integer" if type_.lower() in _INTEGER else type_.lower()


def _singular(name: str) -> str:
    lowered = name.lower()
    if lowered.endswith("ies"):
        return lowered[:-3] + "y"
    if lowered.endswith("s") and not lowered.endswith("ss"):
        return lowered[:-1]
    return lowered


def _parents(snapshot: Snapshot) -> list[tuple[DbObject, Member]]:
    """Tables with a single-column primary key, and that key."""
    out = []
    for obj in snapshot.objects:
        keys = [m for m in obj.members if m.primary_key]
        if len(keys) == 1 and not obj.is_view:
            out.append((obj, keys[0]))
    return out


def _named_like(column: str, parent: DbObject, key: Member) -> bool:
    col, pk = column.lower().replace("_", ""), key.name.lower()
    if pk != "id":
        return column.lower() == pk
    stems = {parent.name.lower().replace("_", ""), _singular(parent.name).replace("_", "")}
    return col in {f"{stem}id" for stem in stems}


def _candidates(snapshot: Snapshot) -> dict[tuple[str, str], tuple[str, str]]:
    """(child table, column) → (parent table, key), unambiguous by name and type."""
    parents = _parents(snapshot)
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for obj in snapshot.objects:
        for m in obj.members:
            if m.references or m.primary_key or not is_key_name(m.name):
                continue
            for parent, key in parents:
                if parent.name == obj.name or _family(m.type) != _family(key.type):
                    continue
                if _named_like(m.name, parent, key):
                    found.setdefault((obj.name, m.name), []).append((parent.name, key.name))
    return {child: options[0] for child, options in found.items() if len(options) == 1}


def _verified(manifest: "Manifest", candidates: dict[tuple[str, str], tuple[str, str]],
              notes: list[str]) -> set[tuple[str, str]]:
    from sqlalchemy import bindparam, column, func, select, table
    from sqlalchemy.exc import DBAPIError

    schema = (manifest.sync.schema_ if manifest.sync else None) or manifest.schema_
    out: set[tuple[str, str]] = set()
    with sql_connection(manifest) as source:
        for (child, name), (parent, key) in candidates.items():
            values = select(column(name)).select_from(table(child, schema=schema)) \
                .where(column(name).is_not(None)).distinct().limit(SAMPLE)
            try:
                with source.transaction() as connection:
                    sample = [row[0] for row in connection.execute(values)]
                    if not sample:
                        continue
                    found = select(func.count(func.distinct(column(key)))).select_from(table(parent, schema=schema)) \
                        .where(column(key).in_(bindparam("sample", expanding=True)))
                    matched = connection.execute(found, {"sample": sample}).scalar_one()
            except DBAPIError as err:
                if not source.timed_out(err):
                    raise
                notes.append(f"{child}.{name}: reference to {parent}.{key} not checked, reading took longer than "
                             f"{source.timeout_s:g} s")
                continue
            if matched == len(sample):
                out.add((child, name))
    return out


def infer_references(manifest: "Manifest", snapshot: Snapshot, notes: list[str]) -> Snapshot:
    """``snapshot`` with the verified inferred references on its members (SQL sources only)."""
    if snapshot.kind != "sql":
        return snapshot
    candidates = _candidates(snapshot)
    if not candidates:
        return snapshot
    verified = _verified(manifest, candidates, notes)
    objects = []
    for obj in snapshot.objects:
        members = tuple(replace(m, references=".".join(candidates[(obj.name, m.name)]), inferred=True)
                        if (obj.name, m.name) in verified else m for m in obj.members)
        objects.append(replace(obj, members=members))
    return replace(snapshot, objects=tuple(objects))
