"""Sources for callers: what the manifests declare (never a denied column), and a probe
that tells whether a source answers (for ``/readyz``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.capabilities.model import SearchField

__all__ = ["describe_manifest", "probe"]


def _values(values: dict[str, str] | None) -> dict[str, Any]:
    return {"values": values} if values else {}


def _fields(fields: "list[SearchField]", prefix: str = "") -> list[dict[str, Any]]:
    out = []
    for f in fields:
        if f.denied:
            continue
        out.append({"name": prefix + f.name, "type": f.type, "description": f.description, **_values(f.values)})
        out += _fields(f.fields, prefix + f.name + ".")
    return out


def describe_manifest(m: "Manifest") -> dict[str, Any]:
    """One source as JSON: tables and columns (or indices and fields), denied ones omitted."""
    doc: dict[str, Any] = {"source": m.source, "kind": m.kind, "description": m.description,
                           "max_rows": m.limits.max_rows}
    if m.is_search:
        doc["indices"] = [{"name": i.name, "description": i.description,
                           "row_filtered": bool(m.row_filters_for(i.name)), "fields": _fields(i.fields)}
                          for i in m.indices]
    else:
        doc["tables"] = [{"name": t.name, "description": t.description,
                          "row_filtered": bool(m.row_filters_for(t.name)),
                          "columns": [{"name": c.name, "type": c.type, "description": c.description, **_values(c.values)}
                                      for c in t.allowed_columns]}
                         for t in m.tables]
    return doc


def probe(executor: Any, manifest: "Manifest") -> None:
    """Reach the source once: ``SELECT 1`` on SQL, a document count on a search index.

    The probe is the service's own fixed query (it reads no row and no column), so it goes to
    the executor directly rather than through the sandbox.
    """
    from structq.safety.query import SafeQuery

    if not manifest.is_search:
        executor.ping()
        return
    index = manifest.indices[0].name
    executor.run(SafeQuery(source=manifest.source, kind="search", limit=1, max_rows=0, index=index,
                           body={"size": 0}))
