"""Opening a source for sync: read-only, fail fast, and one error for "cannot reach it".

Sync only reads catalogs (and, with ``--profile-values``, distinct values), so every
connection it opens is as read-only as the engine allows. A SQLite file is opened with
``mode=ro``: without it, a mistyped path would silently create an empty database and the
next sync would report every table as dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, SourceUnavailable

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from structq.capabilities import Manifest

__all__ = ["sql_connection", "search_client", "CONNECT_TIMEOUT_S"]

#: Seconds to wait for a source to answer before calling it unavailable.
CONNECT_TIMEOUT_S = 10

#: Driver options that bound the connect time, by SQLAlchemy backend name.
_CONNECT_ARGS: dict[str, dict[str, Any]] = {
    "postgresql": {"connect_timeout": CONNECT_TIMEOUT_S},
    "mysql": {"connect_timeout": CONNECT_TIMEOUT_S},
    "mariadb": {"connect_timeout": CONNECT_TIMEOUT_S},
    "sqlite": {"timeout": CONNECT_TIMEOUT_S},
}


def readonly_url(url: str) -> Any:
    """The SQLAlchemy URL to open for reading; SQLite files become ``file:…?mode=ro&uri=true``."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises ArgumentError and ValueError
        raise ConfigError(f"not a database URL: {url!r} ({exc})",
                          hint="write it as dialect+driver://user@host:port/database") from None
    database = parsed.database
    if parsed.get_backend_name() == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
        parsed = parsed.set(database=f"file:{database}", query={**parsed.query, "mode": "ro", "uri": "true"})
    return parsed


def _safe(url: Any) -> str:
    return url.render_as_string(hide_password=True)


@contextmanager
def sql_connection(manifest: "Manifest") -> Iterator["Connection"]:
    """A connection to ``manifest``'s database; ``SourceUnavailable`` when it cannot be opened."""
    from sqlalchemy import create_engine, exc

    url = readonly_url(manifest.url)
    try:
        engine = create_engine(url, connect_args=_CONNECT_ARGS.get(url.get_backend_name(), {}))
    except (ImportError, exc.NoSuchModuleError) as err:
        raise ConfigError(f"source {manifest.source!r}: no driver for {url.drivername} ({err})",
                          hint="pip install 'structq[postgres]' or 'structq[mysql]'") from None
    try:
        try:
            connection = engine.connect()
        except exc.DBAPIError as err:
            from sqlalchemy.engine import make_url

            cause = str(err.orig).strip().splitlines()[0] if err.orig else str(err)
            raise SourceUnavailable(
                f"source {manifest.source!r} is unavailable: cannot connect to "
                f"{_safe(make_url(manifest.url))}: {cause}",
                source=manifest.source, cause=cause,
                hint="check that the server runs and the URL (and its ${VARS}) are right",
            ) from None
        with connection:
            yield connection
    finally:
        engine.dispose()


def _opensearch(url: str) -> tuple[Any, tuple[type[BaseException], ...]]:
    from opensearchpy import OpenSearch
    from opensearchpy import exceptions as ose

    client = OpenSearch(hosts=[url], timeout=CONNECT_TIMEOUT_S, max_retries=0)
    return client, (ose.ConnectionError, ose.AuthenticationException, ose.AuthorizationException)


def _elasticsearch(url: str) -> tuple[Any, tuple[type[BaseException], ...]]:
    import elastic_transport
    from elasticsearch import AuthenticationException, AuthorizationException, Elasticsearch

    client = Elasticsearch(url, request_timeout=CONNECT_TIMEOUT_S, max_retries=0)
    return client, (elastic_transport.ConnectionError, AuthenticationException, AuthorizationException)


#: The official client for each search kind (ES 8+ clients refuse OpenSearch, and vice versa).
_SEARCH_CLIENTS: dict[str, Callable[[str], tuple[Any, tuple[type[BaseException], ...]]]] = {
    "opensearch": _opensearch,
    "elasticsearch": _elasticsearch,
}


@contextmanager
def search_client(manifest: "Manifest") -> Iterator[Any]:
    """A client for ``manifest``'s cluster; its connection failures become ``SourceUnavailable``."""
    try:
        if is_embedded(manifest.url):  # the in-process engine: started and loaded on demand
            from structq.executors.embedded import acquire

            client, unreachable = _opensearch(acquire(manifest))
        else:
            client, unreachable = _SEARCH_CLIENTS[manifest.kind](manifest.url)
    except ImportError as err:
        raise ConfigError(f"source {manifest.source!r}: the {manifest.kind} client is not installed ({err})",
                          hint=f"pip install 'structq[{manifest.kind}]'") from None
    try:
        yield client
    except unreachable as err:
        raise SourceUnavailable(
            f"source {manifest.source!r} is unavailable: cannot reach {manifest.kind} at {_redact(manifest.url)}",
            source=manifest.source, cause=str(err)[:300],
            hint="check that the cluster runs and the URL (and its ${VARS}) are right",
        ) from None
    finally:
        client.close()


def is_embedded(url: str) -> bool:
    """Whether the source is the in-process search engine (``url: embedded``)."""
    return url.strip().lower() == "embedded"


def engine_index_names(manifest: "Manifest") -> dict[str, str]:
    """Engine-side index name → declared name. The embedded engine keeps each declared index
    under a name of its own (one per documents file); a real cluster uses the declared names."""
    if not is_embedded(manifest.url):
        return {i.name: i.name for i in manifest.indices}
    from structq.executors.embedded import physical_index

    return {physical_index(manifest, i.name): i.name for i in manifest.indices}


def _redact(url: str) -> str:
    """A URL without its password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        host = parts.hostname or ""
        netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
