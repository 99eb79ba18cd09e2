"""Property: whatever the SQL sandbox accepts reads only declared tables and allowed columns.

Queries are generated from random combinations of declared / undeclared tables, allowed /
denied / unknown columns, allowed / denied functions, joins, subqueries, unions and CTEs. For
every query that ``check_sql`` accepts, the OUTPUT is re-parsed independently and must:
read only declared tables (or CTE / derived-table names), mention no denied column anywhere,
carry an outermost LIMIT ≤ max_rows + 1, and be accepted again by ``check_sql``.
"""

from __future__ import annotations

import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from sandbox_support import manifest
from structq.errors import SandboxViolation
from structq.safety import check_sql

MANIFEST = manifest("sqlite", filters=False)
DECLARED = {t.name for t in MANIFEST.tables}
DENIED = {c.name for t in MANIFEST.tables for c in t.columns if c.denied}
TABLES = sorted(DECLARED) + ["secrets", "sqlite_master"]
COLUMNS = sorted({c.name for t in MANIFEST.tables for c in t.columns}) + ["bogus", "pwd"]
FUNCTIONS = ["COUNT", "MAX", "LOWER", "ABS", "load_extension", "randomblob", "sqlite_version"]

table = st.sampled_from(TABLES)
column = st.sampled_from(COLUMNS)


@st.composite
def projection(draw, alias: str) -> str:
    col = draw(st.sampled_from(["*", alias + ".*", draw(column), alias + "." + draw(column)]))
    if col.endswith("*") or not draw(st.booleans()):
        return col
    return draw(st.sampled_from(FUNCTIONS)) + "(" + col + ")"


@st.composite
def select(draw, depth: int = 0) -> str:
    t1 = draw(table)
    parts = ["SELECT", draw(projection("a")), "FROM", t1, "AS a"]
    if draw(st.booleans()):
        parts += ["JOIN" if draw(st.booleans()) else "LEFT JOIN", draw(table), "AS b ON a." + draw(column), "= b." + draw(column)]
    if draw(st.booleans()):
        condition = "a." + draw(column) + " = 1"
        if depth < 2 and draw(st.booleans()):
            condition = draw(column) + " IN (" + draw(select(depth + 1)) + ")"
        parts += ["WHERE", condition]
    if draw(st.booleans()):
        parts += ["LIMIT", str(draw(st.sampled_from([1, 50, 101, 5000])))]
    return " ".join(parts)


@st.composite
def query(draw) -> str:
    body = draw(select())
    shape = draw(st.sampled_from(["plain", "union", "cte", "derived"]))
    if shape == "union":
        return draw(select()) .split(" LIMIT")[0] + " UNION " + body.split(" LIMIT")[0]
    if shape == "cte":
        return "WITH c AS (" + body + ") SELECT * FROM c"
    if shape == "derived":
        return "SELECT * FROM (" + body + ") AS d"
    return body


def _outer_limit(tree: exp.Expr) -> int:
    limit = tree.args.get("limit")
    assert isinstance(limit, exp.Limit), "the outermost query must carry a LIMIT"
    return int(limit.expression.this)


def _cte_and_derived_names(tree: exp.Expr) -> set[str]:
    names = {cte.alias for cte in tree.find_all(exp.CTE)}
    names |= {sub.alias for sub in tree.find_all(exp.Subquery) if sub.alias}
    return names


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query())
def test_accepted_queries_read_only_what_is_allowed(sql: str) -> None:
    try:
        result = check_sql(sql, MANIFEST)
    except SandboxViolation:
        return
    tree = sqlglot.parse_one(result.text, read="sqlite")
    local = _cte_and_derived_names(tree)
    for node in tree.find_all(exp.Table):
        assert not node.args.get("db") and not node.args.get("catalog")
        assert node.name in DECLARED or node.name in local, node.name
    for identifier in tree.find_all(exp.Identifier):
        assert identifier.name not in DENIED, result.text
    for func in tree.find_all(exp.Anonymous):
        assert func.name.lower() not in {"load_extension", "randomblob", "sqlite_version"}
    assert _outer_limit(tree) <= MANIFEST.limits.max_rows + 1
    again = check_sql(result.text, MANIFEST)
    assert _outer_limit(sqlglot.parse_one(again.text, read="sqlite")) <= MANIFEST.limits.max_rows + 1
    assert set(again.tables) <= set(result.tables)
