"""What every SQL backend shares: the strategy base class and the client-side backstop.

A ``Backend`` says how one kind of database is opened read-only, how a transaction is made
read-only and time-limited (``Setup`` statements), and how its driver's errors read. The
``Backstop`` timer cancels a statement the server's own timeout did not stop.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from structq.errors import ConfigError

from ..cancel import canceller
from .fetch import Read, Statement, bind

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection

    from structq.safety.query import SafeQuery

__all__ = ["BACKSTOP_GRACE_S", "CONNECT_TIMEOUT_MAX_S", "CONNECT_TIMEOUT_MIN_S", "SOCKET_GRACE_S", "Backend",
           "Backstop", "Setup", "connect_timeout", "driver_message", "milliseconds", "server_cancel"]

#: Longest wait for a connection to a server; a dead host fails within it.
CONNECT_TIMEOUT_MAX_S = 5.0
#: libpq refuses connect timeouts under 2 s.
CONNECT_TIMEOUT_MIN_S = 2.0
#: How long after the server-side timeout the client-side backstop steps in.
BACKSTOP_GRACE_S = 0.5
#: How long after the server-side timeout a MySQL/MariaDB client stops waiting on its socket:
#: after the backstop's ``KILL QUERY`` (at ``BACKSTOP_GRACE_S``) has had time to answer.
SOCKET_GRACE_S = 0.9


class Backstop:
    """A timer that cancels the running statement if the server's own timeout did not.

    ``finish()`` must be called before the connection goes back to the pool; the lock makes
    sure a late timer can never cancel the next query that borrows the connection.
    """

    def __init__(self, cancel: Callable[[], None], after_s: float) -> None:
        self._cancel = cancel
        self._lock = threading.Lock()
        self._done = False
        self._timer = threading.Timer(after_s, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                try:
                    self._cancel()
                except Exception:  # noqa: BLE001 - the query's own error is what matters
                    pass

    def finish(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


@contextmanager
def server_cancel(kind: str, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
    """Cancel the statement on the server (``cancel.py``) if it outlives ``timeout_s`` + grace."""
    backstop = Backstop(canceller(kind, dbapi_connection, connect_timeout(timeout_s)),
                         timeout_s + BACKSTOP_GRACE_S)
    try:
        yield
    finally:
        backstop.finish()


def connect_timeout(timeout_s: float) -> float:
    return max(CONNECT_TIMEOUT_MIN_S, min(CONNECT_TIMEOUT_MAX_S, timeout_s))


def driver_message(error: BaseException) -> str:
    """The database's own words: MySQL drivers' errors are ``(code, message)`` tuples."""
    args = getattr(error, "args", ())
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        return f"{args[1]} (error {args[0]})"
    return " ".join(str(error).split()) or type(error).__name__



@dataclass(frozen=True)
class Setup:
    """One statement run before each query, with bound parameters."""

    sql: str
    params: dict[str, Any] | None = None


class Backend:
    """How one kind of database is opened read-only, timed out and diagnosed."""

    label: ClassVar[str]
    drivername: ClassVar[str]  # SQLAlchemy dialect+driver this backend runs with
    driver_module: ClassVar[str | None] = None  # import name of the DB-API package
    extra: ClassVar[str | None] = None  # the structq extra that installs it
    #: ``cancel.py``'s name for cancelling a statement on this server; None: no server cancel.
    cancel_kind: ClassVar[str | None] = None

    def driver_url(self, url: "URL") -> "URL":
        """``url`` set to the driver this backend runs it with (the one its guards are tested
        with, whatever driver the URL names)."""
        return url.set(drivername=self.drivername)

    def check_driver(self, url: "URL") -> None:
        """A missing driver for ``url`` is a setup mistake, and the message says how to fix it."""
        if self.driver_module and self.extra:
            self.require(self.driver_module, self.extra)

    def require(self, module: str, extra: str) -> None:
        """``ConfigError`` naming the ``pip install`` that fixes it, when ``module`` is missing."""
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"{self.label} sources need the {module!r} package, which is not installed",
                hint=f'pip install "structq[{extra}]"',
            )

    def connect(self, dialect: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        """Open a DB-API connection with SQLAlchemy's ``dialect`` and arguments, for a backend
        that must keep something of how it was opened. Only called when a backend overrides it."""
        return dialect.connect(*cargs, **cparams)

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        """The URL and ``create_engine`` keyword arguments for a read-only engine."""
        raise NotImplementedError

    def setup(self, connection: "Connection", timeout_s: float) -> list[Setup]:
        """Statements that make the next statement read-only and time-limited."""
        return []

    def pin_schema(self, schema: str) -> list[Setup]:
        """Statements that make unqualified names resolve in ``schema`` only.

        The sandbox already qualifies every table with the manifest's schema; this is the
        second guard, so that no unqualified name can reach a same-named object elsewhere.
        """
        return []

    def row_settings(self, variables: Mapping[str, Any]) -> list[Setup]:
        """Statements that hand the caller's row-filter ``variables`` (name → value) to the
        database's own row-level security for this transaction only, so that policies made by
        ``structq grants`` filter rows even if a query reached the database unconfined. None
        by default: only PostgreSQL has row-level security."""
        return []

    def on_connect(self, dbapi_connection: Any) -> None:
        """Called once for each new DB-API connection of the engine."""

    def on_checkout(self, dbapi_connection: Any) -> None:
        """Called each time the pool hands out a connection; raising SQLAlchemy's
        ``DisconnectionError`` drops it and opens a new one. Only registered when a backend
        overrides it (it runs before every query)."""

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """The clause and parameters that run ``query`` on ``dbapi_connection``."""
        return bind(query), dict(query.params)

    def read(self, connection: "Connection", statement: Statement, size: int) -> Read | None:
        """At most ``size`` rows of ``statement`` read the backend's own way (``fetch.Read``), or
        None: read through SQLAlchemy (the default)."""
        return None

    def plain_columns(self, description: Any) -> bool:
        """Whether the driver gives every column of a result with this DB-API cursor
        ``description`` as JSON-safe values (``int``, ``str``, ``bool``, None) in tuples, so that
        ``fetch`` may keep its rows as they are. By default no: every value is checked."""
        return False

    @contextmanager
    def guard(self, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
        """Around the query itself: client-side deadline enforcement, if any — by default the
        server-side cancel named by ``cancel_kind`` (``cancel.py``), a grace after ``timeout_s``."""
        if self.cancel_kind is None:
            yield
            return
        with server_cancel(self.cancel_kind, dbapi_connection, timeout_s):
            yield

    def is_timeout(self, error: BaseException) -> bool:
        """Whether the driver error says the statement was cancelled for running too long."""
        return False

    def is_unavailable(self, error: BaseException) -> bool:
        """Whether the driver error says the server is gone or refuses us (not the query)."""
        return False

    def hint_for(self, error: BaseException) -> str | None:
        """Advice for a query the database rejected, when its error has a known fix."""
        return None



def milliseconds(seconds: float) -> int:
    """``seconds`` as whole milliseconds, at least 1 (0 means "no limit" to the servers)."""
    return max(1, round(seconds * 1000))
