"""Thin adapters over the two search client libraries.

The executor (``executor.py``) holds all DSL handling; a flavour only knows how to build its
library's client and how to read that library's exceptions. Both clients expose the same
``search(index=…, body=…)`` call, which the executor makes
itself, in one place.

Libraries are imported when a client is first built, so importing structq stays fast and a
missing optional package becomes a ``ConfigError`` with the exact ``pip install``.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, ClassVar, Literal

from structq.errors import ConfigError

__all__ = ["Failure", "ClientFlavour", "ElasticsearchFlavour", "OpenSearchFlavour",
           "MAX_RETRIES"]

#: One retry of a failed request (a dropped keep-alive connection, a 502 from a proxy); more
#: would multiply the wait before a dead source is reported.
MAX_RETRIES = 1

#: The retry options both libraries' clients take under the same names: one place for the
#: policy, so the two flavours cannot drift apart. A timed-out request is not retried (it
#: would double the wait for a query that is too slow anyway).
_RETRY_OPTIONS: dict[str, Any] = {"max_retries": MAX_RETRIES, "retry_on_timeout": False}

FailureKind = Literal["unreachable", "timeout", "auth", "wrong_product", "rejected", "server",
                      "unknown"]


@dataclass(frozen=True)
class Failure:
    """A client exception read into library-neutral terms."""

    kind: FailureKind
    status: int | None = None
    #: The search server's ``error.type`` (``parsing_exception``…) or the exception class name.
    type: str | None = None
    #: The search server's ``error.reason`` (root cause first), or the exception's text.
    reason: str | None = None


def server_error(body: Any) -> tuple[str | None, str | None]:
    """(type, reason) from a search server error body, preferring the root cause.

    ``search_phase_execution_exception`` / ``all shards failed`` says little; the root cause
    (or a shard failure's reason) names the field or clause that is wrong.
    """
    if not isinstance(body, dict):
        return None, (str(body) if body else None)
    error = body.get("error", body)
    if isinstance(error, str):
        return None, error
    if not isinstance(error, dict):
        return None, None
    candidates: list[dict[str, Any]] = []
    candidates.extend(c for c in error.get("root_cause") or [] if isinstance(c, dict))
    for failure in error.get("failed_shards") or []:
        if isinstance(failure, dict) and isinstance(failure.get("reason"), dict):
            candidates.append(failure["reason"])
    caused_by = error.get("caused_by")
    while isinstance(caused_by, dict):
        candidates.append(caused_by)
        caused_by = caused_by.get("caused_by")
    candidates.append(error)
    for candidate in candidates:
        reason = candidate.get("reason")
        if reason and reason != "all shards failed":
            return candidate.get("type"), str(reason)
    return error.get("type"), error.get("reason")


#: Search server errors that are the query's fault whatever the HTTP status says: OpenSearch answers
#: too many buckets with 503, which would otherwise read as "source unavailable".
QUERY_FAULTS = frozenset({"too_many_buckets_exception"})


def _error_types(body: Any) -> set[str]:
    """Every ``type`` named anywhere in a search server error body (causes, shard failures)."""
    if isinstance(body, dict):
        found = {body["type"]} if isinstance(body.get("type"), str) else set()
        return found.union(*(_error_types(v) for v in body.values()))
    if isinstance(body, list):
        return set().union(*(_error_types(v) for v in body))
    return set()


def api_failure(status: int | None, body: Any, fallback: str) -> Failure:
    """The failure a search server's error answer stands for: by its status, unless the body names
    an error that is the query's fault (then ``rejected``, so the planner can fix it)."""
    error_type, reason = server_error(body)
    fault = sorted(QUERY_FAULTS & _error_types(body))
    if fault:
        return Failure("rejected", status, fault[0], reason or fallback)
    return Failure(_kind_for_status(status), status, error_type, reason or fallback)


def _kind_for_status(status: int | None) -> FailureKind:
    if status in (401, 403):
        return "auth"
    if status == 429:  # too many requests: the search server is busy, the query is not at fault
        return "server"
    if status is not None and 400 <= status < 500:
        return "rejected"
    if status is not None and status >= 500:
        return "server"
    return "unknown"


def _pool_size() -> int:
    """Connections a client keeps to its cluster: one per ``Engine`` thread that may search at
    once (``STRUCTQ_THREADS``). opensearch-py's default keeps one: under concurrent questions
    each other connection was opened, used once and thrown away ("Connection pool is full")."""
    from structq.config import threads_from_env

    return max(1, threads_from_env())


class ClientFlavour(abc.ABC):
    """How to build one library's client and read its exceptions."""

    #: For messages: "Elasticsearch".
    label: ClassVar[str]
    #: The module to import and the ``pip install`` that provides it.
    module: ClassVar[str]
    install: ClassVar[str]

    def import_library(self) -> ModuleType:
        try:
            return importlib.import_module(self.module)
        except ImportError:
            raise ConfigError(
                f"the {self.label} client library ({self.module}) is not installed",
                hint=f"pip install {self.install}",
            ) from None

    @abc.abstractmethod
    def connect(self, url: str, timeout_s: float) -> Any:
        """A client for ``url`` (credentials may sit in the URL), timing out after
        ``timeout_s`` per request and retrying at most ``MAX_RETRIES`` times."""

    @abc.abstractmethod
    def failure(self, exc: BaseException) -> Failure | None:
        """``exc`` in neutral terms, or None when it is not this library's exception."""

    def response_body(self, response: Any) -> dict[str, Any]:
        """The decoded JSON of a successful response."""
        return dict(response)

    def close(self, client: Any) -> None:
        client.close()


class ElasticsearchFlavour(ClientFlavour):
    """The official ``elasticsearch`` client (8.x / 9.x)."""

    label = "Elasticsearch"
    module = "elasticsearch"
    install = '"elasticsearch>=8"'

    def connect(self, url: str, timeout_s: float) -> Any:
        es = self.import_library()
        return es.Elasticsearch(url, request_timeout=timeout_s, connections_per_node=_pool_size(), **_RETRY_OPTIONS)

    def failure(self, exc: BaseException) -> Failure | None:
        import elastic_transport
        import elasticsearch

        if isinstance(exc, elasticsearch.UnsupportedProductError):
            return Failure("wrong_product", type="unsupported_product", reason=str(exc))
        if isinstance(exc, elasticsearch.ApiError):
            status = getattr(exc.meta, "status", None)
            if status == 406:  # OpenSearch refuses the client's compatible-with media type
                error_type, reason = server_error(exc.body)
                return Failure("wrong_product", status, error_type, reason or str(exc))
            return api_failure(status, exc.body, str(exc))
        if isinstance(exc, elastic_transport.ConnectionTimeout):
            return Failure("timeout", type=type(exc).__name__, reason=str(exc))
        if isinstance(exc, (elastic_transport.ConnectionError, elastic_transport.TlsError)):
            return Failure("unreachable", type=type(exc).__name__, reason=str(exc))
        if isinstance(exc, elastic_transport.SerializationError):
            return Failure("server", type="serialization_error", reason=str(exc))
        if isinstance(exc, elastic_transport.TransportError):
            return Failure("unknown", type=type(exc).__name__, reason=str(exc))
        return None

    def response_body(self, response: Any) -> dict[str, Any]:
        return dict(response.body)


class OpenSearchFlavour(ClientFlavour):
    """``opensearch-py`` (also what the embedded search server speaks)."""

    label = "OpenSearch"
    module = "opensearchpy"
    install = '"structq[opensearch]"'

    def connect(self, url: str, timeout_s: float) -> Any:
        opensearchpy = self.import_library()
        return opensearchpy.OpenSearch(hosts=[url], timeout=timeout_s, pool_maxsize=_pool_size(), **_RETRY_OPTIONS)

    def failure(self, exc: BaseException) -> Failure | None:
        import opensearchpy

        if isinstance(exc, opensearchpy.ConnectionTimeout):
            return Failure("timeout", type=type(exc).__name__, reason=str(exc.info or exc))
        if isinstance(exc, opensearchpy.ConnectionError):  # SSLError included
            return Failure("unreachable", type=type(exc).__name__, reason=str(exc.info or exc))
        if isinstance(exc, opensearchpy.TransportError):
            status = exc.status_code if isinstance(exc.status_code, int) else None
            failure = api_failure(status, exc.info, str(exc.error))
            return failure if failure.type else replace(failure, type=str(exc.error))
        if isinstance(exc, opensearchpy.SerializationError):
            return Failure("server", type="serialization_error", reason=str(exc))
        return None
