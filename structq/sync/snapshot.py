"""What a source really holds, in one neutral shape for every kind of source, and which part of
it sync reads (``Scope``).

Tables and indices are both *objects*; columns and fields are both *members*. Keeping one
shape means the diff and the merge are written once, not once per kind: only
``introspect.py`` and ``api_introspect.py`` know where the facts came from.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from structq.sources import objects as source_objects

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Member", "DbObject", "Scope", "Snapshot"]


@dataclass(frozen=True)
class Scope:
    """Which objects to read: declared ones always, others by include/exclude globs."""

    schema: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    declared: frozenset[str] = frozenset()
    #: Only the declared objects (``structq check --connect``), never new ones.
    declared_only: bool = False

    @classmethod
    def of(cls, manifest: "Manifest", *, declared_only: bool = False) -> "Scope":
        settings = manifest.sync
        objects = source_objects(manifest)
        return cls(
            schema=(settings.schema_ if settings else None) or manifest.schema_,
            include=tuple(settings.include) if settings else (),
            exclude=tuple(settings.exclude) if settings else (),
            declared=frozenset(o.name.lower() for o in objects),
            declared_only=declared_only,
        )

    def wants(self, name: str) -> bool:
        if name.lower() in self.declared:
            return True
        if self.declared_only:
            return False
        included = not self.include or any(fnmatch.fnmatchcase(name, p) for p in self.include)
        return included and not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)


@dataclass(frozen=True)
class Member:
    """A column of a table, or a field of an index (``members`` holds an object field's sub-fields).

    ``type`` is already a manifest type (``text``, ``integer``… or ``keyword``, ``long``…);
    ``native_type`` is what the database or search server calls it, for messages.
    """

    name: str
    type: str
    native_type: str = ""
    comment: str | None = None
    nullable: bool | None = None
    primary_key: bool = False
    #: ``table.column`` of a single-column foreign key.
    references: str | None = None
    members: tuple[Member, ...] = ()
    #: ``references`` was inferred from names, types and data (``infer.py``), not declared.
    inferred: bool = False


@dataclass(frozen=True)
class DbObject:
    """A table, view or search index."""

    name: str
    members: tuple[Member, ...]
    comment: str | None = None
    is_view: bool = False

    def member(self, name: str) -> Member | None:
        lowered = name.lower()
        return next((m for m in self.members if m.name.lower() == lowered), None)


@dataclass(frozen=True)
class Snapshot:
    """Every in-scope object of one source, as introspected, plus what could not be mapped."""

    source: str
    kind: str
    objects: tuple[DbObject, ...]
    #: Things seen but left out (unmappable types…), said once in the report.
    notes: tuple[str, ...] = field(default=())
    #: Types are exact, not a storage type a declaration may narrow (``text`` stored, ``date``
    #: declared): true where the reader already kept every declared type its values fit
    #: (an embedded source's documents, ``documents.py``).
    exact_types: bool = False

    def object(self, name: str) -> DbObject | None:
        lowered = name.lower()
        return next((o for o in self.objects if o.name.lower() == lowered), None)
