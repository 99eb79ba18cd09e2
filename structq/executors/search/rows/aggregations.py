"""Aggregations → one row per innermost bucket, the enclosing buckets' keys as columns.

Some aggregations answer with estimates, and a number shown as exact when it is not is worse
than no number: the table's ``notes`` say so for ``terms`` counts with a
``doc_count_error_upper_bound`` above 0, ``cardinality`` values at or above the
``precision_threshold`` and percentiles (t-digest or HDR sketches).
"""

from __future__ import annotations

import datetime as _dt
import re
import zoneinfo
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from structq.capabilities.model import Index
from structq.executors.values import json_safe_row

from .hits import SearchTable, top_hits_documents

__all__ = ["aggregation_rows"]

_BUCKET_META = frozenset({
    "key", "key_as_string", "doc_count", "from", "from_as_string", "to", "to_as_string",
    "doc_count_error_upper_bound", "bg_count", "score",
})
_AGG_DEF_META = frozenset({"aggs", "aggregations", "meta"})


def _agg_defs(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    """Sub-aggregation definitions of an aggregation (or of a request body)."""
    subs = definition.get("aggs", definition.get("aggregations"))
    return subs if isinstance(subs, Mapping) else {}


def _agg_type(definition: Any) -> tuple[str | None, Mapping[str, Any]]:
    """(type, parameters) of one aggregation definition: ``{"terms": {...}, "aggs": …}``."""
    if isinstance(definition, Mapping):
        for key, params in definition.items():
            if key not in _AGG_DEF_META:
                return str(key), params if isinstance(params, Mapping) else {}
    return None, {}


def _percent_key(key: Any) -> str:
    """``"50.0"`` → ``"50"``, ``"99.9"`` stays: readable column suffixes."""
    try:
        number = float(key)
    except (TypeError, ValueError):
        return str(key)
    return str(int(number)) if number.is_integer() else str(number)


def _percent_order(key: Any) -> tuple[int, float, str]:
    """Search servers may return percentiles ordered as text ("25.0" before "5.0"); order by number."""
    try:
        return (0, float(key), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(key))


def _metric_columns(name: str, result: Any) -> dict[str, Any]:
    """A metric aggregation's value(s): one column, or ``name.part`` columns.

    ``value_as_string`` (dates) is preferred to the raw epoch number; percentiles become
    ``name.50``, ``name.95``…; stats become ``name.min``, ``name.avg``…
    """
    if not isinstance(result, Mapping):
        return {name: result}
    if "value" in result:
        return {name: result.get("value_as_string", result["value"])}
    if "values" in result:
        values = result["values"]
        if isinstance(values, Mapping):
            pairs = [(k, v) for k, v in values.items() if not str(k).endswith("_as_string")]
        elif isinstance(values, list):  # keyed: false
            pairs = [(v.get("key"), v.get("value")) for v in values if isinstance(v, Mapping)]
        else:
            pairs = []
        pairs.sort(key=lambda kv: _percent_order(kv[0]))
        return {f"{name}.{_percent_key(k)}": v for k, v in pairs}
    out: dict[str, Any] = {}
    for key, value in result.items():
        if str(key).endswith("_as_string") or key == "meta":
            continue
        if isinstance(value, Mapping):
            out.update(_metric_columns(f"{name}.{key}", value))
        else:
            out[f"{name}.{key}"] = value
    return out


_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?")


def _zone(name: Any) -> _dt.tzinfo:
    """The zone a ``date_histogram``'s ``time_zone`` names: an offset (``+08:00``) or a tz
    database name (``Asia/Shanghai``). UTC when there is none — or when this machine does not
    know the name, in which case the label is still the right instant, written in UTC."""
    if not isinstance(name, str) or name.upper() in ("", "Z", "UTC"):
        return _dt.timezone.utc
    offset = _OFFSET.fullmatch(name)
    if offset:
        sign, hours, minutes = offset.groups()
        delta = _dt.timedelta(hours=int(hours), minutes=int(minutes or 0))
        return _dt.timezone(-delta if sign == "-" else delta)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return _dt.timezone.utc


def _epoch_ms_to_iso(value: Any, zone: _dt.tzinfo = _dt.timezone.utc) -> Any:
    """Composite ``date_histogram`` keys arrive as epoch milliseconds (a bucket's first
    instant) with no ``key_as_string``; show them as the search server would, in the source's
    ``time_zone`` — a ``+08:00`` month starts on the 1st there, the day before in UTC. A key
    the search server already formatted (the source has a ``format``) is kept as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        stamp = _dt.datetime.fromtimestamp(value / 1000, tz=zone)
        text = stamp.isoformat(timespec="milliseconds")
        return text[:-6] + "Z" if text.endswith("+00:00") else text  # as the search servers write UTC
    return value


def _date_sources(params: Mapping[str, Any]) -> dict[str, _dt.tzinfo]:
    """The ``date_histogram`` sources of a composite aggregation, with their time zones."""
    return {
        str(source_name): _zone(spec["date_histogram"].get("time_zone"))
        for source in params.get("sources", []) if isinstance(source, Mapping)
        for source_name, spec in source.items()
        if isinstance(spec, Mapping) and isinstance(spec.get("date_histogram"), Mapping)
    }


#: Precision threshold of ``cardinality`` when the request sets none, and its ceiling.
_CARDINALITY_THRESHOLD = (3000, 40000)
_PERCENTILE_TYPES = frozenset({"percentiles", "percentile_ranks", "median_absolute_deviation", "boxplot"})


def _cardinality_estimated(params: Mapping[str, Any], result: Any) -> int | None:
    """The precision threshold a ``cardinality`` value reached (so it is an estimate), else None."""
    default, ceiling = _CARDINALITY_THRESHOLD
    threshold = params.get("precision_threshold", default)
    threshold = min(threshold, ceiling) if isinstance(threshold, int) else default
    value = result.get("value") if isinstance(result, Mapping) else None
    if isinstance(value, (int, float)) and value >= threshold:
        return threshold
    return None


@dataclass
class _AggWalk:
    """State of one walk over an aggregation response."""

    index: Index
    key_columns: list[str] = field(default_factory=list)
    truncated: bool = False
    #: Aggregation name → the note on its estimate (one per aggregation, however many buckets).
    estimates: dict[str, str] = field(default_factory=dict)
    #: ``terms`` name → the largest count error any of its buckets reported (-1: unbounded).
    count_errors: dict[str, int] = field(default_factory=dict)

    def key(self, name: str) -> None:
        if name not in self.key_columns:
            self.key_columns.append(name)

    # -- estimates ----------------------------------------------------------------------------

    def notes(self) -> tuple[str, ...]:
        """The notes on every estimate the walk met, in the order met."""
        counts = [
            f"aggregation {name!r}: the document counts per bucket are estimates (the search server could not "
            "bound their error)" if error < 0 else
            f"aggregation {name!r}: the document counts per bucket may be off by up to {error} "
            "(terms are counted shard by shard)"
            for name, error in self.count_errors.items()
        ]
        return (*counts, *self.estimates.values())

    def note_count_error(self, name: str, result: Mapping[str, Any], buckets: Any) -> None:
        """Record a ``terms`` count error: the aggregation's bound and any bucket's own."""
        bounds = [result.get("doc_count_error_upper_bound")]
        if isinstance(buckets, list):
            bounds += [b.get("doc_count_error_upper_bound") for b in buckets if isinstance(b, Mapping)]
        bounds = [b for b in bounds if isinstance(b, int) and not isinstance(b, bool) and b != 0]
        if not bounds:
            return
        error = -1 if min(bounds) < 0 else max(bounds)
        known = self.count_errors.get(name, 0)
        self.count_errors[name] = -1 if -1 in (known, error) else max(known, error)

    def note_metric(self, name: str, agg_type: str | None, params: Mapping[str, Any], result: Any) -> None:
        """Record a metric that is an estimate: percentiles, or a large ``cardinality``."""
        if agg_type in _PERCENTILE_TYPES:
            self.estimates.setdefault(name, f"aggregation {name!r}: {agg_type} are estimates (computed from "
                                            "a sketch of the values), not exact")
        elif agg_type == "cardinality" and (threshold := _cardinality_estimated(params, result)) is not None:
            self.estimates.setdefault(name, f"aggregation {name!r}: the distinct count is an estimate "
                                            f"(HyperLogLog++, exact only below {threshold})")

    # -- bucket keys ------------------------------------------------------------------------

    def bucket_keys(self, name: str, agg_type: str | None, params: Mapping[str, Any],
                    key: Any, bucket: Mapping[str, Any]) -> dict[str, Any]:
        if agg_type == "composite" and isinstance(bucket.get("key"), Mapping):
            date_parts = _date_sources(params)
            out = {}
            for part, value in bucket["key"].items():
                self.key(str(part))
                out[str(part)] = _epoch_ms_to_iso(value, date_parts[part]) if part in date_parts else value
            return out
        self.key(name)
        return {name: bucket.get("key_as_string", key)}

    # -- the walk -----------------------------------------------------------------------------

    def expand(self, defs: Mapping[str, Any], node: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Rows for the aggregations in ``node`` (the response's ``aggregations`` or a bucket).

        Sibling bucket aggregations are independent groupings, so their rows are stacked (a
        column a grouping lacks is None), never crossed. Metrics at a level are attached to
        every row below it: they describe the enclosing bucket.
        """
        names = list(defs) + sorted(k for k, v in node.items()
                                    if k not in defs and k not in _BUCKET_META
                                    and isinstance(v, Mapping) and k != "key")
        metrics: dict[str, Any] = {}
        rowsets: list[list[dict[str, Any]]] = []
        for name in names:
            if name not in node:
                continue
            result = node[name]
            definition = defs.get(name, {})
            agg_type, params = _agg_type(definition)
            subdefs = _agg_defs(definition) if isinstance(definition, Mapping) else {}
            if isinstance(result, Mapping) and "buckets" in result:
                rowsets.append(self._buckets(name, agg_type, params, subdefs, result))
            elif isinstance(result, Mapping) and "doc_count" in result and "value" not in result:
                # filter / nested / global / missing: one unnamed bucket; its count under its name
                inner = self.expand(subdefs, result) if self._has_subaggs(subdefs, result) else [{}]
                rowsets.append([{name: result["doc_count"], **row} for row in inner])
            elif agg_type == "top_hits" or (isinstance(result, Mapping) and "hits" in result):
                # documents: only the allowed fields, as for hits
                metrics[name] = top_hits_documents(result, self.index)
            else:
                self.note_metric(name, agg_type, params, result)
                metrics.update(_metric_columns(name, result))

        rows = [row for rowset in rowsets for row in rowset]
        if not rows:
            return [metrics] if metrics or not rowsets else []
        for row in rows:
            for col, value in metrics.items():
                row.setdefault(col, value)
        return rows

    @staticmethod
    def _has_subaggs(subdefs: Mapping[str, Any], result: Mapping[str, Any]) -> bool:
        return bool(subdefs) or any(
            isinstance(v, Mapping) for k, v in result.items() if k not in _BUCKET_META
        )

    def _buckets(self, name: str, agg_type: str | None, params: Mapping[str, Any],
                 subdefs: Mapping[str, Any], result: Mapping[str, Any]) -> list[dict[str, Any]]:
        if (result.get("sum_other_doc_count") or 0) > 0:
            self.truncated = True  # terms: buckets beyond `size` were left out
        buckets = result["buckets"]
        self.note_count_error(name, result, buckets)
        if (agg_type == "composite" and result.get("after_key") is not None
                and len(buckets) >= int(params.get("size", 10))):
            self.truncated = True  # a full page: later pages may hold more buckets
        items: Iterator[tuple[Any, Any]]
        if isinstance(buckets, Mapping):  # keyed buckets (filters, keyed ranges)
            items = iter(buckets.items())
        else:
            items = ((b.get("key") if isinstance(b, Mapping) else None, b) for b in buckets)
        rows: list[dict[str, Any]] = []
        for key, bucket in items:
            if not isinstance(bucket, Mapping):
                continue
            keys = self.bucket_keys(name, agg_type, params, key, bucket)
            if self._has_subaggs(subdefs, bucket):
                inner = self.expand(subdefs, bucket)
            else:
                inner = [{}]
            for row in inner or [{}]:
                row.setdefault("doc_count", bucket.get("doc_count"))
                rows.append({**keys, **row})
        return rows


def _guess_columns(defs: Mapping[str, Any]) -> list[str]:
    """Columns of an aggregation that returned no rows, read from its definition."""
    keys: list[str] = []
    metrics: list[str] = []
    bucketed = False

    def walk(level: Mapping[str, Any]) -> None:
        nonlocal bucketed
        for name, definition in level.items():
            agg_type, params = _agg_type(definition)
            if agg_type == "composite":
                bucketed = True
                for source in params.get("sources", []):
                    if isinstance(source, Mapping):
                        keys.extend(str(k) for k in source)
            elif agg_type in _SINGLE_BUCKET or agg_type in _METRIC_TYPES:
                metrics.append(name)
            else:
                bucketed = True
                keys.append(name)
            if isinstance(definition, Mapping):
                walk(_agg_defs(definition))

    walk(defs)
    return [*keys, *(["doc_count"] if bucketed else []), *metrics]


_SINGLE_BUCKET = frozenset({"filter", "global", "missing", "nested", "reverse_nested", "sampler"})
_METRIC_TYPES = frozenset({
    "avg", "sum", "min", "max", "value_count", "cardinality", "stats", "extended_stats",
    "percentiles", "percentile_ranks", "median_absolute_deviation", "top_hits",
    "weighted_avg", "geo_bounds", "geo_centroid", "scripted_metric", "boxplot", "t_test",
    "string_stats", "top_metrics", "rate", "matrix_stats",
})


def aggregation_rows(response: Mapping[str, Any], body: Mapping[str, Any], index: Index,
                     max_rows: int) -> SearchTable:
    """Rows from ``response["aggregations"]``: one per innermost bucket.

    A ``terms`` ``by_dept`` holding a ``date_histogram`` ``by_month`` holding an ``avg``
    ``avg_score`` gives columns ``(by_dept, by_month, doc_count, avg_score)``: bucket keys
    outermost first (``key_as_string`` when the search server gives one; the parts of a composite key
    as their own columns), then the innermost ``doc_count``, then metrics. Metrics alone give
    one row. ``after_key`` is not followed.

    ``truncated`` is True when buckets were left out — a ``terms`` with
    ``sum_other_doc_count > 0``, or a composite page filled to its ``size`` — or when there are
    more than ``max_rows`` rows.
    """
    defs = _agg_defs(body)
    walk = _AggWalk(index)
    rows = walk.expand(defs, response.get("aggregations") or {})

    seen: list[str] = []
    for row in rows:
        seen.extend(c for c in row if c not in seen)
    if seen:
        keys = [c for c in walk.key_columns if c in seen]
        middle = ["doc_count"] if "doc_count" in seen else []
        columns = [*keys, *middle, *(c for c in seen if c not in keys and c not in middle)]
    else:
        columns = _guess_columns(defs)

    truncated = walk.truncated or len(rows) > max_rows
    table_rows = [json_safe_row([row.get(c) for c in columns]) for row in rows[:max_rows]]
    return SearchTable(tuple(columns), table_rows, truncated, walk.notes())
