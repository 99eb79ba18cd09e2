"""A long text list sent to MariaDB as rows (``IN (VALUES …)``, ``executors/sql/mysql/value_rows.py``)
selects exactly what the list selects.

On a real MariaDB whose connection collation (``utf8mb4_general_ci``) is not the columns'
(``utf8mb4_unicode_ci``, ``utf8mb4_bin``, …): lists of hostile texts — quotes, backslashes,
NUL, ``\\Z``, the renderer's separator, multibyte, case, accents and spaces that collations
tell apart or not — compared with columns of every kind, under ``IN`` and ``NOT IN``, through
both drivers, with and without ``NO_BACKSLASH_ESCAPES``. The oracle is the same statement with
the list expanded by SQLAlchemy into one literal per value on a plain connection (the form
that needs no argument). Which form the executor chose is checked separately: rows only for
text columns of the connection's character set.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from structq.capabilities import Limits, Manifest
from structq.errors import ExecutionError
from structq.executors.sql import SqlExecutor
from structq.executors.sql.mysql import MySQLList
from structq.executors.sql.mysql.value_rows import (ROWS_FROM, VARCHAR_IN_MEMORY, compared_column,
                                                     fits_in_memory, rows_allowed)
from structq.executors.sql.session import MYSQL
from structq.safety.query import SafeQuery

from conftest import mysqlclient_or_skip

#: Texts that escaping, collations or the one-pass renderer could get wrong.
TEXTS = [
    "a", "A", "a ", " a", "ß", "ss", "SS", "é", "e", "E", "ä", "ae", "1", "01", "1.50", "2024-01-02",
    "", "it's", "''", 'say "hi"', "\\", "a\\'b", "\\'", "x\x00y", "\x1a", "line\nbreak", "\r",
    "%", "_", "' OR 1=1 -- ", "书", "数据 ü", "😀", "\u00a0a", "B", "b",
]
SEPARATOR = "\x01"

#: column → its declaration: text columns of other collations than the connection's, and the
#: kinds whose comparison with text is not one of texts (they keep the list).
COLUMNS = {
    "u": "VARCHAR(20) COLLATE utf8mb4_unicode_ci",
    "g": "VARCHAR(20) COLLATE utf8mb4_general_ci",
    "b": "VARCHAR(20) COLLATE utf8mb4_bin",
    "ch": "CHAR(12) COLLATE utf8mb4_unicode_ci",
    "tx": "TEXT COLLATE utf8mb4_unicode_ci",
    "l": "VARCHAR(20) CHARACTER SET latin1",
    "i": "INT",
    "dd": "DATE",
    "de": "DECIMAL(10,2)",
    "en": "ENUM('a','B','ß','')",
}
ROWS_EXPECTED = {"u", "g", "b", "ch", "tx"}

DRIVERS = ["mysql+mysqldb", "mysql+pymysql"]


def _row(k: int, text: str) -> tuple[Any, ...]:
    latin1 = text if all(ord(c) < 256 for c in text) else None
    return (k, text, text, text, text, text, latin1, k % 5, f"2024-01-0{1 + k % 3}", k % 4 / 2,
            ["a", "B", "ß", ""][k % 4])


@pytest.fixture(scope="module")
def texts_db(mariadb_server: Any) -> Iterator[tuple[str, str]]:
    """(admin URL, read-only URL) of a database with table ``t``: one row per text of ``TEXTS``
    (and one with the separator), every column indexed where MariaDB can."""
    admin = mariadb_server.create_database("value_rows")
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    keys = ", ".join(f"KEY ({name}{'(12)' if name == 'tx' else ''})" for name in COLUMNS)
    rows = [_row(k, text) for k, text in enumerate([*TEXTS, "x" + SEPARATOR + "y"], start=1)]
    marks = ", ".join(["%s"] * (len(COLUMNS) + 1))
    mariadb_server.execute([
        ("SET SESSION sql_mode = ''", None),
        (f"CREATE TABLE t (id INT PRIMARY KEY, {columns}, {keys}) DEFAULT CHARSET=utf8mb4", None),
        *((f"INSERT INTO t VALUES ({marks})", row) for row in rows),
        ("ANALYZE TABLE t", None),
    ], database="value_rows")
    yield admin, mariadb_server.create_readonly_user("value_rows", "value_rows_reader", "reader-secret")


def _with_driver(url: str, drivername: str) -> str:
    if drivername == "mysql+mysqldb":
        mysqlclient_or_skip()
    return sa.make_url(url).set(drivername=drivername).render_as_string(hide_password=False)


def _session_mode(no_backslash_escapes: bool) -> Any:
    def set_mode(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        change = "CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')" if no_backslash_escapes \
            else "REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')"
        cursor.execute("SET SESSION sql_mode = " + change)
        cursor.close()
    return set_mode


def _query(column: str, negated: bool, values: list[str]) -> SafeQuery:
    """What the sandbox writes for ``<column> [NOT] IN (<ref>)`` over its derived table."""
    test = f"NOT t.{column} IN :ref" if negated else f"t.{column} IN :ref"
    text = f"SELECT t.id FROM (SELECT id, {column} FROM t) AS t WHERE {test} ORDER BY t.id"
    return SafeQuery(source="texts", kind="sql", limit=1001, max_rows=1000, text=text,
                     params={"ref": values}, expanding=frozenset({"ref"}))


def _lists() -> list[list[str]]:
    """Subsets of ``TEXTS`` repeated past ``ROWS_FROM`` values: every text alone in turn
    (in pairs), collation neighbours together, one with the separator (written value by value)."""
    pairs = [list(pair) for pair in itertools.zip_longest(TEXTS[::2], TEXTS[1::2], fillvalue="a")]
    chosen = [*pairs, ["ß", "A", "e ", "\\", "书"], ["x" + SEPARATOR + "y", "a", "'"], TEXTS]
    return [(subset * (ROWS_FROM // len(subset) + 1))[: ROWS_FROM + 7] for subset in chosen]


@pytest.mark.parametrize("no_backslash_escapes", [False, True], ids=["backslash-escapes", "no-backslash-escapes"])
@pytest.mark.parametrize("drivername", DRIVERS)
def test_rows_select_what_the_list_selects(texts_db: tuple[str, str], drivername: str,
                                           no_backslash_escapes: bool) -> None:
    admin_url, reader_url = texts_db
    executor = SqlExecutor(Manifest(source="texts", kind="sql", url=_with_driver(reader_url, drivername),
                                    limits=Limits(timeout_s=30.0),
                                    tables=[{"name": "t", "columns": [{"name": "id", "type": "integer"}]}]))
    oracle = sa.create_engine(_with_driver(admin_url, drivername), connect_args={"charset": "utf8mb4"})
    sa.event.listen(executor._get_engine(), "connect", _session_mode(no_backslash_escapes))
    sa.event.listen(oracle, "connect", _session_mode(no_backslash_escapes))
    compared = 0
    try:
        for column, negated, values in itertools.product(COLUMNS, (False, True), _lists()):
            query = _query(column, negated, values)
            clause = sa.text(query.text or "").bindparams(sa.bindparam("ref", expanding=True))
            try:
                with oracle.connect() as connection:
                    want: Any = [tuple(row) for row in connection.execute(clause, {"ref": values})]
            except sa.exc.DBAPIError:
                want = "refused"
            try:
                got: Any = executor.fetch(query).rows
            except ExecutionError:
                got = "refused"
            assert got == want, (column, negated, sorted(set(values)))
            compared += got != "refused"
        with executor._get_engine().connect() as connection:
            mode = connection.exec_driver_sql("SELECT @@sql_mode").scalar()
    finally:
        executor.close()
        oracle.dispose()
    assert ("NO_BACKSLASH_ESCAPES" in mode) is no_backslash_escapes
    assert compared >= len(COLUMNS) * 2 * len(_lists()) * 3 // 4  # most comparisons have rows to compare


@contextmanager
def _reader(texts_db: tuple[str, str], drivername: str) -> Iterator[tuple[Any, Any]]:
    """A read-only SQLAlchemy connection and its DB-API connection, with the encoders the
    executor registers on each connection."""
    engine = sa.create_engine(_with_driver(texts_db[1], drivername), connect_args={"charset": "utf8mb4"})
    try:
        with engine.connect() as connection:
            dbapi_connection = connection.connection.dbapi_connection
            MYSQL.on_connect(dbapi_connection)
            yield connection, dbapi_connection
    finally:
        engine.dispose()


def _sent(dbapi_connection: Any, query: SafeQuery) -> str:
    """The list parameter ``ref`` as the executor would send it."""
    value = MYSQL.statement(dbapi_connection, query)[1]["ref"]
    assert isinstance(value, MySQLList)
    return value.text.decode() if isinstance(value.text, bytes) else value.text


def _form(dbapi_connection: Any, query: SafeQuery) -> str:
    return "rows" if _sent(dbapi_connection, query).startswith("(VALUES (") else "list"


LONG = ["a", "b"] * ROWS_FROM


@pytest.mark.parametrize("drivername", DRIVERS)
def test_rows_only_for_long_text_lists_against_text_columns(texts_db: tuple[str, str], drivername: str) -> None:
    """The form the executor sends: rows where the column is text of the connection's
    character set, the list long and all text and the ``IN`` not negated; a list everywhere else."""
    with _reader(texts_db, drivername) as (_, dbapi_connection):
        for column in COLUMNS:
            assert _form(dbapi_connection, _query(column, False, LONG)) == (
                "rows" if column in ROWS_EXPECTED else "list"), column
            assert _form(dbapi_connection, _query(column, True, LONG)) == "list", column  # under NOT
        assert _form(dbapi_connection, _query("u", False, LONG[: ROWS_FROM - 1])) == "list"  # short: ranges
        assert _form(dbapi_connection, _query("u", False, [*LONG, None])) == "list"  # a NULL: not all text
        expression = SafeQuery(source="texts", kind="sql", limit=1001, max_rows=1000,
                               text="SELECT id FROM t WHERE LOWER(u) IN :ref", params={"ref": LONG},
                               expanding=frozenset({"ref"}))
        assert _form(dbapi_connection, expression) == "list"
        rows = _sent(dbapi_connection, _query("u", False, ["it's", "\\", "x"] * ROWS_FROM))
        assert rows.startswith("(VALUES ('it") and rows.endswith("'),('x'))") and rows.count("),(") == 3 * ROWS_FROM - 1


@pytest.mark.parametrize(("info", "allowed"), [
    ("10.11.19-MariaDB-0+deb12u1", True), ("5.5.5-10.11.6-MariaDB-log", True), ("10.3.3-MariaDB", True),
    ("10.3.2-MariaDB", False), ("10.2.44-MariaDB", False), ("8.0.36", False), ("8.0.36-MySQL", False), ("", False),
    ("11.4.2-MariaDB-ubu2404", True),
])
def test_rows_need_mariadb_10_3_3(info: str, allowed: bool) -> None:
    assert rows_allowed(info) is allowed


@pytest.mark.parametrize(("text", "column"), [
    ("SELECT t.id FROM (SELECT id, code FROM t) AS t WHERE t.code IN :ref", (None, "t", "code")),
    ("SELECT t.id FROM t WHERE t.a > 1 AND (t.code IN :ref AND t.b < 2)", (None, "t", "code")),
    ("SELECT t.id FROM t JOIN u ON u.id = t.id AND u.code IN :ref", (None, "u", "code")),
    # An outer join: the server scans the rows again per row of the other side (32 s against 0.2 s).
    ("SELECT a.id FROM a LEFT JOIN u ON u.id = a.id AND u.code IN :ref", None),
    ("SELECT a.id FROM a LEFT JOIN (SELECT id, code FROM t WHERE code IN :ref) AS x ON x.id = a.id", None),
    ("SELECT a.id FROM a RIGHT JOIN u ON u.id = a.id WHERE u.code IN :ref", None),
    ("WITH c AS (SELECT id FROM t WHERE t.code IN :ref) SELECT COUNT(*) FROM c", (None, "t", "code")),
    ("SELECT 1 FROM t WHERE t.code IN :ref UNION ALL SELECT 2 FROM u", (None, "t", "code")),
    ("SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.id = t.id AND u.code IN :ref)", None),  # a subquery
    ("SELECT t.id, (SELECT COUNT(*) FROM u WHERE u.id = t.id AND u.code IN :ref) AS n FROM t", None),
    ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r, t WHERE t.code IN :ref AND n < 3) "
     "SELECT * FROM r", None),
    ("SELECT t.id FROM t WHERE NOT t.code IN :ref", None),  # under NOT: tested again per row
    ("SELECT t.id FROM t WHERE NOT (t.a > 1 AND t.code IN :ref)", None),
    ("SELECT t.id FROM t WHERE t.a > 1 OR t.code IN :ref", None),  # under OR
    ("SELECT code FROM t GROUP BY code HAVING code IN :ref", None),  # in HAVING
    ("SELECT code IN :ref AS hit FROM t", None),  # a selected expression
    ("SELECT x.id FROM shop.items AS x WHERE x.code IN :ref", ("shop", "items", "code")),
    ("SELECT id FROM t WHERE code IN :ref", (None, "t", "code")),
    ("SELECT id FROM (SELECT y.id FROM (SELECT id, c AS code FROM u) AS y WHERE y.code IN :ref) AS x",
     (None, "u", "c")),
    ("SELECT id FROM t, u WHERE code IN :ref", None),  # unqualified among two tables
    ("SELECT id FROM t WHERE LOWER(code) IN :ref", None),  # an expression
    ("SELECT id FROM (SELECT id, UPPER(c) AS code FROM t) AS t WHERE t.code IN :ref", None),  # changed on the way
    ("WITH c AS (SELECT code FROM t) SELECT * FROM c WHERE c.code IN :ref", None),  # a CTE
    ("SELECT id FROM (SELECT id, code FROM t UNION SELECT id, code FROM u) AS v WHERE v.code IN :ref", None),
    ("SELECT id FROM t WHERE code IN :ref OR name IN :ref", None),  # twice
    ("SELECT id FROM t WHERE code IN (:ref", None),  # not SQL sqlglot reads
    ("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE t.code IN :ref)", None),  # an outer column
])
def test_the_compared_column(text: str, column: Any) -> None:
    assert compared_column(text, "ref") == column


@pytest.mark.parametrize("drivername", DRIVERS)
def test_rows_that_the_server_would_write_to_disk_stay_a_list(texts_db: tuple[str, str], drivername: str) -> None:
    """With the least in-memory temporary table MariaDB allows (16 KiB), 2,000 one-letter
    rows do not fit: the list is sent as a list."""
    forms = []
    with _reader(texts_db, drivername) as (connection, dbapi_connection):
        for size in ("DEFAULT", "16384"):
            connection.exec_driver_sql(f"SET SESSION max_heap_table_size = {size}")
            forms.append(_form(dbapi_connection, _query("u", False, LONG)))
    assert forms == ["rows", "list"]


def test_fits_in_memory() -> None:
    """48 bytes a row for seven-character codes: 16 MiB holds about 350,000 (400,000 stayed in
    memory on MariaDB 10.11, 600,000 did not)."""
    limit = 16 * 1024 * 1024
    assert fits_in_memory(340_000, 7, limit) and not fits_in_memory(360_000, 7, limit)
    assert not fits_in_memory(600_000, 7, limit) and not fits_in_memory(1_000_000, 8, limit)
    assert fits_in_memory(100_000, 8, limit)
    assert not fits_in_memory(ROWS_FROM, VARCHAR_IN_MEMORY + 1, 2**40)  # a text column: never in memory
