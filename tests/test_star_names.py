"""A star's result columns come back named as the database's catalogue spells them, and every
name the rewritten query writes is quoted where the database needs it.

The sandbox expands ``SELECT *`` to the allowed columns and aliases each by its name
lower-cased for matching (``hiring."Shop_ID" AS shop_id``), so the database alone would label
the result ``shop_id``. The names recorded for the result (``names.name_expanded``) restore the
manifest's spelling, which a synced manifest takes from the catalogue: the labels must equal
those the database gives the same star query run directly, with the same rows, on SQLite,
PostgreSQL and MariaDB. The tables use mixed case, names with a space and names that are
words a database reserves (``group``, a table called ``order``), which must be written quoted
wherever the rewrite puts them: stars, qualifiers, output aliases, derived tables
(``quoting.py``). The reserved-word lists are checked against the databases themselves, and
queries over any name SQLite allows run (a property test).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multistep_support import manifest

from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet

#: Table → columns, in the catalogue's spelling. The join key comes first in both tables, where
#: every database puts a USING column of ``SELECT *``.
#: ``shop name`` and ``group`` need quotes in any case: being lower case already, they are not
#: respelled, so nothing but the quoting rule quotes them.
TABLES = {"Hiring": ["Shop_ID", "Employee_ID", "Is Full Time"], "Shop": ["Shop_ID", "shop name", "group"],
          "order": ["id", "select", "Shop_ID", "a.b", 'say "hi"']}
ROWS = {"Hiring": [(1, 10, "T"), (2, 20, "F"), (1, 30, "F")], "Shop": [(1, "Alpha", "a"), (2, "Beta", "b")],
        "order": [(1, "x", 1, "p", "q"), (2, "y", 2, "r", "s")]}

#: Written as a model would write them: names in any case, no quotes where none are needed.
STAR_QUERIES = {
    "star": ("SELECT * FROM hiring", 'SELECT * FROM {Hiring}'),
    "qualified star": ("SELECT h.* FROM hiring h", 'SELECT h.* FROM {Hiring} h'),
    "union of stars": ("SELECT * FROM hiring UNION ALL SELECT * FROM hiring",
                       "SELECT * FROM {Hiring} UNION ALL SELECT * FROM {Hiring}"),
    "star over USING": ("SELECT * FROM hiring JOIN shop USING (shop_id)",
                        "SELECT * FROM {Hiring} JOIN {Shop} USING ({Shop_ID})"),
}


def _quoted(name: str, dialect: str) -> str:
    quote = "`" if dialect == "mysql" else '"'
    return quote + name.replace(quote, quote * 2) + quote


def _load(url: str, dialect: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        for table, columns in TABLES.items():
            kinds = ["INTEGER" if column.lower().endswith("id") else "VARCHAR(20)" for column in columns]
            definition = ", ".join(f"{_quoted(c, dialect)} {k}" for c, k in zip(columns, kinds))
            connection.execute(sa.text(f"CREATE TABLE {_quoted(table, dialect)} ({definition})"))
            for row in ROWS[table]:
                values = ", ".join(repr(v) for v in row)
                connection.execute(sa.text(f"INSERT INTO {_quoted(table, dialect)} VALUES ({values})"))
    engine.dispose()


@pytest.fixture
def database(empty_database: tuple[str, str, Callable[[], None]]) -> tuple[str, str]:
    """(URL, dialect) of a database holding ``TABLES``, for each dialect."""
    url, dialect, _ = empty_database
    _load(url, dialect)
    return url, dialect


def _direct(url: str, sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """Labels and rows as the database gives them for ``sql``."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            result = connection.execute(sa.text(sql))
            return tuple(result.keys()), [tuple(row) for row in result]
    finally:
        engine.dispose()


def _run(url: str, dialect: str, sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    source = manifest("names", url, dialect, TABLES)
    plan = Plan.parse({"steps": [{"output_key": "r", "source": "names", "query": sql}]})
    with Engine(CapabilitySet([source])) as engine:
        final = engine.run(plan).final
    assert final.skipped is None, final.skipped
    return tuple(final.columns), [tuple(row) for row in final.rows]


def _as_records(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> collections.Counter[frozenset[tuple[str, str]]]:
    """Rows as label → value, compared as text: the order of the columns is the database's."""
    return collections.Counter(frozenset((c, str(v)) for c, v in zip(columns, row)) for row in rows)


@pytest.mark.parametrize("label", list(STAR_QUERIES))
def test_star_columns_are_labelled_as_the_database_labels_them(database: tuple[str, str], label: str) -> None:
    url, dialect = database
    ours, direct = STAR_QUERIES[label]
    names = {name: _quoted(name, dialect) for name in [*TABLES, *TABLES["Hiring"]]}
    columns, rows = _run(url, dialect, ours)
    direct_columns, direct_rows = _direct(url, direct.format(**names))
    assert sorted(columns) == sorted(direct_columns)
    assert _as_records(columns, rows) == _as_records(direct_columns, direct_rows)


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT shop_id AS Shop, h.*, 1 AS One FROM hiring h", ("Shop", "Shop_ID", "Employee_ID", "Is Full Time", "One")),
    # a name the database would give twice is told apart, as everywhere in results
    ("SELECT * FROM hiring h JOIN shop s ON h.shop_id = s.shop_id",
     ("Shop_ID", "Employee_ID", "Is Full Time", "Shop_ID_2", "shop name", "group")),
])
def test_star_columns_among_other_items_keep_their_places(database: tuple[str, str], sql: str,
                                                          expected: tuple[str, ...]) -> None:
    url, dialect = database
    columns, rows = _run(url, dialect, sql)
    assert columns == expected and len(rows) == 3


@pytest.mark.parametrize(("sql", "direct", "expected"), [
    # qualification writes the table's name as the qualifier of each column it reads
    ('SELECT id FROM "order" WHERE id > 1', 'SELECT {id} FROM {order} WHERE {id} > 1', [(2,)]),
    # a derived table's outputs, named again outside it
    ("SELECT * FROM (SELECT * FROM shop) s ORDER BY s.shop_id", None, [(1, "Alpha", "a"), (2, "Beta", "b")]),
    ('SELECT x.* FROM (SELECT "select" AS "group" FROM "order") x ORDER BY 1', None, [("x",), ("y",)]),
    ('SELECT s."group", COUNT(*) AS n FROM shop s JOIN "order" o USING (shop_id) GROUP BY s."group" ORDER BY 1',
     None, [("a", 1), ("b", 1)]),
    # names that are no plain identifiers, a star over a USING join (where the database puts
    # its column: first on PostgreSQL and MariaDB, in place on SQLite), a derived table's star
    ('SELECT * FROM "order" JOIN shop USING (shop_id) ORDER BY 1',
     "SELECT * FROM {order} JOIN {Shop} USING ({Shop_ID}) ORDER BY 1", None),
    ('SELECT o.* FROM (SELECT * FROM "order") o ORDER BY 1', None, [(1, "x", 1, "p", "q"), (2, "y", 2, "r", "s")]),
])
def test_names_that_need_quotes_are_quoted_wherever_the_rewrite_writes_them(
        database: tuple[str, str], sql: str, direct: str | None, expected: list[tuple[Any, ...]] | None) -> None:
    url, dialect = database
    if dialect == "mysql":
        sql = sql.replace('"', "`")
    _, rows = _run(url, dialect, sql)
    if direct is not None:
        names = {name: _quoted(name, dialect) for name in ("id", "order", "Shop", "Shop_ID")}
        _, direct_rows = _direct(url, direct.format(**names))
        assert rows == direct_rows
    assert expected is None or rows == expected


def test_every_word_sqlite_refuses_as_a_name_is_quoted() -> None:
    """Probed on the database: each word some dialect's tokenizer knows (and PostgreSQL's
    keywords), used bare as a column after a dot, an output alias and a table alias."""
    import sqlite3

    import sqlglot

    from structq.safety.sql.quoting import reserved_words

    words = {w.lower() for name in ("sqlite", "postgres", "mysql") for w in
             sqlglot.Dialect.get_or_raise(name).tokenizer_class.KEYWORDS if w.replace("_", "").isalpha()}
    words |= reserved_words("postgres")
    refused = set()
    for word in sorted(words):
        db = sqlite3.connect(":memory:")
        db.execute(f'CREATE TABLE t ("{word}" INT)')
        for query in (f"SELECT t.{word} AS {word} FROM t", f'SELECT {word}."{word}" FROM t AS {word}'):
            try:
                db.execute(query)
            except sqlite3.Error:
                refused.add(word)
        db.close()
    assert {"group", "order", "alter", "select"} <= refused  # the probe does find them
    assert refused <= reserved_words("sqlite")


def test_every_word_postgres_reserves_is_quoted(pg_server: Any) -> None:
    from structq.safety.sql.quoting import reserved_words

    engine = sa.create_engine(pg_server.admin_url)
    try:
        with engine.connect() as connection:
            words = {w for (w,) in connection.execute(sa.text(
                "SELECT word FROM pg_get_keywords() WHERE catcode IN ('R', 'T')"))}
    finally:
        engine.dispose()
    assert len(words) > 50 and words <= reserved_words("postgres")


def test_a_star_over_using_writes_every_name_that_needs_quotes_quoted() -> None:
    """``qualify_columns`` writes a star over a USING join as unquoted columns; each is quoted
    where its name needs it once it is written in the manifest's spelling."""
    from structq.safety import check_sql

    for dialect in ("sqlite", "postgres", "mysql"):
        source = manifest("names", "sqlite:///unused.db" if dialect == "sqlite" else f"{dialect}://h/db", dialect, TABLES)
        text = check_sql("SELECT * FROM hiring JOIN shop USING (shop_id)", source).text
        quote: Callable[[str], str] = lambda name: _quoted(name, dialect)  # noqa: E731
        assert f"hiring.{quote('Is Full Time')}" in text and f"shop.{quote('shop name')}" in text, text
        assert f"shop.{quote('group')}" in text, text


# --- any name the database allows, on every dialect ------------------------------------------------

#: Names a database allows when quoted, that the rewrite must therefore quote: words SQLite or
#: PostgreSQL reserve, mixed case, spaces, quotes of every kind, dots, a leading digit, letters
#: beyond ASCII.
_AWKWARD = ["group", "order", "select", "key", "values", "Index", "From", "alter", "match", "date", "user",
            "Shop ID", "a b", 'say "hi"', "back`tick", "[br]", "a.b", "a-b", "1st", "Größe", "ÄÖ", "x;y", "n'o"]
_PLAIN = ["id", "name", "amount", "k"]


@st.composite
def _schemas(draw: st.DrawFn) -> tuple[str, list[str], str, list[str], str, int | None]:
    """(table, its columns, a second table, its columns, the key both have, the index of a
    denied column of the first or None); names distinct without regard to case."""
    pool = st.sampled_from(_AWKWARD + _PLAIN)
    names = draw(st.lists(pool, min_size=6, max_size=8, unique_by=lambda n: n.lower()))
    table, other, key, *rest = names
    columns = [key, *rest[: len(rest) // 2]]
    others = [key, *rest[len(rest) // 2 :]]
    denied = draw(st.one_of(st.none(), st.integers(1, len(columns) - 1))) if len(columns) > 2 else None
    return table, columns, other, others, key, denied


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, Callable[[], None]]:
    """(URL, dialect, a function that empties it) of a fresh database for each dialect; the
    function starts each example of a property test afresh."""
    dialect = request.param
    if dialect == "sqlite":
        path = tmp_path / "any.db"
        return f"sqlite:///{path}", dialect, lambda: path.unlink(missing_ok=True)
    server = request.getfixturevalue("pg_server" if dialect == "postgres" else "mariadb_server")
    name = f"any_names_{tmp_path.name[-6:]}".replace("-", "_").lower()
    url = server.create_database(name)
    if dialect == "postgres":
        statements = [("DROP SCHEMA public CASCADE", None), ("CREATE SCHEMA public", None)]
        return url, dialect, lambda: server.execute(statements, database=name)
    statements = [(f"DROP DATABASE {name}", None), (f"CREATE DATABASE {name} CHARACTER SET utf8mb4", None)]
    return url, dialect, lambda: server.execute(statements)


@given(schema=_schemas())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_queries_over_any_names_run_and_read_only_the_allowed_columns(
        empty_database: tuple[str, str, Callable[[], None]], schema: Any) -> None:
    from structq.capabilities import Manifest

    url, dialect, empty = empty_database
    table, columns, other, others, key, denied = schema
    empty()
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        for name, cols in ((table, columns), (other, others)):
            definition = ", ".join(f"{_quoted(c, dialect)} VARCHAR(40)" for c in cols)
            connection.execute(sa.text(f"CREATE TABLE {_quoted(name, dialect)} ({definition})"))
            for row in (1, 2):
                values = {f"v{i}": f"{c}-{row}" if c != key else str(row) for i, c in enumerate(cols)}
                marks = ", ".join(f":{v}" for v in values)
                connection.execute(sa.text(f"INSERT INTO {_quoted(name, dialect)} VALUES ({marks})"), values)
    engine.dispose()
    allowed = [c for i, c in enumerate(columns) if i != denied]
    source = Manifest.model_validate({
        "source": "names", "kind": "sql", "url": url, "dialect": dialect,
        "limits": {"max_rows": 100, "max_intermediate_rows": 100, "timeout_s": 10},
        "tables": [
            {"name": table, "columns": [{"name": c, "type": "text", **({"access": "deny"} if i == denied else {})}
                                        for i, c in enumerate(columns)]},
            {"name": other, "columns": [{"name": c, "type": "text"} for c in others]},
        ],
    })
    expected = [tuple(f"{c}-{row}" if c != key else str(row) for c in allowed) for row in (1, 2)]
    t, u, k = (_quoted(name, dialect) for name in (table, other, key))

    def run(sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        plan = Plan.parse({"steps": [{"output_key": "r", "source": "names", "query": sql}]})
        with Engine(CapabilitySet([source])) as engine:
            final = engine.run(plan).final
        return tuple(final.columns), sorted(tuple(row) for row in final.rows)

    assert run(f"SELECT * FROM {t}") == (tuple(allowed), expected)
    assert run(f"SELECT x.* FROM (SELECT * FROM {t}) x")[1] == expected
    assert run(f"SELECT a.* FROM {t} a JOIN {u} b ON a.{k} = b.{k}") == (tuple(allowed), expected)
    joined_columns, joined = run(f"SELECT * FROM {t} JOIN {u} USING ({k})")
    assert len(joined) == 2 and len(joined_columns) == len(allowed) + len(others) - 1
    last = _quoted(allowed[-1], dialect)
    assert run(f"SELECT {last} FROM {t} WHERE {last} IS NOT NULL ORDER BY {last}")[1] == [(r[-1],) for r in expected]
