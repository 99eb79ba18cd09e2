"""Multi-step plans give the results of the equivalent single query, on real databases.

For every declared foreign key of the Spider (German) and defog databases, in both directions,
a plan ``k: SELECT key FROM a`` → ``rows: … WHERE col IN (<k>)`` (and NOT IN, COUNT, GROUP BY,
an OR around the reference, and the same with ``k`` empty) returns the same multiset of rows
as the single query with the subquery in ``<k>``'s place: on SQLite for both corpora, on
PostgreSQL and MariaDB for the defog databases (loaded from their dumps). A property test
draws random key lists, the empty one included, and checks the same equality.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structq.agent import Engine
from structq.capabilities import Manifest

from multistep_support import (
    DEFOG_WITH_KEYS,
    SHAPES,
    SPIDER_DE,
    Case,
    ForeignKey,
    capabilities,
    case,
    compare,
    defog_foreign_keys,
    defog_sqlite,
    load_postgres,
    manifest,
    run_cases,
    server_tables,
    spider_databases,
    sqlite_foreign_keys,
    sqlite_tables,
)

#: The corpora's fixture skips when they are absent, or fails under STRUCTQ_REQUIRE_CORPORA=1.
pytestmark = [pytest.mark.corpus, pytest.mark.usefixtures("shared_corpora")]
#: Databases reached through ``request.getfixturevalue``, marked as their fixtures would mark them.
SERVERS = [pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("mariadb", marks=pytest.mark.mariadb)]

EMPTY = " WHERE 1 = 0"


def every_case(manifest_: Manifest, keys: list[ForeignKey]) -> Iterator[Case]:
    """Both directions of every key, every shape, with and without an empty key list."""
    for key in keys:
        for direction in key.directions():
            for shape in SHAPES:
                yield case(manifest_, direction, shape)
                yield case(manifest_, direction, shape, keys_where=EMPTY)


def assert_all_equal(manifest_: Manifest, keys: list[ForeignKey]) -> None:
    assert keys, f"{manifest_.source}: no foreign keys found"
    outcomes = run_cases(manifest_, lambda: every_case(manifest_, keys))
    unequal = [f"{o.label}: {o.detail}" for o in outcomes if not o.equal]
    assert not unequal, "\n".join(unequal)
    assert len(outcomes) == len(keys) * 2 * len(SHAPES) * 2


def sqlite_manifest(db: str, path: Path) -> Manifest:
    return manifest(db, f"sqlite:///{path}", "sqlite", sqlite_tables(path))


#: Without the corpora, one placeholder case: the corpora's fixture then skips it (or fails it
#: under STRUCTQ_REQUIRE_CORPORA=1), where an empty list would always be skipped.
SPIDER_WITH_KEYS = [(db, path) for db, path in spider_databases() if sqlite_foreign_keys(db, path)] \
    if SPIDER_DE.is_dir() else [("corpora-missing", Path())]


@pytest.mark.parametrize(("db", "path"), SPIDER_WITH_KEYS, ids=[db for db, _ in SPIDER_WITH_KEYS])
def test_spider_foreign_keys_two_steps_equal_one_query(db: str, path: Path) -> None:
    assert_all_equal(sqlite_manifest(db, path), sqlite_foreign_keys(db, path))


@pytest.mark.parametrize("db", DEFOG_WITH_KEYS)
def test_defog_foreign_keys_two_steps_equal_one_query_sqlite(db: str) -> None:
    assert_all_equal(sqlite_manifest(db, defog_sqlite(db)), defog_foreign_keys(db))


@pytest.fixture(scope="module")
def defog_postgres_manifests(pg_server: Any) -> dict[str, Manifest]:
    urls = {db: load_postgres(pg_server, db) for db in DEFOG_WITH_KEYS}
    return {db: manifest(db, url, "postgres", server_tables(url)) for db, url in urls.items()}


@pytest.fixture(scope="module")
def defog_mariadb_manifests(defog_mariadb: dict[str, str]) -> dict[str, Manifest]:
    """Manifests over the session's defog databases on MariaDB (loaded once, in conftest)."""
    return {db: manifest(db, defog_mariadb[db], "mysql", server_tables(defog_mariadb[db]))
            for db in DEFOG_WITH_KEYS}


@pytest.mark.parametrize("db", DEFOG_WITH_KEYS)
def test_defog_foreign_keys_two_steps_equal_one_query_postgres(db: str, defog_postgres_manifests: dict[str, Manifest]) -> None:
    assert_all_equal(defog_postgres_manifests[db], defog_foreign_keys(db))


@pytest.mark.parametrize("db", DEFOG_WITH_KEYS)
def test_defog_foreign_keys_two_steps_equal_one_query_mariadb(db: str, defog_mariadb_manifests: dict[str, Manifest]) -> None:
    assert_all_equal(defog_mariadb_manifests[db], defog_foreign_keys(db))


# --- property: random key lists, the empty one included --------------------------------------


def _literal(value: Any, dialect: str) -> str:
    from sqlglot import exp

    return exp.convert(value).sql(dialect)


def random_case(manifest_: Manifest, keys: list[ForeignKey], data: st.DataObject) -> Case:
    """A random key of ``keys``, direction and shape; step ``k`` returns a random subset
    (possibly empty) of the key column's values."""
    key = data.draw(st.sampled_from(keys), label="key")
    direction = data.draw(st.sampled_from(key.directions()), label="direction")
    shape = data.draw(st.sampled_from(sorted(SHAPES)), label="shape")
    values = _values(manifest_, direction[0], direction[1])
    chosen = data.draw(st.lists(st.sampled_from(values), max_size=6, unique=True) if values else st.just([]),
                       label="keys")
    dialect = manifest_.sql_dialect
    column = {"mysql": "`{}`"}.get(dialect, '"{}"').format(direction[1])
    where = f" WHERE {column} IN ({', '.join(_literal(v, dialect) for v in chosen)})" if chosen else EMPTY
    return case(manifest_, direction, shape, keys_where=where)


_VALUES: dict[tuple[str, str, str], list[Any]] = {}


def _values(manifest_: Manifest, table: str, column: str) -> list[Any]:
    """The distinct non-null values of ``table.column`` (read once, through structq)."""
    slot = (manifest_.url, table, column)
    if slot not in _VALUES:
        quote = {"mysql": "`{}`"}.get(manifest_.sql_dialect, '"{}"')
        from structq.agent import Plan

        plan = Plan.parse({"steps": [{"output_key": "v", "source": manifest_.source, "query":
                                      f"SELECT DISTINCT {quote.format(column)} FROM {quote.format(table)} "
                                      f"WHERE {quote.format(column)} IS NOT NULL"}]})
        with Engine(capabilities(manifest_)) as engine:
            _VALUES[slot] = sorted((row[0] for row in engine.run(plan).final.rows), key=repr)[:40]
    return _VALUES[slot]


PROPERTY = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _property(manifest_: Manifest, keys: list[ForeignKey], data: st.DataObject) -> None:
    made = random_case(manifest_, keys, data)
    with Engine(capabilities(manifest_)) as engine:
        outcome = compare(engine, made, manifest_.source)
    assert outcome.equal, f"{outcome.label}: {outcome.detail}\n{made.plan}"


@PROPERTY
@given(data=st.data())
def test_random_key_lists_two_steps_equal_one_query_sqlite(data: st.DataObject) -> None:
    db, path = data.draw(st.sampled_from(SPIDER_WITH_KEYS), label="db")
    _property(sqlite_manifest(db, path), sqlite_foreign_keys(db, path), data)


@pytest.mark.parametrize("server", SERVERS)
@PROPERTY
@given(data=st.data())
def test_random_key_lists_two_steps_equal_one_query_on_servers(data: st.DataObject, server: str,
                                                              request: pytest.FixtureRequest) -> None:
    db = data.draw(st.sampled_from(DEFOG_WITH_KEYS), label="db")
    _property(request.getfixturevalue(f"defog_{server}_manifests")[db], defog_foreign_keys(db), data)


# --- the reference grammar on the three databases --------------------------------------------------


@pytest.fixture(params=["sqlite", *SERVERS])
def car_dealership(request: pytest.FixtureRequest) -> Manifest:
    if request.param == "sqlite":
        return sqlite_manifest("car_dealership", defog_sqlite("car_dealership"))
    return request.getfixturevalue(f"defog_{request.param}_manifests")["car_dealership"]


def test_reference_lookalikes_are_text_on_every_database(car_dealership: Manifest) -> None:
    """``'<none>'`` in a literal and ``<a>`` in a comment are text: the plan validates, no
    dependency appears, and the literal comes back as written."""
    from structq.agent import Plan

    plan = Plan.parse({"steps": [
        {"output_key": "a", "source": "car_dealership", "query": "SELECT id FROM cars WHERE id < 0"},
        {"output_key": "b", "source": "car_dealership",
         "query": "SELECT '<none>' AS label, '<a.id>' AS other, COUNT(*) AS n FROM cars /* <a> <zzz> */ "
                  "WHERE id <> -1 AND '<a>' <> '<zzz>'"},
    ]})
    with Engine(capabilities(car_dealership)) as engine:
        assert plan.dependencies(engine.capabilities) == {"a": [], "b": []}
        result = engine.run(plan).final
    assert result.skipped is None and result.rows[0][:2] == ("<none>", "<a.id>") and result.rows[0][2] > 0


# --- column names survive ------------------------------------------------------------------------


@pytest.mark.parametrize("reference", ["<c.sbCustId>", "<c.SBCUSTID>", "<c>"])
def test_result_columns_keep_the_names_the_query_wrote(car_dealership: Manifest, reference: str) -> None:
    """A mixed-case alias comes back as written and a later step refers to it (in any case);
    an unaliased expression is named by its text as written, not by the rewritten SQL."""
    from structq.agent import Plan

    plan = Plan.parse({"steps": [
        {"output_key": "c", "source": "car_dealership", "query": "SELECT id AS sbCustId FROM customers"},
        {"output_key": "s", "source": "car_dealership",
         "query": f"SELECT max(sale_price), COUNT(*), Customer_Id AS \"Buyer Id\" FROM sales "
                  f"WHERE customer_id IN ({reference}) GROUP BY Customer_Id ORDER BY Customer_Id LIMIT 1"},
    ]})
    with Engine(capabilities(car_dealership)) as engine:
        result = engine.run(plan)
    assert result.steps["c"].columns == ("sbCustId",)
    assert result.final.columns == ("max(sale_price)", "COUNT(*)", "Buyer Id") and result.final.row_count == 1


@pytest.mark.parametrize(("sql", "names"), [
    ("SELECT max(kapazität), stadion.Name FROM stadion", ("max(kapazität)", "Name")),
    ("SELECT DISTINCT sbCustName AS sbCustName FROM stadion", ("sbCustName",)),
    ("SELECT name FROM stadion UNION SELECT Name AS N FROM stadion", ("name",)),
    ("WITH s AS (SELECT name FROM stadion) SELECT COUNT(*), upper( name ) FROM s", ("COUNT(*)", "upper( name )")),
    ("SELECT [a b] FROM stadion", ("a b",)),
    ("SELECT name, Name, name AS name_2 FROM stadion", ("name", "Name_3", "name_2")),  # told apart
    # a star's columns in the manifest's spelling, told apart from the items around them
    ("SELECT * FROM stadion", ("name", "kapazität", "sbCustName", "a b")),
    ("SELECT stadion.*, 1 FROM stadion", ("name", "kapazität", "sbCustName", "a b", "1")),
    ("SELECT SBCUSTNAME AS Who, s.* FROM stadion s", ("Who", "name", "kapazität", "sbCustName", "a b")),
    ("SELECT *, sbcustname FROM stadion", ("name", "kapazität", "sbCustName", "a b", "sbcustname_2")),
    ("SELECT * FROM stadion UNION SELECT * FROM stadion", ("name", "kapazität", "sbCustName", "a b")),
    ("SELECT * FROM stadion a JOIN stadion b USING (sbCustName)",
     ("name", "kapazität", "sbCustName", "a b", "name_2", "kapazität_2", "a b_2")),
    # a derived table's or CTE's columns go by their names there, as written
    ("SELECT * FROM (SELECT sbCustName AS Who, [a b] FROM stadion) d", ("Who", "a b")),
    ("WITH Stats AS (SELECT COUNT(*) AS Total, Name FROM stadion GROUP BY name) SELECT s.*, 2 FROM stats s",
     ("Total", "Name", "2")),
    # … by their matching names where those are not known as written, or not for sure
    ("WITH s AS (SELECT * FROM stadion) SELECT * FROM s", ("name", "kapazität", "sbcustname", "a b")),
    ("SELECT * FROM (SELECT MAX(name) FROM stadion) d", ("_col_0",)),
    ("SELECT * FROM (SELECT sbCustName AS Who FROM stadion) d "
     "WHERE EXISTS (SELECT 1 FROM (SELECT name AS WHO FROM stadion) d)", ("who",)),
    ("SELECT (SELECT * FROM stadion LIMIT 1) FROM stadion", None),  # a star inside an item
])
def test_output_names_are_read_from_the_query_as_written(sql: str, names: tuple[str, ...] | None) -> None:
    from structq.safety import check_sql

    stadium = manifest("st", "sqlite:///st.db", "sqlite",
                       {"stadion": ["name", "kapazität", "sbCustName", "a b"]})
    assert check_sql(sql, stadium).names == names


# --- every column type compares as the single query compares it -----------------------------------


def same_column_cases(manifest_: Manifest) -> Iterator[Case]:
    """``k: SELECT col FROM t`` → ``COUNT(*) … WHERE col IN (<k>)``, for every column of every
    table: each of the database's value types (dates, timestamps, decimals, text) travels
    through a list and is compared with its own column again."""
    for table in manifest_.tables:
        for column in table.columns:
            yield case(manifest_, (table.name, column.name, table.name, column.name), "count_in")


def test_every_column_type_round_trips_through_a_list(car_dealership: Manifest) -> None:
    outcomes = run_cases(car_dealership, lambda: same_column_cases(car_dealership))
    unequal = [f"{o.label}: {o.detail}" for o in outcomes if not o.equal]
    assert not unequal, "\n".join(unequal)
