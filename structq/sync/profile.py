"""``--profile-values N``: propose ``values`` for low-cardinality text columns and keyword fields.

The planner may only compare an enum column with its declared ``values``, so a status
column without them forces people to type every code by hand. Sync can read the distinct values
(at most N + 1 rows each, so a high-cardinality column costs one small query) and propose
them with the value itself as its meaning, marked ``draft: true`` for a person to describe.

Never touched: keys (primary or foreign, and ``id`` / ``*_id`` names: identifiers, not codes),
columns that already have ``values`` or a description (written by a person), denied columns
and new columns about to be denied (their contents are none of the planner's business, not
even their distinct values), columns whose name or values look secret or personal
(``sensitive.py``), columns whose values are mostly unique (each value occurs less than
``MIN_REPEATS`` times on average: names and free text, not codes — except the name column of a
*lookup table*: referenced by a foreign key, its key, one name column and at most a description,
at most ``LOOKUP_ROWS`` names, such as ``Genre.Name`` or ``MediaType.Name``), tables and indices with
row filters (their distinct values would be every tenant's, written into the manifest and from
there into every prompt), and values longer than ``MAX_VALUE_LENGTH``. Skipped tables and
columns whose read timed out are named in the sync's warnings.

Proposed values are *suggestions*: the column is marked ``draft: true``, which the planner's
prompt shows as values seen in the data and the sandbox does not enforce (data that has no
``'Sunday'`` row yet must not make ``'Sunday'`` illegal). A person who removes ``draft``
accepts them, and from then on they are the only legal literals. Until then each
``--profile-values`` run refreshes them (meanings people wrote are kept), which is listed but is
not drift.

Reads go through ``samples.distinct_counts`` (read-only, time-limited, one per column).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from structq.sources import kind_of
from structq.sources import objects as source_objects

from .diff import Proposal, SourceDiff
from .samples import Target, distinct_counts
from .sensitive import by_content, by_name, words
from .snapshot import Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Profile", "propose_values", "is_key_name", "MAX_VALUE_LENGTH", "MIN_REPEATS", "LOOKUP_ROWS"]

MAX_VALUE_LENGTH = 64
#: A lookup table (referenced by a foreign key; a key, a name column, at most a description)
#: gets its names proposed as values when it has at most this many: ``Genre.Name``.
LOOKUP_ROWS = 50
#: Each proposed value must occur this many times on average, or the column is mostly unique.
MIN_REPEATS = 2
_ENUM_TYPES = {"sql": "text", "opensearch": "keyword", "elasticsearch": "keyword"}


def is_key_name(name: str) -> bool:
    """``id``, ``employee_id``, ``customerId``: an identifier by its name."""
    found = words(name)
    return bool(found) and found[-1] in ("id", "uuid", "guid", "key")


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
    objects = source_objects(manifest)
    for obj in objects:
        members = kind_of(manifest).members(obj)
        for m in members:
            path = (obj.name, m.name)
            declared.add((obj.name.lower(), m.name.lower()))
            keyish = getattr(m, "primary_key", False) or getattr(m, "references", None) or is_key_name(m.name)
            described = bool(m.description) and not m.draft
            suggested = bool(m.values) and m.draft  # profiled before, not accepted: refreshed
            if path in dropped or (m.values and not suggested) or m.denied or keyish or described \
                    or (obj.name,) in dropped:
                continue
            if by_name(m.name) is not None:
                continue
            if retyped.get(path, m.type) == wanted:
                out.append(path)
    filtered = sorted({obj for obj, _ in out if manifest.row_filters_for(obj)})
    notes.extend(f"{obj}: values not profiled, it has row filters (its distinct values would be every tenant's); "
                 "write its values by hand" for obj in filtered)
    out = [path for path in out if path[0] not in filtered]
    denied = {d.path for d in diff.denials}
    for obj in snapshot.objects:
        for m in obj.members:
            keyish = m.primary_key or m.references or is_key_name(m.name)
            path = (obj.name, m.name)
            if (obj.name.lower(), m.name.lower()) not in declared and m.type == wanted and not keyish \
                    and path not in denied and by_name(m.name) is None:
                out.append(path)
    return out


def _lookup_columns(snapshot: Snapshot) -> set[Target]:
    """The name column of each lookup table: a table some foreign key (declared or inferred)
    references, holding its key, one name column and at most a description (``Genre.Name``;
    a ``customers`` table with a city is an entity, not a lookup)."""
    referenced = {m.references.split(".")[0].lower() for o in snapshot.objects for m in o.members if m.references}
    out: set[Target] = set()
    for obj in snapshot.objects:
        rest = [m for m in obj.members if not m.primary_key]
        if obj.name.lower() not in referenced or len(rest) == len(obj.members) or not rest \
                or any(m.type != "text" for m in rest):
            continue
        described = [m for m in rest if (words(m.name) or [""])[-1] in ("description", "desc", "comment", "note")]
        names = [m for m in rest if m not in described]
        if len(names) == 1 and len(described) <= 1 and not is_key_name(names[0].name):
            out.add((obj.name, names[0].name))
    return out


def propose_values(manifest: "Manifest", snapshot: Snapshot, diff: SourceDiff, limit: int) -> Profile:
    """Proposals for every eligible member with between 1 and ``limit`` distinct values, and
    for the name column of each lookup table with at most ``LOOKUP_ROWS`` (each name once)."""
    profile = Profile()
    targets = _targets(manifest, snapshot, diff, profile.notes)
    if not targets or limit < 1:
        return profile
    kind = manifest.member_word
    current = _suggested(manifest)
    lookups = [t for t in targets if t in _lookup_columns(snapshot)]
    counts = distinct_counts(manifest, [t for t in targets if t not in lookups], limit, profile.notes)
    counts.update(distinct_counts(manifest, lookups, max(limit, LOOKUP_ROWS), profile.notes) if lookups else {})
    for path, counted in counts.items():
        lookup = path in lookups
        texts = [str(v) for v, _ in counted if v is not None]
        if not counted or len(counted) > (max(limit, LOOKUP_ROWS) if lookup else limit) or len(texts) != len(counted):
            continue
        if any(len(t) > MAX_VALUE_LENGTH or not t.strip() for t in texts):
            continue
        if by_content(texts) is not None or (not lookup and sum(n for _, n in counted) < MIN_REPEATS * len(counted)):
            continue  # secret-looking, or mostly unique (names, free text) outside a lookup table: not codes
        values = tuple(sorted(set(texts)))
        if path not in current:
            profile.proposals.append(Proposal(kind, path, values))
        elif set(values) != current[path]:
            profile.proposals.append(Proposal(kind, path, values, refresh=True))
    return profile


def _suggested(manifest: "Manifest") -> dict[Target, set[str]]:
    """Declared draft members with values: suggestions from an earlier profile, refreshed (not drift)."""
    objects = source_objects(manifest)
    return {(o.name, m.name): set(m.values) for o in objects
            for m in (kind_of(manifest).members(o)) if m.values and m.draft}
