"""100,000-value references on real PostgreSQL, of every value type: the rows are exactly the
rows of the equivalent subquery, NULLs and duplicates included.

The engine binds ``col IN (<ref>)`` on PostgreSQL as ``col = ANY(:array)``, and a list of
``PG_SWITCHED_LIST`` values or more with a switch between that and a hashed form the planner
estimates nothing for (see ``executors/sql/postgresql/`` for why): ints go as a binary
array of the type the server infers for the list, other values through psycopg. Both sides of
the switch are run here, and what the executor sent is looked at (``sent``). A step's values
come back JSON-safe — a date as ISO text — so a date column is compared with text values here,
as it is in every plan that passes dates on.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet
from structq.capabilities.loader import load_manifest_text

ROWS = 100_000

#: Both tables have the same columns: ``picks`` holds the values passed on, ``items`` the rows
#: they select.
COLUMNS = "".join(f"      - {{name: {name}, type: {kind}}}\n" for name, kind in
                  [("id", "integer"), ("n", "integer"), ("big", "integer"), ("code", "text"), ("day", "date")])
MANIFEST = ("source: items\nkind: sql\nurl: {url}\n"
            "limits: {{max_rows: 200000, max_intermediate_rows: 200000, timeout_s: 60}}\ntables:\n"
            + "".join(f"  - name: {table}\n    columns:\n" + COLUMNS.replace("{", "{{").replace("}", "}}")
                      for table in ("items", "picks")))


@pytest.fixture(scope="module")
def items_url(pg_server: Any) -> Iterator[str]:
    """``items``: 120,000 rows; ``picks``: 100,000 rows whose values repeat (duplicates), hold
    NULLs, and partly miss ``items`` — for ints, 64-bit ints, text and dates."""
    from sqlalchemy import create_engine, text

    url = pg_server.create_database("references_pg")
    admin = create_engine(url)
    columns = "(id integer, n integer, big bigint, code text, day date)"
    try:
        with admin.begin() as connection:
            connection.execute(text(f"CREATE TABLE items {columns}"))
            connection.execute(text(f"CREATE TABLE picks {columns}"))
            connection.execute(text(
                "INSERT INTO items SELECT g, g % 50000, g::bigint * 100000, 'K' || (g % 70000), "
                "DATE '2020-01-01' + (g % 3000) FROM generate_series(1, 120000) AS g"))
            connection.execute(text(
                "INSERT INTO picks SELECT g, CASE WHEN g % 997 = 0 THEN NULL ELSE (g * 7) % 90000 END, "
                "CASE WHEN g % 991 = 0 THEN NULL ELSE ((g * 7) % 60000)::bigint * 100000 END, "
                "CASE WHEN g % 983 = 0 THEN NULL ELSE 'K' || ((g * 3) % 95000) END, "
                "CASE WHEN g % 977 = 0 THEN NULL ELSE DATE '2019-06-01' + (g % 1500) END "
                f"FROM generate_series(1, {ROWS}) AS g"))
            connection.execute(text("ANALYZE"))
        yield url
    finally:
        admin.dispose()


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    from sqlalchemy import create_engine, text

    plain = create_engine(url)
    try:
        with plain.connect() as connection:
            return [tuple(_plain(v) for v in row) for row in connection.execute(text(query))]
    finally:
        plain.dispose()


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The parameters the PostgreSQL executor sent, statement by statement."""
    from structq.executors.sql.postgresql import PostgresBackend

    calls: list[dict[str, Any]] = []
    statement = PostgresBackend.statement

    def spy(self: Any, dbapi_connection: Any, query: Any) -> Any:
        clause, params = statement(self, dbapi_connection, query)
        calls.append(params)
        return clause, params

    monkeypatch.setattr(PostgresBackend, "statement", spy)
    return calls


def _switched(sent: list[dict[str, Any]]) -> list[bool]:
    return [value for params in sent for name, value in params.items() if name.endswith("_hashed")]


@pytest.mark.parametrize("hashed", [True, False], ids=["hashed", "plain"])
@pytest.mark.parametrize("column", ["n", "big", "code", "day"])
@pytest.mark.parametrize("negated, nulls", [(False, True), (True, True), (True, False)],
                         ids=["IN", "NOT IN, a NULL in the list", "NOT IN, no NULL"])
def test_hundred_thousand_values_of_each_type_give_the_subquery_rows(
        items_url: str, column: str, negated: bool, nulls: bool, hashed: bool, sent: list[dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from structq.executors.sql import postgresql

    if not hashed:  # no table is small enough: the plain = ANY
        monkeypatch.setattr(postgresql, "ROWS_PER_VALUE", 0)
    manifest, _ = load_manifest_text(MANIFEST.format(url=items_url), "<items>")
    operator = "NOT IN" if negated else "IN"
    picks = f"SELECT {column} FROM picks" + ("" if nulls else f" WHERE {column} IS NOT NULL")
    plan = Plan.parse({"steps": [
        {"output_key": "picked", "source": "items", "query": picks},
        {"output_key": "found", "source": "items",
         "query": f"SELECT id, {column} FROM items WHERE {column} {operator} (<picked>)"},
    ]})
    with Engine(CapabilitySet([manifest])) as engine:
        result = engine.run(plan)
    values = [row[0] for row in result.steps["picked"].rows]
    assert len(values) > 99_000 and (None in values) is nulls and len(set(values)) < len(values)  # duplicates
    want = _rows(items_url, f"SELECT id, {column} FROM items WHERE {column} {operator} ({picks})")
    assert collections.Counter(result.final.rows) == collections.Counter(want)
    # NOT IN over a list holding NULL selects nothing, as over the subquery; otherwise rows.
    assert bool(want) is not (negated and nulls)
    assert _switched(sent) == [hashed]
    assert _switched([result.steps["found"].params]) == [hashed]  # the value sent is the one reported


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``max_parallel_workers_per_gather`` in each executor transaction once its statement is
    bound: what the query then runs with."""
    from structq.executors.sql.postgresql import PostgresBackend

    seen: list[str] = []
    statement = PostgresBackend.statement

    def spy(self: Any, dbapi_connection: Any, query: Any) -> Any:
        bound = statement(self, dbapi_connection, query)
        seen.append(dbapi_connection.execute("SHOW max_parallel_workers_per_gather").fetchone()[0])
        return bound

    monkeypatch.setattr(PostgresBackend, "statement", spy)
    return seen


@pytest.mark.parametrize("hashed", [True, False], ids=["hashed", "plain"])
@pytest.mark.parametrize("column", ["n", "code", "day"])
def test_a_long_hashed_list_runs_without_parallel_workers(
        items_url: str, column: str, hashed: bool, workers: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Just under ``SERIAL_LIST_MIN`` values the server may share the scan among workers; from
    it on, a statement whose list is hashed runs alone (each worker would read the whole list);
    a plain ``= ANY`` keeps its workers. The rows are the subquery's every way, for numbers,
    text and dates alike."""
    from structq.executors.sql import postgresql

    if not hashed:
        monkeypatch.setattr(postgresql, "ROWS_PER_VALUE", 0)
    manifest, _ = load_manifest_text(MANIFEST.format(url=items_url), "<items>")
    default = _rows(items_url, "SELECT current_setting('max_parallel_workers_per_gather')")[0][0]
    assert default != "0"
    for size in (postgresql.SERIAL_LIST_MIN - 1, postgresql.SERIAL_LIST_MIN):
        picks = f"SELECT {column} FROM picks WHERE id <= {size}"
        plan = Plan.parse({"steps": [
            {"output_key": "picked", "source": "items", "query": picks},
            {"output_key": "found", "source": "items",
             "query": f"SELECT id, {column} FROM items WHERE {column} IN (<picked>)"},
        ]})
        workers.clear()
        with Engine(CapabilitySet([manifest])) as engine:
            result = engine.run(plan)
        assert len(result.steps["picked"].rows) == size
        want = _rows(items_url, f"SELECT id, {column} FROM items WHERE {column} IN ({picks})")
        assert collections.Counter(result.final.rows) == collections.Counter(want) and want
        assert _switched([result.steps["found"].params]) == [hashed]
        serial = hashed and size >= postgresql.SERIAL_LIST_MIN
        assert workers == [default, "0" if serial else default]


# --------------------------------------------------------------------------------------------
# Lists of ints against every integer width (and numbers that are not integers)
# --------------------------------------------------------------------------------------------

NUMBERS = """source: numbers
kind: sql
url: {url}
limits: {{max_rows: 200000, max_intermediate_rows: 200000, timeout_s: 60}}
tables:
  - name: nums
    columns:
      - {{name: id, type: integer}}
      - {{name: s, type: integer}}
      - {{name: i, type: integer}}
      - {{name: b, type: integer}}
      - {{name: d, type: numeric}}
      - {{name: f, type: real}}
  - name: vals
    columns:
      - {{name: id, type: integer}}
      - {{name: v, type: integer}}
      - {{name: kind, type: text}}
  - name: nums_view
    columns:
      - {{name: id, type: integer}}
      - {{name: i, type: integer}}
  - name: fresh
    columns:
      - {{name: id, type: integer}}
      - {{name: i, type: integer}}
"""

#: Which ``vals`` rows a list takes: values that fit int2 (and NULLs), ones past int2, ones past int4.
KINDS = ("small", "wide", "huge")
#: Array types of the integer columns: the executor sends the list as the column's type.
ARRAY_OF = {"s": 1005, "i": 1007, "b": 1016}


@pytest.fixture(scope="module")
def numbers_url(pg_server: Any) -> Iterator[str]:
    """``nums``: 20,000 rows with the same small numbers as smallint, int, bigint, numeric and
    float8 (no index, so an unhashed list compares every row with every value); ``vals``:
    6,000 values of each kind, repeating, some NULL; a view, and a table never analyzed."""
    from sqlalchemy import create_engine, text

    url = pg_server.create_database("references_numbers")
    admin = create_engine(url)
    try:
        with admin.begin() as connection:
            connection.execute(text("CREATE TABLE nums (id integer, s smallint, i integer, b bigint, d numeric, "
                                    "f float8)"))
            connection.execute(text("INSERT INTO nums SELECT g, g % 30000 - 100, g % 30000 - 100, g % 30000 - 100, "
                                    "g % 30000 - 100, g % 30000 - 100 FROM generate_series(1, 20000) AS g"))
            connection.execute(text("CREATE TABLE vals (id integer, v bigint, kind text)"))
            connection.execute(text(
                "INSERT INTO vals SELECT g, CASE WHEN g % 499 = 0 THEN NULL ELSE (g * 7) % 25000 - 50 END, 'small' "
                "FROM generate_series(1, 6000) AS g UNION ALL "
                "SELECT g, CASE WHEN g % 3 = 0 THEN 32768 + g ELSE (g * 7) % 25000 END, 'wide' "
                "FROM generate_series(1, 6000) AS g UNION ALL "
                "SELECT g, CASE WHEN g % 3 = 0 THEN 3000000000 + g WHEN g % 3 = 1 THEN 40000 + g "
                "ELSE (g * 11) % 25000 END, 'huge' FROM generate_series(1, 6000) AS g"))
            connection.execute(text("CREATE VIEW nums_view AS SELECT id, i FROM nums"))
            connection.execute(text("ANALYZE nums"))
            connection.execute(text("ANALYZE vals"))
            connection.execute(text("CREATE TABLE fresh AS SELECT id, i FROM nums"))  # never analyzed
        yield url
    finally:
        admin.dispose()


def _plain_number(value: Any) -> Any:
    from structq.executors.values import json_safe

    return json_safe(value)


def _numbers_plan(picks: str, found: str) -> Plan:
    return Plan.parse({"steps": [
        {"output_key": "picked", "source": "numbers", "query": picks},
        {"output_key": "found", "source": "numbers", "query": found},
    ]})


def _run_numbers(url: str, picks: str, found: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(the database's rows for ``found`` given ``picks``, the subquery's rows)."""
    from sqlalchemy import create_engine, text

    manifest, _ = load_manifest_text(NUMBERS.format(url=url), "<numbers>")
    with Engine(CapabilitySet([manifest])) as engine:
        got = engine.run(_numbers_plan(picks, found)).final.rows
    plain = create_engine(url)
    try:
        with plain.connect() as connection:
            query = found.replace("(<picked>)", f"({picks})")
            want = [tuple(_plain_number(v) for v in row) for row in connection.execute(text(query))]
    finally:
        plain.dispose()
    return got, want


@pytest.mark.parametrize("size", [500, 5000], ids=["500 values", "5,000 values (switched)"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("column", ["s", "i", "b", "d", "f"])
def test_int_lists_select_the_subquery_rows_from_every_number_type(
        numbers_url: str, column: str, kind: str, size: int, sent: list[dict[str, Any]]) -> None:
    """Against smallint, int, bigint, numeric and float8, with values each type cannot hold:
    the rows of the subquery, for IN and NOT IN; an integer column gets the list as its own
    type (so PostgreSQL can hash it), and a long list is switched to the hash."""
    picks = f"SELECT v FROM vals WHERE kind = '{kind}' AND id <= {size}"
    for operator in ("IN", "NOT IN"):
        sent.clear()
        got, want = _run_numbers(numbers_url, picks, f"SELECT id, {column} FROM nums WHERE {column} {operator} (<picked>)")
        assert collections.Counter(got) == collections.Counter(want)
        assert bool(want) is not (operator == "NOT IN" and kind == "small")  # only "small" holds NULLs
        params = sent[-1]
        array = params["ref_picked"]
        if column in ARRAY_OF:
            assert array.oid == ARRAY_OF[column]
        assert _switched(sent) == ([column in ARRAY_OF] if size >= 1000 else [])


@pytest.mark.parametrize("expression, array", [
    ("i + 0", 1007), ("CAST(s AS BIGINT)", 1016), ("COALESCE(s, 0)", 1007), ("-b", 1016), ("abs(s)", 1005),
])
def test_int_lists_take_the_type_of_the_compared_expression(
        numbers_url: str, expression: str, array: int, sent: list[dict[str, Any]]) -> None:
    picks = "SELECT v FROM vals WHERE kind = 'wide'"
    got, want = _run_numbers(numbers_url, picks, f"SELECT id FROM nums WHERE {expression} IN (<picked>)")
    assert collections.Counter(got) == collections.Counter(want) and want
    assert sent[-1]["ref_picked"].oid == array and _switched(sent) == [True]


@pytest.mark.parametrize("table, size", [("nums", 700), ("nums_view", 5000), ("fresh", 5000)],
                         ids=["over 25 rows per value", "a view", "never analyzed"])
def test_a_list_is_hashed_only_where_a_scan_is_known_to_be_small(
        numbers_url: str, table: str, size: int, sent: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A switch stays False (the plain ``= ANY``, which may use an index) unless every table the
    query reads is a plain, analyzed table with at most ``ROWS_PER_VALUE`` rows per value."""
    from structq.safety.sql.rules import references

    monkeypatch.setattr(references, "PG_SWITCHED_LIST", 500)  # so that 700 values are switched
    picks = f"SELECT v FROM vals WHERE kind = 'wide' AND id <= {size}"
    got, want = _run_numbers(numbers_url, picks, f"SELECT id FROM {table} WHERE i IN (<picked>)")
    assert collections.Counter(got) == collections.Counter(want) and want
    assert sent[-1]["ref_picked"].oid == 1007 and _switched(sent) == [False]


def test_describing_a_wrong_statement_leaves_the_transaction_usable(numbers_url: str) -> None:
    """The executor asks the server for list types in a savepoint; a statement that does not
    parse is rolled back to it, so the query itself runs (and fails) as it would have."""
    import psycopg
    from sqlalchemy import make_url

    from structq.executors.sql.postgresql.describe import describe as _describe

    url = make_url(numbers_url)
    with (psycopg.connect(host=url.host, port=url.port, user=url.username, dbname=url.database) as connection,
          connection.cursor() as cursor):
        cursor.execute("SELECT 1")  # a transaction is open
        assert _describe(connection, "SELECT id FROM nums WHERE nothere = ANY(:r)", ("nums",)) is None
        cursor.execute("SELECT count(*) FROM nums")
        assert cursor.fetchall() == [(20000,)]
        types, rows = _describe(connection, "SELECT id FROM nums WHERE b = ANY(:r) AND i = :x LIMIT 5",
                                ("nums", "vals"))
        assert types == {"r": 1016, "x": 23} and rows == 20000.0
        assert _describe(connection, "SELECT 1 WHERE 5 = ANY(:r)", ()) == ({"r": 1007}, 0.0)
        assert _describe(connection, "SELECT id FROM nums WHERE i = ANY(:r)", ("nums", "nums_view"))[1] is None
        cursor.execute("SELECT 2")
        assert cursor.fetchall() == [(2,)]
