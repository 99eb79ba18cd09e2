"""The whole request: which index, which top-level keys, and the rewrites that make the
checked body safe to send (``_source`` restriction, the hits window, row filters).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from structq.capabilities.model import Index, Manifest
from structq.errors import SandboxViolation

from ._aggs import aggregations
from ._context import SCALAR_TYPES, Context, JsonPath, closest_hint
from ._grammar import Shape, count, data
from ._hits import HIT_OPTIONS, collapse, with_default_source
from ._queries import query
from ._tenant import min_score

__all__ = ["REQUEST", "REWRITES", "SCRIPT_KEYS", "MAX_DEPTH", "resolve_index", "forbid_scripts"]

#: Keys that carry code for the cluster to run, refused wherever they stand, whatever the
#: allowlists say (code ``script``): the search server accepts script queries, only this stands
#: between a plan and a script.
SCRIPT_KEYS = frozenset({
    "script", "scripts", "_script", "script_fields", "script_score", "scripted_metric",
    "bucket_script", "bucket_selector", "runtime_mappings", "init_script", "map_script",
    "combine_script", "reduce_script",
})

#: Deeper bodies are refused before any recursive check runs (the search server caps bool nesting
#: well below this anyway).
MAX_DEPTH = 100

#: Index names that are not one index, and what they are instead.
_NOT_ONE_INDEX: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda n: n.startswith("_"), "names every index (or an endpoint)"),
    (lambda n: "," in n, "is a list of indices"),
    (lambda n: "*" in n or "?" in n, "is a wildcard pattern"),
    (lambda n: ":" in n, "names a remote cluster"),
    (lambda n: n.startswith("<"), "is date math"),
    (lambda n: n.startswith("-"), "is an exclusion pattern"),
)


def resolve_index(source: Manifest, name: Any) -> Index:
    """The declared index ``name`` spells exactly; patterns, lists, ``_all``, remote
    clusters and date math are refused by name so the message says what was wrong."""
    declared = [i.name for i in source.indices]
    target = source.index(name) if isinstance(name, str) else None
    if target is not None:
        return target
    hint = closest_hint(str(name or ""), declared, what="declared indices")
    if not isinstance(name, str) or not name:
        raise SandboxViolation("unknown_index", "no index given: a search step names one index",
                               hint=hint, source=source.source)
    reason = next((why for test, why in _NOT_ONE_INDEX if test(name)), None)
    message = (f"index {name!r} {reason}: name exactly one declared index" if reason
               else f"unknown index {name!r} in source {source.source!r}")
    raise SandboxViolation("unknown_index", message, hint=hint, source=source.source)


def forbid_scripts(ctx: Context, value: Any, path: JsonPath = ()) -> None:
    """Refuse a script key anywhere in the body (and bodies too deep to walk safely).

    A value that is neither an object nor a list holds no key: it is visited only where its
    depth alone is refused (a ``_source`` of 1,000 field names costs no 1,000 calls)."""
    if len(path) > MAX_DEPTH:
        ctx.refuse("invalid_body", f"the body is nested deeper than {MAX_DEPTH} levels", path[:5] + ("…",))
    deepest = len(path) >= MAX_DEPTH  # a value one level down is too deep, whatever it is
    if isinstance(value, dict):
        for key, item in value.items():
            if key in SCRIPT_KEYS:
                ctx.refuse("script", f"{key!r} runs code on the cluster", (*path, key),
                           "scripts are never allowed; use declared fields with term/range/match "
                           "queries and the field-based aggregations")
            if deepest or isinstance(item, (dict, list)):
                forbid_scripts(ctx, item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if deepest or isinstance(item, (dict, list)):
                forbid_scripts(ctx, item, (*path, i))


REQUEST = Shape(
    {
        "query": query,
        "post_filter": query,
        "aggs": aggregations,
        "aggregations": aggregations,
        "size": count,
        "from": count,
        **HIT_OPTIONS,
        "collapse": collapse,
        "track_total_hits": data,
        "search_after": data,
        "min_score": min_score,
        "terminate_after": data,
    },
    what="top-level key",
)


def enforce_window(ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
    """``size`` defaults and is capped to the limit (``max_rows + 1``: one hit more than
    ``max_rows`` tells the executor the result was truncated); ``from + size`` past the
    limit is refused, since those hits could never be returned whole."""
    start = body.get("from", 0)
    size = min(body.get("size", ctx.limit - start), ctx.limit)
    if size < 0 or start + size > ctx.limit:
        ctx.refuse("size_limit", f"from {start} + size {body.get('size', size)} goes past the limit of {ctx.limit} hits",
                   ("from",), f"keep from + size at most {ctx.limit}; to read further, sort and pass the "
                   "last hit's sort values as search_after")
    return {**body, "size": size}


_VARIABLE = re.compile(r":([A-Za-z_]\w*)")


def _filter_value(ctx: Context, value: Any) -> Any:
    """A row filter's value: a literal, or ``:var`` from the caller (never silently absent)."""
    match = _VARIABLE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return value
    name = match.group(1)
    if ctx.vars.get(name) is None:
        raise SandboxViolation(
            "missing_variable",
            f"index {ctx.index.name!r} has a row filter on variable {name!r}, which the caller did not give",
            hint=f"pass it: vars={{{name!r}: …}} (CLI: --var {name}=…)", source=ctx.source.source,
        )
    value = ctx.vars[name]
    if not _is_term_value(value):
        raise SandboxViolation(
            "invalid_variable", f"variable {name!r} of the row filter on {ctx.index.name!r} is {type(value).__name__}",
            hint="give a string, a number, a boolean, or a list of them", source=ctx.source.source,
        )
    ctx.used[name] = value
    return value


def _is_term_value(value: Any) -> bool:
    """A scalar or a list of scalars: an object would be read by the search server as term options."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return all(isinstance(item, SCALAR_TYPES) for item in items)


def row_filter_clauses(ctx: Context) -> list[dict[str, Any]]:
    """One ``term`` (or ``terms``, for a list value) per row-filter field of the index."""
    clauses = []
    for row_filter in ctx.source.row_filters_for(ctx.index.name):
        for name, raw in (row_filter.term or {}).items():
            value = _filter_value(ctx, raw)
            kind = "terms" if isinstance(value, (list, tuple)) else "term"
            clauses.append({kind: {name: list(value) if kind == "terms" else value}})
    return clauses


def apply_row_filters(ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
    """Wrap the query in ``bool.filter`` beside the row filters. Aggregations,
    ``post_filter`` and ``top_hits`` all run inside the query's hits, so they are constrained
    too (``global`` is refused).

    The original query goes in filter context too, not ``must``: a scored query would read
    index-wide term statistics, other tenants' documents included (see ``_tenant``), so on a
    row-filtered index documents match or not, and every hit scores the same."""
    filters = row_filter_clauses(ctx)
    if not filters:
        return body
    original = body.get("query")
    clauses = [original, *filters] if original is not None else filters
    return {**body, "query": {"bool": {"filter": clauses}}}


#: Applied in order to the checked body.
REWRITES: tuple[Callable[[Context, dict[str, Any]], dict[str, Any]], ...] = (
    with_default_source,
    enforce_window,
    apply_row_filters,
)
