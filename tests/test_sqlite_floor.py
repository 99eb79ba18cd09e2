"""``floor()`` answers as SQLite's own on every connection structq runs SQL on.

SQLite is the judge: ``sqlite_floor`` (registered where a build lacks the math functions, or
where SQLAlchemy replaced them with Python's ``math.floor``) must give what the native function
gives, value for value and type for type.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structq.executors.floor import install_floor, sqlite_floor


def _native() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("SELECT floor(1.5)")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite build has no math functions to compare with")
    return connection


_NUMERIC_TEXT = st.from_regex(r"\A\s?[+-]?(\d{1,20}(\.\d{0,5})?|\.\d{1,5})([eE][+-]?\d{1,3})?\s?\Z")
VALUES = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), _NUMERIC_TEXT,
                   st.text(max_size=8), st.binary(max_size=4))


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_fallback_answers_as_sqlite(value: object) -> None:
    connection = _native()
    (expected,) = connection.execute("SELECT floor(?)", (value,)).fetchone()
    got = sqlite_floor(value)
    assert type(got) is type(expected)
    assert got == expected or (isinstance(got, float) and math.isnan(got) and math.isnan(expected))


def test_a_connection_whose_floor_is_pythons_gets_sqlites() -> None:
    connection = sqlite3.connect(":memory:")
    connection.create_function("floor", 1, math.floor)  # what SQLAlchemy's SQLite dialect registers
    install_floor(connection)
    assert connection.execute("SELECT floor(2.5), floor(NULL), floor(-0.5)").fetchone() == (2.0, None, -1.0)
    assert type(connection.execute("SELECT floor(2.5)").fetchone()[0]) is float


def test_a_source_and_a_local_step_floor_alike(tmp_path: Path) -> None:
    from structq.executors.local.executor import LocalExecutor
    from structq.executors.sql.sqlite import connect_read_only
    from structq.safety.query import SafeQuery

    query = "SELECT floor(2.5), floor(NULL), floor(-7), floor('3'), floor('x')"
    database = tmp_path / "d.db"
    sqlite3.connect(database).close()
    on_file = connect_read_only(str(database), 5.0).execute(query).fetchone()
    local = LocalExecutor().fetch(SafeQuery(source="local", kind="sql", limit=3, max_rows=2, text=query)).rows[0]
    assert on_file == tuple(local) == (2.0, None, -7, 3, None)
