"""Search responses → rows: the tabular shape every later step (and ``source: local``) reads.

Pure functions over decoded JSON; no client, no I/O. Three shapes of answer:

- **hits** → one row per document: ``_id``, ``_score``, the allowed ``_source`` fields in
  manifest order, then ``_highlight`` when the request asked for highlighting;
- **aggregations** → one row per innermost bucket, the keys of the enclosing buckets as
  columns (see :func:`aggregation_rows`); a body with both hits and aggregations answers with
  the aggregation rows, because a question that aggregates is about the buckets;
- **count** → one row, one column ``count`` (a body with ``size: 0`` and no aggregations),
  counted up to a bound: past it the row says "at least" (:func:`count_rows`).

The manifest, not the engine, decides which fields leave this module: a field the manifest
denies (or does not declare) is dropped even if the engine returned it.

Some aggregations answer with estimates, and a number shown as exact when it is not is worse
than no number: ``Table.notes`` says so for ``terms`` counts with a ``doc_count_error_upper_bound``
above 0, ``cardinality`` values at or above the ``precision_threshold`` (HyperLogLog++ counts
exactly, up to rare hash collisions, only below it) and percentiles (t-digest or HDR sketches).
"""

from __future__ import annotations

import datetime as _dt
import re
import zoneinfo
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from structq.capabilities.model import Index, SearchField
from structq.executors.values import json_safe_row

__all__ = [
    "Table",
    "hit_rows",
    "aggregation_rows",
    "count_rows",
    "HIGHLIGHT_COLUMN",
    "HIGHLIGHT_SEPARATOR",
]

HIGHLIGHT_COLUMN = "_highlight"
#: Joins the fragments highlighted in one field.
HIGHLIGHT_SEPARATOR = " … "

_BUCKET_META = frozenset({
    "key", "key_as_string", "doc_count", "from", "from_as_string", "to", "to_as_string",
    "doc_count_error_upper_bound", "bg_count", "score",
})
_AGG_DEF_META = frozenset({"aggs", "aggregations", "meta"})
_MISSING = object()


@dataclass
class Table:
    """Columns, rows, and whether the engine held more than the rows show."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    #: What about the rows is an estimate (see the module docstring).
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Hits
# ---------------------------------------------------------------------------------------------


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
    # column too; the engine returns only that part of it.
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
             max_rows: int) -> Table:
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
    return Table(tuple(names), rows, truncated)


def count_rows(total: Any, bound: int) -> Table:
    """How many documents matched, as one row, from ``hits.total`` of a request whose
    ``track_total_hits`` was ``bound``.

    At the bound the engine stopped counting (relation ``gte``, or a value at the bound): the
    row holds the bound, ``truncated`` is set and a note says "at least" — a count that stopped
    is never shown as exact.
    """
    total = total if isinstance(total, Mapping) else {"value": total, "relation": "eq"}
    value = total.get("value")
    stopped = total.get("relation") == "gte" or (isinstance(value, int) and value >= bound)
    notes = (f"the count stopped at {value:,} documents (limits.max_count): at least {value:,} match",
             ) if stopped else ()
    return Table(("count",), [json_safe_row([value])], stopped, notes)


# ---------------------------------------------------------------------------------------------
# Aggregations
# ---------------------------------------------------------------------------------------------


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
    """Engines may return percentiles ordered as text ("25.0" before "5.0"); order by number."""
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
    instant) with no ``key_as_string``; show them as the engine would, in the source's
    ``time_zone`` — a ``+08:00`` month starts on the 1st there, the day before in UTC. A key
    the engine already formatted (the source has a ``format``) is kept as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        stamp = _dt.datetime.fromtimestamp(value / 1000, tz=zone)
        text = stamp.isoformat(timespec="milliseconds")
        return text[:-6] + "Z" if text.endswith("+00:00") else text  # as the engines write UTC
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
            f"aggregation {name!r}: the document counts per bucket are estimates (the engine could not "
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
                metrics[name] = _top_hits_documents(result, self.index)
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
                     max_rows: int) -> Table:
    """Rows from ``response["aggregations"]``: one per innermost bucket.

    A ``terms`` ``by_dept`` holding a ``date_histogram`` ``by_month`` holding an ``avg``
    ``avg_score`` gives columns ``(by_dept, by_month, doc_count, avg_score)``: bucket keys
    outermost first (``key_as_string`` when the engine gives one; the parts of a composite key
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
    return Table(tuple(columns), table_rows, truncated, walk.notes())


def _top_hits_documents(result: Any, index: Index) -> list[dict[str, Any]]:
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
