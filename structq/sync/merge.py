"""Apply a ``SourceDiff`` to a manifest's YAML text, keeping everything people wrote.

The edit is made on the raw text (``${VAR}`` stays ``${VAR}``), through ``yamledit``: a type
change rewrites one scalar, a dropped column deletes that item's lines, new columns are
appended after the last one in the file's own indentation. Descriptions, ``values``,
``synonyms``, ``access``, ``references``, examples, policies, comments and key order of every
object that still exists come back byte for byte.

What sync writes is marked ``draft: true`` — "added by sync, not yet described by a person" —
so people can find it (``grep -n 'draft: true'``) and the planner's prompt shows it as
``(undescribed)``. The database's comment, when there is one, becomes the description.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .diff import Change, Proposal, SourceDiff
from .snapshot import DbObject, Member
from .yamledit import TextDocument, YamlEditError, flow_map, scalar

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["merge_text", "YamlEditError"]


def _find(seq: Any, name: str) -> int | None:
    lowered = name.lower()
    for i, item in enumerate(seq or ()):
        if str(item.get("name", "")).lower() == lowered:
            return i
    return None


class _Merger:
    def __init__(self, text: str, manifest: "Manifest", diff: SourceDiff, file: str) -> None:
        self.doc = TextDocument(text, file)
        self.keyed = manifest.object_type.keyed
        self.objects_key, self.members_key = manifest.object_type.plural, manifest.object_type.member_plural
        #: None when the file declares no objects yet (no key, ``tables:`` or ``tables: []``).
        self.objects = self.doc.root.get(self.objects_key) or None
        self.diff = diff
        self.values = {p.path: p.values for p in diff.proposals}
        self.denied = {d.path: d for d in diff.denials}
        self.coverage = dict(diff.coverage)
        self.final = self._final_members(manifest, diff)
        self.offset = self._sequence_offset()

    # --- layout ---------------------------------------------------------------------------

    def _sequence_offset(self) -> int:
        """How far this file indents a list's '-' past its key (``columns:`` → ``  - …``)."""
        for obj in self.objects or ():
            members = obj.get(self.members_key)
            if members is not None and len(members) and not members.fa.flow_style():
                key_col = obj.lc.key(self.members_key)[1]
                return self.doc.item_indent(members) - key_col
        return 2

    def _node(self, path: tuple[str, ...]) -> tuple[Any, int, Any]:
        """(sequence, index, mapping) of the object or member at ``path``."""
        seq = self.objects
        i = _find(seq, path[0]) if seq is not None else None
        if i is None:
            raise YamlEditError(f"{self.doc.file}: {'.'.join(path)} is not in the file")
        for name in path[1:]:
            seq = seq[i].get(self.members_key)
            i = _find(seq, name)
            if i is None:
                raise YamlEditError(f"{self.doc.file}: {'.'.join(path)} is not in the file")
        return seq, i, seq[i]

    # --- what the manifest will hold, for references of new columns ---------------------------

    def _final_members(self, manifest: "Manifest", diff: SourceDiff) -> dict[str, set[str]]:
        if not self.keyed:
            return {}  # no references to resolve
        final = {t.name.lower(): {c.name.lower() for c in t.columns} for t in manifest.tables}
        for c in diff.changes:
            if c.action == "drop" and not c.held:
                if len(c.path) == 1:
                    final.pop(c.path[0].lower(), None)
                else:
                    final.get(c.path[0].lower(), set()).discard(c.path[1].lower())
            elif c.action == "add" and c.obj is not None:
                final[c.obj.name.lower()] = {m.name.lower() for m in c.obj.members}
            elif c.action == "add" and c.member is not None:
                final.setdefault(c.path[0].lower(), set()).add(c.member.name.lower())
        return final

    def _reference(self, member: Member) -> str | None:
        if not member.references:
            return None
        if member.references.count(".") != 1:
            return None  # a name with a dot in it cannot be written as table.column
        table, column = member.references.lower().split(".", 1)
        return member.references if column in self.final.get(table, set()) else None

    # --- rendering new objects -------------------------------------------------------------------

    def _member_lines(self, path: tuple[str, ...], m: Member) -> list[str]:
        pairs: list[tuple[str, Any]] = [("name", m.name), ("type", m.type)]
        if m.comment:
            pairs.append(("description", m.comment))
        if (ref := self._reference(m)) is not None:
            pairs.append(("references", ref))
            if m.inferred:
                pairs.append(("inferred", True))
        if m.primary_key:
            pairs.append(("primary_key", True))
        elif m.nullable is False:
            pairs.append(("nullable", False))
        if (values := self.values.get(path)) is not None:
            pairs.append(("values", {v: v for v in values}))
        if (coverage := self.coverage.get(path)) is not None:
            pairs.append(("coverage", coverage))
        denial = self.denied.get(path)
        if denial is not None:  # personal data is named to the planner as restricted; secrets stay unnamed
            pairs.append(("access", "restricted" if denial.category == "personal" else "deny"))
        pairs.append(("draft", True))
        why = f"   # denied: {denial.reason}" if denial is not None else ""
        if not m.members:
            return ["- " + flow_map(pairs) + why]
        lines = [("- " if i == 0 else "  ") + f"{k}: {flow_map(v.items()) if isinstance(v, dict) else scalar(v)}"
                 for i, (k, v) in enumerate(pairs)]
        lines[0] += why
        return lines + [f"  {self.members_key}:"] + self._nested(path, m.members)

    def _nested(self, path: tuple[str, ...], members: Iterable[Member]) -> list[str]:
        pad = "  " + " " * self.offset
        return [pad + line for m in members for line in self._member_lines((*path, m.name), m)]

    def _object_lines(self, obj: DbObject) -> list[str]:
        lines = [f"- name: {scalar(obj.name)}"]
        if obj.comment:
            lines.append(f"  description: {scalar(obj.comment)}")
        lines += ["  draft: true", f"  {self.members_key}:"]
        return lines + self._nested((obj.name,), obj.members)

    # --- applying the diff -----------------------------------------------------------------------

    def apply(self) -> str:
        added_members: dict[tuple[str, ...], list[Change]] = defaultdict(list)
        new_objects: list[DbObject] = []
        for change in self.diff.changes:
            if change.action == "drop" and not change.held:
                seq, i, _ = self._node(change.path)
                self.doc.delete_item(seq, i)
            elif change.action == "change":
                self._change(change)
            elif change.action == "add" and change.obj is not None:
                new_objects.append(change.obj)
            elif change.action == "add" and change.member is not None:
                added_members[change.path[:-1]].append(change)
        for parent, changes in added_members.items():
            self._add_members(parent, changes)
        if new_objects and self.objects is None:
            self.doc.put_top_list(self.objects_key, [self._object_lines(o) for o in new_objects])
        elif new_objects:
            self.doc.append_items(self.objects, [self._object_lines(o) for o in new_objects])
        new_paths = {c.path for c in self.diff.changes if c.action == "add"}
        for proposal in self.diff.proposals:
            if not any(proposal.path[: len(p)] == p for p in new_paths):
                self._propose(proposal)
        return self.doc.result()

    def _change(self, change: Change) -> None:
        _, _, node = self._node(change.path)
        text = flow_map(change.new.items()) if isinstance(change.new, dict) else scalar(change.new)
        if change.new is None:
            self.doc.remove_key(node, change.attribute)
        elif change.attribute not in node:
            self.doc.add_key(node, change.attribute, text)
        elif isinstance(change.new, dict):  # a mapping value: replaced whole
            self.doc.remove_key(node, change.attribute)
            self.doc.add_key(node, change.attribute, text)
        else:
            self.doc.set_value(node, change.attribute, text)

    def _add_members(self, parent: tuple[str, ...], changes: list[Change]) -> None:
        _, _, node = self._node(parent)
        items = [self._member_lines(c.path, c.member) for c in changes]
        seq = node.get(self.members_key)
        if seq is not None and len(seq) and not seq.fa.flow_style():
            self.doc.append_items(seq, items)
            return
        # A field that had no sub-fields declared: add them as one flow list.
        flows = ", ".join(line[2:] for item in items for line in item if len(item) == 1)
        if any(len(item) != 1 for item in items) or seq is not None:
            raise YamlEditError(f"{self.doc.file}: cannot add sub-fields under {'.'.join(parent)} here; "
                                "declare its 'fields:' as an indented list first")
        self.doc.add_key(node, self.members_key, f"[{flows}]")

    def _propose(self, proposal: Proposal) -> None:
        _, _, node = self._node(proposal.path)
        if proposal.refresh:  # new suggestions for a draft's; meanings people wrote are kept
            meanings = {str(k): v for k, v in (node.get("values") or {}).items()}
            self.doc.remove_key(node, "values")
            self.doc.add_key(node, "values", flow_map((v, meanings.get(v, v)) for v in proposal.values))
            return
        self.doc.add_key(node, "values", flow_map((v, v) for v in proposal.values))
        if "draft" not in node:
            self.doc.add_key(node, "draft", "true")
        elif node["draft"] is not True:
            self.doc.set_value(node, "draft", "true")


def merge_text(text: str, manifest: "Manifest", diff: SourceDiff, file: str = "<manifest>") -> str:
    """``text`` with ``diff`` applied; raises ``YamlEditError`` when a layout cannot be edited safely."""
    if not diff.writable:
        return text
    return _Merger(text, manifest, diff, file).apply()
