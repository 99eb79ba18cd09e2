"""What a sync found, as plain frozen values: changes, value proposals, denials, and the diff
that holds them. ``diff.py`` computes them, ``merge.py`` applies them, the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .snapshot import DbObject, Member

__all__ = ["Change", "Denial", "Proposal", "SourceDiff"]


@dataclass(frozen=True)
class Change:
    """One difference. ``path`` is (object,) or (object, member, sub-member…)."""

    action: Literal["add", "drop", "change"]
    kind: str  # table | column | index | field
    path: tuple[str, ...]
    #: What an add brings in (with its members), as introspected.
    obj: DbObject | None = None
    member: Member | None = None
    #: For a change: which attribute, from what, to what.
    attribute: str | None = None
    old: Any = None
    new: Any = None
    #: A drop left in place because policies or examples still need it.
    held: bool = False
    #: States an unstated fact (``old`` is None): written, but not drift.
    fill: bool = False

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def type(self) -> str | None:
        if self.member is not None:
            return self.member.type
        return None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"object": self.name, "kind": self.kind}
        if self.action == "add":
            if self.member is not None:
                out["type"] = self.member.type
                out["native_type"] = self.member.native_type
            if self.obj is not None:
                out["columns" if self.kind == "table" else "fields"] = [
                    {"name": m.name, "type": m.type} for m in self.obj.members
                ]
        elif self.action == "change":
            out.update({"attribute": self.attribute, "from": self.old, "to": self.new})
            if self.fill:
                out["fill"] = True
        else:
            out["held"] = self.held
        return out


@dataclass(frozen=True)
class Proposal:
    """``values`` proposed by ``--profile-values`` for a text column or keyword field."""

    kind: str
    path: tuple[str, ...]
    values: tuple[str, ...]
    #: Replaces earlier suggestions (a draft's values) rather than adding values: not drift.
    refresh: bool = False

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Denial:
    """A new column or field written ``access: deny`` because it looks secret or personal."""

    kind: str  # column | field
    path: tuple[str, ...]
    category: str  # secret | personal
    reason: str

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class SourceDiff:
    """Everything that differs between one manifest and its source."""

    source: str
    file: str | None
    changes: tuple[Change, ...] = ()
    proposals: tuple[Proposal, ...] = ()
    warnings: tuple[str, ...] = ()
    renames: tuple[str, ...] = ()
    #: New members that will be written ``access: deny``, and why.
    denials: tuple[Denial, ...] = ()
    #: Measured ``coverage`` of new date columns (path → {min, max, format}).
    coverage: tuple[tuple[tuple[str, ...], dict[str, str]], ...] = ()

    @property
    def added(self) -> list[Change]:
        return [c for c in self.changes if c.action == "add"]

    @property
    def dropped(self) -> list[Change]:
        return [c for c in self.changes if c.action == "drop"]

    @property
    def changed(self) -> list[Change]:
        return [c for c in self.changes if c.action == "change" and not c.fill]

    @property
    def filled(self) -> list[Change]:
        """Unstated keys and nullability the write fills in from the database."""
        return [c for c in self.changes if c.fill]

    @property
    def drift(self) -> bool:
        return any(not c.fill for c in self.changes) or any(not p.refresh for p in self.proposals)

    @property
    def writable(self) -> bool:
        """Whether ``--write`` has anything to apply (held drops change nothing)."""
        return any(not c.held for c in self.changes) or bool(self.proposals)

    def with_proposals(self, proposals: Sequence[Proposal], notes: Sequence[str] = ()) -> SourceDiff:
        """This diff with ``--profile-values``' proposals, and its notes (what it skipped) as warnings."""
        return replace(self, proposals=tuple(proposals), warnings=(*self.warnings, *notes))

    def with_coverage(self, new: dict[tuple[str, ...], dict[str, str]], refreshes: Sequence[Change],
                      notes: Sequence[str] = ()) -> SourceDiff:
        """This diff with new columns' coverage and refreshed coverage of declared ones (not drift)."""
        return replace(self, coverage=tuple(new.items()), changes=(*self.changes, *refreshes),
                       warnings=(*self.warnings, *notes))

    def with_denials(self, denials: Sequence[Denial], notes: Sequence[str] = ()) -> SourceDiff:
        """This diff with the new members to deny, and what the content check could not read."""
        return replace(self, denials=tuple(denials), warnings=(*self.warnings, *notes))
