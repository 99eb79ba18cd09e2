"""Reading stored values for sync: distinct values per column or field, through ``connect``.

Two readers share the read-only, time-limited sessions of ``connect``: ``distinct_counts``
(each distinct value with how often it occurs, for ``--profile-values``; one transaction per
column, so one slow column costs its own timeout and not the others') and ``samples`` (a few
values from the first rows, for the content check of ``sensitive.py`` and ``describe``; one
read per table). What timed out is named in ``notes`` and left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from structq.sources import per_kind
from structq.sources.graphql import GraphqlKind
from structq.sources.openapi import OpenapiKind
from structq.sources.search import SearchKind
from structq.sources.sql import SqlKind

from .connect import server_index_names, search_client, sql_connection

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Target", "by_object", "distinct_counts", "no_values", "samples", "SAMPLE_ROWS"]

Target = tuple[str, ...]  # (object, member[, sub-member…])


def _schema(manifest: "Manifest") -> str | None:
    return (manifest.sync.schema_ if manifest.sync else None) or manifest.schema_


def _sql_counts(manifest: "Manifest", targets: list[Target], limit: int,
                notes: list[str]) -> dict[Target, list[tuple[Any, int]]]:
    from sqlalchemy import column, func, select, table
    from sqlalchemy.exc import DBAPIError

    found: dict[Target, list[tuple[Any, int]]] = {}
    with sql_connection(manifest) as source:
        for path in targets:
            col = column(path[1])
            query = (select(col, func.count()).select_from(table(path[0], schema=_schema(manifest)))
                     .where(col.is_not(None)).group_by(col).limit(limit + 1))
            try:
                with source.transaction() as connection:
                    found[path] = [(row[0], int(row[1])) for row in connection.execute(query)]
            except DBAPIError as err:
                if not source.timed_out(err):
                    raise
                notes.append(f"{'.'.join(path)}: values not profiled, reading them took longer than {source.timeout_s:g} s")
    return found


def _search_counts(manifest: "Manifest", targets: list[Target], limit: int,
                   notes: list[str]) -> dict[Target, list[tuple[Any, int]]]:
    server_name = {declared: name for name, declared in server_index_names(manifest).items()}
    found: dict[Target, list[tuple[Any, int]]] = {}
    with search_client(manifest) as client:
        for path in targets:
            body = {"size": 0, "aggs": {"v": {"terms": {"field": ".".join(path[1:]), "size": limit + 1}}}}
            result = client.search(index=server_name.get(path[0], path[0]), body=body)
            agg = result.get("aggregations", {}).get("v", {})
            values = [(b["key"], int(b.get("doc_count", 0))) for b in agg.get("buckets", [])]
            if agg.get("sum_other_doc_count"):
                values += [(None, 0)] * (limit + 1)  # more values than the buckets show
            found[path] = values
    return found


def no_values(manifest: Manifest, targets: list[Any], limit: int, notes: list[str]) -> dict[Any, Any]:
    """Values, samples and counts of an API source's fields: none are read (an API has no
    query that lists a field's distinct values; sending one request per field to sample it
    would be traffic nobody asked for). Denials come from the names alone."""
    if targets:
        notes.append(f"source {manifest.source!r}: stored values are not read from an API source")
    return {}


#: How each kind of source (by its registry name) counts distinct values:
#: (manifest, targets, limit, notes) → values.
_COUNTS: dict[str, Callable[["Manifest", list[Target], int, list[str]], dict[Target, list[tuple[Any, int]]]]] = {
    SqlKind.name: _sql_counts,
    SearchKind.name: _search_counts,
    GraphqlKind.name: no_values,
    OpenapiKind.name: no_values,
}


def distinct_counts(manifest: "Manifest", targets: list[Target], limit: int,
                    notes: list[str]) -> dict[Target, list[tuple[Any, int]]]:
    """Up to ``limit + 1`` (value, occurrences) pairs per target (more than ``limit`` means "many")."""
    if not targets:
        return {}
    return per_kind(_COUNTS, manifest, "distinct-value counter")(manifest, targets, limit, notes)


def _pluck(document: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at a dotted path of a ``_source`` document (lists of objects flattened)."""
    if not path:
        return document if isinstance(document, list) else [document]
    if isinstance(document, list):
        return [v for item in document for v in _pluck(item, path)]
    if isinstance(document, dict) and path[0] in document:
        return _pluck(document[path[0]], path[1:])
    return []


def _search_samples(manifest: "Manifest", targets: list[Target], limit: int,
                    notes: list[str]) -> dict[Target, list[Any]]:
    """From documents' ``_source`` (text fields have no terms aggregation)."""
    server_name = {declared: name for name, declared in server_index_names(manifest).items()}
    found: dict[Target, list[Any]] = {}
    with search_client(manifest) as client:
        for index, paths in by_object(targets).items():
            body = {"size": max(limit * 5, 50), "_source": sorted({".".join(p[1:]) for p in paths})}
            hits = client.search(index=server_name.get(index, index), body=body).get("hits", {}).get("hits", [])
            for path in paths:
                seen = [v for hit in hits for v in _pluck(hit.get("_source") or {}, path[1:]) if v is not None]
                found[path] = list(dict.fromkeys(map(str, seen)))[:limit]
    return found


def by_object(targets: list[Target]) -> dict[str, list[Target]]:
    """Targets grouped by their table or index, in first-seen order."""
    grouped: dict[str, list[Target]] = {}
    for path in targets:
        grouped.setdefault(path[0], []).append(path)
    return grouped


#: Rows read per table for samples: one query per table, however many columns it has.
SAMPLE_ROWS = 200


def _sql_samples(manifest: "Manifest", targets: list[Target], limit: int, notes: list[str]) -> dict[Target, list[Any]]:
    """The first ``SAMPLE_ROWS`` rows' non-null values, per column: one read per table, so a
    first sync of a 1,000-table schema costs 1,000 small reads, not one per column."""
    from sqlalchemy import column, select, table
    from sqlalchemy.exc import DBAPIError

    found: dict[Target, list[Any]] = {}
    with sql_connection(manifest) as source:
        for name, paths in by_object(targets).items():
            query = select(*(column(p[1]) for p in paths)).select_from(table(name, schema=_schema(manifest))) \
                .limit(SAMPLE_ROWS)
            try:
                with source.transaction() as connection:
                    rows = connection.execute(query).all()
            except DBAPIError as err:
                if not source.timed_out(err):
                    raise
                notes.append(f"{name}: not checked for secrets, reading it took longer than {source.timeout_s:g} s")
                continue
            for i, path in enumerate(paths):
                found[path] = list(dict.fromkeys(row[i] for row in rows if row[i] is not None))[:limit]
    return found


def samples(manifest: "Manifest", targets: list[Target], limit: int, notes: list[str]) -> dict[Target, list[Any]]:
    """Up to ``limit`` distinct stored values per target; never written anywhere by sync."""
    if not targets:
        return {}
    return per_kind(_SAMPLES, manifest, "sample reader")(manifest, targets, limit, notes)


#: How each kind of source (by its registry name) samples stored values.
_SAMPLES: dict[str, Callable[["Manifest", list[Target], int, list[str]], dict[Target, list[Any]]]] = {
    SqlKind.name: _sql_samples,
    SearchKind.name: _search_samples,
    GraphqlKind.name: no_values,
    OpenapiKind.name: no_values,
}
