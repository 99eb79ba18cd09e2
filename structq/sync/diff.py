"""Compare a manifest with a snapshot of its source: what was added, dropped or changed.

The diff is a plain description (frozen dataclasses); ``merge.py`` applies it to the YAML and
the CLI prints it. Tables and indices, columns and fields go through the same code: the
snapshot's neutral shape makes databases and search servers indistinguishable here.

Rules that protect what people wrote:

* A declared type that is a narrower *reading* of the stored type is kept (dates stored as
  text in SQLite, booleans stored as integers): only a real contradiction is a change.
* ``nullable``, ``primary_key`` and ``references`` are compared where the manifest states them,
  and a change is drift. Where it does not, what the database says is *filled in*
  (``primary_key: true``, ``nullable: false``, a foreign key's ``references``): written by
  ``--write`` but not drift, since nothing disagrees. A declared reference the database has no
  foreign key for is kept: people declare logical references that no constraint enforces.
* A rename cannot be told from a drop plus an add; when a dropped and an added column of one
  table share a type it is reported as a *probable rename*, and nothing is carried over.
* A dropped table or index that a row filter or a verified example still needs is **held**:
  removing it would make the manifest fail to load (and silently drop a row filter, which is a
  security policy). It stays, drift stays reported, and a warning says what to fix by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structq.capabilities.objects import Column, SearchField
from structq.sources import per_kind
from structq.sources.graphql import GraphqlKind
from structq.sources.openapi import OpenapiKind
from structq.sources.search import SearchKind
from structq.sources.sql import SqlKind

from .changes import Change, Denial, Proposal, SourceDiff
from .snapshot import DbObject, Member, Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Example, Manifest

__all__ = ["Change", "Denial", "Proposal", "SourceDiff", "diff_manifest", "REFINEMENTS"]

#: (stored type, declared type) pairs where the declaration is a valid narrower reading.
REFINEMENTS = frozenset({
    ("text", "date"), ("text", "datetime"), ("text", "json"), ("text", "numeric"),
    ("integer", "boolean"), ("numeric", "integer"), ("numeric", "real"), ("real", "numeric"),
    ("datetime", "date"), ("binary", "text"),
    ("keyword", "date"), ("text", "keyword"), ("long", "integer"), ("double", "float"),
})


#: Per kind of source (by its registry name): whether a dropped member that a row filter names
#: is held. A search row filter's ``term`` fields are checked when the manifest loads, so
#: dropping one would stop it loading; a SQL filter's ``where`` columns are checked by
#: ``structq check`` (and sync warns), not at load.
_HOLD_FILTERED: dict[str, bool] = {SqlKind.name: False, SearchKind.name: True, GraphqlKind.name: False,
                                    OpenapiKind.name: False}


# --- what the manifest declares, in the snapshot's shape ------------------------------------


def declared(manifest: "Manifest") -> tuple[DbObject, ...]:
    """The manifest's tables/indices as ``DbObject``s, so both sides compare alike."""
    return tuple(DbObject(o.name, tuple(_member(m) for m in o.members)) for o in manifest.objects)


def _member(declared: Column | SearchField) -> Member:
    """A column with the keys it states (unstated ones None, so the database's fill them in),
    or a field with its sub-fields."""
    if not isinstance(declared, Column):  # a search field with its sub-fields, an API response field
        return Member(declared.name, declared.type, members=tuple(_member(s) for s in getattr(declared, "fields", ())))
    stated = declared.model_fields_set
    return Member(declared.name, declared.type,
                  nullable=declared.nullable if "nullable" in stated else None,
                  primary_key=declared.primary_key if "primary_key" in stated else None,  # type: ignore[arg-type]
                  references=declared.references)


# --- who still needs an object ------------------------------------------------------------


@dataclass
class _Users:
    """Row filters and verified examples, and what each of them reads."""

    tables: dict[str, list[str]] = field(default_factory=dict)  # object → who reads it
    members: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (object, member) → who
    policy_objects: set[str] = field(default_factory=set)  # objects a row filter is on
    policy_members: set[tuple[str, str]] = field(default_factory=set)

    def add(self, who: str, obj: str, members: Iterable[str], *, policy: bool) -> None:
        self.tables.setdefault(obj.lower(), []).append(who)
        if policy:
            self.policy_objects.add(obj.lower())
        for m in members:
            self.members.setdefault((obj.lower(), m.lower()), []).append(who)
            if policy:
                self.policy_members.add((obj.lower(), m.lower()))


def _sql_reads(query: str, dialect: str) -> tuple[set[str], set[str]]:
    """Tables and column names a SQL text mentions (best effort: unparsable text reads nothing)."""
    import sqlglot
    from sqlglot import exp

    from structq.capabilities import replace_references

    try:
        tree = sqlglot.parse_one(replace_references(query, dialect, lambda _: "NULL"), read=dialect)
    except sqlglot.errors.ParseError:
        return set(), set()
    return {t.name for t in tree.find_all(exp.Table)}, {c.name for c in tree.find_all(exp.Column)}


def _dsl_strings(body: Any) -> Iterator[str]:
    """Every key and string value in a DSL body: field names appear as either."""
    if isinstance(body, dict):
        for key, value in body.items():
            yield str(key)
            yield from _dsl_strings(value)
    elif isinstance(body, list):
        for value in body:
            yield from _dsl_strings(value)
    elif isinstance(body, str):
        yield body


def _users(manifest: "Manifest", examples: Sequence["Example"]) -> _Users:
    users = _Users()
    for i, rf in enumerate(manifest.policies.row_filters):
        who = f"row filter policies.row_filters[{i}]"
        if rf.table and rf.where:
            _, columns = _sql_reads(f"SELECT 1 FROM t WHERE {rf.where}", manifest.sql_dialect)
            users.add(who, rf.table, columns, policy=True)
        elif rf.index:
            users.add(who, rf.index, (rf.term or {}).keys(), policy=True)
    for example in examples:
        for step in example.steps:
            if step.source != manifest.source:
                continue
            who = f"verified example {example.question!r}"
            if isinstance(step.query, str):
                tables, columns = _sql_reads(step.query, manifest.sql_dialect)
                for table in tables:
                    users.add(who, table, columns, policy=False)
            elif step.index:
                users.add(who, step.index, set(_dsl_strings(step.query)), policy=False)
    return users


# --- the comparison -----------------------------------------------------------------------


def _by_name(items: Iterable[Any]) -> dict[str, Any]:
    return {i.name.lower(): i for i in items}


def _compatible(stored: str, declared_type: str) -> bool:
    return stored == declared_type or (stored, declared_type) in REFINEMENTS


class _Differ:
    """Walks declared and real objects side by side and records each difference once."""

    def __init__(self, manifest: "Manifest", snapshot: Snapshot, users: _Users) -> None:
        self.keyed = manifest.object_type.keyed
        self.hold_filtered = per_kind(_HOLD_FILTERED, manifest, "rule for members a row filter names")
        self.object_kind, self.member_kind = manifest.object_word, manifest.member_word
        self.snapshot = snapshot
        self.users = users
        self.changes: list[Change] = []
        self.warnings: list[str] = list(snapshot.notes)
        self.renames: list[str] = []

    def compare(self, mine: Sequence[DbObject]) -> None:
        real = _by_name(self.snapshot.objects)
        known = _by_name(mine)
        for obj in mine:
            found = real.get(obj.name.lower())
            if found is None:
                self._drop_object(obj)
            else:
                self._members((obj.name,), obj.members, found.members)
        added = [o for o in self.snapshot.objects if o.name.lower() not in known]
        for obj in added:
            self.changes.append(Change("add", self.object_kind, (obj.name,), obj=obj))
        self._object_renames([c for c in self.changes if c.action == "drop" and len(c.path) == 1], added, known)

    def _drop_object(self, obj: DbObject) -> None:
        key = obj.name.lower()
        who = self.users.tables.get(key, [])
        held = key in self.users.policy_objects or any(w.startswith("verified example") for w in who)
        self.changes.append(Change("drop", self.object_kind, (obj.name,), held=held))
        if held:
            self.warnings.append(
                f"{self.object_kind} {obj.name} no longer exists but is kept in the manifest: "
                f"{_join(who)} still read{'s' if len(set(who)) == 1 else ''} it — "
                "fix or remove those by hand (move a row filter to the renamed object), then sync again")

    def _members(self, path: tuple[str, ...], mine: Sequence[Member], real: Sequence[Member]) -> None:
        found = _by_name(real)
        dropped: list[Member] = []
        for m in mine:
            r = found.get(m.name.lower())
            here = (*path, m.name)
            if r is None:
                dropped.append(m)
                self._drop_member(here)
                continue
            if r.type != m.type and (self.snapshot.exact_types or not _compatible(r.type, m.type)):
                self.changes.append(Change("change", self.member_kind, here, attribute="type", old=m.type, new=r.type,
                                           member=r))
            if self.keyed:
                self._keys(here, m, r)
            if m.members or r.members:
                self._members(here, m.members, r.members)
        mine_names = {m.name.lower() for m in mine}
        added = [r for r in real if r.name.lower() not in mine_names]
        for r in added:
            self.changes.append(Change("add", self.member_kind, (*path, r.name), member=r))
        self._member_renames(path, dropped, added)

    def _keys(self, path: tuple[str, ...], m: Member, r: Member) -> None:
        """``primary_key``, ``nullable`` and ``references``: drift where stated, filled where not."""
        def record(attribute: str, old: Any, new: Any) -> None:
            self.changes.append(Change("change", self.member_kind, path, attribute=attribute, old=old, new=new,
                                       fill=old is None))

        if m.primary_key is not None and m.primary_key != r.primary_key:
            record("primary_key", m.primary_key, r.primary_key)
        elif m.primary_key is None and r.primary_key:
            record("primary_key", None, True)
        if m.nullable is not None and r.nullable is not None and m.nullable != r.nullable and not r.primary_key:
            record("nullable", m.nullable, r.nullable)
        elif m.nullable is None and r.nullable is False and not r.primary_key:
            record("nullable", None, False)
        if r.references and (m.references or "").lower() != r.references.lower() and r.references.count(".") == 1:
            record("references", m.references, r.references)

    def _drop_member(self, path: tuple[str, ...]) -> None:
        obj, member = path[0], ".".join(path[1:])
        key = (obj.lower(), member.lower())
        who = self.users.members.get(key, [])
        # A row filter on an undeclared field fails to load: hold it like a table.
        held = self.hold_filtered and key in self.users.policy_members
        self.changes.append(Change("drop", self.member_kind, path, held=held))
        if who:
            kept = " (kept in the manifest until they are fixed)" if held else ""
            self.warnings.append(f"dropped {self.member_kind} {'.'.join(path)} is still read by {_join(who)}{kept}")

    def _member_renames(self, path: tuple[str, ...], dropped: list[Member], added: list[Member]) -> None:
        pool = list(added)
        for d in dropped:
            match = next((a for a in pool if a.type == d.type or _compatible(a.type, d.type)), None)
            if match is not None:
                pool.remove(match)
                where = ".".join(path)
                self.renames.append(
                    f"{where}.{d.name} → {where}.{match.name}: probable rename (same type {match.type}); "
                    f"shown as a drop and an add — move descriptions and values by hand")

    def _object_renames(self, drops: list[Change], added: list[DbObject], known: dict[str, DbObject]) -> None:
        pool = list(added)
        for d in drops:
            mine = known[d.path[0].lower()]
            names = {m.name.lower() for m in mine.members}
            match = next((a for a in pool if {m.name.lower() for m in a.members} == names), None)
            if match is not None:
                pool.remove(match)
                self.renames.append(
                    f"{d.path[0]} → {match.name}: probable rename (same {self.member_kind}s); "
                    f"shown as a drop and an add — move descriptions, policies and examples by hand")


def _join(who: Iterable[str]) -> str:
    unique = list(dict.fromkeys(who))
    return ", ".join(unique[:5]) + (f" and {len(unique) - 5} more" if len(unique) > 5 else "")


def _dangling_references(manifest: "Manifest", changes: Sequence[Change]) -> list[Change]:
    """Hand-written ``references`` that point at a dropped table or column must go (the manifest
    would not load), and each removal is a change of its own that people see."""
    if not manifest.object_type.keyed:
        return []
    gone_tables = {c.path[0].lower() for c in changes if c.action == "drop" and len(c.path) == 1 and not c.held}
    gone_columns = {(c.path[0].lower(), c.path[1].lower()) for c in changes if c.action == "drop" and len(c.path) == 2}
    out = []
    for table in manifest.tables:
        if table.name.lower() in gone_tables:
            continue
        for column in table.columns:
            if not column.references:
                continue
            target, target_column = column.references.lower().split(".", 1)
            if target in gone_tables or (target, target_column) in gone_columns:
                still_there = (table.name.lower(), column.name.lower()) not in gone_columns
                if still_there:
                    out.append(Change("change", "column", (table.name, column.name), attribute="references",
                                      old=column.references, new=None))
    return out


def _resolvable_references(manifest: "Manifest", snapshot: Snapshot, changes: list[Change]) -> list[Change]:
    """Leave out reference changes whose target the manifest will not declare (it would not load)."""
    if not manifest.object_type.keyed:
        return changes
    final = {(t.name.lower(), c.name.lower()) for t in manifest.tables for c in t.columns}
    final |= {(c.obj.name.lower(), m.name.lower()) for c in changes if c.action == "add" and c.obj for m in c.obj.members}
    final -= {(c.path[0].lower(), c.path[1].lower()) for c in changes if c.action == "drop" and len(c.path) == 2}
    gone = {c.path[0].lower() for c in changes if c.action == "drop" and len(c.path) == 1 and not c.held}

    def keep(c: Change) -> bool:
        if c.attribute != "references" or c.new is None:
            return True
        table, column = c.new.lower().split(".", 1)
        return (table, column) in final and table not in gone

    return [c for c in changes if keep(c)]


def diff_manifest(manifest: "Manifest", snapshot: Snapshot, *, examples: Sequence["Example"] | None = None) -> SourceDiff:
    """What ``--write`` would change to make ``manifest`` true to ``snapshot``.

    ``examples`` are every verified example that may read this source (from all manifests);
    the manifest's own by default.
    """
    users = _users(manifest, manifest.examples if examples is None else examples)
    differ = _Differ(manifest, snapshot, users)
    differ.compare(declared(manifest))
    changes = _resolvable_references(manifest, snapshot, differ.changes)
    unreferenced = _dangling_references(manifest, changes)
    warnings = differ.warnings + [
        f"column {c.name} referenced {c.old}, which was dropped; the reference is removed" for c in unreferenced
    ]
    return SourceDiff(
        source=manifest.source,
        file=str(manifest.path) if manifest.path else None,
        changes=tuple(changes + unreferenced),
        warnings=tuple(warnings),
        renames=tuple(differ.renames),
    )


