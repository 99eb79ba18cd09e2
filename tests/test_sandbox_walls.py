"""No undeclared column is readable: canary differentials on SQLite, PostgreSQL and MariaDB.

The table ``products`` has a column the manifest does not declare, ``cost_secret``, holding
``COSTSECRET_1`` … ``COSTSECRET_5``. Each leak shape below asks the database, one way or
another, whether ``cost_secret`` equals a literal — through an output alias of the same name
inside an ORDER BY / GROUP BY / HAVING / DISTINCT ON / window expression, a derived table or
scalar subquery whose order feeds ``LIMIT 1`` or a string aggregate. The sandbox must either
refuse it, or accept it only where it is *proven harmless*: the accepted query run with the
canary literal (a real secret) and with a literal that matches nothing gives the same rows
(or fails the same way). A difference would mean the database compared the real column.

The shapes are hand-written from what was found by trying them on the databases, and generated
(hypothesis) by wrapping the name in the expressions the ORDER BY / HAVING / GROUP BY leaks used.
``test_the_canary_sees_the_secret`` shows the differential has teeth: the same shapes sent to
the database without the sandbox do tell the literals apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_support import table_engine
from sqlalchemy import bindparam, text
from sqlalchemy.engine import Engine

from structq.capabilities import Manifest, load_manifest_text
from structq.errors import SandboxViolation
from structq.safety import SafeQuery, check_sql

CANARY = "COSTSECRET_2"
NOTHING = "NO_SUCH_VALUE_9"
ROWS = [(i, f"item{i}", 10 * i, f"COSTSECRET_{i}") for i in range(1, 6)]
DIALECTS = ("sqlite", "postgres", "mysql")


def manifest(dialect: str, url: str = "sqlite://") -> Manifest:
    return load_manifest_text(f"""
source: shop
kind: sql
url: {url}
dialect: {dialect}
tables:
  - name: products
    columns:
      - {{name: id, type: integer}}
      - {{name: name, type: text}}
      - {{name: price, type: integer}}
""")[0]


@pytest.fixture(scope="module", params=DIALECTS)
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, Engine]]:
    create = "CREATE TABLE products (id integer, name varchar(20), price integer, cost_secret varchar(20))"
    engine = table_engine(request, request.param, "walls_canary", create, ROWS)
    yield request.param, engine
    engine.dispose()


def _run(engine: Engine, sql: str, params: dict[str, Any], expanding: frozenset[str] = frozenset()) -> object:
    """The rows, or the kind of error the database raised (an error is an answer too)."""
    statement = text(sql)
    if expanding:
        statement = statement.bindparams(*(bindparam(name, expanding=True) for name in expanding))
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(statement, params)]
    except Exception as exc:  # noqa: BLE001 - the differential compares outcomes, errors included
        return ("error", type(exc).__name__)


def _cast(dialect: str) -> str:
    return "CHAR" if dialect == "mysql" else "TEXT"


def _concat(dialect: str, left: str, right: str) -> str:
    return f"CONCAT({left}, {right})" if dialect == "mysql" else f"{left} || {right}"


def _string_agg(dialect: str, expression: str) -> str:
    return {"sqlite": f"group_concat({expression})", "postgres": f"string_agg(CAST({expression} AS TEXT), ',')",
            "mysql": f"GROUP_CONCAT({expression})"}[dialect]


def shapes(dialect: str) -> list[str]:
    """The leak shapes, ``{v}`` standing for the literal compared with ``cost_secret``."""
    cast, agg = _cast(dialect), _string_agg(dialect, "id")
    order = "CASE WHEN cost_secret = '{v}' THEN 0 ELSE 1 END"
    listed = [
        f"SELECT id, 'k' AS cost_secret FROM products ORDER BY {order}, id DESC",
        "SELECT id, 'k' AS cost_secret FROM products ORDER BY cost_secret = '{v}', id",
        "SELECT id, 'k' AS cost_secret FROM products ORDER BY cost_secret IN ('{v}', 'x') DESC, id",
        "SELECT id, 'k' AS cost_secret FROM products ORDER BY cost_secret LIKE '{v}' DESC, id",
        "SELECT id, 'k' AS cost_secret FROM products ORDER BY cost_secret BETWEEN '{v}' AND '{v}' DESC, id",
        f"SELECT id, 'k' AS cost_secret FROM products ORDER BY CAST(cost_secret AS {cast}) = '{{v}}' DESC, id",
        "SELECT id, 'k' AS cost_secret FROM products ORDER BY COALESCE(cost_secret, 'x') = '{v}' DESC, id",
        "SELECT id, 'k' AS cost_secret FROM products ORDER BY NULLIF(cost_secret, '{v}') IS NULL DESC, id",
        f"SELECT id, 'k' AS cost_secret FROM products ORDER BY MAX({order}) OVER (PARTITION BY id), id",
        f"SELECT id, name AS cost_secret FROM products ORDER BY {order}, id DESC",
        f"SELECT id, price AS cost_secret FROM products ORDER BY {order}, id DESC",
        f"SELECT id FROM (SELECT id, 'k' AS cost_secret FROM products ORDER BY {order}, id DESC LIMIT 1) AS t",
        f"SELECT (SELECT id FROM (SELECT id, 'k' AS cost_secret FROM products ORDER BY {order}, id DESC LIMIT 1) AS t) AS first",
        f"SELECT (SELECT s.id FROM (SELECT id, 'k' AS cost_secret FROM products) AS s ORDER BY {order}, s.id DESC LIMIT 1) AS first",
        f"SELECT {agg} AS ids FROM (SELECT id, 'k' AS cost_secret FROM products ORDER BY {order}, id DESC) AS t",
        "SELECT id, COUNT(*) AS cost_secret FROM products GROUP BY id HAVING MAX(cost_secret) = '{v}'",
        "SELECT id, 'k' AS cost_secret FROM products GROUP BY id HAVING MAX(cost_secret) = '{v}'",
        "SELECT COUNT(*) AS n, 'k' AS cost_secret FROM products GROUP BY cost_secret = '{v}' ORDER BY n",
        "SELECT id, 'k' AS cost_secret FROM products GROUP BY id, " + _concat(dialect, "cost_secret", "''") + " ORDER BY id",
        "SELECT COUNT(*) AS n, 'k' AS cost_secret FROM products GROUP BY " + order + " ORDER BY n",
        "SELECT id, 'k' AS cost_secret, ROW_NUMBER() OVER (ORDER BY cost_secret = '{v}' DESC, id) AS r FROM products ORDER BY r",
        "SELECT id, 'k' AS cost_secret, COUNT(*) OVER (PARTITION BY cost_secret = '{v}') AS c FROM products ORDER BY id",
        "SELECT DISTINCT ON (cost_secret = '{v}') id, 'k' AS cost_secret FROM products ORDER BY cost_secret = '{v}', id",
        "SELECT cost_secret FROM products WHERE cost_secret = '{v}'",
        "SELECT id FROM products AS p WHERE EXISTS (SELECT 1 FROM products AS q WHERE q.id = p.id AND q.cost_secret = '{v}')",
    ]
    return listed


def _outcome(engine: Engine, dialect: str, shape: str, value: str) -> object:
    """The accepted query's outcome with ``value`` for the literal; None when refused."""
    query = shape.replace("{v}", value)
    try:
        safe: SafeQuery = check_sql(query, manifest(dialect))
    except SandboxViolation:
        return None
    return _run(engine, safe.text, safe.params, safe.expanding)  # type: ignore[arg-type]


def assert_harmless(engine: Engine, dialect: str, shape: str) -> None:
    """Refused, or the same outcome whether the literal is the canary or matches nothing."""
    with_canary = _outcome(engine, dialect, shape, CANARY)
    with_nothing = _outcome(engine, dialect, shape, NOTHING)
    assert (with_canary is None) == (with_nothing is None), f"refused with one literal only: {shape}"
    assert with_canary == with_nothing, f"the rows tell the literals apart (a leak): {shape}\n{with_canary}\n{with_nothing}"


@pytest.mark.parametrize("index", range(len(shapes("sqlite"))))
def test_leak_shapes_are_refused_or_harmless(target: tuple[str, Engine], index: int) -> None:
    dialect, engine = target
    assert_harmless(engine, dialect, shapes(dialect)[index])


def test_the_canary_sees_the_secret(target: tuple[str, Engine]) -> None:
    """Without the sandbox the databases read ``cost_secret`` in most shapes: the differential
    is able to see a leak, so a pass above means one was not there."""
    dialect, engine = target
    leaks = [shape for shape in shapes(dialect)
             if _run(engine, shape.replace("{v}", CANARY), {}) != _run(engine, shape.replace("{v}", NOTHING), {})]
    assert len(leaks) >= 10, leaks


# ---- generated variants: the name wrapped in the expressions the leaks used -------------------

_WRAPPERS = [
    "{x}",
    "CASE WHEN {x} = '{v}' THEN 0 ELSE 1 END",
    "({x} = '{v}')",
    "({x} IN ('{v}', 'zz'))",
    "({x} LIKE '{v}')",
    "({x} BETWEEN '{v}' AND '{v}')",
    "CAST({x} AS {cast})",
    "COALESCE({x}, 'zz')",
    "NULLIF({x}, '{v}')",
    "UPPER({x})",
    "LOWER({x})",
    "SUBSTR({x}, 1, 12)",
    "LENGTH({x})",
    "({x} IS NULL)",
]
_ALIASES = ["'k'", "COUNT(*)", "name", "price", "MAX(name)", "NULL"]


@st.composite
def _wrapped(draw: st.DrawFn, dialect: str) -> str:
    expression = "cost_secret"
    for _ in range(draw(st.integers(1, 3))):
        wrapper = draw(st.sampled_from(_WRAPPERS))
        expression = wrapper.replace("{x}", expression).replace("{cast}", _cast(dialect))
    if "{v}" not in expression:
        expression = f"CASE WHEN {expression} = '{{v}}' THEN 0 ELSE 1 END"
    alias = draw(st.sampled_from(_ALIASES))
    aggregate = alias in ("COUNT(*)", "MAX(name)")
    clause = draw(st.sampled_from(["order", "having", "group", "window"]))
    if clause == "order":
        group = " GROUP BY id" if aggregate else ""
        return f"SELECT id, {alias} AS cost_secret FROM products{group} ORDER BY {expression}, id DESC"
    if clause == "having":
        return f"SELECT id, {alias} AS cost_secret FROM products GROUP BY id HAVING MAX({expression}) = 0 ORDER BY id"
    if clause == "group":
        return f"SELECT COUNT(*) AS n, {alias} AS cost_secret FROM products GROUP BY {expression} ORDER BY n"
    return (f"SELECT id, {alias} AS cost_secret, ROW_NUMBER() OVER (ORDER BY {expression}, id DESC) AS r "
            f"FROM products{' GROUP BY id' if aggregate else ''} ORDER BY r")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_wrappings_are_refused_or_harmless(target: tuple[str, Engine], data: st.DataObject) -> None:
    dialect, engine = target
    assert_harmless(engine, dialect, data.draw(_wrapped(dialect)))
