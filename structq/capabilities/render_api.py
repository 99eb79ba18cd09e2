"""API sources as compact prompt text: each operation on one line with its arguments or
parameters, then the fields it returns (GraphQL: each declared object type once). Denied fields
are left out (the model should not learn their names), operations a plan may not call are not
shown, and an argument a row filter fixes is named as set automatically."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import ApiField, ApiType, Operation

if TYPE_CHECKING:
    from .model import Manifest

__all__ = ["api_language", "render_api"]


def api_language(m: Manifest) -> str:
    """How a step on ``m`` is written, for the source's header line."""
    if m.kind == "graphql":
        return ('GraphQL: a step gives "query" (one query document, fields listed below only) and "variables" '
                '(a value may be "<key.column>")')
    return ('REST: a step gives "operation" (one below) and "params"; a param "<key.column>" sends one request '
            'per value and concatenates the rows')


def _described(text: str, draft: bool) -> str:
    return f" — {text}" if text else (" (undescribed)" if draft else "")


def _field(f: ApiField, max_rows: int | None = None) -> str:
    values = f" values: {', '.join(f.values)}" if f.values else ""
    synonyms = f" (also: {', '.join(f.synonyms)})" if f.synonyms else ""
    page = f"({f.page}: Int [page size, at most {max_rows}])" if f.page and max_rows else ""
    return f"    {f.name}{page} {f.type}{_described(f.description, f.draft)}{synonyms}{values}"


def _schema_words(schema: dict[str, Any]) -> str:
    """``string (open|closed)``, ``integer 1..100``, ``array of string``: a parameter's schema."""
    kind = schema.get("type", "string")
    if kind == "array":
        kind = f"array of {_schema_words(schema.get('items') or {})}"
    words = [str(kind)]
    if "enum" in schema:
        words.append("(" + "|".join(str(v) for v in schema["enum"]) + ")")
    if "format" in schema:
        words.append(f"format {schema['format']}")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        words.append(f"{'' if low is None else low}..{'' if high is None else high}")
    return " ".join(words)


def _fixed(m: Manifest, op: Operation) -> set[str]:
    return {rf.argument or rf.parameter or "" for rf in m.row_filters_for(op.name)}


def _graphql_operation(m: Manifest, op: Operation) -> list[str]:
    fixed = _fixed(m, op)
    arguments = []
    for a in op.arguments:
        note = " [set automatically]" if a.name in fixed else (f" [page size, at most {m.limits.max_rows}]" if a.page else "")
        arguments.append(f"{a.name}: {a.type}{note}")
    signature = f"({', '.join(arguments)})" if arguments else ""
    returns = f": {op.returns}" if op.returns else ""
    return [f"  query field {op.name}{signature}{returns}{_described(op.description, op.draft)}"]


def _graphql_type(m: Manifest, t: ApiType) -> list[str]:
    return [f"  type {t.name}{_described(t.description, t.draft)}",
            *(_field(f, m.limits.max_rows) for f in t.fields if not f.denied)]


def _rest_operation(m: Manifest, op: Operation) -> list[str]:
    fixed = _fixed(m, op)
    lines = [f"  operation {op.name} (GET {op.path}){_described(op.description, op.draft)}"]
    for p in op.parameters:
        if p.name in fixed:
            lines.append(f"    param {p.name}: set automatically (row filter)")
            continue
        flags = " required" if p.required else ""
        flags += f" [page size, at most {m.limits.max_rows}]" if p.page else ""
        lines.append(f"    param {p.name} {_schema_words(p.schema_)}{flags}{_described(p.description, False)}")
    lines += [_field(f) for f in op.readable_members().values()]
    return lines


def render_api(m: Manifest) -> list[str]:
    """The lines of an API source after its header: operations, then (GraphQL) types."""
    lines: list[str] = []
    if m.kind == "graphql":
        for op in m.operations:
            lines += _graphql_operation(m, op)
        for t in m.types:
            lines += _graphql_type(m, t)
        return lines
    for op in m.operations:
        if op.readable:
            lines += _rest_operation(m, op)
    return lines
