"""``structq init --kind graphql`` / ``--kind openapi``: a first manifest of an API source.

GraphQL: the schema is read by introspection and saved beside the manifest as SDL
(``NAME.graphql``, the file the sandbox validates against offline); the manifest declares
every root query field (an operation, with its arguments; an ``Int`` argument called ``first``,
``limit``… is its page size) and every object and interface type those fields reach, with
their fields. OpenAPI: the spec (a URL or a file, JSON or YAML) is read; every GET operation
is declared with its path and query parameters and their schemas and the fields of one row of
its JSON response; every other method is recorded with ``callable: false``.

Fields whose names, or whose sampled values (``api_samples``: a few rows of each list
operation that needs no argument, through the sandbox and the executor), say they hold secrets
or personal data are written ``access: deny`` with a ``# denied:`` comment, by the same rules
``structq init`` applies to SQL columns (``sensitive.classify``). Everything is ``draft: true``. The URL stays out of the file
(``url: ${NAME_URL}``), shown once by the caller, as for a database. An existing file is never
overwritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import yaml

from structq.capabilities import load_manifest
from structq.errors import ConfigError

from .api_samples import Samples, graphql_samples, openapi_samples
from .seed import seed_head, url_variable
from .sensitive import classify
from .yamledit import scalar

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["PAGE_ARGUMENTS", "ApiInitResult", "graphql_schema", "init_api", "openapi_operations"]

#: Names of an integer argument or parameter that sets a page size (capped at ``max_rows``).
PAGE_ARGUMENTS = frozenset({"first", "last", "limit", "top", "pagesize", "page_size", "per_page", "size", "count"})
_MAX_FIELD_DEPTH = 4


@dataclass(frozen=True)
class Denied:
    """A field init wrote ``access: deny`` (the same shape as sync's ``Denial`` for the CLI)."""

    name: str
    category: str
    reason: str


@dataclass
class ApiInitResult:
    path: Path
    variable: str
    url: str
    kind: str
    operations: int
    fields: int
    not_callable: int = 0
    denials: list[Denied] = field(default_factory=list)
    schema_path: Path | None = None


def flow_map(items: Any) -> str:
    """A YAML flow mapping of ``items`` (pairs), lists and nested mappings included."""
    return "{" + ", ".join(f"{scalar(k)}: {_flow(v)}" for k, v in items) + "}"


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return flow_map(value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return scalar(value)


def _block(items: list[tuple[str, Any]], indent: str = "  ") -> list[str]:
    """A list item as block lines: ``- key: value`` then ``  key: value``."""
    return [f"{indent}{'- ' if i == 0 else '  '}{scalar(k)}: {_flow(v)}" for i, (k, v) in enumerate(items)]


def _field_line(indent: str, name: str, type_: str, description: str, denied: list[Denied], owner: str,
                samples: Samples, extra: list[tuple[str, Any]] | None = None) -> str:
    verdict = classify(name, samples.get(f"{owner}.{name}", ()))
    items: list[tuple[str, Any]] = [("name", name), ("type", type_)]
    if description:
        items.append(("description", description))
    items += extra or []
    if verdict is not None:
        items.append(("access", "deny"))
        denied.append(Denied(f"{owner}.{name}", verdict.kind, verdict.reason))
    items.append(("draft", True))
    line = f"{indent}- {flow_map(items)}"
    return line + (f"  # denied: {verdict.reason}" if verdict else "")


# --- GraphQL ----------------------------------------------------------------------------------

def graphql_schema(url: str, manifest: Manifest | None = None) -> Any:
    """The live schema of a GraphQL endpoint, by introspection (with ``manifest``'s headers)."""
    from graphql import build_client_schema, get_introspection_query

    answer = _post(url, {"query": get_introspection_query(descriptions=True)}, manifest)
    try:
        return build_client_schema(answer["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"the endpoint did not answer the introspection query: {exc}",
                          hint="introspection may be disabled on the server; save its SDL and write the manifest "
                               "by hand") from None


def _client(url: str, manifest: Manifest | None) -> Any:
    from structq.capabilities.model import Manifest
    from structq.executors.http import ApiClient

    base = manifest or Manifest.model_validate({"source": "init", "kind": "openapi", "url": url})
    return ApiClient(base.model_copy(update={"url": url, "limits": base.limits.model_copy(update={"timeout_s": 30.0})}))


def _post(url: str, body: Any, manifest: Manifest | None) -> Any:
    client = _client(url, manifest)
    try:
        return client.request("POST", url, json_body=body)
    finally:
        client.close()


def _page_argument(arguments: Any) -> str | None:
    """The first ``Int`` argument named like a page size (``first``, ``limit``…), if any."""
    from graphql import get_named_type

    return next((name for name, arg in arguments.items()
                 if name.lower() in PAGE_ARGUMENTS and get_named_type(arg.type).name == "Int"), None)


def _graphql_text(source: str, variable: str, schema: Any, schema_file: str, denied: list[Denied],
                  samples: Samples) -> tuple[str, int, int]:
    from graphql import (
        get_named_type,
        get_nullable_type,
        is_interface_type,
        is_list_type,
        is_object_type,
    )

    query = schema.query_type
    if query is None or not query.fields:
        raise ConfigError("the schema has no query fields a manifest can declare")
    lines = seed_head(source, "graphql", variable) + [f"schema_file: {schema_file}", "operations:"]
    reached: list[str] = []

    def reach(type_: Any) -> None:
        named = get_named_type(type_)
        if (is_object_type(named) or is_interface_type(named)) and named.name not in reached:
            reached.append(named.name)
            for f in named.fields.values():
                reach(f.type)

    for name, f in query.fields.items():
        items: list[tuple[str, Any]] = [("name", name), ("returns", str(f.type))]
        if f.description:
            items.append(("description", f.description))
        lines += _block(items)
        if f.args:
            lines.append("    arguments:")
            for arg_name, arg in f.args.items():
                arg_items: list[tuple[str, Any]] = [("name", arg_name), ("type", str(arg.type))]
                if arg_name == _page_argument(f.args):
                    arg_items.append(("page", True))
                lines.append(f"      - {flow_map(arg_items)}")
        lines.append("    draft: true")
        reach(f.type)
    lines.append("types:")
    count = 0
    for type_name in reached:
        type_ = schema.get_type(type_name)
        lines.append(f"  - name: {scalar(type_name)}")
        if type_.description:
            lines.append(f"    description: {scalar(type_.description)}")
        lines.append("    fields:")
        for fname, f in type_.fields.items():
            page = _page_argument(f.args) if is_list_type(get_nullable_type(f.type)) else None
            lines.append(_field_line("      ", fname, str(f.type), f.description or "", denied, type_name, samples,
                                     [("page", page)] if page else []))
            count += 1
        lines.append("    draft: true")
    return "\n".join(lines) + "\n", len(query.fields), count


# --- OpenAPI ----------------------------------------------------------------------------------

def _load_spec(where: str, manifest: Manifest | None = None) -> tuple[dict[str, Any], str | None]:
    """The spec, and the URL it came from (None for a file)."""
    if urlsplit(where).scheme in ("http", "https"):
        client = _client(where, manifest)
        try:
            spec = client.request("GET", where)
        finally:
            client.close()
        origin = where
    else:
        try:
            text, origin = Path(where).read_text(encoding="utf-8"), None
        except OSError as exc:
            raise ConfigError(f"cannot read the OpenAPI description {where}: {exc.strerror}") from None
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"the OpenAPI description is neither JSON nor YAML: {exc}") from None
    if not isinstance(spec, dict) or "paths" not in spec:
        raise ConfigError("the OpenAPI description has no paths:", hint="give the spec itself (openapi.json)")
    return spec, origin


def _base_url(spec: dict[str, Any], origin: str | None) -> str:
    servers = spec.get("servers") or []
    server = servers[0].get("url", "") if servers and isinstance(servers[0], dict) else ""
    if origin is not None:
        base = urljoin(origin, server or "/")
    elif urlsplit(server).scheme in ("http", "https"):
        base = server
    else:
        raise ConfigError("the OpenAPI file names no absolute server URL (servers: - url: https://…)",
                          hint="add servers: to the spec, or read it from the API's own URL")
    return base.rstrip("/")


class _Refs:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def __call__(self, node: Any, seen: frozenset[str] = frozenset()) -> Any:
        """``node`` with a top-level ``$ref`` followed (cycles stop at an empty schema)."""
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen or not ref.startswith("#/"):
                return {}
            seen = seen | {ref}
            target: Any = self.spec
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            node = target
        if isinstance(node, dict) and "anyOf" in node:  # Optional[X] in FastAPI: X or null
            choices = [c for c in node["anyOf"] if self(c).get("type") != "null"]
            if len(choices) == 1:
                merged = {**self(choices[0]), **{k: v for k, v in node.items() if k != "anyOf"}}
                return merged
        return node

    def plain(self, schema: Any, depth: int = 0) -> dict[str, Any]:
        """A parameter's schema with references resolved and only the keys the sandbox checks."""
        schema = self(schema)
        keep = {k: schema[k] for k in ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                        "format", "pattern", "minLength", "maxLength", "maxItems") if k in schema}
        if "items" in schema and depth < 2:
            keep["items"] = self.plain(schema["items"], depth + 1)
        if "type" not in keep:
            keep["type"] = "string"
        return keep


def _response_schema(operation: dict[str, Any], refs: _Refs) -> Any:
    responses = operation.get("responses") or {}
    ok = next((responses[c] for c in ("200", "201", 200, "default") if c in responses), None)
    content = (refs(ok) or {}).get("content") or {} if ok else {}
    media = content.get("application/json") or next(iter(content.values()), {})
    return refs(media.get("schema") or {})


def _row_schema(schema: Any, refs: _Refs) -> tuple[Any, str | None]:
    """The schema of one row, and the ``rows:`` path when the list sits inside an object."""
    schema = refs(schema)
    if schema.get("type") == "array":
        return refs(schema.get("items") or {}), None
    for name, prop in (schema.get("properties") or {}).items():
        prop = refs(prop)
        if prop.get("type") == "array" and refs(prop.get("items") or {}).get("type") in ("object", None):
            return refs(prop.get("items") or {}), name
    return schema, None


def _leaf_fields(schema: Any, refs: _Refs, prefix: str = "", depth: int = 0) -> list[tuple[str, str, str]]:
    """(dotted name, type, description) of each leaf of an object schema."""
    schema = refs(schema)
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = refs(prop)
        path = f"{prefix}{name}"
        if prop.get("type") == "object" or ("properties" in prop and depth < _MAX_FIELD_DEPTH):
            inner = _leaf_fields(prop, refs, path + ".", depth + 1)
            out += inner or [(path, "object", prop.get("description", ""))]
        else:
            out.append((path, str(prop.get("type", "string")), prop.get("description", "")))
    return out


def _operations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every operation of the spec: name, method, path, description, and for a GET its
    parameters (path and query, schemas resolved), ``rows`` path and response fields."""
    refs = _Refs(spec)
    found = []
    for path, item in (spec.get("paths") or {}).items():
        item = refs(item)
        shared = item.get("parameters") or []
        for method, operation in item.items():
            if method not in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
                continue
            name = operation.get("operationId") or f"{method}_{path}"
            entry: dict[str, Any] = {"name": re.sub(r"\W", "_", name), "method": method, "path": path,
                                     "description": operation.get("summary") or operation.get("description") or "",
                                     "parameters": [], "rows": None, "fields": []}
            found.append(entry)
            if method != "get":
                continue
            parameters = [refs(p) for p in [*shared, *(operation.get("parameters") or [])]]
            for p in parameters:
                if p.get("in") not in ("query", "path"):
                    continue
                schema = refs.plain(p.get("schema") or {})
                items: list[tuple[str, Any]] = [("name", p["name"]), ("in", p["in"])]
                if p.get("required") or p["in"] == "path":
                    items.append(("required", True))
                if p.get("description"):
                    items.append(("description", p["description"]))
                items.append(("schema", schema))
                if p["name"].lower() in PAGE_ARGUMENTS and schema.get("type") == "integer":
                    items.append(("page", True))
                entry["parameters"].append(items)
            row, entry["rows"] = _row_schema(_response_schema(operation, refs), refs)
            entry["fields"] = _leaf_fields(row, refs)
    return found


def openapi_operations(where: str, manifest: Manifest | None = None) -> list[dict[str, Any]]:
    """The operations of the OpenAPI description at ``where`` (a URL or a file); with
    ``manifest``, ``where`` may be its ``spec:`` (relative to its ``url`` or its folder)."""
    if manifest is not None and manifest.spec:
        where = _spec_location(manifest)
    return _operations(_load_spec(where, manifest)[0])


def _spec_location(manifest: Manifest) -> str:
    spec = manifest.spec or ""
    if urlsplit(spec).scheme in ("http", "https") or (Path(spec).is_absolute() and Path(spec).exists()):
        return spec
    if spec.startswith("/"):
        return manifest.url.rstrip("/") + spec
    return str(manifest.resolve_path(spec))


def _openapi_text(source: str, variable: str, operations: list[dict[str, Any]], spec: str,
                  denied: list[Denied], samples: Samples) -> tuple[str, int, int, int]:
    lines = seed_head(source, "openapi", variable) + [f"spec: {scalar(spec)}", "operations:"]
    readable = not_callable = count = 0
    for op in operations:
        head: list[tuple[str, Any]] = [("name", op["name"]), ("method", op["method"]), ("path", op["path"])]
        if op["description"]:
            head.append(("description", op["description"]))
        if op["method"] != "get":
            lines += _block([*head, ("callable", False)])
            not_callable += 1
            continue
        readable += 1
        lines += _block(head)
        if op["parameters"]:
            lines.append("    parameters:")
            lines += [f"      - {flow_map(items)}" for items in op["parameters"]]
        if op["rows"]:
            lines.append(f"    rows: {scalar(op['rows'])}")
        if op["fields"]:
            lines.append("    fields:")
            for leaf, type_, text in op["fields"]:
                lines.append(_field_line("      ", leaf, type_, text, denied, op["name"], samples))
                count += 1
        lines.append("    draft: true")
    if not readable:
        raise ConfigError("the OpenAPI description has no GET operation a plan could call")
    return "\n".join(lines) + "\n", readable, count, not_callable


# --- both -------------------------------------------------------------------------------------

def init_api(directory: Path, source: str, url: str, kind: str) -> ApiInitResult:
    """Write ``directory/source.yaml`` (and for GraphQL ``source.graphql``) from the live API
    or its description; never overwrites. The manifest is loaded back before it is kept, so
    what init writes always loads. The draft is then sampled through the sandbox and the
    executor (``api_samples``) and written again with the fields whose values look personal
    or secret denied."""
    path = directory / f"{source}.yaml"
    if path.exists():
        raise ConfigError(f"{path} already exists; init never overwrites a manifest")
    variable = url_variable(source)
    schema_path = None
    if kind == "graphql":
        from graphql import print_schema

        schema = graphql_schema(url)
        schema_path = directory / f"{source}.graphql"
        if schema_path.exists():
            raise ConfigError(f"{schema_path} already exists; init never overwrites a saved schema")

        def draft(denied: list[Denied], samples: Samples) -> tuple[str, int, int, int]:
            return (*_graphql_text(source, variable, schema, schema_path.name, denied, samples), 0)

        base, sdl, sample = url, print_schema(schema) + "\n", graphql_samples
    else:
        spec, origin = _load_spec(url)
        base = _base_url(spec, origin)
        where = url if origin is None else (url[len(base):] if url.startswith(base + "/") else url)
        if origin is None:
            where = str(Path(url).resolve())
        operations_found = _operations(spec)

        def draft(denied: list[Denied], samples: Samples) -> tuple[str, int, int, int]:
            return _openapi_text(source, variable, operations_found, where, denied, samples)

        sdl, sample = None, openapi_samples
    denied: list[Denied] = []
    text, operations, fields, not_callable = draft(denied, {})
    directory.mkdir(parents=True, exist_ok=True)
    if sdl is not None and schema_path is not None:
        schema_path.write_text(sdl, encoding="utf-8")
    with path.open("x", encoding="utf-8") as out:
        out.write(text)
    try:
        manifest = load_manifest(path, env={variable: base})[0]
        samples = sample(manifest)
        if samples:
            by_content: list[Denied] = []
            text = draft(by_content, samples)[0]
            if by_content != denied:
                denied = by_content
                path.write_text(text, encoding="utf-8")
                load_manifest(path, env={variable: base})
    except Exception:
        path.unlink()
        if schema_path is not None:
            schema_path.unlink(missing_ok=True)
        raise
    return ApiInitResult(path, variable, base, kind, operations, fields, not_callable, denied, schema_path)
