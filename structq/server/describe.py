"""Sources for callers: what the manifests declare (never a denied column), and a probe
that tells whether a source answers (for ``/readyz``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["describe_manifest", "probe"]


def _values(values: dict[str, str] | None) -> dict[str, Any]:
    return {"values": values} if values else {}


def describe_manifest(m: "Manifest") -> dict[str, Any]:
    """One source as JSON: tables and columns (or indices and fields, by dotted path), denied
    ones (and what lies under a denied field) omitted; the keys are the manifest's own."""
    doc: dict[str, Any] = {"source": m.source, "kind": m.kind, "description": m.description,
                           "max_rows": m.limits.max_rows}
    doc[m.object_type.plural] = [
        {"name": o.name, "description": o.description, "row_filtered": bool(m.row_filters_for(o.name)),
         o.member_plural: [{"name": path, "type": f.type, "description": f.description, **_values(f.values)}
                           for path, f in o.readable_members().items()]}
        for o in m.objects]
    return doc


def probe(executor: Any, manifest: "Manifest") -> None:
    """Reach the source once: ``SELECT 1`` on SQL, a document count on a search index.

    The probe is the service's own fixed query (it reads no row and no column), so it goes to
    the executor directly rather than through the sandbox.
    """
    from structq.sources import kind_of

    kind_of(manifest).probe(executor, manifest)
