"""What comes back with each hit: ``_source``, ``sort`` values, highlights, ``fields`` and
``docvalue_fields``. Shared by the request and by ``top_hits`` aggregations.

Unreadable fields must never come back, so every returned field is checked like a queried
one, and a ``_source`` that is absent or ``true`` becomes the list of readable fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._context import Context, JsonPath, closest_hint
from ._grammar import Check, Shape, data, each, field, nested_path, one_or_many
from ._queries import query
from ._tenant import highlighter_type

__all__ = ["HIT_OPTIONS", "sort", "source", "highlight", "field_list", "collapse", "with_default_source"]

#: Sort keys that are not fields.
_SORT_SPECIALS = frozenset({"_score", "_doc"})


def _sort_entry(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``"field"``, ``{"field": "desc"}``, ``{"field": {"order": …}}``, or ``_score``/``_doc``."""
    if isinstance(value, str):
        return value if value in _SORT_SPECIALS else ctx.field(value, path)
    obj = ctx.expect(value, dict, path, 'a field name or {"field": "asc"|"desc"}')
    if len(obj) != 1:
        ctx.refuse("invalid_body", f"a sort entry names one field, found {len(obj)}", path,
                   'use a list: [{"week_start_date": "desc"}, "_score"]')
    ((name, order),) = obj.items()
    if name not in _SORT_SPECIALS:
        ctx.field(name, (*path, name))
    checked = _SORT_OPTIONS(ctx, order, (*path, name)) if isinstance(order, dict) else data(ctx, order, (*path, name))
    return {name: checked}


_SORT_OPTIONS = Shape(
    {**{k: data for k in ("order", "mode", "missing", "unmapped_type", "numeric_type", "format")},
     "nested": Shape({"path": nested_path, "filter": query, "max_children": data},
                     required={"path": "name the nested field"}, what="option")},
    what="sort option",
)

sort: Check = one_or_many(_sort_entry)


def _source_entry(ctx: Context, value: Any, path: JsonPath) -> str:
    return ctx.field(value, path)


def _excluded(ctx: Context, value: Any, path: JsonPath) -> str:
    """An excluded path only removes data, so unreadable fields may be named; it must still
    be declared (a typo would silently exclude nothing)."""
    ctx.expect(value, str, path, "a field name")
    if value not in ctx.fields:
        ctx.refuse("unknown_field", f"unknown field {value!r} in index {ctx.index.name!r}", path,
                   closest_hint(value, ctx.fields, what="fields"))
    return value


_SOURCE_PATHS = one_or_many(_source_entry)
_SOURCE_FILTER = Shape(
    {"includes": _SOURCE_PATHS, "include": _SOURCE_PATHS,
     "excludes": one_or_many(_excluded), "exclude": one_or_many(_excluded)},
    what="_source key",
)


def readable_source(ctx: Context, excluded: Iterable[str] = ()) -> list[str]:
    """The ``_source`` paths of every readable field, but those in or under an ``excluded``
    path (recorded as read)."""
    excluded = tuple(excluded)
    if excluded:
        paths = [p for p in ctx.source_paths if not any(p == x or p.startswith(x + ".") for x in excluded)]
    else:
        paths = list(ctx.source_paths)
    ctx.columns.update(dict.fromkeys(paths))  # ``setdefault`` of each: the order of first use kept
    return paths


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def source(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``_source``: ``false`` stays; ``true`` becomes the readable fields; named fields must
    be readable; includes default to the readable fields not excluded.

    The default includes leave the excluded fields out: the search servers refuse a field both
    included and excluded. Empty includes become ``false``: the search servers read them as every
    field, unreadable ones included."""
    if isinstance(value, bool):
        return readable_source(ctx) if value else False
    if not isinstance(value, dict):
        return _SOURCE_PATHS(ctx, value, path) or False
    checked = _SOURCE_FILTER(ctx, value, path)
    if "includes" not in checked and "include" not in checked:
        checked["includes"] = readable_source(ctx, _as_list(checked.get("excludes", checked.get("exclude", []))))
    return checked if checked.get("includes", checked.get("include")) else False


def with_default_source(ctx: Context, hits: dict[str, Any]) -> dict[str, Any]:
    """Hits options with an explicit ``_source`` (an absent one returns every field)."""
    return hits if "_source" in hits else {**hits, "_source": readable_source(ctx)}


_HIGHLIGHT_OPTIONS: Mapping[str, Check] = {
    **{k: data for k in ("pre_tags", "post_tags", "fragment_size", "number_of_fragments", "order",
                         "require_field_match", "encoder", "no_match_size", "boundary_scanner",
                         "boundary_chars", "boundary_max_scan", "boundary_scanner_locale", "fragmenter",
                         "tags_schema", "phrase_limit", "max_analyzed_offset")},
    "highlight_query": query,
    "type": highlighter_type,
}
_FIELD_HIGHLIGHT = Shape({**_HIGHLIGHT_OPTIONS, "matched_fields": each(field)}, what="highlight option")


def _highlight_fields(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``{"content": {}}`` or ``[{"content": {}}, …]``: each key a readable field."""
    if isinstance(value, list):
        return [_highlight_fields(ctx, item, (*path, i)) for i, item in enumerate(value)]
    obj = ctx.expect(value, dict, path, 'an object of fields, e.g. {"content": {}}')
    return {ctx.field(name, (*path, name)): _FIELD_HIGHLIGHT(ctx, opts, (*path, name)) for name, opts in obj.items()}


highlight = Shape({**_HIGHLIGHT_OPTIONS, "fields": _highlight_fields},
                  required={"fields": 'name the fields to highlight, e.g. {"content": {}}'}, what="highlight option")


def _field_entry(ctx: Context, value: Any, path: JsonPath) -> Any:
    if isinstance(value, str):
        return ctx.field(value, path)
    return Shape({"field": field, "format": data}, required={"field": "name the field"}, what="option")(ctx, value, path)


#: ``fields`` / ``docvalue_fields``: names or ``{"field", "format"}``.
field_list: Check = each(_field_entry)

collapse = Shape({"field": field, "max_concurrent_group_searches": data},
                 required={"field": "name a keyword or numeric field"}, what="collapse option")

#: Options that shape the returned hits, at the top level and in ``top_hits``.
HIT_OPTIONS: Mapping[str, Check] = {
    "sort": sort,
    "_source": source,
    "highlight": highlight,
    "docvalue_fields": field_list,
    "fields": field_list,
    "track_scores": data,
}
