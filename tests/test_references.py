"""The one reference grammar: where ``<key>`` / ``<key.column>`` is a reference, and when an
empty input provably empties a step.

Plan validation, the engine's dependency order, the sandbox's binding and local-input
detection all read references through ``structq.capabilities.references``; these tests pin
what that function says, dialect by dialect. Engine-level runs of the same lookalikes on the
three real engines are in ``test_multistep.py``.
"""

from __future__ import annotations

import pytest

from structq.agent import Plan
from structq.agent.empty import empty_when_input_empty
from structq.agent.plan import Step
from structq.capabilities import Reference, find_references, local_inputs, replace_references
from structq.errors import PlanError
from structq.safety import check_sql

from sandbox_support import manifest

DIALECTS = ("sqlite", "postgres", "mysql")

#: (SQL, the references in it) — the same in every dialect.
COMMON = [
    ("SELECT name FROM employees WHERE name = '<none>'", []),
    ("SELECT '<a>' AS label FROM employees", []),
    ("SELECT name FROM employees -- <a>\nWHERE 1 = 1", []),
    ("SELECT name /* <a> and <b.c> */ FROM employees", []),
    ("SELECT name FROM employees WHERE employee_id IN (<a>) AND name <> '<a>'", [Reference("a")]),
    ("SELECT name FROM employees WHERE dept_id = <top.dept_id> OR name = '<x.y>'", [Reference("top", "dept_id")]),
    ("SELECT name FROM employees WHERE employee_id IN (<a>) OR employee_id IN (<a>) OR dept_id IN (<b>)",
     [Reference("a"), Reference("b")]),
    ("SELECT name FROM employees WHERE name = 'it''s <a>'", []),
]

#: Dialect-specific ways to hide ``<a>`` in text.
SPECIFIC = [
    ("postgres", "SELECT name FROM employees WHERE name = $$<a>$$", []),
    ("postgres", "SELECT name FROM employees WHERE name = E'<a>'", []),
    ("postgres", 'SELECT "<a>" FROM employees', []),
    ("sqlite", 'SELECT name AS "<a>" FROM employees', []),
    ("sqlite", "SELECT name AS [<a>] FROM employees", []),
    ("mysql", "SELECT name FROM employees # <a>\nWHERE 1 = 1", []),
    ("mysql", "SELECT name AS `<a>` FROM employees", []),
    ("mysql", 'SELECT name FROM employees WHERE name = "<a>"', []),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(("sql", "expected"), COMMON)
def test_references_are_found_by_the_tokenizer(dialect: str, sql: str, expected: list[Reference]) -> None:
    assert find_references(sql, dialect) == expected


@pytest.mark.parametrize(("dialect", "sql", "expected"), SPECIFIC)
def test_dialect_quotes_and_comments_hide_references(dialect: str, sql: str, expected: list[Reference]) -> None:
    assert find_references(sql, dialect) == expected


def test_search_bodies_reference_by_whole_values_only() -> None:
    body = {"query": {"bool": {"filter": [{"terms": {"author_id": "<top>"}}, {"term": {"x": "<c.d>"}}],
                               "must": [{"match": {"title": "a <b> c"}}]}}, "<key>": 1}
    assert find_references(body, "sqlite") == [Reference("top"), Reference("c", "d")]


def test_replacing_references_keeps_lookalikes() -> None:
    sql = "SELECT '<a>' FROM t WHERE x IN (<a>) -- <a>"
    assert replace_references(sql, "sqlite", lambda ref: "NULL") == "SELECT '<a>' FROM t WHERE x IN (NULL) -- <a>"


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT x FROM a JOIN b ON a.x = b.x", ["a", "b"]),
    ("SELECT a FROM b WHERE b.a = 'a'", ["b"]),  # a column and a literal spelled like a key
    ("SELECT x FROM A", ["a"]),  # table names without regard to case
    ("WITH a AS (SELECT 1 AS x) SELECT x FROM a", []),  # a CTE shadows the key
    ("SELECT x FROM b -- FROM a", ["b"]),
    ("SELECT x FROM b WHERE x IN (<a>)", ["b"]),  # a reference is a dependency, not a table
    ("SELECT FROM WHERE", []),
])
def test_local_inputs_are_the_tables_the_query_reads(sql: str, expected: list[str]) -> None:
    assert local_inputs(sql, ["a", "b"]) == expected


# --- plans --------------------------------------------------------------------------------------


def plan_with(query: str, source: str = "hr") -> Plan:
    return Plan.parse({"steps": [
        {"output_key": "a", "source": source, "query": "SELECT employee_id FROM employees"},
        {"output_key": "b", "source": source, "query": query},
    ]})


@pytest.fixture
def capabilities(demo_capabilities):
    return demo_capabilities


@pytest.mark.parametrize("query", [
    "SELECT name FROM employees WHERE name = '<none>'",
    "SELECT name FROM employees WHERE name <> '<a>' -- <a>",
    "SELECT name FROM employees /* <later> */",
])
def test_lookalikes_make_no_dependency_and_pass_validation(capabilities, query: str) -> None:
    plan = plan_with(query)
    plan.validate_against(capabilities)
    assert plan.dependencies(capabilities) == {"a": [], "b": []}


def test_a_real_reference_to_an_unknown_step_is_still_refused(capabilities) -> None:
    with pytest.raises(PlanError, match="unknown step"):
        plan_with("SELECT name FROM employees WHERE employee_id IN (<none>) AND name = '<a>'").validate_against(capabilities)


def test_the_sandbox_binds_exactly_what_the_grammar_finds() -> None:
    safe = check_sql("SELECT name FROM employees WHERE employee_id IN (<a>) AND name <> '<a>'",
                     manifest("sqlite", filters=False), params={"a": ["E1"]})
    assert "'<a>'" in (safe.text or "") and list(safe.params) == ["ref_a"]


# --- when an empty input empties a step ---------------------------------------------------------


def step(query: str | dict) -> Step:
    return Step(output_key="s", source="hr" if isinstance(query, str) else "reports",
                index=None if isinstance(query, str) else "weekly_reports", query=query)


@pytest.mark.parametrize(("query", "empties"), [
    ("SELECT x FROM t WHERE x IN (<k>)", True),
    ("SELECT x FROM t WHERE y = 1 AND (x IN (<k.c>))", True),
    ("SELECT x, COUNT(*) FROM t WHERE x IN (<k>) GROUP BY x", True),
    ("SELECT x FROM t WHERE x IN (<k>) ORDER BY x LIMIT 5", True),
    ("WITH c AS (SELECT 1 AS x) SELECT x FROM c WHERE x IN (<k>)", True),
    ("SELECT x FROM t WHERE x NOT IN (<k>)", False),
    ("SELECT COUNT(*) FROM t WHERE x IN (<k>)", False),
    ("SELECT MAX(x) AS m FROM t WHERE x IN (<k>)", False),
    ("SELECT 1 AS one FROM t WHERE x IN (<k>) HAVING COUNT(*) >= 0", False),
    ("SELECT x, COUNT(*) FROM t WHERE x IN (<k>) GROUP BY ROLLUP (x)", False),
    ("SELECT x FROM t WHERE x IN (<k>) OR y = 1", False),
    ("SELECT x FROM t WHERE NOT (x IN (<k>))", False),
    ("SELECT x FROM t WHERE x IN (<k>) UNION SELECT 1", False),
    ("SELECT x FROM t WHERE x IN (SELECT y FROM u WHERE y IN (<k>))", False),
    ("SELECT x FROM t WHERE x = <k>", False),
    ("SELECT x FROM t WHERE x IN (<other>)", False),
    ("SELECT x FROM t WHERE x IN ('<k>')", False),
    ({"query": {"terms": {"author_id": "<k>"}}}, True),
    ({"query": {"bool": {"filter": [{"terms": {"author_id": "<k>"}}]}}}, True),
    ({"query": {"bool": {"must": {"terms": {"author_id": "<k.id>", "boost": 2}}}}}, True),
    ({"query": {"bool": {"must_not": [{"terms": {"author_id": "<k>"}}]}}}, False),
    ({"query": {"bool": {"should": [{"terms": {"author_id": "<k>"}}]}}}, False),
    ({"query": {"terms": {"author_id": "<k>"}}, "aggs": {"n": {"value_count": {"field": "x"}}}}, False),
])
def test_an_empty_input_empties_a_step_only_where_provable(query: str | dict, empties: bool) -> None:
    assert empty_when_input_empty(step(query), "k", "postgres") is empties
