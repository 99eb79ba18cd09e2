"""What an ``embedded`` search source really holds: the fields of its documents files.

An embedded index is built from the manifest (its mapping comes from the declared fields), so
reading the search server's mapping back would compare the manifest with itself and always say "in
sync". The truth for such a source is its ``documents:`` file; this reads every document and
describes the fields they carry, in the shape the mapping reader produces, so that ``sync`` and
``check --connect`` report a field the documents gained or lost, or values of another kind than
the manifest declares.

Types are inferred from JSON values the way a search server's dynamic mapping would, with one
rule that keeps the comparison honest: a string field keeps the declared string type
(``keyword``, ``text``, ``date``, ``ip`` …) as long as every value fits it (a ``date`` must
parse as an ISO date, an ``ip`` as an address), since the JSON cannot tell ``keyword`` from
``text``. A new string field is proposed as ``date`` when every value is an ISO date, else
``keyword`` for short single words and ``text`` for the rest.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .snapshot import DbObject, Member

if TYPE_CHECKING:
    from structq.capabilities.model import Index, Manifest, SearchField

__all__ = ["documents_objects"]

_INTEGER_TYPES = frozenset({"long", "integer", "short", "byte", "unsigned_long"})
_NUMBER_TYPES = frozenset({"double", "float", "half_float", "scaled_float"}) | _INTEGER_TYPES
_STRING_TYPES = frozenset({"keyword", "text", "date", "ip", "wildcard", "constant_keyword",
                           "match_only_text"})
#: A string proposed as ``keyword`` has no space and is at most this long.
_KEYWORD_MAX = 64


@dataclass
class _Observed:
    """What the documents held under one field name."""

    kinds: set[str] = field(default_factory=set)  # JSON kinds: string, integer, number, boolean, object
    strings: list[str] = field(default_factory=list)
    in_lists: bool = False
    children: dict[str, _Observed] = field(default_factory=dict)

    def add(self, value: Any, *, in_list: bool = False) -> None:
        if value is None:
            return
        if isinstance(value, list):
            for item in value:
                self.add(item, in_list=True)
            return
        self.in_lists |= in_list
        if isinstance(value, bool):
            self.kinds.add("boolean")
        elif isinstance(value, int):
            self.kinds.add("integer")
        elif isinstance(value, float):
            self.kinds.add("number")
        elif isinstance(value, str):
            self.kinds.add("string")
            self.strings.append(value)
        elif isinstance(value, dict):
            self.kinds.add("object")
            _observe(value, self.children)


def _observe(document: dict[str, Any], into: dict[str, _Observed]) -> None:
    for name, value in document.items():
        into.setdefault(name, _Observed()).add(value)


def documents_objects(manifest: Manifest, wanted: Iterable[str]) -> tuple[list[DbObject], list[str]]:
    """One object per declared index in ``wanted`` (names), described from its documents file;
    plus notes on what could not be described."""
    from structq.executors.search.embedded_server import existing_documents, read_documents

    names = {name.lower() for name in wanted}
    objects, notes = [], []
    for index in manifest.indices:
        if index.name.lower() not in names:
            continue
        path = existing_documents(manifest, index)
        observed: dict[str, _Observed] = {}
        if path is None:
            notes.append(f"{index.name}: no documents file declared; nothing to compare")
        else:
            for _, document in read_documents(path):
                document.pop("_id", None)
                _observe(document, observed)
        objects.append(_as_object(index, observed, notes))
    return objects, notes


def _as_object(index: Index, observed: dict[str, _Observed], notes: list[str]) -> DbObject:
    return DbObject(index.name, _members(observed, _declared(index.fields), f"{index.name}:", notes))


def _declared(fields: list[SearchField]) -> dict[str, SearchField | dict[str, Any]]:
    """Declared fields as a tree: dotted names (``author.name``) become nested entries."""
    tree: dict[str, Any] = {}
    for declared in fields:
        *parents, leaf = declared.name.split(".")
        target = tree
        for part in parents:
            holder = target.setdefault(part, {})
            target = holder if isinstance(holder, dict) else {}
        target[leaf] = declared
    return tree


def _members(observed: dict[str, _Observed], declared: dict[str, Any], prefix: str,
             notes: list[str]) -> tuple[Member, ...]:
    members = []
    for name, seen in observed.items():
        if not seen.kinds:
            continue  # only nulls: nothing to type
        spec = declared.get(name)
        kind = _kind(seen, spec, f"{prefix}{name}", notes)
        children: tuple[Member, ...] = ()
        if kind in ("object", "nested"):
            children = _members(seen.children, _children_of(spec), f"{prefix}{name}.", notes)
        members.append(Member(name=name, type=kind, native_type="json " + "/".join(sorted(seen.kinds)),
                              members=children))
    return tuple(members)


def _children_of(spec: Any) -> dict[str, Any]:
    if isinstance(spec, dict):
        return spec
    if spec is not None and getattr(spec, "fields", None):
        return _declared(spec.fields)
    return {}


def _kind(seen: _Observed, spec: Any, where: str, notes: list[str]) -> str:
    declared = getattr(spec, "type", None) if spec is not None and not isinstance(spec, dict) else (
        "object" if isinstance(spec, dict) else None)
    kinds = seen.kinds
    if kinds == {"object"}:
        return "nested" if declared == "nested" and seen.in_lists else "object"
    if kinds == {"boolean"}:
        return "boolean"
    if kinds <= {"integer"}:
        return declared if declared in _NUMBER_TYPES else "long"
    if kinds <= {"integer", "number"}:
        return declared if declared in _NUMBER_TYPES - _INTEGER_TYPES else "double"
    if kinds == {"string"}:
        return _string_kind(seen.strings, declared)
    notes.append(f"field {where} holds values of several kinds ({', '.join(sorted(kinds))})")
    if "string" in kinds:  # text among numbers or flags: only a string type holds them all
        return declared if declared in _STRING_TYPES - {"date", "ip"} else "keyword"
    return declared or "keyword"


def _string_kind(values: list[str], declared: str | None) -> str:
    if declared in _STRING_TYPES and _fits(values, declared):
        return declared
    if values and all(_is_date(value) for value in values):
        return "date"
    if all(len(value) <= _KEYWORD_MAX and not any(c.isspace() for c in value) for value in values):
        return "keyword"
    return "text"


def _fits(values: list[str], declared: str) -> bool:
    if declared == "date":
        return all(_is_date(value) for value in values)
    if declared == "ip":
        return all(_is_ip(value) for value in values)
    return True


def _is_date(value: str) -> bool:
    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
