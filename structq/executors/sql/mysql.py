"""MySQL and MariaDB (PyMySQL): a read-only session and transaction, the server's statement
time limit, ``KILL QUERY`` as the backstop; lists of ints bound as one parameter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .fetch import Statement, bind
from .guards import SOCKET_GRACE_S, Backend, Setup, connect_timeout, milliseconds, server_cancel

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection

    from structq.safety.query import SafeQuery

__all__ = ["MySQLBackend", "MySQLIntList"]


class MySQLBackend(Backend):
    label = "MySQL/MariaDB"
    drivername = "mysql+pymysql"
    driver_module = "pymysql"
    extra = "mysql"

    #: MariaDB max_statement_time, MySQL max_execution_time, query killed.
    _TIMEOUT_CODES = frozenset({1969, 3024, 1317})
    #: too many connections, access denied, unknown database, lost/refused connections.
    _UNAVAILABLE_CODES = frozenset({1040, 1044, 1045, 1049, 1129, 1130, 2002, 2003, 2005, 2006, 2013})

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        # The server cancels at timeout_s and says so at once; if it did not, the backstop
        # sends KILL QUERY at timeout_s + grace (``guard``); a server that stops answering is
        # caught by the socket timeouts after that. PyMySQL also waits for the login greeting
        # under read_timeout, so a hung server cannot hold a connect past it.
        backstop = timeout_s + SOCKET_GRACE_S
        connect_args = {
            "connect_timeout": connect_timeout(timeout_s),
            "read_timeout": backstop,
            "write_timeout": backstop,
        }
        return url, {"connect_args": connect_args, "pool_recycle": 3600}

    def on_connect(self, dbapi_connection: Any) -> None:
        # PyMySQL keeps a per-connection copy of its encoders (type → literal).
        dbapi_connection.encoders[MySQLIntList] = MySQLIntList.literal

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """Lists of plain ints (``IN :ref``) bound as one parameter PyMySQL renders at once.

        SQLAlchemy expands a list into one placeholder per value (100k names to render and
        100k values for PyMySQL to escape one by one, ~200 ms at 100k); the values of an
        ``MySQLIntList`` are checked to be exactly ``int`` and written ``(1,2,3)`` in one
        join — what PyMySQL's ``escape_int`` writes for each. Empty lists and lists of
        anything else keep SQLAlchemy's expanding bind (and its empty-set rendering; text
        is escaped by PyMySQL per value, honouring the server's SQL mode).
        """
        params = dict(query.params)
        whole = set()
        if MySQLIntList in getattr(dbapi_connection, "encoders", {}):
            for name in query.expanding:
                value = params.get(name)
                if isinstance(value, (list, tuple)) and value and set(map(type, value)) == {int}:
                    params[name] = MySQLIntList(value)
                    whole.add(name)
        if not whole:
            return bind(query), params
        return bind(query, query.expanding - whole), params

    def setup(self, connection: "Connection", timeout_s: float) -> list[Setup]:
        if getattr(connection.dialect, "is_mariadb", False):
            limit = Setup("SET SESSION max_statement_time = :seconds", {"seconds": float(timeout_s)})
        else:
            limit = Setup("SET SESSION max_execution_time = :ms", {"ms": milliseconds(timeout_s)})
        return [
            Setup("SET SESSION TRANSACTION READ ONLY"),
            limit,
            Setup("START TRANSACTION READ ONLY"),
        ]

    @contextmanager
    def guard(self, dbapi_connection: Any, timeout_s: float) -> Iterator[None]:
        with server_cancel("mysql", dbapi_connection, timeout_s):
            yield

    def pin_schema(self, schema: str) -> list[Setup]:
        """The declared database as the session's current one (``USE``; ``text()`` reads a
        ``:`` as a bind, so one in the name is escaped)."""
        return [Setup("USE `" + schema.replace("`", "``").replace(":", "\\:") + "`")]

    def is_timeout(self, error: BaseException) -> bool:
        return _mysql_code(error) in self._TIMEOUT_CODES

    def is_unavailable(self, error: BaseException) -> bool:
        return _mysql_code(error) in self._UNAVAILABLE_CODES


class MySQLIntList(tuple):  # type: ignore[type-arg]
    """A non-empty list of exact ``int`` values, bound as one MySQL parameter."""

    __slots__ = ()

    @staticmethod
    def literal(value: "MySQLIntList", mapping: Any = None) -> str:
        """``(1,2,3)``: PyMySQL's encoder signature; ``str(int)`` is ``escape_int``."""
        if not value or set(map(type, value)) != {int}:  # never render anything else this way
            raise TypeError("MySQLIntList holds non-empty plain ints only")
        return "(" + ",".join(map(str, value)) + ")"



def _mysql_code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None
