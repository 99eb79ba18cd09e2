"""``structq sync --values``: build the value index that schema linking reads.

For every eligible column of a source (``structq.linking.values.eligible_columns``: text, not
a key, not denied, no ``values`` of its own, not on a row-filtered table) read at most N + 1
distinct values; a column with more than N is left out (ids, free text) and named in the
notes. The values go to ``.values/<source>.json`` next to the manifest, with the fingerprint
of the columns and row filters they were read under, written atomically.

Reads go through ``connect``: the executor's read-only, time-limited transactions, one per
column, so a slow column costs its own timeout and not the others'. Denied columns and
row-filtered tables are never read: they are not eligible, and eligibility is decided from the
manifest before any query is written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError
from structq.linking.values import (
    DEFAULT_MAX_DISTINCT,
    FORMAT_VERSION,
    MAX_VALUE_LENGTH,
    eligible_columns,
    values_fingerprint,
    values_path,
)
from structq.sources import per_kind
from structq.sources.graphql import GraphqlKind
from structq.sources.openapi import OpenapiKind
from structq.sources.search import SearchKind
from structq.sources.sql import SqlKind

from .connect import server_index_names, search_client, sql_connection
from .samples import no_values

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["ValuesBuild", "build_values"]


@dataclass
class ValuesBuild:
    """What one source's build wrote and skipped."""

    source: str
    path: Path
    columns: int = 0
    values: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "file": str(self.path), "columns": self.columns, "values": self.values,
                "notes": self.notes}


def _sql_values(manifest: "Manifest", targets: list[tuple[str, str]], limit: int,
                notes: list[str]) -> dict[tuple[str, str], list[Any]]:
    from sqlalchemy import column, select, table
    from sqlalchemy.exc import DBAPIError

    schema = (manifest.sync.schema_ if manifest.sync else None) or manifest.schema_
    found: dict[tuple[str, str], list[Any]] = {}
    with sql_connection(manifest) as source:
        for name, member in targets:
            col = column(member)
            query = select(col).select_from(table(name, schema=schema)).where(col.is_not(None)).distinct().limit(limit + 1)
            try:
                with source.transaction() as connection:
                    found[(name, member)] = [row[0] for row in connection.execute(query)]
            except DBAPIError as err:  # one column's failure (a timeout, a dropped table) skips that column
                if source.timed_out(err):
                    notes.append(f"{name}.{member}: skipped, reading its values took longer than {source.timeout_s:g} s")
                else:
                    cause = str(getattr(err, "orig", err)).splitlines()[0]
                    notes.append(f"{name}.{member}: skipped, the database refused the read ({cause}); "
                                 "`structq sync --check` shows whether the manifest drifted")
    return found


def _search_values(manifest: "Manifest", targets: list[tuple[str, str]], limit: int,
                   notes: list[str]) -> dict[tuple[str, str], list[Any]]:
    server_name = {declared: name for name, declared in server_index_names(manifest).items()}
    found: dict[tuple[str, str], list[Any]] = {}
    with search_client(manifest) as client:
        for name, member in targets:
            body = {"size": 0, "aggs": {"v": {"terms": {"field": member, "size": limit + 1}}}}
            result = client.search(index=server_name.get(name, name), body=body)
            agg = result.get("aggregations", {}).get("v", {})
            values = [b["key"] for b in agg.get("buckets", [])]
            if agg.get("sum_other_doc_count"):
                values += [None] * (limit + 1)
            found[(name, member)] = values
    return found


#: How each kind of source (by its registry name) reads the distinct values of its targets.
_READERS: dict[str, Callable[["Manifest", list[tuple[str, str]], int, list[str]], dict[tuple[str, str], list[Any]]]] = {
    SqlKind.name: _sql_values,
    SearchKind.name: _search_values,
    GraphqlKind.name: no_values,
    OpenapiKind.name: no_values,
}


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_values(manifest: "Manifest", *, max_distinct: int = DEFAULT_MAX_DISTINCT) -> ValuesBuild:
    """Read the eligible columns' distinct values and write ``.values/<source>.json``."""
    path = values_path(manifest)
    if path is None:
        raise ConfigError(f"source {manifest.source!r} was not loaded from a file, so its value index has no place",
                          hint="load the manifests from a folder (structq sync --values -m DIR)")
    build = ValuesBuild(manifest.source, path)
    targets = eligible_columns(manifest)
    reader = per_kind(_READERS, manifest, "value reader")
    found = reader(manifest, targets, max_distinct, build.notes) if targets else {}
    columns = []
    for (name, member), values in found.items():
        if len(values) > max_distinct:
            build.notes.append(f"{name}.{member}: skipped, more than {max_distinct} distinct values")
            continue
        texts = sorted({str(v) for v in values if v is not None and 0 < len(str(v).strip()) and len(str(v)) <= MAX_VALUE_LENGTH})
        if texts:
            columns.append({"table": name, "column": member, "values": texts})
            build.columns += 1
            build.values += len(texts)
    _write(path, {"version": FORMAT_VERSION, "source": manifest.source, "fingerprint": values_fingerprint(manifest),
                  "max_distinct": max_distinct, "built_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  "columns": columns})
    return build
