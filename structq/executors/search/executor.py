"""Search executors: run checked query-DSL requests on Elasticsearch or OpenSearch.

One implementation, two client flavours (the source kind ``structq.sources.search`` names
which serves which manifest ``kind:``)::

    elasticsearch   ElasticsearchExecutor   the official elasticsearch client
    opensearch      OpenSearchExecutor      opensearch-py

Everything about the DSL — the request actually sent, the one endpoint, errors, hits and
aggregations → rows (``rows/``) — lives in ``SearchExecutor``; a subclass only names
its ``ClientFlavour`` (``clients.py``), which builds the client and reads its
exceptions.

Read-only by construction: the executor only ever calls ``search``, from
``SearchExecutor._call``, the one place that touches the client. No index, update, delete,
bulk, script or ``_sql`` call exists in this module.

Connection URL: ``url`` in the manifest, e.g. ``https://${ES_USER}:${ES_PASSWORD}@es:9200``;
credentials belong in environment variables interpolated by the manifest loader, never in the
file. The URL ``embedded`` starts the in-process search server (``embedded_server.py``) and loads the
manifest's documents; it is always spoken to with the OpenSearch client.

Time: each request is bounded twice — the client's request timeout and the body's
``timeout`` (so the search server stops searching too) — both ``limits.timeout_s``. Counting is
bounded too: ``track_total_hits`` is never ``true`` but at most ``limits.max_count``, so the
search server stops counting there and a count at the bound reads "at least N".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from structq.capabilities.hints import listing
from structq.capabilities.model import Index, Manifest, is_embedded
from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable
from structq.executors.base import ResultSet
from structq.executors.urls import redact_url
from structq.safety.query import SafeQuery

from . import embedded_server
from .clients import (
    ClientFlavour,
    ElasticsearchFlavour,
    Failure,
    OpenSearchFlavour,
    server_error,
)
from .rows import SearchTable, aggregation_rows, count_rows, hit_rows

__all__ = ["SearchExecutor", "ElasticsearchExecutor", "OpenSearchExecutor"]


#: Too many requests, bad gateway, service unavailable, gateway timeout: the search server cannot
#: serve anyone right now — the source's state, not the query's fault (other 5xx stay
#: ExecutionError).
_UNAVAILABLE_STATUSES = frozenset({429, 502, 503, 504})


#: Better advice than "fix the query" for rejections whose fix is known.
_REJECTION_HINTS = {
    "too_many_buckets_exception": "ask for fewer buckets: a wider histogram interval, a range filter on "
                                  "the field, min_doc_count 1, or a smaller size",
}


#: Failures of the connection rather than the query: the error class, what happened (after
#: "<where> "; ``str.format`` fields ``detail``, ``status``, ``timeout_s``) and what to do.
#: One table, so each kind's message and advice read side by side.
_CONNECTION_FAILURES: dict[str, tuple[type[ExecutionError], str, str]] = {
    "unreachable": (SourceUnavailable, "is unreachable ({detail})",
                    "check that the search server is running and that the manifest's url is right"),
    "timeout": (QueryTimeout, "did not answer within {timeout_s:g} s",
                "narrow the query with filters, or raise limits.timeout_s"),
    "auth": (SourceUnavailable, "refused the credentials (HTTP {status}: {detail})",
             "put user:password in the url through ${VAR} interpolation"),
    "wrong_product": (SourceUnavailable, "does not answer as Elasticsearch ({detail})",
                      "an OpenSearch server needs `kind: opensearch` in the manifest"),
}


def _has_aggregations(body: Mapping[str, Any]) -> bool:
    return bool(body.get("aggs") or body.get("aggregations"))


def _bounded_total(asked: Any, bound: int) -> int | bool:
    """``track_total_hits`` as sent: ``false`` stays off; anything else (``true``, a number, a
    count step that did not say) counts exactly up to ``bound`` and no further, so no request
    makes the search server count a huge index to the end."""
    if asked is False:
        return False
    if type(asked) is int and 0 <= asked < bound:
        return asked
    return bound


def _wants_count(body: Mapping[str, Any]) -> bool:
    """``size: 0`` without aggregations asks how many documents match."""
    return body.get("size") == 0 and not _has_aggregations(body)


def _unscored(table: SearchTable, index: Index, body: Mapping[str, Any]) -> SearchTable:
    """Hits of a row-filtered index: the sandbox runs the query in filter context (relevance
    would read other tenants' term statistics), so the search server's score is the same constant
    for every hit. An empty ``_score`` says so, rather than a number that reads as "not
    relevant"; without a sort, a note tells why the hits come in no particular order."""
    at = table.columns.index("_score")
    rows = [(*row[:at], None, *row[at + 1:]) for row in table.rows]
    notes = table.notes
    if rows and not body.get("sort"):
        notes += (f"index {index.name!r} has a row filter: hits are matched, not ranked by relevance "
                  "(_score is empty); sort by a field to order them",)
    return SearchTable(table.columns, rows, table.truncated, notes)


class SearchExecutor:
    """Runs ``SafeQuery(kind="search")`` objects against one search source.

    Rows: hits give ``_id``, ``_score``, the allowed ``_source`` fields in manifest order
    (object sub-fields as dotted columns, nested fields as lists of objects, arrays as lists)
    and ``_highlight`` ({field: joined fragments}) when the request highlights. A body with
    aggregations answers with the aggregation rows even if it also asks for hits; ``size: 0``
    without aggregations answers one ``count`` row, counted up to ``limits.max_count``.
    ``truncated``: more than ``max_rows`` hits came back (the sandbox asks for
    ``max_rows + 1``), an aggregation left buckets out, or a count stopped at its bound.

    The client is created on first use and shared by threads (both clients are thread-safe);
    ``close()`` releases it, and the embedded search server when this executor holds it.
    """

    flavour: ClassVar[ClientFlavour]

    def __init__(self, manifest: Manifest, *,
                 progress: embedded_server.LoadProgress | None = None) -> None:
        if manifest.object_type is not Index:
            raise ConfigError(
                f"source {manifest.source!r} is of kind {manifest.kind!r}, not a search source",
                hint="search executors serve kind: elasticsearch or kind: opensearch",
            )
        self.manifest = manifest
        self._progress = progress
        self._lock = threading.Lock()
        self._client: Any = None
        self._client_flavour: ClientFlavour = self.flavour
        #: The URL the client speaks to: the embedded search server's changes when it restarts.
        self._client_url: str | None = None
        self._holds_server = False

    # -- public ---------------------------------------------------------------------------------

    @property
    def timeout_s(self) -> float:
        return self.manifest.limits.timeout_s

    def connect(self) -> None:
        """Create the client now (starting and loading the embedded search server if the source
        uses it) rather than on the first query — so a CLI can show load progress."""
        self._connection()

    def fetch(self, query: SafeQuery) -> ResultSet:
        """Run ``query``; rows as described on the class. Making the client — which starts
        the embedded search server and loads its indices on first use — is timed apart
        (``startup_ms``), so a step's ``elapsed_ms`` is the search's own time."""
        startup_ms = self._start_up()
        started = time.perf_counter()
        index = self._index_of(query)
        body = self._request_body(query)
        response = self._call(query, body)
        self._check_complete(response, query)
        if _wants_count(body):
            table = count_rows((response.get("hits") or {}).get("total"), body["track_total_hits"])
        else:
            table = self._rows(response, body, index, query.max_rows)
        return ResultSet(
            columns=table.columns,
            rows=table.rows,
            truncated=table.truncated,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            query=body,
            params=dict(query.params),
            notes=table.notes,
            startup_ms=startup_ms,
        )

    def _start_up(self) -> float:
        """Milliseconds spent making the client now (0 when it already existed)."""
        before = self._client
        started = time.perf_counter()
        client, _ = self._connection()
        return 0.0 if client is before else (time.perf_counter() - started) * 1000

    def close(self) -> None:
        """Close the client; give back the embedded search server (stopped when nobody holds it)."""
        with self._lock:
            self._drop_client()

    # -- the request ----------------------------------------------------------------------------

    def _index_of(self, query: SafeQuery) -> Index:
        """The manifest's index for ``query`` — the sandbox checked it; this is a second lock."""
        if query.kind != "search" or query.body is None or not query.index:
            raise ExecutionError(
                f"source {self.manifest.source!r} is a search source; it runs search queries "
                f"with an index and a body, not {query.kind!r} queries",
                source=self.manifest.source, query=str(query),
            )
        if query.source != self.manifest.source:
            raise ExecutionError(
                f"a query checked for source {query.source!r} was sent to "
                f"{self.manifest.source!r}",
                source=self.manifest.source, query=str(query),
            )
        index = self.manifest.index(query.index)
        if index is None:
            raise ExecutionError(
                f"index {query.index!r} is not declared for source {self.manifest.source!r}",
                source=self.manifest.source, query=str(query),
                hint="declared indices: " + listing((i.name for i in self.manifest.indices), near=query.index),
            )
        return index

    def _request_body(self, query: SafeQuery) -> dict[str, Any]:
        """The body as sent: the sandbox's body, with the server-side timeout and the row cap.

        The sandbox already caps ``size`` at ``max_rows + 1``; capping again here means a
        hand-built or buggy query still cannot fetch more, and truncation stays detectable.
        With aggregations ``size`` becomes 0: their rows are the answer, so hits would be
        fetched only to be discarded. A ``size`` that is not an integer (``"5000"``, ``5.5``,
        ``true``) cannot be compared with the cap, so it is refused rather than guessed at.
        """
        body = dict(query.body or {})
        body["timeout"] = f"{max(1, round(self.timeout_s * 1000))}ms"
        size = body.get("size")
        if size is not None and type(size) is not int:
            raise ExecutionError(
                f"the request's size must be a whole number, not {size!r}",
                source=self.manifest.source, query=str(query),
                hint=f'write it as a number, e.g. "size": {min(10, query.limit)}',
            )
        if _has_aggregations(body):
            body["size"] = 0  # the answer is the aggregation rows; hits would be thrown away
        elif size is None or size > query.limit:
            body["size"] = query.limit
        if _wants_count(body) or "track_total_hits" in body:
            asked = body.get("track_total_hits")
            if _wants_count(body) and asked is False:
                asked = True  # a count step's answer is the total: it is always tracked
            body["track_total_hits"] = _bounded_total(asked, self.manifest.limits.max_count)
        return body

    def _call(self, query: SafeQuery, body: dict[str, Any]) -> dict[str, Any]:
        """The only place that talks to the search server, and only to ``search``.

        An embedded search server that refuses the connection has died since the client was made:
        the client is dropped, the search server started (and loaded) again, and the request sent
        once more. A server of the manifest's is never retried: its outage is the answer.
        """
        for attempt in range(2):
            client, flavour = self._connection()
            index = query.index
            if self._holds_server:  # the embedded search server keeps each declared index under its own name
                index = embedded_server.physical_index(self.manifest, query.index)
            try:
                response = client.search(index=index, body=body)
            except Exception as exc:
                failure = flavour.failure(exc)
                if failure is None:
                    raise
                if attempt == 0 and failure.kind == "unreachable" and self._holds_server:
                    self._forget(client)
                    continue
                raise self._error(failure, flavour, query) from exc
            return flavour.response_body(response)
        raise AssertionError("the second attempt returns or raises")

    def _connection(self) -> tuple[Any, ClientFlavour]:
        """The client, made on first use — and made again when the embedded search server it spoke
        to has stopped or restarted on another port since."""
        with self._lock:
            if self._client is not None and self._holds_server and embedded_server.server_url() != self._client_url:
                self._drop_client()
            if self._client is None:
                url, flavour = self._url_and_flavour()
                try:
                    self._client = flavour.connect(url, self.timeout_s)
                except ValueError:
                    self._drop_client()
                    # The client's own message may quote part of the password: leave it out.
                    raise ConfigError(
                        f"source {self.manifest.source!r}: bad url {redact_url(url)!r}",
                        hint="write it as http(s)://[user:password@]host:port, or `embedded`",
                    ) from None
                self._client_flavour, self._client_url = flavour, url
            return self._client, self._client_flavour

    def _forget(self, client: Any) -> None:
        """Drop ``client`` if it is still the current one (another thread may have replaced it)."""
        with self._lock:
            if self._client is client:
                self._drop_client()

    def _drop_client(self) -> None:
        """Close the client and give back the embedded search server; the caller holds the lock."""
        client, self._client, self._client_url = self._client, None, None
        if client is not None:
            self._client_flavour.close(client)
        if self._holds_server:
            self._holds_server = False
            embedded_server.release()

    def _url_and_flavour(self) -> tuple[str, ClientFlavour]:
        if is_embedded(self.manifest.url):
            url = embedded_server.acquire(self.manifest, progress=self._progress)
            self._holds_server = True
            return url, OpenSearchFlavour()
        return self.manifest.url, self.flavour

    # -- the response ---------------------------------------------------------------------------

    def _check_complete(self, response: Mapping[str, Any], query: SafeQuery) -> None:
        """Partial answers are errors: a timed-out search or failed shards would otherwise
        read as a complete (and wrong) result."""
        if response.get("timed_out"):
            raise QueryTimeout(
                f"the search on {query.index!r} ran past {self.timeout_s:g} s and was stopped",
                source=self.manifest.source, query=str(query),
                hint="narrow the query with filters, or aggregate over fewer buckets",
            )
        shards = response.get("_shards") or {}
        if (shards.get("failed") or 0) > 0:
            failures = shards.get("failures") or [{}]
            reason = failures[0].get("reason") if isinstance(failures[0], Mapping) else None
            error_type, text = server_error({"error": reason}) if reason else (None, None)
            raise ExecutionError(
                f"the search on {query.index!r} failed on {shards['failed']} of "
                f"{shards.get('total', '?')} shards"
                + (f": {error_type}: {text}" if text else ""),
                source=self.manifest.source, query=str(query), cause=text,
            )

    def _rows(self, response: Mapping[str, Any], body: Mapping[str, Any], index: Index,
              max_rows: int) -> SearchTable:
        if _has_aggregations(body):
            return aggregation_rows(response, body, index, max_rows)
        table = hit_rows(response, body, index, max_rows)
        return _unscored(table, index, body) if self.manifest.row_filters_for(index.name) else table

    # -- errors ---------------------------------------------------------------------------------

    def _error(self, failure: Failure, flavour: ClientFlavour, query: SafeQuery) -> ExecutionError:
        source = self.manifest.source
        where = f"{flavour.label} source {source!r}"
        if not is_embedded(self.manifest.url):
            where += f" at {redact_url(self.manifest.url)}"
        common: dict[str, Any] = {"source": source, "query": str(query), "cause": failure.reason}
        detail = ": ".join(p for p in (failure.type, failure.reason) if p)

        if failure.kind in _CONNECTION_FAILURES:
            error_class, what, hint = _CONNECTION_FAILURES[failure.kind]
            message = what.format(detail=detail, status=failure.status, timeout_s=self.timeout_s)
            return error_class(f"{where} {message}", **common, hint=hint)
        if failure.kind == "rejected":
            return ExecutionError(
                f"{flavour.label} rejected the query on index {query.index!r} "
                f"(HTTP {failure.status}): {detail}", **common,
                hint=_REJECTION_HINTS.get(failure.type or "",
                                          "fix the query: the search server's reason names the clause or field"),
            )
        if failure.kind == "server" and failure.status in _UNAVAILABLE_STATUSES:
            return SourceUnavailable(
                f"{where} is unavailable (HTTP {failure.status}: "
                f"{detail or 'no reason given'})", **common,
                hint="the search server, or a proxy in front of it, cannot serve requests now; "
                     "try again later",
            )
        if failure.kind == "server":
            status = f"HTTP {failure.status}" if failure.status else "an unreadable answer"
            error = ExecutionError(
                f"{where} failed with {status} ({detail or 'no reason given'})", **common,
                hint="a search server fault, not the query's: try again later",
            )
            error.retryable = False  # rewriting the query would not help
            return error
        return ExecutionError(f"{where}: the request failed ({detail})", **common)


class ElasticsearchExecutor(SearchExecutor):
    """Elasticsearch through the official client."""

    flavour = ElasticsearchFlavour()


class OpenSearchExecutor(SearchExecutor):
    """OpenSearch through opensearch-py; also the executor of ``url: embedded`` sources."""

    flavour = OpenSearchFlavour()
