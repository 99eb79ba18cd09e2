"""What the embedded search server holds: each manifest index's mapping, and its documents loaded.

The mapping is built from the manifest's field types (``dynamic: false``, so nothing undeclared
is searchable); the documents come from the JSON-lines file named by the index's
``documents:``, one object a line, an ``_id`` key becoming the document id. Loading is the
only write path in structq, and it writes to the private embedded search server only. ``embedded_server.py``
runs the search server; this module only speaks to a client it is given.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, SourceUnavailable

if TYPE_CHECKING:
    from structq.capabilities.model import Index, Manifest, SearchField

__all__ = ["LoadProgress", "documents_path", "existing_documents", "index_body", "index_mapping", "load_index",
           "physical_index", "read_documents"]

#: ``progress(index, loaded, total)``: documents of ``index`` loaded so far, out of ``total``.
LoadProgress = Callable[[str, int, int], None]

#: Documents per bulk request. The search server's cost is mostly per request: the demo's 11,830
#: reports load in about 3.6 s at 5,000 a request, 14 s at 2,000.
_BATCH = 5000
# A step may pass up to ``max_intermediate_rows`` (≤ 10,000,000) rows on, fetched with
# ``size = rows + 1``; the search server's default window stops ``from + size`` at 10,000.
_MAX_RESULT_WINDOW = 10_000_001


# ---------------------------------------------------------------------------------------------
# Mapping
# ---------------------------------------------------------------------------------------------


def _field_mapping(field: SearchField) -> dict[str, Any]:
    if field.type in ("object", "nested"):
        spec: dict[str, Any] = {"type": field.type}
        if field.fields:
            spec["properties"] = _properties(field.fields)
        return spec
    if field.type == "scaled_float":  # no factor to scale by: keep the values (module docstring)
        return {"type": "double"}
    # text uses the default (standard) analyzer, which splits CJK text per character, so a
    # match on 星火 finds 星火项目 as it would on a stock Elasticsearch.
    return {"type": field.type}


def _properties(fields: list[SearchField]) -> dict[str, Any]:
    """Mapping properties; a dotted name (``author.name``) becomes object properties."""
    properties: dict[str, Any] = {}
    for field in fields:
        *parents, leaf = field.name.split(".")
        target = properties
        for part in parents:
            holder = target.setdefault(part, {"type": "object"})
            target = holder.setdefault("properties", {})
        existing = target.get(leaf)
        spec = _field_mapping(field)
        if existing and "properties" in existing and "properties" in spec:
            spec["properties"] = {**existing["properties"], **spec["properties"]}
        target[leaf] = spec
    return properties


def index_mapping(index: Index) -> dict[str, Any]:
    """The OpenSearch mapping for a manifest index.

    ``dynamic: false``: fields the manifest does not declare stay in ``_source`` but are not
    indexed, so nothing undeclared is searchable — the manifest is the whole map.
    """
    return {"dynamic": False, "properties": _properties(index.fields)}


def index_body(index: Index) -> dict[str, Any]:
    """The create-index request for a manifest index: its mapping, and a result window wide
    enough for the largest row cap a manifest allows."""
    return {"settings": {"index": {"max_result_window": _MAX_RESULT_WINDOW}},
            "mappings": index_mapping(index)}


# ---------------------------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------------------------


def documents_path(manifest: Manifest, index: Index) -> Path | None:
    """The absolute documents file of ``index``, or None when it declares none."""
    return manifest.resolve_path(index.documents).resolve() if index.documents else None


def physical_index(manifest: Manifest, name: str) -> str:
    """The server-side name of declared index ``name``: one per documents file."""
    index = manifest.index(name)
    path = documents_path(manifest, index) if index is not None else None
    if path is None:
        return name
    return f"{name}--{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"


def existing_documents(manifest: Manifest, index: Index) -> Path | None:
    """``documents_path``, which must exist when declared (``SourceUnavailable`` otherwise)."""
    path = documents_path(manifest, index)
    if path is not None and not path.is_file():
        raise SourceUnavailable(
            f"documents for embedded index {index.name!r} of source {manifest.source!r} "
            f"not found: {path}",
            source=manifest.source,
            hint="run `structq demo` to build the demo data, or fix `documents:` in the "
                 "manifest",
        )
    return path


def _count_documents(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def read_documents(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, document) for each non-blank line; a bad line is a ``ConfigError``."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                document = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{path}:{number}: not a JSON document ({exc})",
                                  hint="each line of a documents file is one JSON object") from None
            if not isinstance(document, dict):
                raise ConfigError(f"{path}:{number}: expected a JSON object, got "
                                  f"{type(document).__name__}")
            yield number, document


def _bulk_lines(index: str, batch: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for _, document in batch:
        action: dict[str, Any] = {"_index": index}
        if "_id" in document:
            document = dict(document)
            action["_id"] = str(document.pop("_id"))
        lines.extend(({"index": action}, document))
    return lines


def load_index(client: Any, manifest: Manifest, index: Index,
               progress: LoadProgress | None = None) -> int:
    """Create ``index`` in the search server ``client`` speaks to and fill it from its documents file;
    the number of documents loaded. A failed load leaves no half-filled index behind."""
    path = existing_documents(manifest, index)
    name = physical_index(manifest, index.name)
    client.indices.create(index=name, body=index_body(index))
    try:
        loaded = _bulk_load(client, name, path, progress, label=index.name) if path else 0
        client.indices.refresh(index=name)
    except BaseException:
        client.indices.delete(index=name, ignore_unavailable=True)
        raise
    return loaded


def _bulk_load(client: Any, name: str, path: Path, progress: LoadProgress | None, *,
               label: str) -> int:
    total = _count_documents(path)
    loaded = 0
    if progress:
        progress(label, loaded, total)
    documents = read_documents(path)
    while batch := list(itertools.islice(documents, _BATCH)):
        response = client.bulk(body=_bulk_lines(name, batch))
        if response.get("errors"):
            _raise_rejected(name, path, batch, response)
        loaded += len(batch)
        if progress:
            progress(label, loaded, total)
    return loaded


def _raise_rejected(name: str, path: Path, batch: list[tuple[int, dict[str, Any]]],
                    response: dict[str, Any]) -> None:
    """Name the first document the search server refused, with its line and the search server's reason."""
    for (number, _), item in zip(batch, response.get("items", [])):
        result = next(iter(item.values()), {}) if isinstance(item, dict) else {}
        error = result.get("error")
        if error:
            reason = error.get("reason") if isinstance(error, dict) else str(error)
            raise ConfigError(
                f"{path}:{number}: the embedded search server refused this document for index "
                f"{name!r}: {reason}",
                hint="make the document match the field types declared in the manifest",
            )
    raise ConfigError(f"{path}: the embedded search server refused documents for index {name!r}")
