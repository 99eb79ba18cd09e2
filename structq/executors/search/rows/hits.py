"""Hits → one row per document, and a count → one row; the manifest decides which fields leave.

``_id``, ``_score``, the allowed ``_source`` fields in manifest order, then ``_highlight`` when
the request asked for highlighting. A field the manifest denies (or does not declare) is
dropped even if the search server returned it — also from ``top_hits`` documents inside aggregations
(``top_hits_documents``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from structq.capabilities.model import Index, SearchField
from structq.executors.values import json_safe_row

__all__ = ["HIGHLIGHT_COLUMN", "HIGHLIGHT_SEPARATOR", "SearchTable", "count_rows", "hit_rows", "top_hits_documents"]

HIGHLIGHT_COLUMN = "_highlight"
#: Joins the fragments highlighted in one field.
HIGHLIGHT_SEPARATOR = " … "

_MISSING = object()


@dataclass
@dataclass
class SearchTable:
    """A search response as rows: columns, rows, and whether the search server held more than the rows
    show (named apart from ``capabilities.Table``, a declared SQL table)."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    #: What about the rows is an estimate (see the module docstring).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _SourceColumn:
    """A ``_source`` column: a leaf path, or a nested/undescribed object kept whole."""

    path: str
    #: Declared sub-fields of a ``nested`` field; its values are pruned to the allowed ones.
    subfields: tuple[SearchField, ...] = ()


def _source_columns(index: Index) -> list[_SourceColumn]:
    """Allowed ``_source`` columns in manifest order.

    ``object`` fields with declared sub-fields are flattened to dotted columns (each sub-field
    has its own access rule, and flat columns are what SQL over results wants); ``nested``
    fields are arrays of objects, so they stay one column holding a list of dicts.
    """
    out: list[_SourceColumn] = []

    def walk(fields: list[SearchField], prefix: str) -> None:
        for f in fields:
            if f.denied:
                continue
            path = prefix + f.name
            if f.type == "object" and f.fields:
                walk(f.fields, path + ".")
            else:
                out.append(_SourceColumn(path, tuple(f.fields) if f.type == "nested" else ()))

    walk(index.fields, "")
    return out


def _source_filter(spec: Any) -> tuple[list[str] | None, list[str]]:
    """(includes or None for everything, excludes) from a request's ``_source`` value."""
    if spec is None or spec is True:
        return None, []
    if spec is False:
        return [], []
    if isinstance(spec, str):
        return [spec], []
    if isinstance(spec, list):
        return [str(s) for s in spec], []
    if isinstance(spec, Mapping):
        includes = spec.get("includes", spec.get("include"))
        excludes = spec.get("excludes", spec.get("exclude")) or []
        if isinstance(includes, str):
            includes = [includes]
        if isinstance(excludes, str):
            excludes = [excludes]
        return (list(includes) if includes else None), list(excludes)
    return None, []


def _covers(pattern: str, path: str) -> bool:
    """Whether a ``_source`` pattern selects ``path`` itself or one of its ancestors."""
    parts = path.split(".")
    return any(fnmatchcase(".".join(parts[:i]), pattern) for i in range(1, len(parts) + 1))


def _selected(column: _SourceColumn, includes: list[str] | None, excludes: list[str]) -> bool:
    path = column.path
    if any(_covers(p, path) for p in excludes):
        return False
    if includes is None:
        return True
    # A pattern naming a descendant (``comments.author`` for nested ``comments``) selects the
    # column too; the search server returns only that part of it.
    return any(_covers(p, path) or p.startswith(path + ".") for p in includes)


def _lookup(value: Any, parts: list[str]) -> Any:
    """The value at a dotted path; documents may nest objects or use dotted keys, and
    arrays of objects yield the list of their values (as Elasticsearch flattens them)."""
    if not parts:
        return value
    if isinstance(value, list):
        found = [_lookup(v, parts) for v in value]
        flat: list[Any] = []
        for item in found:
            if item is _MISSING:
                continue
            flat.extend(item if isinstance(item, list) else [item])
        return flat if flat else _MISSING
    if isinstance(value, Mapping):
        for i in range(len(parts), 0, -1):
            key = ".".join(parts[:i])
            if key in value:
                return _lookup(value[key], parts[i:])
    return _MISSING


def _prune(value: Any, fields: tuple[SearchField, ...]) -> Any:
    """Keep only the declared, allowed sub-fields of a nested value."""
    if not fields:
        return value
    if isinstance(value, list):
        return [_prune(v, fields) for v in value]
    if not isinstance(value, Mapping):
        return value
    allowed = {f.name: f for f in fields if not f.denied}
    return {
        k: _prune(v, tuple(allowed[k].fields)) for k, v in value.items() if k in allowed
    }


def _allowed_paths(index: Index) -> set[str]:
    """Every field path the manifest allows (itself and its ancestors not denied)."""
    allowed: set[str] = set()

    def walk(fields: list[SearchField], prefix: str) -> None:
        for f in fields:
            if not f.denied:
                allowed.add(prefix + f.name)
                walk(f.fields, f"{prefix}{f.name}.")

    walk(index.fields, "")
    return allowed


def _highlight_value(highlight: Any, allowed: set[str]) -> dict[str, str] | None:
    """Fragments per field, joined; fields the manifest does not allow are dropped."""
    if not isinstance(highlight, Mapping):
        return None
    out = {}
    for name, fragments in sorted(highlight.items()):
        parts = str(name).split(".")
        if not any(".".join(parts[:i]) in allowed for i in range(len(parts), 0, -1)):
            continue
        if isinstance(fragments, list):
            out[str(name)] = HIGHLIGHT_SEPARATOR.join(str(f) for f in fragments)
        else:
            out[str(name)] = str(fragments)
    return out or None


def hit_rows(response: Mapping[str, Any], body: Mapping[str, Any], index: Index,
             max_rows: int) -> SearchTable:
    """One row per hit; ``truncated`` when more than ``max_rows`` hits came back.

    The sandbox caps ``size`` at ``max_rows + 1``, so one hit too many is the signal.
    """
    includes, excludes = _source_filter(body.get("_source"))
    columns = [c for c in _source_columns(index) if _selected(c, includes, excludes)]
    with_highlight = "highlight" in body
    allowed = _allowed_paths(index) if with_highlight else set()

    hits = list(((response.get("hits") or {}).get("hits")) or [])
    truncated = len(hits) > max_rows
    rows = []
    for hit in hits[:max_rows]:
        source = hit.get("_source") or {}
        row: list[Any] = [hit.get("_id"), hit.get("_score")]
        for col in columns:
            value = _lookup(source, col.path.split("."))
            row.append(None if value is _MISSING else _prune(value, col.subfields))
        if with_highlight:
            row.append(_highlight_value(hit.get("highlight"), allowed))
        rows.append(json_safe_row(row))

    names = ["_id", "_score", *(c.path for c in columns)]
    if with_highlight:
        names.append(HIGHLIGHT_COLUMN)
    return SearchTable(tuple(names), rows, truncated)


def count_rows(total: Any, bound: int) -> SearchTable:
    """How many documents matched, as one row, from ``hits.total`` of a request whose
    ``track_total_hits`` was ``bound``.

    At the bound the search server stopped counting (relation ``gte``, or a value at the bound): the
    row holds the bound, ``truncated`` is set and a note says "at least" — a count that stopped
    is never shown as exact.
    """
    total = total if isinstance(total, Mapping) else {"value": total, "relation": "eq"}
    value = total.get("value")
    stopped = total.get("relation") == "gte" or (isinstance(value, int) and value >= bound)
    notes = (f"the count stopped at {value:,} documents (limits.max_count): at least {value:,} match",
             ) if stopped else ()
    return SearchTable(("count",), [json_safe_row([value])], stopped, notes)


def top_hits_documents(result: Any, index: Index) -> list[dict[str, Any]]:
    """A ``top_hits`` result's documents, each reduced to the allowed fields."""
    hits = (result.get("hits") or {}).get("hits") if isinstance(result, Mapping) else None
    return [_allowed_hit_source(hit, index) for hit in hits or [] if isinstance(hit, Mapping)]


def _allowed_hit_source(hit: Mapping[str, Any], index: Index) -> dict[str, Any]:
    """One hit's allowed ``_source``. Under a ``nested`` aggregation a hit is a nested
    document: its ``_source`` holds the nested field's sub-fields, keyed relative to it
    (``{"by": …}`` for ``comments.by``), and ``_nested`` says which field it comes from."""
    source = hit.get("_source") or {}
    nested = _nested_path(hit.get("_nested"))
    if nested is None:
        return _allowed_document(source, index)
    declared = index.flat_fields().get(nested)
    if declared is None or nested not in _allowed_paths(index):
        return {}
    pruned = _prune(source, tuple(declared.fields))
    return dict(pruned) if isinstance(pruned, Mapping) else {}


def _nested_path(identity: Any) -> str | None:
    """``{"field": "a", "_nested": {"field": "b"}}`` → ``"a.b"``; None for a top-level hit."""
    parts = []
    while isinstance(identity, Mapping) and isinstance(identity.get("field"), str):
        parts.append(identity["field"])
        identity = identity.get("_nested")
    return ".".join(parts) or None


def _allowed_document(doc: Mapping[str, Any], index: Index) -> dict[str, Any]:
    """A ``_source`` reduced to the allowed fields, keyed by column path."""
    kept = {}
    for col in _source_columns(index):
        found = _lookup(doc, col.path.split("."))
        if found is not _MISSING:
            kept[col.path] = _prune(found, col.subfields)
    return kept
