"""Runs checked REST requests: GETs of the paths the sandbox built, below the manifest's
``url``, at most ``max_concurrency`` at a time; the rows of every response concatenated.

Each response's rows are the declared ``rows:`` path (or the first list, or the object
itself), flattened to dotted columns; only the operation's declared fields that are not
``access: deny`` are kept, as only declared columns can be read from a table: a denied or
undeclared field never reaches a result, a prompt or the audit log.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from structq.capabilities.model import Manifest
from structq.safety.query import SafeQuery

from .api_rows import records_of, to_table
from .base import ResultSet
from .http import ApiClient

__all__ = ["OpenapiExecutor"]


class OpenapiExecutor:
    """Runs checked REST requests (``kind: openapi``) on the manifest's ``url``."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.client = ApiClient(manifest)

    def ping(self) -> None:
        """Reach the host (any HTTP answer will do: the API is up)."""
        self.client.reach()

    def fetch(self, query: SafeQuery) -> ResultSet:
        assert query.kind == "openapi" and query.body is not None
        started = time.perf_counter()
        operation = self.manifest.operation(query.body["operation"])
        assert operation is not None and operation.readable  # the sandbox made sure
        requests = query.body["requests"]

        def one(request: dict[str, Any]) -> list[Any]:
            answer = self.client.request("GET", self.client.url(request["path"]), params=_query(request["query"]))
            return records_of(answer, operation.rows, query.source)

        workers = min(self.manifest.limits.max_concurrency, len(requests)) or 1
        if len(requests) == 1:
            pages = [one(requests[0])]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="structq-rest") as pool:
                pages = list(pool.map(one, requests))
        records = [record for page in pages for record in page]
        readable = operation.readable_members()
        columns, rows = to_table(records[: query.limit], readable.__contains__)
        # What ran, without its values (they are the step's params, as a SQL query's are).
        ran = {"operation": operation.name, "path": operation.path, "requests": len(requests)}
        return ResultSet(columns=columns, rows=rows[: query.max_rows], truncated=len(rows) > query.max_rows,
                         elapsed_ms=(time.perf_counter() - started) * 1000, query=ran)

    def close(self) -> None:
        self.client.close()


def _query(values: dict[str, Any]) -> list[tuple[str, str]]:
    """Query parameters as pairs (a list repeats its name); booleans as ``true``/``false``."""
    pairs = []
    for name, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            pairs.append((name, str(item).lower() if isinstance(item, bool) else str(item)))
    return pairs
