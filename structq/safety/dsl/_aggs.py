"""Aggregations: the allowlist, and the check of each aggregation's body.

Aggregations run over the query's hits, so the row filters wrapped around the query constrain
them too — except where an aggregation looks past the hits: ``global`` (ignores the query),
``significant_terms``/``significant_text`` (index-wide background counts) and a ``terms``
aggregation with ``min_doc_count: 0`` (lists terms of documents outside the hits). Those are
refused. Scripted ones (``scripted_metric``, ``bucket_script``, ``bucket_selector``) never get
this far: any ``script`` key is refused before the walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._context import Context, JsonPath
from ._grammar import Check, Shape, agg_size, count, data, each, field, nested_path, pick_one
from ._hits import HIT_OPTIONS, with_default_source
from ._queries import query

__all__ = ["aggregations", "AGGREGATIONS"]

_SUB_AGGREGATIONS = frozenset({"aggs", "aggregations", "meta"})


def aggregations(ctx: Context, value: Any, path: JsonPath) -> dict[str, Any]:
    """``{"<name>": {"<type>": {…}, "aggs": {…}}}``, each checked, sub-aggregations too."""
    named = ctx.expect(value, dict, path, 'an object of named aggregations, e.g. {"by_week": {…}}')
    return {name: _aggregation(ctx, agg, (*path, name)) for name, agg in named.items()}


def _aggregation(ctx: Context, agg: Any, path: JsonPath) -> dict[str, Any]:
    kind = pick_one(ctx, agg, AGGREGATIONS, path, code="denied_aggregation", what="aggregation",
                    extra=_SUB_AGGREGATIONS)
    out = {kind: AGGREGATIONS[kind](ctx, agg[kind], (*path, kind))}
    with ctx.within_buckets(_bucket_count(ctx, kind, out[kind])):
        for key in ("aggs", "aggregations"):
            if key in agg:
                out[key] = aggregations(ctx, agg[key], (*path, key))
    if "meta" in agg:
        out["meta"] = data(ctx, agg["meta"], (*path, "meta"))
    return out


def _at_least_one(ctx: Context, value: Any, path: JsonPath) -> int:
    """``min_doc_count`` of a ``terms`` aggregation: 0 would list terms from documents outside
    the hits (other tenants' values, past the row filters)."""
    number = count(ctx, value, path)
    if number < 1:
        ctx.refuse("denied_value", "min_doc_count 0 lists terms of documents outside the query", path,
                   "use min_doc_count 1 (the default)")
    return number


def _term_filter(ctx: Context, value: Any, path: JsonPath) -> Any:
    """``include``/``exclude``: a list of values or a partition; regular expressions are
    refused for the same cost reason as the ``regexp`` query."""
    if isinstance(value, str):
        ctx.refuse("denied_value", "include/exclude as a regular expression is not allowed", path,
                   'give a list of values, e.g. "include": ["eng", "sales"]')
    if isinstance(value, dict):
        return Shape({"partition": data, "num_partitions": data}, what="option")(ctx, value, path)
    return ctx.values(value, path)


def _metric(*options: str) -> Shape:
    """A single-field metric: ``field`` required, plain options."""
    return Shape({"field": field, "missing": data, "format": data, **{k: data for k in options}},
                 required={"field": "name the field"}, what="option")


_BUCKET_ORDER = ("order", "min_doc_count", "missing", "keyed", "format")
_HISTOGRAM = ("offset", "extended_bounds", "hard_bounds", *_BUCKET_ORDER)

def _histogram(options: Shape) -> Check:
    """A histogram's options, refusing empty buckets stretched to ``extended_bounds``.

    With ``min_doc_count`` 0 (the default for histograms) ``extended_bounds`` makes one bucket
    per interval between the bounds, data or not: a one-unit interval over a wide range
    asks the search server for millions of buckets, far past the row limit. ``hard_bounds`` only
    narrows the buckets, so it stays allowed."""

    def checked(ctx: Context, value: Any, path: JsonPath) -> dict[str, Any]:
        out = options(ctx, value, path)
        min_doc_count = out.get("min_doc_count", 0)
        if "extended_bounds" in out and not (isinstance(min_doc_count, int) and min_doc_count >= 1):
            ctx.refuse("size_limit", "extended_bounds with min_doc_count 0 makes a bucket for every interval "
                       "between the bounds, with or without documents", (*path, "extended_bounds"),
                       "drop extended_bounds (filter the query with a range on the field instead), "
                       "or give min_doc_count: 1")
        return out

    return checked


_COMPOSITE_SOURCES: Mapping[str, Check] = {
    "terms": _metric("order", "missing_bucket", "missing_order"),
    "histogram": _metric("interval", "order", "missing_bucket", "missing_order"),
    "date_histogram": _metric("calendar_interval", "fixed_interval", "time_zone", "offset", "order",
                              "missing_bucket", "missing_order"),
}


def _composite_source(ctx: Context, value: Any, path: JsonPath) -> dict[str, Any]:
    """``{"<name>": {"terms"|"histogram"|"date_histogram": {…}}}``."""
    named = ctx.expect(value, dict, path, 'a named source, e.g. {"dept": {"terms": {"field": "department"}}}')
    if len(named) != 1:
        ctx.refuse("invalid_body", f"a composite source has one name, found {len(named)}", path)
    ((name, body),) = named.items()
    kind = pick_one(ctx, body, _COMPOSITE_SOURCES, (*path, name), code="denied_aggregation",
                    what="composite source")
    return {name: {kind: _COMPOSITE_SOURCES[kind](ctx, body[kind], (*path, name, kind))}}


def _filters(ctx: Context, value: Any, path: JsonPath) -> Any:
    """Named (``{"eng": {query}}``) or anonymous (``[{query}]``) bucket filters."""
    if isinstance(value, list):
        return each(query)(ctx, value, path)
    named = ctx.expect(value, dict, path, "an object of named queries or a list of queries")
    return {name: query(ctx, clause, (*path, name)) for name, clause in named.items()}


_TOP_HITS = Shape({**HIT_OPTIONS, "size": agg_size, "from": count}, what="top_hits option")

#: The search servers' defaults when ``size`` is not given.
_DEFAULT_BUCKETS = 10
_DEFAULT_TOP_HITS = 3


def _top_hits(ctx: Context, value: Any, path: JsonPath) -> dict[str, Any]:
    """The documents of a bucket: hits options as at the top level, ``_source`` restricted.

    Each enclosing bucket returns its own documents, and no truncation marker says when
    some were left out, so the buckets times ``size`` must stay within the limit — else a
    ``terms`` of ``max_rows`` buckets would return ``max_rows`` times more documents."""
    checked = _TOP_HITS(ctx, value, path)
    size = checked.get("size", _DEFAULT_TOP_HITS)
    if ctx.buckets * size > ctx.limit:
        ctx.refuse("size_limit", f"top_hits of {size} documents in each of up to {ctx.buckets} buckets "
                   f"could return {ctx.buckets * size} documents, above the limit of {ctx.limit}", path,
                   f"keep the enclosing buckets' size times the top_hits size at most {ctx.limit}, "
                   "e.g. fewer terms buckets, or top_hits size 1")
    return with_default_source(ctx, checked)


def _bucket_count(ctx: Context, kind: str, params: Any) -> int:
    """At most how many buckets one aggregation makes (1 for single-bucket and metrics).

    Histograms have no size: their bucket count depends on the data, so it is taken as the
    limit (their rows past ``max_rows`` are cut off anyway)."""
    if kind in ("terms", "composite"):
        return params.get("size", _DEFAULT_BUCKETS)
    if kind in ("range", "date_range"):
        return max(1, len(params.get("ranges") or ()))
    if kind == "filters":
        other = params.get("other_bucket") or "other_bucket_key" in params
        return max(1, len(params["filters"]) + bool(other))
    if kind in ("histogram", "date_histogram"):
        return ctx.limit
    return 1


AGGREGATIONS: Mapping[str, Check] = {
    # buckets
    "terms": _metric("order", "show_term_doc_count_error", "collect_mode").extend(
        {"size": agg_size, "min_doc_count": _at_least_one, "include": _term_filter, "exclude": _term_filter}),
    "date_histogram": _histogram(_metric("calendar_interval", "fixed_interval", "time_zone", *_HISTOGRAM)),
    "histogram": _histogram(_metric("interval", *_HISTOGRAM)),
    "range": _metric("ranges", "keyed"),
    "date_range": _metric("ranges", "keyed", "time_zone"),
    "missing": Shape({"field": field}, required={"field": "name the field"}, what="option"),
    "filter": query,
    "filters": Shape({"filters": _filters, "other_bucket": data, "other_bucket_key": data},
                     required={"filters": "give the bucket queries"}, what="option"),
    "composite": Shape({"sources": each(_composite_source), "size": agg_size, "after": data},
                       required={"sources": "give the sources"}, what="option"),
    "nested": Shape({"path": nested_path}, required={"path": "name the nested field"}, what="option"),
    "reverse_nested": Shape({"path": nested_path}, what="option"),
    # metrics
    "avg": _metric(), "sum": _metric(), "min": _metric(), "max": _metric(),
    "stats": _metric(), "extended_stats": _metric("sigma"), "value_count": _metric(),
    "cardinality": _metric("precision_threshold"),
    "percentiles": _metric("percents", "keyed", "tdigest", "hdr"),
    "top_hits": _top_hits,
}
