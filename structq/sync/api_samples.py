"""A few sampled values of an API source's fields, for ``structq init`` to judge by content.

A field's name may say nothing (``contact``) while its values are email addresses; SQL init
samples stored values for that reason (``sensitive.by_content``), and API init does the same
through the path any plan takes: the draft manifest is loaded, each sampling query goes through
the sandbox (``check_graphql`` / ``check_rest``) and the source's executor, under tight limits.

Only operations that need nothing to run are sampled: a GraphQL root field that returns a list
and has no required argument, a REST GET (``readable``) with no required or path parameter;
never one a row filter covers (a person scoped it to a caller). GraphQL asks for the leaf
fields of the returned type only (no nested lists), with the page argument, if declared, set
by the sandbox to the sample size. A sample that fails (refused, timed out, an error from the
server) is skipped: the names still decide. The values are only classified, never written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from structq.capabilities.model import Manifest
from structq.errors import StructqError
from structq.safety.query import SafeQuery

__all__ = ["SAMPLE_ROWS", "graphql_samples", "openapi_samples"]

#: Rows one sampling request asks for.
SAMPLE_ROWS = 5
#: Seconds one sampling request may take, and the bytes its answer may have.
SAMPLE_TIMEOUT_S = 5.0
SAMPLE_BYTES = 1_000_000

Samples = dict[str, list[Any]]


def _bounded(manifest: Manifest) -> Manifest:
    limits = manifest.limits.model_copy(update={
        "max_rows": SAMPLE_ROWS, "timeout_s": SAMPLE_TIMEOUT_S, "max_requests": 1, "max_concurrency": 1,
        "max_response_bytes": SAMPLE_BYTES})
    return manifest.model_copy(update={"limits": limits})


def _sampled(executor: Any, queries: Iterator[tuple[str, Callable[[], SafeQuery]]]) -> Samples:
    """Each checked query fetched, its values kept by ``owner.column``; a query the sandbox
    refuses or the source fails is skipped. The executor is closed at the end."""
    samples: Samples = {}
    try:
        for owner, check in queries:
            try:
                result = executor.fetch(check())
            except StructqError:
                continue
            for i, column in enumerate(result.columns):
                if values := [row[i] for row in result.rows if row[i] is not None]:
                    samples[f"{owner}.{column}"] = values
    finally:
        executor.close()
    return samples


def graphql_samples(manifest: Manifest) -> Samples:
    """Sampled values by ``Type.field`` for the leaf fields of every list-returning root
    field a plan could call with no argument."""
    from graphql import get_named_type, get_nullable_type, is_leaf_type, is_list_type

    from structq.executors.graphql import GraphqlExecutor
    from structq.safety.graphql import check_graphql, saved_schema

    source = _bounded(manifest)
    schema = saved_schema(source)

    def queries() -> Iterator[tuple[str, Callable[[], SafeQuery]]]:
        query_type = schema.query_type
        for operation in source.operations if query_type is not None else ():
            root = query_type.fields.get(operation.name)
            if root is None or not is_list_type(get_nullable_type(root.type)) or source.row_filters_for(operation.name) \
                    or any(a.required for a in operation.arguments):
                continue
            returned = get_named_type(root.type)
            declared = source.api_type(returned.name)
            if declared is None or not hasattr(returned, "fields"):
                continue
            leaves = [f.name for f in declared.fields if not f.denied and f.name in returned.fields
                      and is_leaf_type(get_named_type(returned.fields[f.name].type))]
            if leaves:
                text = f"query {{ {operation.name} {{ {' '.join(leaves)} }} }}"
                yield returned.name, partial(check_graphql, text, source, max_rows=SAMPLE_ROWS)

    return _sampled(GraphqlExecutor(source), queries())


def openapi_samples(manifest: Manifest) -> Samples:
    """Sampled values by ``operation.field`` for every GET operation a plan could call with
    no parameter."""
    from structq.executors.openapi import OpenapiExecutor
    from structq.safety.rest import check_rest

    source = _bounded(manifest)
    return _sampled(OpenapiExecutor(source), (
        (operation.name, partial(check_rest, operation.name, source, values={}, max_rows=SAMPLE_ROWS))
        for operation in source.operations
        if operation.readable and not source.row_filters_for(operation.name)
        and not any(p.required or p.in_ == "path" for p in operation.parameters)))
