"""Bounded, crash-free checking: size and nesting limits before any parser recurses, and
nothing but ``SandboxViolation`` / ``PlanError`` ever leaves ``check_sql`` or ``check_dsl``.

The hostile shapes are the ones that crashed the sandbox with ``RecursionError`` (1,000 nested
parentheses, ``NOT `` × 5,000, ``abs(`` × 2,000, 1,000 UNION parts, 300 chained CTEs, chains of
``||``) or with sqlglot's ``OptimizeError``; each is refused with a stable code in every dialect.
The same shapes at their limit pass the pre-scan and are checked to the end from a deep call
stack (where the server's threads call the sandbox), so the limits sit below the crash point.
A property test feeds generated text, fragments of those shapes and generated search bodies.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_support import DIALECTS, manifest
from test_sandbox_dsl import INDEX, REPORTS

from structq.agent import Plan
from structq.capabilities import CapabilitySet
from structq.capabilities.nesting import MAX_CTES, MAX_DEPTH, MAX_SET_PARTS
from structq.errors import PlanError, SandboxViolation
from structq.safety import check_dsl, check_sql

COLUMN = "d.budget"
FROM = " FROM departments AS d"


def parens(n: int) -> str:
    return "SELECT " + "(" * n + COLUMN + ")" * n + " AS x" + FROM


def nots(n: int) -> str:
    return "SELECT d.dept_id" + FROM + " WHERE " + "NOT " * n + "d.budget > 1"


def calls(n: int) -> str:
    return "SELECT " + "abs(" * n + COLUMN + ")" * n + " AS x" + FROM


def unions(n: int) -> str:
    return " UNION ".join(["SELECT 1 AS x"] * n)


def ctes(n: int) -> str:
    chain = ", ".join(f"c{i} AS (SELECT * FROM {f'c{i - 1}' if i else 'departments'})" for i in range(n))
    return f"WITH {chain} SELECT * FROM c{n - 1}"


def concats(n: int) -> str:
    return "SELECT " + " || ".join(["d.title"] * (n + 1)) + " AS x" + FROM


def derived(n: int) -> str:
    return "SELECT * FROM " + "(SELECT * FROM " * n + "departments" + ") AS t" * n


def cases(n: int) -> str:
    return "SELECT " + "CASE WHEN d.budget > 1 THEN " * n + "1" + " END" * n + " AS x" + FROM


#: shape → (the text at size n, the hostile n that crashed, the largest n the limits accept)
SHAPES: dict[str, tuple[Callable[[int], str], int, int]] = {
    "nested parentheses": (parens, 1000, MAX_DEPTH),
    "NOT chain": (nots, 5000, MAX_DEPTH),
    "nested calls": (calls, 2000, MAX_DEPTH),
    "UNION parts": (unions, 1000, MAX_SET_PARTS),
    "chained CTEs": (ctes, 300, MAX_CTES),
    "|| chain": (concats, 2000, MAX_DEPTH),
    "nested derived tables": (derived, 400, MAX_DEPTH - 1),
    "nested CASE": (cases, 600, MAX_DEPTH),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_hostile_shape_is_refused_as_too_complex(shape: str, dialect: str) -> None:
    text, hostile, _ = SHAPES[shape]
    with pytest.raises(SandboxViolation) as refused:
        check_sql(text(hostile), manifest(dialect, filters=False))
    assert refused.value.code == "too_complex"
    assert "at most" in refused.value.message  # the pre-scan's words: it refused before parsing


def _deep(levels: int, work: Callable[[], Any]) -> Any:
    """``work()`` called under ``levels`` extra frames (a server thread calls from deep)."""
    return work() if levels == 0 else _deep(levels - 1, work)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_shape_at_its_limit_is_checked_to_the_end_without_recursing_out(shape: str, dialect: str) -> None:
    """At the limit the pre-scan lets the query through, and every pass runs to its end from a
    stack 150 frames deep: the outcome is a safe query or an ordinary refusal, never the net."""
    text, _, limit = SHAPES[shape]
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(_deep(150, lambda: check_sql(text(limit), manifest(dialect, filters=False))))
        except SandboxViolation as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert outcome, "the check raised something other than a refusal"
    if isinstance(outcome[0], SandboxViolation):
        assert outcome[0].code not in ("too_complex", "unsupported"), outcome[0]


def test_alias_already_used_is_a_refusal_not_a_crash() -> None:
    with pytest.raises(SandboxViolation) as refused:
        check_sql("SELECT x FROM (SELECT 1 AS x FROM departments AS DEPARTMENTS, departments) t",
                  manifest("sqlite", filters=False))
    assert refused.value.code in ("unsupported", "ambiguous_column", "unknown_table")


def _with_limits(**limits: Any) -> Any:
    base = manifest("sqlite", filters=False)
    return base.model_copy(update={"limits": base.limits.model_copy(update=limits)})


def test_the_size_limits_are_the_manifests_and_say_so() -> None:
    query = "SELECT d.dept_id FROM departments AS d WHERE d.dept_id IN (" + ", ".join(map(str, range(400))) + ")"
    assert check_sql(query, manifest("sqlite", filters=False)) is not None  # within the defaults
    with pytest.raises(SandboxViolation) as by_bytes:
        check_sql(query, _with_limits(max_query_bytes=1000))
    assert by_bytes.value.code == "too_large" and "at most 1000" in by_bytes.value.message
    assert "max_query_bytes" in (by_bytes.value.hint or "")
    with pytest.raises(SandboxViolation) as by_tokens:
        check_sql(query, _with_limits(max_query_tokens=100))
    assert by_tokens.value.code == "too_large" and "at most 100" in by_tokens.value.message
    assert "max_query_tokens" in (by_tokens.value.hint or "")


def test_the_default_byte_limit_refuses_a_200_kb_query() -> None:
    query = "SELECT d.dept_id FROM departments AS d WHERE " + " OR ".join(f"d.dept_id = {i}" for i in range(12_000))
    with pytest.raises(SandboxViolation) as refused:
        check_sql(query, manifest("sqlite", filters=False))
    assert refused.value.code == "too_large"


@pytest.mark.parametrize("text", ["SELECT '\ud800' AS x FROM departments", "SELECT d.title AS \"\udfff\" FROM departments AS d"])
def test_a_lone_surrogate_in_sql_is_invalid_text(text: str) -> None:
    with pytest.raises(SandboxViolation) as refused:
        check_sql(text, manifest("sqlite", filters=False))
    assert refused.value.code == "invalid_text"


# --- the search sandbox ----------------------------------------------------------------------


@pytest.mark.parametrize("body,code", [
    ({"query": {"term": {"department": "\ud800"}}}, "invalid_text"),
    ({"query": {"range": {"week_start_date": {"gte": math.nan}}}}, "invalid_value"),
    ({"query": {"range": {"week_start_date": {"gte": math.inf}}}}, "invalid_value"),
    ({"size": 2**70}, "invalid_value"),
    ({"query": {"terms": {"department": ["x" * 100] * 1000}}}, "too_large"),
])
def test_a_search_body_with_unwritable_text_numbers_or_size_is_refused(body: dict[str, Any], code: str) -> None:
    with pytest.raises(SandboxViolation) as refused:
        check_dsl(body, REPORTS, INDEX, vars={"tenant_id": 7})
    assert refused.value.code == code


def test_a_deep_search_body_is_refused_without_recursing() -> None:
    body: Any = {"match_all": {}}
    for _ in range(5000):
        body = {"bool": {"must": [body]}}
    with pytest.raises(SandboxViolation) as refused:
        check_dsl({"query": body}, REPORTS, INDEX, vars={"tenant_id": 7})
    assert refused.value.code == "invalid_body"


# --- the plan: a local step's tables are read before the sandbox sees it ----------------------


def test_a_deep_local_step_reads_no_tables_and_the_sandbox_refuses_it(tmp_path: Path) -> None:
    caps = CapabilitySet([manifest("sqlite", filters=False)])
    plan = Plan.parse({"steps": [
        {"output_key": "a", "source": "hr", "query": "SELECT d.dept_id FROM departments AS d"},
        {"output_key": "b", "source": "local", "query": "SELECT " + "(" * 1000 + "1" + ")" * 1000 + " AS x FROM a"},
    ]})
    assert plan.dependencies(caps) == {"a": [], "b": []}  # no RecursionError: nothing read


# --- the property ----------------------------------------------------------------------------

FRAGMENTS = ["(", ")", "NOT ", "abs(", " UNION SELECT 1", "WITH c AS (", " || ", "::text", " IS NULL",
             "SELECT ", " FROM departments", " AS ", "d.budget", ",", "'", '"', "<a>", "<a.b>", "--", "/*",
             "CASE WHEN 1 THEN ", " END", "[", "]", "\ud800", "\x00", "%", "?", ":x", "$1", ";", "\\", "`"]

hostile_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join),
    st.builds(lambda head, shape, n: head + SHAPES[shape][0](n),
              st.sampled_from(["", "SELECT 1; ", "/* x */ "]), st.sampled_from(sorted(SHAPES)),
              st.integers(min_value=1, max_value=1200)),
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile_text, dialect=st.sampled_from(DIALECTS))
def test_only_refusals_leave_check_sql(text: str, dialect: str) -> None:
    try:
        check_sql(text, manifest(dialect), vars={"tenant_id": 1}, params={"a": [1], "a.b": [2]})
    except (SandboxViolation, PlanError):
        pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.sampled_from(["<a>", "department", "content", "\ud800", "_all", "script"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["query", "bool", "must", "term", "match", "aggs", "size", "department",
                                       "terms", "field", "range", "gte", "script", "_source", "sort",
                                       "nested", "path", "from"]) | st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.dictionaries(st.sampled_from(["query", "aggs", "size", "sort", "_source", "from", "x"]), json_values,
                            max_size=4))
def test_only_refusals_leave_check_dsl(body: dict[str, Any]) -> None:
    json.dumps(body, allow_nan=True)  # any JSON-ish body
    try:
        check_dsl(body, REPORTS, INDEX, vars={"tenant_id": 7}, params={"a": [1]})
    except (SandboxViolation, PlanError):
        pass
