"""What an API source offers now, in sync's neutral shape (``Snapshot``), for ``structq sync
--check`` and ``structq check --connect`` on ``kind: graphql`` / ``openapi`` manifests.

Objects are the operations: a GraphQL root query field (no members: its rows are the types
under ``types:``), a REST operation with its response fields as members (dotted paths). A
GraphQL schema that differs from the saved ``schema_file`` is said in the notes, naming the
types whose fields changed: the sandbox validates against the saved file, so it must be
brought up to date (``structq init`` into another folder writes the live one).

The live description is read the way ``structq init`` reads it (``api_init``), so a manifest
init just wrote is in sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .snapshot import DbObject, Member, Scope, Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["read_graphql", "read_openapi"]


def read_graphql(manifest: Manifest, scope: Scope) -> Snapshot:
    from graphql import build_schema, print_schema

    from .api_init import graphql_schema

    live = graphql_schema(manifest.url, manifest)
    query = live.query_type
    objects = tuple(DbObject(name, (), field.description) for name, field in (query.fields if query else {}).items()
                    if scope.wants(name))
    notes: list[str] = []
    if manifest.schema_file:
        path = manifest.resolve_path(manifest.schema_file)
        try:
            saved = build_schema(path.read_text(encoding="utf-8"))
        except OSError:
            notes.append(f"the saved schema {path} is missing")
        else:
            changed = _changed_types(saved, live)
            if changed or print_schema(saved) != print_schema(live):
                notes.append(f"the live schema differs from the saved {path.name}"
                             + (f" (types {', '.join(changed)})" if changed else "")
                             + ": queries are validated against the saved one; save the live one there")
    return Snapshot(manifest.source, manifest.kind, objects, tuple(notes))


def _changed_types(saved: Any, live: Any) -> list[str]:
    def fields(schema: Any) -> dict[str, dict[str, str]]:
        return {name: {f: str(d.type) for f, d in getattr(t, "fields", {}).items()}
                for name, t in schema.type_map.items() if not name.startswith("__")}

    before, after = fields(saved), fields(live)
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def read_openapi(manifest: Manifest, scope: Scope) -> Snapshot:
    from .api_init import openapi_operations

    objects = []
    for operation in openapi_operations(manifest.url, manifest):
        if not scope.wants(operation["name"]):
            continue
        members = tuple(Member(name, type_, comment=text or None) for name, type_, text in operation["fields"])
        objects.append(DbObject(operation["name"], members, operation.get("description") or None))
    return Snapshot(manifest.source, manifest.kind, tuple(objects))
