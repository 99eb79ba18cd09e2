"""Opening a source for sync: read-only, time-limited, and one error for "cannot reach it".

Sync only reads catalogs (and, with ``--profile-values``, distinct values), yet it runs the
same guards as a question's query, because it opens the database through the SQL executor's
session functions (``structq.executors.sql.session``): which driver a URL runs with (plain
``postgresql://`` URLs get psycopg 3, ``mysql://`` ones mysqlclient or else PyMySQL: the
drivers the extras install and the guards are tested with), how a connection is opened read-only (a SQLite file
with ``mode=ro``, so a mistyped path never creates an empty database that the next sync would
read as "every table dropped"), and which statements make a transaction read-only with a
server-side statement timeout. Search sources are opened through the executor's client flavours for the same reason.

Every URL that reaches a message goes through ``redact_url``: a manifest's URL usually carries
a password through ``${VAR}`` interpolation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, SourceUnavailable
from structq.capabilities.model import is_embedded
from structq.executors.urls import redact_url

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from structq.capabilities import Manifest
    from structq.executors.sql import Backend

__all__ = ["SqlSource", "sql_connection", "search_client", "server_index_names", "READ_TIMEOUT_S"]

#: Seconds one read of sync may run: the whole catalog read, or one column's distinct values.
#: A large schema's catalog takes longer to read than a question's query may run, so the
#: source's ``limits.timeout_s`` is a floor here, not the limit; but a sync never hangs.
READ_TIMEOUT_S = 60.0


def _timeout(manifest: "Manifest") -> float:
    return max(float(manifest.limits.timeout_s), READ_TIMEOUT_S)


@dataclass(frozen=True)
class SqlSource:
    """An open connection to a SQL source, read through guarded transactions only."""

    connection: "Connection"
    backend: "Backend"  # the per-database guards
    timeout_s: float

    @contextmanager
    def transaction(self) -> Iterator["Connection"]:
        """One read-only transaction with a statement timeout, always rolled back.

        The backend's setup statements are the executor's: on PostgreSQL ``SET TRANSACTION
        READ ONLY`` and a transaction-local ``statement_timeout``, which a rollback undoes, so
        every transaction needs them again; its guard adds the client-side backstop (and the
        only deadline SQLite has).
        """
        from structq.executors.sql import begin_read_only

        connection = self.connection
        try:
            begin_read_only(connection, self.backend, self.timeout_s)
            with self.backend.guard(connection.connection.dbapi_connection, self.timeout_s):
                yield connection
        finally:
            connection.rollback()

    def timed_out(self, error: BaseException) -> bool:
        """Whether a SQLAlchemy error is the statement timeout (or its backstop) firing."""
        return self.backend.is_timeout(getattr(error, "orig", None) or error)


@contextmanager
def sql_connection(manifest: "Manifest") -> Iterator[SqlSource]:
    """``manifest``'s database, opened as the SQL executor opens it; ``SourceUnavailable``
    when it cannot be reached, ``ConfigError`` for a bad URL or a missing driver."""
    from sqlalchemy.exc import DBAPIError

    from structq.executors.sql import read_only_engine, resolve

    backend, url = resolve(manifest)
    timeout_s = _timeout(manifest)
    pool = read_only_engine(backend, url, timeout_s)
    try:
        try:
            connection = pool.connect()
        except DBAPIError as err:
            cause = str(err.orig).strip().splitlines()[0] if err.orig else str(err)
            raise SourceUnavailable(
                f"source {manifest.source!r} is unavailable: cannot connect to {redact_url(manifest.url)}: {cause}",
                source=manifest.source, cause=cause,
                hint="check that the server runs and the URL (and its ${VARS}) are right",
            ) from None
        with connection:
            yield SqlSource(connection, backend, timeout_s)
    finally:
        pool.dispose()


#: What makes a search source unavailable rather than the request wrong (``Failure.kind``).
_UNAVAILABLE = frozenset({"unreachable", "timeout", "auth", "wrong_product"})


@contextmanager
def search_client(manifest: "Manifest") -> Iterator[Any]:
    """A client for ``manifest``'s cluster, built by the search executor's client flavour
    (the embedded search server is started and loaded on demand, and released afterwards); its
    connection failures become ``SourceUnavailable``."""
    from structq.executors.search import embedded_server
    from structq.executors.search.clients import OpenSearchFlavour
    from structq.sources import kind_of

    if is_embedded(manifest.url):
        flavour, url = OpenSearchFlavour(), embedded_server.acquire(manifest)
    else:
        flavour, url = kind_of(manifest).executor_class(manifest).flavour, manifest.url
    try:
        try:
            client = flavour.connect(url, _timeout(manifest))
        except ValueError as err:  # the client could not read the URL
            raise ConfigError(f"source {manifest.source!r}: bad url {redact_url(url)}: {redact_url(str(err))}",
                              hint="write it as http(s)://[user:password@]host:port, or `embedded`") from None
        try:
            yield client
        except Exception as err:
            failure = flavour.failure(err)
            if failure is None or failure.kind not in _UNAVAILABLE:
                raise
            raise SourceUnavailable(
                f"source {manifest.source!r} is unavailable: cannot reach {manifest.kind} at {redact_url(manifest.url)} "
                f"({failure.kind})",
                source=manifest.source, cause=redact_url(failure.reason or "")[:300],
                hint="check that the cluster runs and the URL (and its ${VARS}) are right",
            ) from None
        finally:
            flavour.close(client)
    finally:
        if is_embedded(manifest.url):
            embedded_server.release()


def server_index_names(manifest: "Manifest") -> dict[str, str]:
    """Server-side index name → declared name. The embedded search server keeps each declared index
    under a name of its own (one per documents file); a real cluster uses the declared names."""
    if not is_embedded(manifest.url):
        return {i.name: i.name for i in manifest.indices}
    from structq.executors.search.embedded_server import physical_index

    return {physical_index(manifest, i.name): i.name for i in manifest.indices}
