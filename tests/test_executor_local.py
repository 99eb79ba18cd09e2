"""The local executor: SQL (SQLite dialect) over earlier steps' results."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from structq.capabilities import Limits
from structq.errors import ExecutionError, QueryTimeout
from structq.executors.base import ResultSet
from structq.executors.local import LocalExecutor, describe_results, infer_column_type, local_manifest
from structq.safety.query import SafeQuery


def local(text: str, *, max_rows: int = 1000, params: dict[str, Any] | None = None,
          expanding: frozenset[str] = frozenset()) -> SafeQuery:
    return SafeQuery(source="local", kind="sql", limit=max_rows + 1, max_rows=max_rows, text=text,
                     params=params or {}, expanding=expanding)


def result(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> ResultSet:
    return ResultSet(columns=columns, rows=rows)


MEMBERS = result(("employee_id",), [("E1",), ("E2",), ("E3",), ("E5",)])
TOP = result(("employee_id", "grade"), [("E2", "A"), ("E3", "A"), ("E4", "A"), ("E9", "A")])
EMPLOYEES = result(("employee_id", "name", "active"), [("E1", "王芳", True), ("E2", "李雷", True),
                                                       ("E3", "韩梅梅", False), ("E4", "Bob", True)])
REPORTS = result(("author_id", "title", "tags"), [("E2", "周报 3/4", ["ai", "db"]), ("E3", "周报 3/5", []),
                                                  ("E3", "周报 3/6", ["ai"])])
MONTHLY = result(("month", "revenue"), [("2024-01", 100), ("2024-02", 125.0), ("2024-03", 150)])


class TestQueries:
    def test_intersection(self) -> None:
        rows = LocalExecutor({"members": MEMBERS, "top": TOP}).fetch(local(
            "SELECT employee_id FROM members INTERSECT SELECT employee_id FROM top ORDER BY employee_id")).rows
        assert rows == [("E2",), ("E3",)]

    def test_join_across_sources(self) -> None:
        out = LocalExecutor({"employees": EMPLOYEES, "reports": REPORTS}).fetch(local(
            "SELECT e.name, count(r.title) AS reports FROM employees e "
            "LEFT JOIN reports r ON r.author_id = e.employee_id GROUP BY e.name ORDER BY reports DESC, e.name"))
        assert out.columns == ("name", "reports")
        assert out.rows == [("韩梅梅", 2), ("李雷", 1), ("Bob", 0), ("王芳", 0)]

    def test_growth_rate(self) -> None:
        out = LocalExecutor({"monthly": MONTHLY}).fetch(local(
            "SELECT month, round(revenue * 1.0 / lag(revenue) OVER (ORDER BY month) - 1, 4) AS growth "
            "FROM monthly ORDER BY month"))
        assert out.rows == [("2024-01", None), ("2024-02", 0.25), ("2024-03", 0.2)]

    def test_booleans_and_json_come_back_as_they_went_in(self) -> None:
        executor = LocalExecutor({"employees": EMPLOYEES, "reports": REPORTS})
        assert executor.fetch(local("SELECT active FROM employees ORDER BY employee_id")).rows == [
            (True,), (True,), (False,), (True,)]
        assert executor.fetch(local("SELECT tags FROM reports ORDER BY title")).rows == [(["ai", "db"],), ([],), (["ai"],)]
        tagged = executor.fetch(local(
            "SELECT r.title FROM reports r, json_each(r.tags) t WHERE t.value = 'ai' ORDER BY r.title"))
        assert tagged.rows == [("周报 3/4",), ("周报 3/6",)]

    def test_references_bind_as_json_or_expanding_lists(self) -> None:
        executor = LocalExecutor({"top": TOP})
        as_json = executor.fetch(local("SELECT employee_id FROM top WHERE employee_id IN "
                                     "(SELECT value FROM json_each(:ids)) ORDER BY 1",
                                     params={"ids": json.dumps(["E2", "E9"])}))
        as_list = executor.fetch(local("SELECT employee_id FROM top WHERE employee_id IN :ids ORDER BY 1",
                                     params={"ids": ["E2", "E9"]}, expanding=frozenset({"ids"})))
        assert as_json.rows == as_list.rows == [("E2",), ("E9",)]

    def test_truncation(self) -> None:
        out = LocalExecutor({"top": TOP}).fetch(local("SELECT employee_id FROM top ORDER BY 1", max_rows=2))
        assert out.truncated and out.rows == [("E2",), ("E3",)]

    def test_an_empty_result_is_an_empty_table(self) -> None:
        out = LocalExecutor({"none": result(("id",), [])}).fetch(local("SELECT count(*) AS n FROM none"))
        assert out.rows == [(0,)]

    def test_one_instance_many_threads(self) -> None:
        executor = LocalExecutor({"members": MEMBERS, "top": TOP})
        outcomes: list[Any] = []

        def work() -> None:
            for _ in range(10):
                outcomes.append(executor.fetch(local("SELECT count(*) AS n FROM members JOIN top USING (employee_id)")).rows)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert outcomes == [[(2,)]] * 80


class TestOddColumnNames:
    ODD = result(("count(*)", "销售额", "a \"quoted\" name", "id", "ID", "", "select", " padded "),
                 [(3, 12.5, "x", 1, 2, "e", "s", "p")])

    def test_names_are_quoted_and_deduplicated(self) -> None:
        executor = LocalExecutor({"odd": self.ODD})
        columns = [name for name, _ in executor.tables[0].columns]
        assert columns == ["count(*)", "销售额", "a \"quoted\" name", "id", "ID_2", "column_6", "select", " padded "]
        out = executor.fetch(local('SELECT "count(*)", "销售额", "a ""quoted"" name", "ID_2", "select", " padded " FROM odd'))
        assert out.rows == [(3, 12.5, "x", 2, "s", "p")]

    def test_manifest_declares_them(self) -> None:
        manifest = local_manifest({"odd": self.ODD})
        table = manifest.table("odd")
        assert table is not None
        assert [c.name for c in table.columns][:2] == ["count(*)", "销售额"]
        assert table.columns[-1].name == " padded "
        assert table.column("销售额").type == "real"

    def test_the_sandbox_accepts_them(self) -> None:
        from structq.safety import check_sql

        results = {"odd": self.ODD}
        checked = check_sql('SELECT "销售额" * 2 AS doubled FROM odd', local_manifest(results))
        assert LocalExecutor(results).fetch(checked).rows == [(25.0,)]


class TestTypes:
    @pytest.mark.parametrize("values,expected", [
        ([1, 2, None], "integer"),
        ([True, False], "boolean"),
        ([True, 2], "integer"),
        ([1, 2.5], "real"),
        (["a", 1], "text"),
        ([[1], {"a": 1}, None], "json"),
        ([None, None], "text"),
        ([], "text"),
        ([2**63], "text"),
        ([-(2**63), 2**63 - 1], "integer"),
        ([9.5, 100.25, "0.1000000000000000055", "NaN"], "real"),  # a NUMERIC column via values.py
        (["0.1000000000000000055", None], "real"),
        ([1, "12", "-3.5e2"], "real"),  # a document holding "12" where others hold 12
        (["007", "12"], "text"),  # digits, but not numbers values.py had to write as text
        (["1.2"], "text"),
        (["NaN", "Infinity"], "text"),
        ([1, "12 "], "text"),
        ([1, "1_000"], "text"),
    ])
    def test_inference(self, values: list[Any], expected: str) -> None:
        assert infer_column_type(values) == expected

    def test_inference_looks_past_the_first_rows(self) -> None:
        rows = [(i,) for i in range(99_999)] + [(0.5,)]
        assert describe_results({"t": result(("v",), rows)})[0].columns == (("v", "real"),)

    def test_mixed_text_and_huge_ints_are_kept_exactly(self) -> None:
        out = LocalExecutor({"t": result(("v",), [(2**70,), ("x",)])}).fetch(local("SELECT v FROM t ORDER BY rowid"))
        assert out.rows == [(str(2**70),), ("x",)]

    def test_a_numeric_column_with_exact_decimal_text_compares_as_numbers(self) -> None:
        from decimal import Decimal

        from structq.executors.values import json_safe_rows

        rows = json_safe_rows([(Decimal("9.5"),), (Decimal("100.25"),), (Decimal("0.1000000000000000055"),),
                               (Decimal("NaN"),)])
        assert rows == [(9.5,), (100.25,), ("0.1000000000000000055",), ("NaN",)]
        executor = LocalExecutor({"sales": result(("amount",), rows)})
        assert executor.fetch(local("SELECT amount FROM sales WHERE amount > 50")).rows == [(100.25,)]
        out = executor.fetch(local("SELECT max(amount) AS top, min(amount) AS low FROM sales"))
        assert out.rows == [(100.25, 0.1)]
        assert out.notes == (
            "column 'amount' of step 'sales': 1 value(s) have more digits than a double holds and were "
            "rounded for this step (e.g. 0.1000000000000000055 became 0.1)",
            "column 'amount' of step 'sales': 1 NaN value(s) were loaded as NULL (SQLite has no NaN)",
        )

    def test_exact_numbers_need_no_note(self) -> None:
        out = LocalExecutor({"monthly": MONTHLY, "t": result(("v",), [(1,), ("2.5",), ("Infinity",)])}).fetch(
            local("SELECT v FROM t ORDER BY v"))
        assert out.rows == [(1.0,), (2.5,), ("Infinity",)] and out.notes == ()

    def test_numbers_kept_as_text_are_noted(self) -> None:
        out = LocalExecutor({"t": result(("v",), [(10,), ("about 9",)]), "ids": result(("id",), [(2**64,)])}).fetch(
            local("SELECT v FROM t ORDER BY v"))
        assert out.rows == [("10",), ("about 9",)]
        assert [note.split(" holds")[0] for note in out.notes] == ["column 'id' of step 'ids'",
                                                                   "column 'v' of step 't'"]
        assert all("loaded as text" in note for note in out.notes)

    def test_manifest_shape(self) -> None:
        manifest = local_manifest({"members": MEMBERS, "monthly": MONTHLY}, limits=Limits(max_rows=7))
        assert manifest.source == "local" and manifest.sql_dialect == "sqlite"
        assert manifest.limits.max_rows == 7
        assert [t.name for t in manifest.tables] == ["members", "monthly"]
        assert [(c.name, c.type) for c in manifest.table("monthly").columns] == [("month", "text"), ("revenue", "real")]


class TestOrderIndependence:
    def test_same_answers_whatever_the_load_order(self) -> None:
        rows = [(f"E{i}", i % 7, i * 0.5 if i % 3 else i) for i in range(500)]
        shuffled = rows[:]
        random.Random(7).shuffle(shuffled)
        query = local("SELECT a.k, count(*) AS n, sum(a.v) AS s FROM a JOIN b USING (id) GROUP BY a.k ORDER BY a.k")
        columns = ("id", "k", "v")
        subset = [row for row in rows if int(row[0][1:]) % 2]
        shuffled_subset = [row for row in shuffled if int(row[0][1:]) % 2]
        one = LocalExecutor({"a": result(columns, rows), "b": result(columns, subset)})
        two = LocalExecutor({"b": result(columns, shuffled_subset), "a": result(columns, shuffled)})
        assert one.manifest == two.manifest
        assert one.fetch(query).rows == two.fetch(query).rows


class TestLimits:
    def test_100k_rows_join(self) -> None:
        big = result(("id", "v"), [(i, i * 2) for i in range(100_000)])
        picked = result(("id",), [(i,) for i in range(0, 100_000, 10)])
        out = LocalExecutor({"big": big, "picked": picked}).fetch(local(
            "SELECT count(*) AS n, sum(big.v) AS s FROM big JOIN picked USING (id)"))
        assert out.rows == [(10_000, sum(i * 2 for i in range(0, 100_000, 10)))]

    def test_100k_rows_out(self) -> None:
        big = result(("id",), [(i,) for i in range(100_000)])
        out = LocalExecutor({"big": big}).fetch(local("SELECT id FROM big", max_rows=100_000))
        assert out.row_count == 100_000 and not out.truncated

    def test_long_query_times_out(self) -> None:
        executor = LocalExecutor({"t": result(("x",), [(1,)])}, timeout_s=0.5)
        with pytest.raises(QueryTimeout):  # a billion rows: only the timeout ends it
            executor.fetch(local("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                               "WHERE x < 1000000000) SELECT max(x) FROM c"))

    def test_limits_set_the_timeout(self) -> None:
        assert LocalExecutor({}, limits=Limits(timeout_s=2)).timeout_s == 2

    def test_timeout_stops_a_statement_inside_one_long_function_call(self) -> None:
        """The progress handler never runs inside a call; the deadline timer's interrupt
        stops the statement right after it (each printf loops ~0.5 s past the size limit)."""
        executor = LocalExecutor({"t": result(("x",), [(i,) for i in range(20)])}, timeout_s=0.1)
        # Without the interrupt the first call's result is too big: an ExecutionError, not this.
        with pytest.raises(QueryTimeout):
            executor.fetch(local("SELECT length(printf('%.*c', 300000000, 'x')) AS n FROM t"))

    def test_values_past_the_size_limit_are_a_clear_error(self) -> None:
        executor = LocalExecutor({"t": result(("x",), [(1,)])})
        with pytest.raises(ExecutionError) as info:
            executor.fetch(local("SELECT length(replace(printf('%.*c', 5000, 'x'), 'x', "
                               "printf('%.*c', 5000, 'y'))) AS n FROM t"))
        assert not isinstance(info.value, QueryTimeout) and info.value.retryable
        assert "too big" in info.value.message and "10 MB" in (info.value.hint or "")

    def test_values_within_the_size_limit_are_built(self) -> None:
        executor = LocalExecutor({"t": result(("x",), [(1,)])})
        out = executor.fetch(local("SELECT length(printf('%.*c', 9000000, 'x')) AS n FROM t"))
        assert out.rows == [(9_000_000,)]


class TestRefusals:
    @pytest.mark.parametrize("statement", [
        "DELETE FROM t",
        "INSERT INTO t VALUES (2)",
        "CREATE TABLE u (x)",
        "SELECT 1; DELETE FROM t",
    ])
    def test_writes_are_refused(self, statement: str) -> None:
        with pytest.raises(ExecutionError):
            LocalExecutor({"t": result(("x",), [(1,)])}).fetch(local(statement))

    def test_attach_is_refused_and_creates_no_file(self, tmp_path: Path) -> None:
        path = tmp_path / "escape.db"
        with pytest.raises(ExecutionError):
            LocalExecutor({}).fetch(local(f"ATTACH DATABASE '{path}' AS escape"))
        assert not path.exists()

    def test_malformed_results_are_an_execution_error(self) -> None:
        with pytest.raises(ExecutionError, match="do not match its 2 columns"):
            LocalExecutor({"t": result(("x", "y"), [(1, 2), (3,)])}).fetch(local("SELECT x FROM t"))

    def test_bad_query_has_the_message(self) -> None:
        with pytest.raises(ExecutionError) as caught:
            LocalExecutor({"t": result(("x",), [(1,)])}).fetch(local("SELECT nope FROM t"))
        assert "nope" in (caught.value.cause or "") and caught.value.source == "local"
