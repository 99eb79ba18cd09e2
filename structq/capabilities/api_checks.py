"""The structural rules of an API manifest (``kind: graphql`` / ``openapi``) that pydantic
cannot express: unique names, row filters on declared arguments and parameters, examples
that name declared operations. ``validate.py`` calls them through its per-object tables; each
failure is a ``ManifestError`` at the offending spot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from structq.errors import ManifestError

from .hints import closest, listing
from .loader import Positions

if TYPE_CHECKING:
    from .model import Manifest, RowFilter

__all__ = ["check_api_example_step", "check_api_row_filter", "check_operations"]

Problems = Iterator[ManifestError]

#: GraphQL's built-in scalar types: a field of one of them needs no ``types:`` entry.
GRAPHQL_SCALARS = frozenset({"Int", "Float", "String", "Boolean", "ID"})


def _near(name: str, options: list[str]) -> dict[str, str | None]:
    suggestion = closest(name, options)
    return {"suggestion": suggestion} if suggestion else {"hint": f"declared: {listing(options, near=name) or '(none)'}"}


def _unique(names: list[str], what: str, base: tuple, pos: Positions) -> Problems:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            yield pos.error((*base, i, "name"), f"duplicate {what} {name!r}", hint=f"each {what} is declared once")
        seen.add(name)


def check_operations(m: Manifest, pos: Positions) -> Problems:
    yield from _unique([o.name for o in m.operations], "operation", ("operations",), pos)
    if m.kind == "graphql":
        yield from _unique([t.name for t in m.types], "type", ("types",), pos)
        if not m.schema_file:
            yield pos.error(("kind",), "a graphql source names its saved schema: schema_file: NAME.graphql",
                            hint="structq init --kind graphql writes it beside the manifest")
    elif m.types:
        yield pos.error(("types",), "types: belongs to graphql sources; a REST operation lists its fields:")


def check_api_row_filter(m: Manifest, rf: RowFilter, pos: Positions, here: tuple, filter_columns: bool) -> Problems:
    """GraphQL: ``{field: Query.X, argument, value}``; REST: ``{operation, parameter, value}``;
    the argument or parameter is declared on a declared operation."""
    graphql = m.kind == "graphql"
    keys = ("field", "argument") if graphql else ("operation", "parameter")
    example = ('{field: Query.projects, argument: tenantId, value: ":tenant_id"}' if graphql
               else '{operation: listTickets, parameter: tenant, value: ":tenant_id"}')
    given = {k for k in ("table", "where", "index", "term", "field", "argument", "operation", "parameter", "value")
             if getattr(rf, k) is not None}
    if given != {*keys, "value"}:
        yield pos.error(here, f"a {m.kind} row filter has exactly {keys[0]!r}, {keys[1]!r} and 'value'", hint=example)
        return
    if graphql and not rf.field.startswith("Query."):  # type: ignore[union-attr]
        yield pos.error((*here, "field"), "a graphql row filter names a root query field: Query.NAME", hint=example)
        return
    op = m.operation(rf.target or "")
    if op is None:
        yield pos.error((*here, keys[0]), f"row filter on undeclared operation {rf.target!r}",
                        **_near(rf.target or "", [o.name for o in m.operations]))
        return
    name = rf.argument if graphql else rf.parameter
    declared = [a.name for a in op.arguments] if graphql else [p.name for p in op.parameters]
    if name not in declared:
        yield pos.error((*here, keys[1]), f"row filter on {op.name!r}: it declares no {keys[1]} {name!r}",
                        **_near(name or "", declared))


def check_api_example_step(step: Any, target: Manifest, pos: Positions, here: tuple) -> Problems:
    """A verified example's step on an API source: a GraphQL document, or a declared REST
    operation (the sandbox checks the rest in ``structq check``)."""
    if target.kind == "graphql":
        if not isinstance(step.query, str) or step.operation is not None:
            yield pos.error((*here, "query"), "a graphql step's query is a GraphQL document (text)")
    elif step.operation is None:
        yield pos.error(here, f"a step on REST source {target.source!r} names its operation: and params:")
    elif target.operation(step.operation) is None:
        yield pos.error((*here, "operation"), f"unknown operation {step.operation!r}",
                        **_near(step.operation, [o.name for o in target.operations]))

