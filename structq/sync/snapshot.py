"""What a source really holds, in one neutral shape for every engine.

Tables and indices are both *objects*; columns and fields are both *members*. Keeping one
shape means the diff and the merge are written once, not once per engine: only
``introspect.py`` knows where the facts came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Member", "DbObject", "Snapshot"]


@dataclass(frozen=True)
class Member:
    """A column of a table, or a field of an index (``members`` holds an object field's sub-fields).

    ``type`` is already a manifest type (``text``, ``integer``… or ``keyword``, ``long``…);
    ``native_type`` is what the engine calls it, for messages.
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
