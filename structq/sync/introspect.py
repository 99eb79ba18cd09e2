"""Read what a source really holds into a neutral ``Snapshot``.

SQL sources go through SQLAlchemy's inspector and its ``get_multi_*`` calls, which fetch
a whole schema's columns, keys and comments in a handful of catalog queries (one per kind of
fact) instead of several per table; that is what keeps a 1,000-table schema fast.
Search sources are read from the index mapping; embedded ones from their documents files
(``documents.py``), since their mapping is made from the manifest.

What is in scope: every object the manifest already declares (so a drop is always seen), plus
the objects matching ``sync.include`` (all when empty) and not ``sync.exclude`` (glob patterns),
so new objects are proposed only where people asked for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from structq.capabilities.model import SEARCH_FIELD_TYPES, Column, Index, SearchField, Table

from structq.capabilities.model import is_embedded
from structq.sources import per_kind
from structq.sources.graphql import GraphqlKind
from structq.sources.openapi import OpenapiKind
from structq.sources.search import SearchKind
from structq.sources.sql import SqlKind

from .connect import server_index_names, search_client, sql_connection
from .documents import documents_objects
from .api_introspect import read_graphql, read_openapi
from .snapshot import DbObject, Member, Scope, Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Scope", "introspect", "sql_type", "search_type"]


def _name_pattern(model: type) -> re.Pattern[str]:
    """The ``name`` pattern the manifest model enforces, so sync never writes a name it refuses."""
    pattern = next(m.pattern for m in model.model_fields["name"].metadata if getattr(m, "pattern", None))
    return re.compile(pattern)


#: Names a manifest can declare; others are reported, not added.
_SQL_NAME = _name_pattern(Table)
_COLUMN_NAME = _name_pattern(Column)
_INDEX_NAME = _name_pattern(Index)
_FIELD_NAME = _name_pattern(SearchField)


def introspect(manifest: "Manifest", *, declared_only: bool = False) -> Snapshot:
    """The in-scope objects of ``manifest``'s source. Raises ``SourceUnavailable`` when unreachable."""
    reader = per_kind(_READERS, manifest, "schema reader")
    return reader(manifest, Scope.of(manifest, declared_only=declared_only))


# --- SQL --------------------------------------------------------------------------------


def sql_type(column_type: Any) -> str:
    """The manifest type of a reflected SQLAlchemy type (the order matters: Float is a Numeric)."""
    from sqlalchemy import types as T
    from sqlalchemy.dialects import mysql

    if isinstance(column_type, mysql.TINYINT) and getattr(column_type, "display_width", None) == 1:
        return "boolean"  # MySQL and MariaDB spell BOOLEAN as TINYINT(1)
    for cls, name in _SQL_TYPES(T):
        if isinstance(column_type, cls):
            return name
    if isinstance(column_type, T.NullType):
        return "text"  # SQLite: an undeclared or unknown type; its values are usually text
    return "text"


def _SQL_TYPES(T: Any) -> tuple[tuple[Any, str], ...]:  # noqa: N802 - a table, lazily built
    return (
        (T.Boolean, "boolean"),
        (T.Integer, "integer"),
        (T.Float, "real"),
        (T.Numeric, "numeric"),
        (T.DateTime, "datetime"),
        (T.Date, "date"),
        (T.JSON, "json"),
        (T.ARRAY, "json"),
        ((T.LargeBinary, T.BINARY, T.VARBINARY), "binary"),
    )


def _native(column_type: Any) -> str:
    try:
        return str(column_type)
    except Exception:  # noqa: BLE001 - some reflected types cannot compile without a dialect
        return type(column_type).__name__


def _comment(text: Any) -> str | None:
    return str(text).strip() or None if text else None


def _read_sql(manifest: "Manifest", scope: Scope) -> Snapshot:
    from sqlalchemy import inspect
    from sqlalchemy.engine.reflection import ObjectKind

    with sql_connection(manifest) as source, source.transaction() as connection:
        inspector = inspect(connection)
        views = set(inspector.get_view_names(schema=scope.schema))
        names = [n for n in [*inspector.get_table_names(schema=scope.schema), *sorted(views)] if scope.wants(n)]
        if not names:
            return Snapshot(manifest.source, manifest.kind, ())
        multi = {"schema": scope.schema, "filter_names": names, "kind": ObjectKind.ANY}
        columns = inspector.get_multi_columns(**multi)
        keys = inspector.get_multi_pk_constraint(**multi)
        foreign = inspector.get_multi_foreign_keys(**multi)
        try:
            comments = inspector.get_multi_table_comment(**multi)
        except NotImplementedError:  # SQLite has no comments
            comments = {}
    order = {name: i for i, name in enumerate(names)}
    objects = []
    for (_, table), cols in sorted(columns.items(), key=lambda item: order.get(item[0][1], len(order))):
        key = (scope.schema, table)
        primary = set((keys.get(key) or {}).get("constrained_columns") or [])
        references = _single_column_references(foreign.get(key) or [], scope.schema)
        members = tuple(
            Member(
                name=c["name"],
                type=sql_type(c["type"]),
                native_type=_native(c["type"]),
                comment=_comment(c.get("comment")),
                nullable=bool(c.get("nullable", True)) and c["name"] not in primary,
                primary_key=c["name"] in primary,
                references=references.get(c["name"]),
            )
            for c in cols
        )
        comment = _comment((comments.get(key) or {}).get("text"))
        objects.append(DbObject(table, members, comment, is_view=table in views))
    return Snapshot(manifest.source, manifest.kind, *_declarable(objects, _SQL_NAME, _COLUMN_NAME, scope))


def _declarable(objects: list[DbObject], object_name: re.Pattern[str], member_name: re.Pattern[str],
                scope: Scope, notes: Iterable[str] = ()) -> tuple[tuple[DbObject, ...], tuple[str, ...]]:
    """Leave out new objects and members whose names a manifest cannot declare, saying so."""
    kept, said = [], list(notes)
    for obj in objects:
        if obj.name.lower() not in scope.declared:
            if not object_name.match(obj.name) or not obj.members:
                said.append(f"{obj.name!r} cannot be declared in a manifest (name or no columns); left out")
                continue
        bad = [m.name for m in obj.members if not member_name.match(m.name)]
        if bad:
            said.append(f"{obj.name}: {', '.join(map(repr, bad))} cannot be declared (name); left out")
            obj = DbObject(obj.name, tuple(m for m in obj.members if m.name not in bad), obj.comment, obj.is_view)
        kept.append(obj)
    return tuple(kept), tuple(said)


def _single_column_references(foreign_keys: Iterable[dict[str, Any]], schema: str | None) -> dict[str, str]:
    """``column → table.column`` for single-column foreign keys within the scanned schema."""
    out: dict[str, str] = {}
    for fk in foreign_keys:
        local, remote = fk.get("constrained_columns") or [], fk.get("referred_columns") or []
        if len(local) == 1 and len(remote) == 1 and fk.get("referred_schema") in (None, schema):
            out.setdefault(local[0], f"{fk['referred_table']}.{remote[0]}")
    return out


# --- search -----------------------------------------------------------------------------

#: Mapping types a manifest cannot name, and the declared type that queries them the same way.
_SEARCH_ALIASES = {
    "half_float": "float",
    "unsigned_long": "long",
    "match_only_text": "text",
    "search_as_you_type": "text",
    "constant_keyword": "keyword",
    "wildcard": "keyword",
    "date_nanos": "date",
    "flattened": "object",
}


def search_type(mapping_type: str | None, has_properties: bool = False) -> str | None:
    """The manifest field type of a mapping type; None when manifests cannot declare it."""
    if mapping_type is None:
        return "object" if has_properties else None
    if mapping_type in SEARCH_FIELD_TYPES:
        return mapping_type
    return _SEARCH_ALIASES.get(mapping_type)


def _fields(properties: dict[str, Any], prefix: str, notes: list[str]) -> tuple[Member, ...]:
    members = []
    for name, spec in properties.items():
        sub = spec.get("properties") or {}
        kind = search_type(spec.get("type"), bool(sub))
        if kind is None:
            notes.append(f"field {prefix}{name} has mapping type {spec.get('type')!r}, which a manifest cannot declare; left out")
            continue
        members.append(Member(
            name=name,
            type=kind,
            native_type=str(spec.get("type", "object")),
            comment=_comment((spec.get("meta") or {}).get("description")),
            members=_fields(sub, f"{prefix}{name}.", notes),
        ))
    return tuple(members)


def _read_search(manifest: "Manifest", scope: Scope) -> Snapshot:
    if is_embedded(manifest.url):
        # Its mapping is made from the manifest: the documents files are what it really holds.
        wanted = [index.name for index in manifest.indices if scope.wants(index.name)]
        objects, notes = documents_objects(manifest, wanted)
        return Snapshot(manifest.source, manifest.kind,
                        *_declarable(objects, _INDEX_NAME, _FIELD_NAME, scope, notes), exact_types=True)
    names = server_index_names(manifest)
    with search_client(manifest) as client:
        if scope.declared_only:
            mappings = client.indices.get_mapping(index=",".join(sorted(names)), ignore_unavailable=True)
        else:
            mappings = client.indices.get_mapping()
    mappings = {names.get(server_name, server_name): body for server_name, body in mappings.items()}
    notes: list[str] = []
    objects = []
    for name in sorted(mappings):
        if name.startswith(".") or not scope.wants(name):
            continue  # hidden and system indices are never a manifest's business
        body = mappings[name].get("mappings") or {}
        meta = body.get("_meta") or {}
        fields = _fields(body.get("properties") or {}, f"{name}:", notes)
        objects.append(DbObject(name, fields, _comment(meta.get("description"))))
    return Snapshot(manifest.source, manifest.kind, *_declarable(objects, _INDEX_NAME, _FIELD_NAME, scope, notes))


#: How each kind of source (by its registry name) is read; a new kind registers here.
_READERS: dict[str, Callable[["Manifest", Scope], Snapshot]] = {
    SqlKind.name: _read_sql,
    SearchKind.name: _read_search,
    GraphqlKind.name: read_graphql,
    OpenapiKind.name: read_openapi,
}
