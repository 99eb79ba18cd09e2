"""Runs checked GraphQL queries: one POST of the rewritten document to the source's URL.

The rows are the first list in ``data`` (or the declared ``rows:`` path of the one operation
the query reads), flattened to dotted columns, cut at ``max_rows`` (one more row tells of
truncation). Errors the server reports are an ``ExecutionError`` with its messages; partial
data with errors is not an answer either.
"""

from __future__ import annotations

import time

from structq.capabilities.model import Manifest
from structq.errors import ExecutionError
from structq.safety.query import SafeQuery

from .api_rows import records_of, to_table
from .base import ResultSet
from .http import ApiClient

__all__ = ["GraphqlExecutor"]


class GraphqlExecutor:
    """Runs checked GraphQL documents (``kind: graphql``): one POST each."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.client = ApiClient(manifest)

    def ping(self) -> None:
        self.client.request("POST", self.client.url(""), json_body={"query": "{ __typename }"})

    def fetch(self, query: SafeQuery) -> ResultSet:
        assert query.kind == "graphql" and query.body is not None
        started = time.perf_counter()
        answer = self.client.request("POST", self.client.url(""), json_body=query.body)
        if not isinstance(answer, dict):
            raise ExecutionError(f"source {self.manifest.source!r} did not answer a GraphQL response", source=query.source)
        if answer.get("errors"):
            messages = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in answer["errors"][:3])
            raise ExecutionError(f"source {query.source!r} answered with errors: {messages}", source=query.source,
                                 query=query.body["query"], cause=messages)
        operation = self.manifest.operation(query.index) if query.index else None
        records = records_of(answer.get("data") or {}, f"{query.index}.{operation.rows}" if operation and operation.rows
                             else None, query.source)
        columns, rows = to_table(records[: query.limit])
        truncated = len(rows) > query.max_rows
        return ResultSet(columns=columns, rows=rows[: query.max_rows], truncated=truncated,
                         elapsed_ms=(time.perf_counter() - started) * 1000, query=query.body["query"],
                         params=dict(query.body.get("variables") or {}))  # the document holds no value: they are here

    def close(self) -> None:
        self.client.close()
