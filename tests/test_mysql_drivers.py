"""MySQL/MariaDB sources run with mysqlclient or PyMySQL (``executors/sql/mysql/drivers.py``): which one a
URL gets, and that both read the same values and keep the same guards on a real MariaDB.

The behavioural suite of ``test_executor_sql.py`` runs once per driver; this file holds what
is about the two drivers themselves: every column type read through each gives the same row,
a second statement never reaches the server, the ``KILL QUERY`` backstop is a kill on the
server (not a socket giving up), and the connect arguments that make mysqlclient behave as
PyMySQL does.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from structq.capabilities import Limits, Manifest
from structq.errors import ConfigError, ExecutionError, QueryTimeout
from structq.executors.sql import SqlExecutor
from structq.executors.sql.mysql.drivers import MYSQLCLIENT, PYMYSQL, MySQLDriver, driver_for
from structq.executors.sql.session import MYSQL
from structq.safety.query import SafeQuery

from conftest import mysqlclient_or_skip

pytestmark = pytest.mark.mariadb

DRIVERS = [pytest.param(MYSQLCLIENT, id="mysqlclient"), pytest.param(PYMYSQL, id="pymysql")]

#: One column of each type MariaDB has, and rows that reach their edges: bounds, NULLs, and
#: dates the server keeps but Python cannot hold (``sql_mode=''`` lets them in).
_COLUMNS = """
 id INT PRIMARY KEY, ti TINYINT, su SMALLINT UNSIGNED, mi MEDIUMINT, bu BIGINT UNSIGNED,
 b1 BIT(1), b9 BIT(9), bo BOOLEAN, de DECIMAL(30,10), fl FLOAT, db DOUBLE, d DATE,
 dtm DATETIME(6), ts TIMESTAMP NULL, tm TIME(3), yr YEAR, ch CHAR(3), vc VARCHAR(20), tx TEXT,
 bn BINARY(3), vb VARBINARY(10), bl BLOB, en ENUM('a','b'), st SET('x','y','z'), js JSON,
 u UUID, i4 INET4, i6 INET6, g POINT"""
_ROWS = """
 (1, -128, 65535, -8388608, 18446744073709551615, b'1', b'100000001', TRUE,
  12345678901234567890.0123456789, 1.5, 2.25, '2024-02-29', '2024-02-29 23:59:59.123456',
  '2024-03-01 00:00:00', '-838:59:59.999', 2024, 'ab', '数据 ü', 'long text', 'ab', x'00ff',
  x'deadbeef', 'b', 'x,z', '{"a": [1, 2]}', '123e4567-e89b-12d3-a456-426614174000', '10.0.0.1',
  '::1', POINT(1, 2)),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '0000-00-00',
  '0000-00-00 00:00:00', '0000-00-00 00:00:00', '00:00:00', 0, '', '', '', '', '', '', '', '',
  'null', NULL, NULL, NULL, NULL),
 (3, 0, 0, 0, 0, b'0', b'0', FALSE, -0.0000000001, -0.0, 1e308, '2024-00-15',
  '2024-01-00 10:00:00', NULL, '838:59:59', 1901, 'x', 'y', 'z', 'x', 'y', 'z', 'a', '', '[]',
  NULL, NULL, NULL, NULL)"""


@pytest.fixture(scope="module")
def shop(mariadb_server: Any) -> Iterator[str]:
    """A database with the ``every_type`` table and ``n``: 1…50,000; its read-only URL."""
    mariadb_server.create_database("drivers")
    mariadb_server.execute([
        ("SET SESSION sql_mode = ''", None),
        (f"CREATE TABLE every_type ({_COLUMNS})", None),
        (f"INSERT INTO every_type VALUES {_ROWS}", None),
        ("CREATE TABLE n (id INT PRIMARY KEY)", None),
        ("INSERT INTO n SELECT seq FROM seq_1_to_50000", None),
    ], database="drivers")
    yield mariadb_server.create_readonly_user("drivers", "drivers_reader", "reader-secret")


def _executor(url: str, driver: MySQLDriver, **limits: Any) -> SqlExecutor:
    if driver is MYSQLCLIENT:
        mysqlclient_or_skip()
    url = sa.make_url(url).set(drivername=driver.drivername).render_as_string(hide_password=False)
    settings = {"timeout_s": 1.0, **limits}
    return SqlExecutor(Manifest(source="drivers", kind="sql", url=url, limits=Limits(**settings),
                                tables=[{"name": "every_type", "columns": [{"name": "id", "type": "integer"}]}]))


def _query(text: str) -> SafeQuery:
    return SafeQuery(source="drivers", kind="sql", limit=1001, max_rows=1000, text=text)


def test_every_column_type_reads_the_same_through_both_drivers(shop: str) -> None:
    results = {}
    for driver in (MYSQLCLIENT, PYMYSQL):
        executor = _executor(shop, driver)
        try:
            results[driver.name] = executor.fetch(_query("SELECT * FROM every_type ORDER BY id"))
        finally:
            executor.close()
    through_c, through_python = results["mysqldb"], results["pymysql"]
    assert through_c.columns == through_python.columns
    assert through_c.rows == through_python.rows
    zero_dates = dict(zip(through_c.columns, through_c.rows[1]))
    assert (zero_dates["d"], zero_dates["ts"]) == ("0000-00-00", "0000-00-00 00:00:00")  # not NULL
    first = dict(zip(through_c.columns, through_c.rows[0]))
    assert (first["bu"], first["vc"], first["vb"]) == (18446744073709551615, "数据 ü", "base64:AP8=")


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_second_statement_never_reaches_the_server(shop: str, driver: MySQLDriver) -> None:
    """The sandbox allows one statement; the driver is the second guard: the server gets the
    text as one statement and refuses it as a syntax error, so nothing after ``;`` runs."""
    executor = _executor(shop, driver)
    try:
        with pytest.raises(ExecutionError) as caught:
            executor.fetch(_query("SELECT 1 AS a; SELECT 2 AS b"))
        assert "1064" in (caught.value.cause or "")
    finally:
        executor.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_backstop_kills_the_statement_on_the_server(shop: str, driver: MySQLDriver,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the server's own time limit, the backstop's ``KILL QUERY`` (over a second
    connection opened from the first one's ``Login``) ends the statement: error 1317, not the
    socket timeout that would leave it running on the server."""
    setup = type(MYSQL).setup
    monkeypatch.setattr(type(MYSQL), "setup", lambda self, connection, timeout_s: [
        step for step in setup(self, connection, timeout_s) if "time" not in step.sql])
    executor = _executor(shop, driver)
    try:
        with pytest.raises(QueryTimeout) as caught:
            executor.fetch(_query("SELECT SLEEP(10) AS s"))
        assert "1317" in (caught.value.cause or ""), caught.value.cause
        assert executor.fetch(_query("SELECT count(*) AS n FROM n")).rows == [(50_000,)]
    finally:
        executor.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_integer_results_are_kept_as_the_driver_gives_them(shop: str, driver: MySQLDriver) -> None:
    executor = _executor(shop, driver, max_intermediate_rows=100_000)
    try:
        engine = executor._get_engine()
        with engine.connect() as connection:
            cursor = connection.connection.dbapi_connection.cursor()
            cursor.execute("SELECT id, ti, yr FROM every_type")
            assert MYSQL.plain_columns(cursor.description)
            cursor.execute("SELECT id, vb FROM every_type")  # bytes: checked value by value
            assert not MYSQL.plain_columns(cursor.description)
            cursor.close()
        result = executor.fetch(SafeQuery(source="drivers", kind="sql", limit=50_001, max_rows=50_000,
                                          text="SELECT id FROM n ORDER BY id"))
        assert result.rows[:2] == [(1,), (2,)] and len(result.rows) == 50_000
    finally:
        executor.close()


def test_mysqlclient_connects_with_whole_seconds_and_one_statement() -> None:
    arguments = MYSQLCLIENT.connect_args(2.0, 1.9)
    assert (arguments["connect_timeout"], arguments["read_timeout"], arguments["write_timeout"]) == (2, 2, 2)
    assert arguments["multi_statements"] is False and arguments["local_infile"] is False
    assert PYMYSQL.connect_args(2.0, 1.9)["read_timeout"] == 1.9
    assert PYMYSQL.connect_args(2.0, 1.9)["local_infile"] is False


def test_a_plain_url_gets_pymysql_without_mysqlclient(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "MySQLdb" else real(name, *a))
    assert driver_for(sa.make_url("mysql://u@h/db")) is PYMYSQL
    assert driver_for(sa.make_url("mysql+mysqldb://u@h/db")) is MYSQLCLIENT  # named: kept
    with pytest.raises(ConfigError) as caught:
        MYSQL.check_driver(sa.make_url("mysql+mysqldb://u@h/db"))
    assert 'pip install "structq[mysqlclient]"' in str(caught.value)
