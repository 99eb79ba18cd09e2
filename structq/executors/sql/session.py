"""The read-only, time-limited session: which backend a URL gets, its engine, its transaction.

The SQL executor and ``structq sync`` resolve URLs and open servers through these functions
only, so a question's query and a catalog read get the same guards: the driver a URL runs with
(plain ``postgresql://`` URLs get psycopg 3, ``mysql://`` ones mysqlclient or PyMySQL: the
drivers the guards are tested with), how a connection is opened read-only, and which statements
make each transaction read-only with a server-side statement timeout.

A SQLite file has no transaction to set up: every guard is on the connection, which both open
with ``sqlite.connect_read_only`` — sync through the SQLAlchemy engine made here, the executor
on its own ``sqlite3`` connections (``sqlite_pool.py``), so that a plan on a SQLite file never
imports SQLAlchemy. Its URL is read by ``SQLiteURL``, with the same result as SQLAlchemy's.

A backend's module is imported when a URL first needs it: a plan on a SQLite file loads
neither the PostgreSQL nor the MySQL backend (``tests/test_startup.py``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError

from ..urls import redact_url
from .guards import Backend, Setup
from .sqlite import SQLiteURL

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine

    from structq.capabilities import Manifest

__all__ = ["BACKENDS", "backend_for", "begin_read_only", "parse_url", "read_only_engine", "resolve"]

#: URL backend name → (module, class) of its strategy. Anything else has no tested read-only
#: guard and is refused.
BACKENDS: dict[str, tuple[str, str]] = {
    "sqlite": (".sqlite", "SQLiteBackend"),
    "postgresql": (".postgresql", "PostgresBackend"),
    "postgres": (".postgresql", "PostgresBackend"),
    "mysql": (".mysql", "MySQLBackend"),
    "mariadb": (".mysql", "MySQLBackend"),
}
#: The names of the one strategy object of each backend (``MYSQL`` is ``backend_for`` a mysql:// URL).
_SHARED = {"SQLITE": "sqlite", "POSTGRES": "postgresql", "MYSQL": "mysql"}


@functools.cache
def _strategy(module: str, name: str) -> Backend:
    """The one strategy object of a backend, its module imported on first use."""
    return getattr(importlib.import_module(module, __package__), name)()


def backend_for(url: "URL | SQLiteURL") -> Backend:
    """The strategy for ``url``'s database, or a ``ConfigError`` listing the supported ones."""
    name = url.drivername.split("+", 1)[0].lower()
    try:
        where = BACKENDS[name]
    except KeyError:
        raise ConfigError(
            f"no read-only SQL executor for {name!r} URLs",
            hint="supported: sqlite:///PATH, postgresql://…, mysql://… or mariadb://…",
        ) from None
    return _strategy(*where)


def __getattr__(name: str) -> Any:
    """``SQLITE``, ``POSTGRES`` and ``MYSQL``: each backend's strategy, loaded when asked for."""
    if name in _SHARED:
        return _strategy(*BACKENDS[_SHARED[name]])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_url(manifest: "Manifest") -> "URL | SQLiteURL":
    """The manifest's URL parsed, or a ``ConfigError`` that shows it without its password.

    A SQLite file URL is read without SQLAlchemy (``SQLiteURL``: the same parts, so the same
    file), which a plan on a SQLite file then never imports; any other URL by SQLAlchemy's
    ``make_url``. That raises ``ArgumentError`` for an unparseable URL and a bare
    ``ValueError`` for a port that is not a number. Neither message is shown: the first quotes
    the whole URL and the second the "port", which is part of the password when the password
    holds ``@``.
    """
    file_url = SQLiteURL.parse(manifest.url)
    if file_url is not None:
        return file_url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(manifest.url)
    except (ArgumentError, ValueError) as exc:
        problem = "its port is not a number" if type(exc) is ValueError else "it is not a database URL"
        raise ConfigError(
            f"source {manifest.source!r}: cannot parse the database URL {redact_url(manifest.url)!r}: {problem}",
            hint="e.g. sqlite:///data/company.db, postgresql://user@host:5432/db, mysql://user@host/db",
        ) from None


def resolve(manifest: "Manifest") -> tuple[Backend, "URL | SQLiteURL"]:
    """(backend, URL set to the backend's driver) for ``manifest``; a ``ConfigError`` that
    names the source for a URL that does not parse or has no read-only backend."""
    url = parse_url(manifest)
    try:
        backend = backend_for(url)
    except ConfigError as err:
        raise ConfigError(f"source {manifest.source!r}: {err.message}", hint=err.hint) from None
    return backend, backend.driver_url(url)


def read_only_engine(backend: Backend, url: "URL | SQLiteURL", timeout_s: float) -> "Engine":
    """A SQLAlchemy engine whose connections open the way ``backend`` makes them read-only
    (a missing driver is a ``ConfigError`` with the ``pip install`` that fixes it)."""
    from sqlalchemy import create_engine, event

    backend.check_driver(url)
    engine_url, arguments = backend.engine_arguments(url, timeout_s)
    engine = create_engine(engine_url, pool_pre_ping=True, **arguments)
    if type(backend).connect is not Backend.connect:
        event.listen(engine, "do_connect",
                     lambda dialect, _record, cargs, cparams: backend.connect(dialect, cargs, cparams))
    event.listen(engine, "connect", lambda dbapi_connection, _record: backend.on_connect(dbapi_connection))
    if type(backend).on_checkout is not Backend.on_checkout:
        event.listen(engine, "checkout",
                     lambda dbapi_connection, _record, _proxy: backend.on_checkout(dbapi_connection))
    return engine


def begin_read_only(connection: "Connection", backend: Backend, timeout_s: float,
                    pin: Iterable[Setup] = ()) -> None:
    """Make the next transaction on ``connection`` read-only with a ``timeout_s`` statement
    timeout (``backend.setup``), then run ``pin`` (``Backend.pin_schema``'s statements).

    PostgreSQL's settings are transaction-local and a rollback undoes them, so this runs at
    the start of every transaction, not once per connection."""
    from sqlalchemy import text

    for step in [*backend.setup(connection, timeout_s), *pin]:
        connection.execute(text(step.sql), step.params or {})
