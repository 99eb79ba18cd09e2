"""The two DB-API drivers MySQL/MariaDB sources run with, and which one a URL gets.

- **mysqlclient** (``MySQLdb``, C, on libmariadb/libmysqlclient) reads rows about seven times
  faster than PyMySQL: 100,000 one-int rows in 22 ms against 151 ms, measured raw on MariaDB
  10.11. A step that passes 100k ids to the next one spends most of its time reading them, so
  this is what brings such a plan within 2× of the equivalent JOIN (``bench/engine.py``).
  It has to be built against the client library (``libmariadb-dev`` and a C compiler).
- **PyMySQL** is pure Python and installs anywhere.

A plain ``mysql://`` / ``mariadb://`` URL (or one naming another driver) runs with
mysqlclient when it is installed and PyMySQL otherwise; ``mysql+mysqldb://`` and
``mysql+pymysql://`` keep the driver they name. The guards are tested with both
(``tests/test_executor_sql.py`` runs its whole suite once per driver), and the rows they
return are compared value by value over every column type (``tests/test_mysql_drivers.py``).

What differs between the two, and how each is made to behave the same (``connect_args``):

- **time limits**: libmariadb takes whole seconds; they are rounded up, never down;
- **several statements in one query**: mysqlclient allows them by default
  (``CLIENT_MULTI_STATEMENTS``); it is turned off, as PyMySQL has it. The sandbox already
  allows one statement only; this keeps a second one from ever reaching the server;
- **LOAD DATA LOCAL**: off for both, so a server cannot ask for a file of this machine;
- **dates the server stores but Python cannot hold** (``0000-00-00``, ``2024-00-15``):
  mysqlclient turns them into None, which would read as NULL. They come back as the
  server's text instead, as PyMySQL gives them.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import URL

__all__ = ["DRIVERS", "MYSQLCLIENT", "PYMYSQL", "MySQLDriver", "driver_for"]


@dataclass(frozen=True)
class MySQLDriver:
    """One DB-API package, as SQLAlchemy names it, with its connect arguments."""

    name: str  # SQLAlchemy's driver name: ``mysql+<name>://``
    package: str  # what pip and people call it
    module: str  # import name
    extra: str  # the structq extra that installs it
    whole_seconds: bool  # time limits as whole seconds (the C client library)

    @property
    def drivername(self) -> str:
        return "mysql+" + self.name

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def timeouts(self, connect_s: float, socket_s: float) -> dict[str, Any]:
        """The connect and socket read/write time limits, in the unit the driver takes."""
        seconds: Callable[[float], Any] = math.ceil if self.whole_seconds else float
        return {"connect_timeout": seconds(connect_s), "read_timeout": seconds(socket_s),
                "write_timeout": seconds(socket_s)}

    def connect_args(self, connect_s: float, socket_s: float) -> dict[str, Any]:
        """Everything a read-only connection of this driver is opened with."""
        arguments = self.timeouts(connect_s, socket_s)
        if self.module == "MySQLdb":
            arguments.update(multi_statements=False, local_infile=False, conv=_mysqlclient_conversions())
        else:
            arguments.update(local_infile=False)
        return arguments


MYSQLCLIENT = MySQLDriver("mysqldb", "mysqlclient", "MySQLdb", "mysqlclient", whole_seconds=True)
PYMYSQL = MySQLDriver("pymysql", "PyMySQL", "pymysql", "mysql", whole_seconds=False)
#: SQLAlchemy driver name → driver; the first installed one serves URLs that name neither.
DRIVERS = {driver.name: driver for driver in (MYSQLCLIENT, PYMYSQL)}


def driver_for(url: "URL") -> MySQLDriver:
    """The driver ``url`` runs with: the one it names if it is one of ours, else mysqlclient
    when it is installed, else PyMySQL (whose absence ``Backend.check_driver`` reports)."""
    named = DRIVERS.get(url.get_driver_name())
    if named is not None and "+" in url.drivername:
        return named
    return MYSQLCLIENT if MYSQLCLIENT.installed() else PYMYSQL


def _mysqlclient_conversions() -> dict[Any, Any]:
    """mysqlclient's converters, with the temporal ones giving back the server's text where
    they would give None for a value Python cannot hold (a zero date is not a NULL)."""
    from MySQLdb.constants import FIELD_TYPE
    from MySQLdb.converters import conversions

    converted = dict(conversions)
    for field_type in (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME):
        converted[field_type] = _or_text(converted[field_type])
    return converted


def _or_text(convert: "Callable[[str], Any]") -> "Callable[[str], Any]":
    def convert_or_keep(text: str) -> Any:
        value = convert(text)
        return text if value is None else value

    return convert_or_keep
