"""MySQL and MariaDB (mysqlclient or PyMySQL, ``drivers.py``): a read-only session and
transaction, the server's statement time limit, ``KILL QUERY`` as the backstop; every list bound as one
parameter, written at once, a long text list as rows where MariaDB then uses the column's index
(``value_rows.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..fetch import Statement, bind
from ..guards import SOCKET_GRACE_S, Backend, Setup, connect_timeout, milliseconds
from .drivers import DRIVERS, PYMYSQL, MySQLDriver, driver_for
from .value_rows import ROWS_FROM, compared_column, rows_allowed, rows_fit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.engine import URL, Connection, Dialect

    from structq.safety.query import SafeQuery

__all__ = ["Login", "MySQLBackend", "MySQLIntList", "MySQLList", "render_list"]

#: MySQL column types both drivers always give as ``int`` (or None): TINY, SHORT, LONG,
#: LONGLONG, INT24, YEAR. Text columns are not among them: a binary string has the same type
#: code and comes back as bytes.
_INT_COLUMNS = frozenset({1, 2, 3, 8, 9, 13})


class MySQLBackend(Backend):
    label = "MySQL/MariaDB"
    drivername = PYMYSQL.drivername  # unused: each URL's driver comes from ``driver_for``
    cancel_kind = "mysql"

    #: MariaDB max_statement_time, MySQL max_execution_time, query killed.
    _TIMEOUT_CODES = frozenset({1969, 3024, 1317})
    #: too many connections, access denied, unknown database, lost/refused connections.
    _UNAVAILABLE_CODES = frozenset({1040, 1044, 1045, 1049, 1129, 1130, 2002, 2003, 2005, 2006, 2013})

    def driver_url(self, url: "URL") -> "URL":
        return url.set(drivername=driver_for(url).drivername)

    def check_driver(self, url: "URL") -> None:
        driver = driver_for(url)
        self.require(driver.module, driver.extra)

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        # The server cancels at timeout_s and says so at once; if it did not, the backstop
        # sends KILL QUERY at timeout_s + grace (``guard``); a server that stops answering is
        # caught by the socket timeouts after that. Both drivers also wait for the login
        # greeting under a time limit, so a hung server cannot hold a connect past it.
        connect_args = driver_for(url).connect_args(connect_timeout(timeout_s), timeout_s + SOCKET_GRACE_S)
        return url, {"connect_args": connect_args, "pool_recycle": 3600}

    def connect(self, dialect: "Dialect", cargs: "Sequence[Any]", cparams: dict[str, Any]) -> Any:
        """The dialect's own connection, carrying its ``Login`` for ``KILL QUERY``: neither
        driver can open a second connection like the first by itself (mysqlclient keeps no
        password, PyMySQL no copy of its TLS options)."""
        connection = dialect.connect(*cargs, **cparams)
        login = Login(DRIVERS[dialect.driver], dialect.loaded_dbapi, tuple(cargs), dict(cparams))
        connection.structq_login = login  # read by ``cancel.py``
        return connection

    def on_connect(self, dbapi_connection: Any) -> None:
        # Both drivers keep a per-connection copy of their encoders (type → literal).
        dbapi_connection.encoders[MySQLIntList] = MySQLIntList.literal
        dbapi_connection.encoders[MySQLList] = MySQLList.literal

    def plain_columns(self, description: Any) -> bool:
        """Integer columns (``_INT_COLUMNS``): both drivers give them as ``int`` or None."""
        return description is not None and all(column[1] in _INT_COLUMNS for column in description)

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """Every non-empty list (``IN :ref``) bound as one parameter the driver writes at once.

        SQLAlchemy expands a list into one placeholder per value (100k names to render and
        100k values for the driver to escape one by one, ~200 ms at 100k with PyMySQL). Here
        a list of plain ints goes as an ``MySQLIntList``, checked to be exactly ``int`` and
        written ``(1,2,3)`` in one join; any other list as a ``MySQLList`` whose text the
        connection itself wrote (``render_list``: its own escaping, which honours the
        server's SQL mode). A long text list compared with a text column goes as rows,
        ``(VALUES ('a'),('b'))``, on MariaDB (``value_rows.py`` says when and why). Empty
        lists keep SQLAlchemy's expanding bind (the sandbox writes them as a constant anyway).
        """
        params = dict(query.params)
        whole = set()
        if MySQLIntList in getattr(dbapi_connection, "encoders", {}):
            for name in query.expanding:
                value = params.get(name)
                if not isinstance(value, (list, tuple)) or not value:
                    continue
                if set(map(type, value)) == {int}:
                    params[name] = MySQLIntList(value)
                else:
                    params[name] = render_list(dbapi_connection, value,
                                               rows=_as_rows(dbapi_connection, query, name, value))
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
        """``(1,2,3)``: the encoder signature of both drivers (``str(int)`` is how each writes
        an int). mysqlclient looks encoders up by exact type, so this tuple subclass reaches
        it instead of its per-item tuple rendering."""
        if not value or set(map(type, value)) != {int}:  # never render anything else this way
            raise TypeError("MySQLIntList holds non-empty plain ints only")
        return "(" + ",".join(map(str, value)) + ")"


class MySQLList:
    """A list already written as SQL by the connection that will send it (``render_list``):
    ``('a','b')``, as the driver would write the list value by value."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text

    @staticmethod
    def literal(value: MySQLList, mapping: Any = None) -> str | bytes:
        """The written list (the encoder signature of both drivers)."""
        return value.text


#: Joins the texts of a list before they are escaped at once (``render_list``): a character
#: neither driver's escaping changes, in any character set MySQL speaks with a client.
_SEPARATOR = "\x01"


def render_list(dbapi_connection: Any, values: Sequence[Any], *, rows: bool = False) -> MySQLList:
    """``values`` written ``(v1,v2,…)`` by ``dbapi_connection``'s own escaping, which honours
    the server's SQL mode (``NO_BACKSLASH_ESCAPES``) and the connection's character set; with
    ``rows``, as MariaDB's rows of one column, ``(VALUES (v1),(v2),…)`` (``value_rows.py``).

    Escaping is character by character and leaves ``_SEPARATOR`` as it is, so a list of text
    none of which holds the separator is joined, escaped in one call and split back
    (a million codes: one pass in C for mysqlclient, one ``str.translate`` for PyMySQL); any
    other list is written value by value, by the same escaping the driver applies to each
    value of an expanded list.
    """
    opening, between, closing = ("(VALUES (", "),(", "))") if rows else ("(", ",", ")")
    mysqlclient = hasattr(dbapi_connection, "string_literal")
    texts = all(type(v) is str for v in values)
    joined = _SEPARATOR.join(values) if texts else ""
    if texts and joined.count(_SEPARATOR) == len(values) - 1:
        split = "'" + between + "'"
        if mysqlclient:
            quoted = dbapi_connection.string_literal(joined.encode(dbapi_connection.encoding))
            return MySQLList(opening.encode() + quoted.replace(_SEPARATOR.encode(), split.encode()) + closing.encode())
        quoted_text = dbapi_connection.escape(joined)
        return MySQLList(opening + quoted_text.replace(_SEPARATOR, split) + closing)
    if mysqlclient:
        return MySQLList(opening.encode() + between.encode().join(map(dbapi_connection.literal, values))
                         + closing.encode())
    return MySQLList(opening + between.join(map(dbapi_connection.escape, values)) + closing)


def _as_rows(dbapi_connection: Any, query: "SafeQuery", name: str, values: Sequence[Any]) -> bool:
    """Whether the list ``name`` of ``query`` goes as rows (``value_rows.py``): long enough,
    all text, on MariaDB, compared with a text column of the connection's character set, and
    held in the server's memory."""
    if len(values) < ROWS_FROM or not all(type(v) is str for v in values):
        return False
    if not rows_allowed(dbapi_connection.get_server_info()):
        return False
    column = compared_column(query.text or "", name)
    return column is not None and rows_fit(dbapi_connection, column, len(values), max(map(len, values)))


@dataclass(frozen=True)
class Login:
    """How a connection was opened (the driver module and its connect arguments), so that
    ``KILL QUERY`` can open a second one with the same account, host and TLS settings."""

    driver: MySQLDriver
    dbapi: Any  # the driver's module
    cargs: tuple[Any, ...] = field(repr=False)
    cparams: dict[str, Any] = field(repr=False)  # the password among them: never printed

    def connect(self, timeout_s: float) -> Any:
        """A new connection like the first, every wait bounded by ``timeout_s``."""
        return self.dbapi.connect(*self.cargs, **{**self.cparams, **self.driver.timeouts(timeout_s, timeout_s)})


def _mysql_code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None
