"""Red team: SQL over earlier steps' results (the local executor, an in-memory SQLite).

A local step's query is written by the same model as every other step, over rows that came
from the sources — data an attacker may have planted. The sandbox sees only the tables the
step names (``local_manifest``); the executor bounds time and allocation. Each refusal pins
the rule it is about (``sandbox_support.refused``).
"""

from __future__ import annotations

from typing import Any

import pytest
import sandbox_support as support

from structq.errors import ExecutionError, QueryTimeout, SandboxViolation
from structq.executors.base import ResultSet
from structq.executors.local import LocalExecutor, local_manifest
from structq.safety import check_sql


LOCAL_RESULTS = {"a": ResultSet(columns=("x", "j"), rows=[(1, {"k": 1}), (2, [1, 2]), (3, None)])}


def local(sql: str, results: dict[str, ResultSet] | None = None, **options: Any) -> ResultSet:
    results = results or LOCAL_RESULTS
    safe = check_sql(sql, local_manifest(results), max_rows=options.pop("max_rows", 10))
    return LocalExecutor(results, **options).fetch(safe)


LOCAL_ATTACKS = [
    ("SELECT readfile('/etc/passwd') FROM a", "denied_function"),
    ("SELECT writefile('/tmp/x', 'y') FROM a", "denied_function"),
    ("SELECT load_extension('/tmp/x.so') FROM a", "denied_function"),
    ("SELECT fts3_tokenizer('simple') FROM a", "denied_function"),
    ("SELECT edit('x') FROM a", "denied_function"),
    ("ATTACH DATABASE '/tmp/x.db' AS y", "not_a_query"),
    ("ATTACH DATABASE 'file::memory:?cache=shared' AS y", "not_a_query"),
    ("PRAGMA writable_schema = 1", "not_a_query"),
    ("SELECT * FROM pragma_table_info('a')", "denied_function"),
    ("SELECT * FROM sqlite_master", "unknown_table"),
    ("SELECT * FROM sqlite_temp_master", "unknown_table"),
    ("SELECT * FROM main.a", "unknown_table"),
    ("SELECT * FROM temp.a", "unknown_table"),
    ("SELECT zeroblob(1000000000) FROM a", "denied_function"),
    ("SELECT randomblob(1000000000) FROM a", "denied_function"),
    ("SELECT sqlite_version() FROM a", "denied_function"),
    ("SELECT x FROM a; DROP TABLE a", "multiple_statements"),
    ("CREATE TABLE t AS SELECT * FROM a", "write"),
    ("VACUUM INTO '/tmp/x.db'", "unsupported"),
    ("SELECT * FROM secret", "unknown_table"),                         # a step this local step did not name/load
    ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT * FROM sqlite_master", "unknown_table"),
]


@pytest.mark.parametrize("sql,code", LOCAL_ATTACKS)
def test_local_sql_attacks_are_refused(sql: str, code: str) -> None:
    support.refused(local, sql, code=code)


def test_local_step_reads_only_the_steps_it_names() -> None:
    """A plan's local step gets only the tables it names; others are unknown to it."""
    from structq.agent.plan import Step

    step = Step(output_key="c", source="local", query="SELECT x FROM a")
    assert step.local_inputs(["a", "secret"]) == ["a"]
    results = {"a": LOCAL_RESULTS["a"]}
    with pytest.raises(SandboxViolation) as info:
        local("SELECT x FROM a UNION SELECT s FROM secret", results)
    assert info.value.code == "unknown_table"


def test_local_infinite_recursive_cte_times_out() -> None:
    with pytest.raises(QueryTimeout):  # endless: only the timeout ends it
        local("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c",
              timeout_s=0.3)


def test_local_huge_recursive_cte_is_row_capped() -> None:
    result = local("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c",
                   max_rows=10, timeout_s=2)
    assert result.row_count == 10 and result.truncated


def test_local_json_values_stay_data() -> None:
    result = local("SELECT j FROM a WHERE x = 1")
    assert result.rows == [({"k": 1},)]


def test_local_printf_allocation_bomb_is_refused() -> None:
    with pytest.raises((SandboxViolation, ExecutionError)):
        local("SELECT length(printf('%.*c', 100000000, 'x')) AS n FROM a")


def test_local_timeout_holds_for_expensive_single_operations() -> None:
    sql = ("SELECT length(replace(printf('%.*c', 15000, 'x'), 'x', printf('%.*c', 15000, 'y'))) AS n FROM a")
    try:
        with pytest.raises(QueryTimeout):
            local(sql, timeout_s=0.05)
    except SandboxViolation:
        return  # refused up front: safe
