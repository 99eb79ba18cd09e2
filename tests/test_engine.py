"""The engine on real data: every verified example, scheduling, references, errors, the CLI.

Each verified example in ``capabilities/`` runs through ``Engine`` on the demo company (SQLite
+ the embedded search server) and its rows are compared with an answer written independently
from the question: one SQL query (joins and subqueries where the plan passes references) run
with ``sqlite3`` on the demo database, or a Python filter over the JSONL documents the search
index was loaded from. The expected queries are written by hand, not derived from the plans.

References of 1, 1,000 and 100,000 values go through the engine on SQLite, PostgreSQL and
MariaDB and must give what the single JOIN gives; 100,000 ids also go to a ``terms`` query on
the search engine.
"""

from __future__ import annotations

import datetime as dt
import asyncio
import collections
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from manifest_support import manifest_text

from structq.agent import Engine, Plan
from structq.agent.engine import ExecutorPool, StepResult
from structq.capabilities import CapabilitySet, Manifest
from structq.capabilities.loader import load_manifest_text
from structq.capabilities.model import Limits
from structq.errors import ExecutionError, PlanError, SandboxViolation
from structq.executors.base import ResultSet

REPO_ROOT = Path(__file__).resolve().parents[1]
Row = tuple[Any, ...]


# ============================================================================================
# Helpers
# ============================================================================================


def _normal(value: Any) -> Any:
    """Floats compared to 6 decimals: the same sum added in another order may differ in the
    last bits; Decimal and int totals as numbers."""
    if isinstance(value, float):
        return round(value, 6)
    if type(value).__name__ == "Decimal":
        return round(float(value), 6)
    return value


def normalised(rows: Sequence[Sequence[Any]]) -> list[Row]:
    return [tuple(_normal(v) for v in row) for row in rows]


def assert_same_rows(got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]], *,
                     order: Callable[[Row], Any] | None = None, descending: bool = False) -> None:
    """Equal as multisets; with ``order``, ``got`` must also be sorted by it (ties in the sort
    key may come in any order, so the two lists are not compared position by position)."""
    got_rows, want_rows = normalised(got), normalised(want)
    assert collections.Counter(got_rows) == collections.Counter(want_rows)
    assert len(got_rows) == len(want_rows)
    if order is not None:
        keys = [order(row) for row in got_rows]
        assert keys == sorted(keys, reverse=descending)


def sql(db: sqlite3.Connection, query: str, *params: Any) -> list[Row]:
    return [tuple(row) for row in db.execute(query, params).fetchall()]


def column(result: StepResult, name: str) -> list[Any]:
    return [row[result.columns.index(name)] for row in result.rows]


def plan_of(steps: list[dict[str, Any]]) -> Plan:
    return Plan.parse({"steps": steps})


def step(key: str, source: str, query: str) -> dict[str, Any]:
    """One step of a plan, as the model writes it."""
    return {"output_key": key, "source": source, "query": query}


def with_limits(capabilities: CapabilitySet, source: str, **limits: Any) -> CapabilitySet:
    """The same manifests, with ``source``'s limits changed."""
    manifests: list[Manifest] = []
    for manifest in capabilities:
        if manifest.source == source:
            merged = {**manifest.limits.model_dump(), **limits}
            manifest = manifest.model_copy(update={"limits": Limits(**merged)})
        manifests.append(manifest)
    return CapabilitySet(manifests)


# ============================================================================================
# Fixtures
# ============================================================================================


@pytest.fixture(scope="module")
def engine(demo_capabilities: CapabilitySet) -> Iterator[Engine]:
    """One engine for the module: the embedded search index loads once."""
    with Engine(demo_capabilities) as shared:
        yield shared


@pytest.fixture(scope="module")
def company(demo_data) -> Iterator[sqlite3.Connection]:
    """The demo database, read-only, for the hand-written expected queries."""
    db = sqlite3.connect(f"file:{demo_data.database}?mode=ro", uri=True)
    yield db
    db.close()


@pytest.fixture(scope="module")
def reports(demo_data) -> list[dict[str, Any]]:
    """The documents the ``weekly_reports`` index was loaded from."""
    with open(demo_data.reports, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def example_plans(demo_capabilities: CapabilitySet, engine: Engine) -> dict[str, Plan]:
    """Each example's plan; a slotted example's with its own question's values (read on the
    demo's day, so 上个月 is 2026-10)."""
    from structq.agent.templated import TemplatePlans

    templates = TemplatePlans(demo_capabilities, engine)
    plans = {}
    for _, example in demo_capabilities.examples():
        plan = templates.plan(example.question, DEMO_DAY) if example.slots else Plan.from_example(example)
        assert plan is not None, f"the slotted example {example.question!r} does not match its own question"
        plans[example.question] = plan
    return plans


#: The day the examples' relative periods are read for (as ``structq demo`` asks them).
DEMO_DAY = dt.date(2026, 11, 30)


# ============================================================================================
# Every verified example against a hand-written answer
# ============================================================================================

# question → the same question as one SQL query over the demo database, and the sort the
# example promises (a function of a result row, and whether it is descending), if any.
SQL_EXAMPLES: dict[str, tuple[str, Callable[[Row], Any] | None, bool]] = {
    "华东区在职的研发部员工有哪些？": (
        """SELECT employee_id, name, title, city, hire_date FROM employees
           WHERE status = '在职' AND department = '研发部' AND region = '华东'""",
        lambda row: row[0], False),
    "列出‘星火’项目的所有成员及其部门和角色": (
        """SELECT m.employee_id, e.name, e.department, e.title, m.role, m.joined_at
           FROM employees AS e, project_members AS m
           WHERE m.employee_id = e.employee_id AND m.project_name = '星火'""",
        lambda row: (row[5], row[0]), False),
    "2026年3月各部门绩效为A的人数是多少？": (
        """SELECT department, COUNT(*) FROM employees
           JOIN employee_performance USING (employee_id)
           WHERE performance_grade = 'A' AND strftime('%Y-%m', assessment_month) = '2026-03'
           GROUP BY department""",
        lambda row: (-row[1], row[0]), False),
    "2026年3月绩效为A的员工都参与了哪些项目？": (
        """SELECT project_name, COUNT(*) FROM project_members
           WHERE employee_id IN (SELECT employee_id FROM employee_performance
                                 WHERE assessment_month = '2026-03-01' AND performance_grade = 'A')
           GROUP BY project_name""",
        lambda row: (-row[1], row[0]), False),
    "2023年第四季度，华东区销售额超过1000万且回款周期小于60天的合同有哪些？": (
        """SELECT c.contract_id, c.contract_name,
                  (SELECT customer_name FROM customers WHERE customer_id = c.customer_id),
                  c.amount, c.signed_at, c.collection_days
           FROM contracts AS c
           WHERE c.region = '华东' AND c.signed_at BETWEEN '2023-10-01' AND '2023-12-31'
             AND c.amount > 1e7 AND c.collection_days < 60""",
        lambda row: row[3], True),
    "去年第三季度在华东区销售额最高的产品是什么？": (
        """SELECT p.product_id, p.product_name, t.total FROM products AS p
           JOIN (SELECT product_id, SUM(amount) AS total FROM sales
                 WHERE region = '华东' AND sale_date BETWEEN '2025-07-01' AND '2025-09-30'
                 GROUP BY product_id) AS t ON t.product_id = p.product_id
           WHERE t.total = (SELECT MAX(total) FROM (
                 SELECT SUM(amount) AS total FROM sales
                 WHERE region = '华东' AND sale_date BETWEEN '2025-07-01' AND '2025-09-30'
                 GROUP BY product_id))""",
        None, False),
    "产品X在过去三个季度的增长率变化": (
        """WITH q AS (
             SELECT CASE WHEN sale_date < '2026-01-01' THEN '2025-Q4'
                         WHEN sale_date < '2026-04-01' THEN '2026-Q1'
                         WHEN sale_date < '2026-07-01' THEN '2026-Q2'
                         ELSE '2026-Q3' END AS quarter,
                    SUM(amount) AS total
             FROM sales WHERE product_id = (SELECT product_id FROM products WHERE product_name = '产品X')
               AND sale_date BETWEEN '2025-10-01' AND '2026-09-30'
             GROUP BY 1),
           pairs(quarter, previous) AS (VALUES ('2026-Q1', '2025-Q4'), ('2026-Q2', '2026-Q1'),
                                               ('2026-Q3', '2026-Q2'))
           SELECT cur.quarter, cur.total, prev.total,
                  ROUND(100.0 * (cur.total - prev.total) / prev.total, 1)
           FROM pairs JOIN q AS cur ON cur.quarter = pairs.quarter
                      JOIN q AS prev ON prev.quarter = pairs.previous""",
        lambda row: row[0], False),
    "2025年各大区的销售额分别是多少？": (
        """SELECT region, SUM(amount), COUNT(*) FROM sales WHERE sale_date LIKE '2025-%'
           GROUP BY region""",
        lambda row: row[1], True),
    "星火项目的成员有哪些？": (
        """SELECT m.employee_id, e.name, m.role FROM project_members AS m JOIN employees AS e USING (employee_id)
           WHERE m.project_name = '星火'""",
        lambda row: row[0], False),
    "北斗项目的负责人是谁？": (
        """SELECT name, employee_id, department, title FROM employees
           WHERE employee_id = (SELECT owner_id FROM projects WHERE project_name = '北斗')""",
        None, False),
    "预算最高的3个项目是哪些？": (
        "SELECT project_name, budget FROM projects ORDER BY budget DESC LIMIT 3", lambda row: row[1], True),
    "上个月绩效为D的员工有多少人？": (
        "SELECT COUNT(*) FROM employee_performance WHERE assessment_month = '2026-10-01' AND performance_grade = 'D'",
        None, False),
    "研发部2026年3月绩效为A的有多少人？": (
        """SELECT COUNT(*) FROM employee_performance JOIN employees USING (employee_id)
           WHERE department = '研发部' AND assessment_month = '2026-03-01' AND performance_grade = 'A'""",
        None, False),
    "What was the average performance score of the R&D department (研发部) in September 2026?": (
        """SELECT AVG(score) FROM employee_performance JOIN employees USING (employee_id)
           WHERE department = '研发部' AND assessment_month = '2026-09-01'""",
        None, False),
    "产品X在2025年的销售额是多少？": (
        """SELECT SUM(amount), COUNT(*) FROM sales WHERE sale_date LIKE '2025-%'
           AND product_id = (SELECT product_id FROM products WHERE product_name = '产品X')""",
        None, False),
    "How many different customers bought 产品X last year?": (
        """SELECT COUNT(DISTINCT customer_id) FROM sales WHERE sale_date LIKE '2025-%'
           AND product_id = (SELECT product_id FROM products WHERE product_name = '产品X')""",
        None, False),
    "What were the total sales in the 华南 region in 2024?": (
        "SELECT SUM(amount) FROM sales WHERE region = '华南' AND sale_date LIKE '2024-%'", None, False),
    "2025年销售额最高的5个产品是什么？": (
        """SELECT p.product_name, SUM(s.amount) FROM sales AS s JOIN products AS p USING (product_id)
           WHERE s.sale_date LIKE '2025-%' GROUP BY p.product_name ORDER BY 2 DESC LIMIT 5""",
        lambda row: row[1], True),
    "2025年销售额最高的10个客户是哪些？": (
        """SELECT c.customer_name, SUM(s.amount) FROM sales AS s JOIN customers AS c USING (customer_id)
           WHERE s.sale_date LIKE '2025-%' GROUP BY c.customer_name ORDER BY 2 DESC LIMIT 10""",
        lambda row: row[1], True),
    "2025年销售额最高的客户是哪家？": (
        """SELECT c.customer_name, SUM(s.amount) FROM sales AS s JOIN customers AS c USING (customer_id)
           WHERE s.sale_date LIKE '2025-%' GROUP BY c.customer_name ORDER BY 2 DESC LIMIT 1""",
        None, False),
    "上个季度签了多少份合同？": (
        "SELECT COUNT(*) FROM contracts WHERE signed_at BETWEEN '2026-07-01' AND '2026-09-30'", None, False),
    "2024年签约的合同中金额最大的5份是哪些？": (
        """SELECT contract_id, contract_name, amount, signed_at FROM contracts WHERE signed_at LIKE '2024-%'
           ORDER BY amount DESC LIMIT 5""",
        lambda row: row[2], True),
    "2025年销售额最高的5名销售代表是谁，分别在哪个城市？": (
        """SELECT e.employee_id, e.name, e.region, e.city, e.title FROM employees AS e
           WHERE e.employee_id IN (SELECT employee_id FROM sales WHERE sale_date LIKE '2025-%'
                                   GROUP BY employee_id ORDER BY SUM(amount) DESC LIMIT 5)""",
        None, False),
}


def week_between(document: Mapping[str, Any], first: str, last: str) -> bool:
    return first <= document["week_start_date"] <= last


def xinghuo_a_week_reports(company: sqlite3.Connection, documents: list[dict[str, Any]]) -> list[str]:
    """Reports of 星火 members graded A in 2026-03, in the week from Monday 2026-03-02."""
    a_members = {row[0] for row in sql(company, """
        SELECT p.employee_id FROM employee_performance AS p
        JOIN project_members AS m ON m.employee_id = p.employee_id AND m.project_name = '星火'
        WHERE p.performance_grade = 'A' AND p.assessment_month = '2026-03-01'""")}
    return [d["report_id"] for d in documents
            if d["author_id"] in a_members and week_between(d, "2026-03-02", "2026-03-08")]


def xinghuo_owner_latest(company: sqlite3.Connection, documents: list[dict[str, Any]]) -> list[str]:
    """The 星火 lead's five latest reports; the lead found through the members' roles."""
    (lead,), = sql(company, "SELECT employee_id FROM project_members WHERE project_name = '星火' AND role = '负责人'")
    mine = sorted((d for d in documents if d["author_id"] == lead), key=lambda d: d["week_start_date"], reverse=True)
    return [d["report_id"] for d in mine[:5]]


SEARCH_EXAMPLES = {
    "‘星火’项目组里，绩效为A的员工在三月第一周写了哪些周报？",
    "2026年10月有哪些周报提到了灰度发布？",
    "2026年第三季度各部门分别提交了多少份周报？",
    "‘星火’项目负责人最近写的5份周报是什么？",
    "李玲倩在2026年10月写了哪些周报？",
}


def test_every_verified_example_has_a_hand_written_answer(example_plans: dict[str, Plan]) -> None:
    assert set(example_plans) == set(SQL_EXAMPLES) | SEARCH_EXAMPLES
    assert len(example_plans) == 28


@pytest.mark.parametrize("question", list(SQL_EXAMPLES))
def test_sql_example_matches_hand_written_sql(question: str, engine: Engine, example_plans: dict[str, Plan],
                                              company: sqlite3.Connection) -> None:
    expected_sql, order, descending = SQL_EXAMPLES[question]
    result = engine.run(example_plans[question])
    assert result.notes == []
    assert all(step.row_count for step in result.steps.values())
    assert_same_rows(result.final.rows, sql(company, expected_sql), order=order, descending=descending)


def test_example_intermediate_steps(engine: Engine, example_plans: dict[str, Plan],
                                    company: sqlite3.Connection) -> None:
    """What the multi-step SQL examples pass on: the 2026-03 A grades, the quarterly totals,
    the top five representatives in order."""
    top = engine.run(example_plans["2026年3月绩效为A的员工都参与了哪些项目？"]).steps["top"]
    assert_same_rows(top.rows, sql(company, "SELECT employee_id FROM employee_performance "
                                            "WHERE performance_grade = 'A' AND assessment_month LIKE '2026-03%'"))

    quarterly = engine.run(example_plans["产品X在过去三个季度的增长率变化"]).steps["quarterly"]
    assert [row[0] for row in quarterly.rows] == ["2025-Q4", "2026-Q1", "2026-Q2", "2026-Q3"]
    assert_same_rows([quarterly.rows[0]], sql(company, """
        SELECT '2025-Q4', SUM(s.amount) FROM sales AS s, products AS p
        WHERE p.product_id = s.product_id AND p.product_name = '产品X'
          AND s.sale_date >= '2025-10-01' AND s.sale_date < '2026-01-01'"""))

    reps = engine.run(example_plans["2025年销售额最高的5名销售代表是谁，分别在哪个城市？"]).steps["top_reps"]
    want = sql(company, "SELECT employee_id, SUM(amount) AS t FROM sales WHERE strftime('%Y', sale_date) = '2025' "
                        "GROUP BY employee_id ORDER BY t DESC LIMIT 5")
    assert normalised(reps.rows) == normalised(want)


def test_example_xinghuo_a_grades_first_march_week(engine: Engine, example_plans: dict[str, Plan],
                                                   company: sqlite3.Connection, reports: list[dict[str, Any]]) -> None:
    result = engine.run(example_plans["‘星火’项目组里，绩效为A的员工在三月第一周写了哪些周报？"])
    want = xinghuo_a_week_reports(company, reports)
    assert want, "the demo data answers this question"
    final = result.final
    assert sorted(column(final, "report_id")) == sorted(want)
    authors = column(final, "author_id")
    assert authors == sorted(authors)
    assert set(column(result.steps["top"], "employee_id")) >= set(authors)


def test_example_reports_mentioning_canary_release(engine: Engine, example_plans: dict[str, Plan],
                                                   reports: list[dict[str, Any]]) -> None:
    result = engine.run(example_plans["2026年10月有哪些周报提到了灰度发布？"])
    want = [d for d in reports if "灰度发布" in d["content"] and week_between(d, "2026-10-01", "2026-10-31")]
    assert 0 < len(want) < 100  # under the example's size, so every match comes back
    assert sorted(column(result.final, "report_id")) == sorted(d["report_id"] for d in want)
    weeks = column(result.final, "week_start_date")
    assert weeks == sorted(weeks)


def test_example_reports_per_department_in_q3(engine: Engine, example_plans: dict[str, Plan],
                                              reports: list[dict[str, Any]]) -> None:
    result = engine.run(example_plans["2026年第三季度各部门分别提交了多少份周报？"])
    want = collections.Counter(d["department"] for d in reports if week_between(d, "2026-07-01", "2026-09-30"))
    assert dict(result.final.rows) == dict(want)
    counts = [row[1] for row in result.final.rows]
    assert counts == sorted(counts, reverse=True)


def test_example_xinghuo_lead_latest_reports(engine: Engine, example_plans: dict[str, Plan],
                                             company: sqlite3.Connection, reports: list[dict[str, Any]]) -> None:
    result = engine.run(example_plans["‘星火’项目负责人最近写的5份周报是什么？"])
    assert column(result.final, "report_id") == xinghuo_owner_latest(company, reports)


# ============================================================================================
# Scheduling: concurrency, dependency order, empty inputs
# ============================================================================================


#: How long a step waits for the steps it must run alongside: only a bound that turns an engine
#: running them one by one into a failure instead of a hang.
MEET_GUARD_S = 60.0


@dataclass(frozen=True)
class Call:
    step: str
    started: float
    ended: float


class RecordingPool(ExecutorPool):
    """The real executors, each call recorded (and optionally slowed down or broken).

    The engine takes its executors from the pool it is given, so wrapping them is how a test
    sees in which order queries started and ended without touching the engine's code; the
    queries still run on the real databases.

    Concurrency is shown by outcome, never by durations: the steps in ``meet`` each wait for
    all the others to be running (a barrier), and a step in ``waits_for`` does not return
    before the step it names has ended. An engine that ran them one after the other would
    leave a step waiting until ``MEET_GUARD_S`` breaks the wait — the test fails, it does not
    depend on how busy the machine is.
    """

    def __init__(self, capabilities: CapabilitySet, *, delay_s: float = 0.0, slow: Mapping[str, float] | None = None,
                 fail: Mapping[str, Exception] | None = None, meet: Sequence[str] = (),
                 waits_for: Mapping[str, str] | None = None) -> None:
        super().__init__(capabilities)
        self.calls: list[Call] = []
        self.delay_s = delay_s
        self.slow = dict(slow or {})
        self.fail = dict(fail or {})
        self.meet = threading.Barrier(len(meet), timeout=MEET_GUARD_S) if meet else None
        self.meeting = frozenset(meet)
        self.waits_for = dict(waits_for or {})
        self.ended = collections.defaultdict(threading.Event)
        self._calls_lock = threading.Lock()

    def get(self, manifest: Manifest) -> Any:
        return _Recorded(self, super().get(manifest))

    def by_step(self) -> dict[str, Call]:
        return {call.step: call for call in self.calls}


@dataclass(frozen=True)
class _Recorded:
    pool: RecordingPool
    inner: Any

    def fetch(self, query: Any) -> Any:
        step = _step_of(query)
        started = time.perf_counter()
        try:
            if step in self.pool.fail:
                raise self.pool.fail[step]
            time.sleep(self.pool.slow.get(step, self.pool.delay_s))
            if self.pool.meet is not None and step in self.pool.meeting:
                self.pool.meet.wait()  # BrokenBarrierError: the others never ran alongside
            if step in self.pool.waits_for:
                other = self.pool.waits_for[step]
                assert self.pool.ended[other].wait(MEET_GUARD_S), f"{step!r} waited in vain for {other!r} to end"
            return self.inner.fetch(query)
        finally:
            with self.pool._calls_lock:
                self.pool.calls.append(Call(step, started, time.perf_counter()))
            self.pool.ended[step].set()

    def close(self) -> None:
        self.inner.close()


def _step_of(query: Any) -> str:
    """The step a query belongs to: each test plan below names its step in a comment or
    selected literal, ``'step=<key>'``."""
    text = query.text if query.kind == "sql" else json.dumps(query.body, ensure_ascii=False)
    return text.split("step=", 1)[1].split("'", 1)[0].split('"', 1)[0] if "step=" in text else "?"


def step_sql(key: str, query: str, **extra: Any) -> dict[str, Any]:
    """A SQL step whose rows carry a marker column naming the step (for ``RecordingPool``)."""
    marked = query.replace("SELECT ", f"SELECT 'step={key}' AS marker, ", 1)
    return {"output_key": key, "source": extra.pop("source", "hr"), "query": marked, **extra}


@pytest.fixture
def recording(demo_capabilities: CapabilitySet) -> Callable[..., tuple[Engine, RecordingPool]]:
    engines: list[Engine] = []

    def make(**options: Any) -> tuple[Engine, RecordingPool]:
        pool = RecordingPool(demo_capabilities, **options)
        engines.append(Engine(demo_capabilities, executors=pool))
        return engines[-1], pool

    yield make
    for made in engines:
        made.close()


def test_independent_steps_run_concurrently(recording) -> None:
    """An hr step and a sales step that do not depend on each other run at the same time."""
    runner, pool = recording(meet=("staff", "lines"))
    plan = plan_of([
        step_sql("staff", "SELECT employee_id FROM employees WHERE department = '法务部'"),
        step_sql("lines", "SELECT COUNT(*) AS n FROM sales WHERE sale_date LIKE '2026-01%'", source="sales"),
    ])
    result = runner.run(plan)
    calls = pool.by_step()
    assert set(calls) == {"staff", "lines"}
    assert calls["staff"].started < calls["lines"].ended and calls["lines"].started < calls["staff"].ended
    assert pool.meet is not None and not pool.meet.broken
    assert all(step.row_count for step in result.steps.values())


def test_dependent_steps_run_in_order_and_independent_ones_alongside(recording) -> None:
    """a → b → c, with d independent: b starts after a ended, c after b; d runs alongside a."""
    runner, pool = recording(meet=("a", "d"))
    plan = plan_of([
        step_sql("a", "SELECT employee_id FROM project_members WHERE project_name = '星火'"),
        step_sql("b", "SELECT employee_id FROM employees WHERE employee_id IN (<a.employee_id>) AND status = '在职'"),
        step_sql("c", "SELECT COUNT(*) AS n FROM employee_performance WHERE employee_id IN (<b.employee_id>)"),
        step_sql("d", "SELECT COUNT(*) AS n FROM projects"),
    ])
    result = runner.run(plan)
    calls = pool.by_step()
    assert calls["b"].started >= calls["a"].ended
    assert calls["c"].started >= calls["b"].ended
    assert calls["d"].started < calls["a"].ended
    assert list(result.steps) == ["a", "b", "c", "d"]  # plan order, whatever finished first


def test_empty_input_stops_dependents_with_a_note(recording) -> None:
    runner, pool = recording()
    plan = plan_of([
        step_sql("nobody", "SELECT employee_id FROM project_members WHERE project_name = '不存在的项目'",
                 purpose="不存在项目的成员"),
        step_sql("grades", "SELECT employee_id FROM employee_performance WHERE employee_id IN (<nobody.employee_id>)"),
        step_sql("later", "SELECT employee_id FROM employees WHERE employee_id IN (<grades.employee_id>)"),
        step_sql("other", "SELECT COUNT(*) AS n FROM projects"),
    ])
    result = runner.run(plan)
    assert [call.step for call in pool.calls if call.step != "other"] == ["nobody"]
    assert result.steps["nobody"].row_count == 0 and result.steps["nobody"].skipped is None
    assert result.steps["grades"].skipped and result.steps["later"].skipped
    assert result.steps["other"].row_count == 1
    grades_note = next(note for note in result.notes if "'grades'" in note)
    assert "'nobody'" in grades_note and "不存在项目的成员" in grades_note and "no rows" in grades_note
    assert any("'later'" in note and "'grades'" in note for note in result.notes)


NOBODY = step_sql("nobody", "SELECT employee_id FROM project_members WHERE project_name = '不存在的项目'",
                  purpose="不存在项目的成员")


NOBODY_SUBQUERY = "SELECT employee_id FROM project_members WHERE project_name = '不存在的项目'"


@pytest.mark.parametrize("query", [
    "SELECT COUNT(*) AS n FROM employees WHERE employee_id IN (<nobody.employee_id>)",
    "SELECT COUNT(*) AS n FROM employees WHERE employee_id NOT IN (<nobody.employee_id>)",
    "SELECT employee_id FROM employees WHERE employee_id NOT IN (<nobody.employee_id>) ORDER BY employee_id",
    "SELECT employee_id FROM employees WHERE employee_id IN (<nobody.employee_id>) OR status = '离职' "
    "ORDER BY employee_id",
    "SELECT CASE WHEN 'E0001' IN (<nobody.employee_id>) THEN 1 ELSE 0 END AS member",
])
def test_a_step_with_an_empty_input_runs_unless_that_provably_empties_it(
    recording, company: sqlite3.Connection, query: str,
) -> None:
    """NOT IN (), COUNT over IN (), IN () under OR: the empty list is bound and the step runs,
    giving what the single query with the (empty) subquery gives; a note names the empty step."""
    runner, _ = recording()
    result = runner.run(plan_of([NOBODY, {"output_key": "q", "source": "hr", "query": query}]))
    assert result.steps["q"].skipped is None
    assert normalised(result.steps["q"].rows) == sql(company, query.replace("<nobody.employee_id>", NOBODY_SUBQUERY))
    note = next(note for note in result.notes if "'q'" in note)
    assert "'nobody'" in note and "不存在项目的成员" in note and "no rows" in note


@pytest.mark.parametrize("query", [
    "SELECT employee_id FROM employees WHERE status = '在职' AND employee_id IN (<nobody.employee_id>)",
    "SELECT department, COUNT(*) AS n FROM employees WHERE (employee_id IN (<nobody.employee_id>)) GROUP BY department",
    "SELECT employee_id, COUNT(*) OVER () AS n FROM employees WHERE employee_id IN (<nobody.employee_id>) LIMIT 3",
])
def test_a_top_level_in_conjunct_on_an_empty_input_skips_the_step(recording, query: str) -> None:
    runner, pool = recording()
    result = runner.run(plan_of([NOBODY, step_sql("q", query)]))
    assert result.steps["q"].skipped and [call.step for call in pool.calls] == ["nobody"]


def test_an_empty_terms_filter_skips_a_search_step_and_must_not_runs_it(recording) -> None:
    runner, pool = recording()
    body = {"query": {"bool": {"filter": [{"terms": {"author_id": "<nobody.employee_id>"}}]}}, "size": 3}
    negated = {"query": {"bool": {"must_not": [{"terms": {"author_id": "<nobody.employee_id>"}}]}}, "size": 3,
               "_source": ["report_id"]}
    aggregated = {"query": {"terms": {"author_id": "<nobody.employee_id>"}}, "size": 0,
                  "aggs": {"n": {"value_count": {"field": "report_id"}}}}
    result = runner.run(plan_of([
        NOBODY,
        {"output_key": "filtered", "source": "reports", "index": "weekly_reports", "query": body},
        {"output_key": "others", "source": "reports", "index": "weekly_reports", "query": negated},
        {"output_key": "counted", "source": "reports", "index": "weekly_reports", "query": aggregated},
    ]))
    assert result.steps["filtered"].skipped
    assert result.steps["others"].skipped is None and result.steps["others"].row_count == 3
    assert result.steps["counted"].skipped is None and result.steps["counted"].rows == [(0,)]


def test_a_step_after_a_skipped_step_runs_with_the_empty_list(recording) -> None:
    runner, _ = recording()
    result = runner.run(plan_of([
        NOBODY,
        {"output_key": "grades", "source": "hr", "query": "SELECT employee_id FROM employee_performance WHERE employee_id IN (<nobody.employee_id>)"},
        {"output_key": "n", "source": "hr",
         "query": "SELECT COUNT(*) AS n FROM employees WHERE employee_id NOT IN (<grades.employee_id>)"},
    ]))
    assert result.steps["grades"].skipped and result.steps["n"].rows[0][0] > 0


def test_a_step_a_local_step_reads_as_a_table_always_runs(recording) -> None:
    """A local step needs the table's columns, so its input runs even when provably empty."""
    runner, _ = recording()
    result = runner.run(plan_of([
        NOBODY,
        {"output_key": "grades", "source": "hr", "query": "SELECT employee_id FROM employee_performance WHERE employee_id IN (<nobody.employee_id>)"},
        {"output_key": "n", "source": "local", "query": "SELECT COUNT(*) AS n FROM grades"},
    ]))
    assert result.steps["grades"].skipped is None and result.steps["n"].rows == [(0,)]


def test_local_step_reads_earlier_steps_only_whichever_finished_first(recording) -> None:
    """``later`` finishes long before ``a``, yet the local step between them cannot read it."""
    runner, pool = recording(waits_for={"a": "later"})
    plan = plan_of([
        step_sql("a", "SELECT employee_id FROM employees WHERE department = '法务部'"),
        {"output_key": "c", "source": "local",
         "query": "SELECT a.employee_id FROM a JOIN later ON later.employee_id = a.employee_id"},
        step_sql("later", "SELECT employee_id FROM employees WHERE department = '法务部'"),
    ])
    with pytest.raises(SandboxViolation) as caught:
        runner.run(plan)
    assert caught.value.code == "unknown_table" and caught.value.step == "c"
    calls = pool.by_step()
    assert calls["later"].ended < calls["a"].ended


def test_run_inside_an_event_loop_and_arun(engine: Engine, example_plans: dict[str, Plan]) -> None:
    """A notebook cell or async handler may call ``run``; ``arun`` keeps the loop free."""
    plan = example_plans["2026年3月绩效为A的员工都参与了哪些项目？"]

    async def both() -> tuple[Any, Any]:
        inside = engine.run(plan)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(tick())
        awaited = await engine.arun(plan)
        ticker.cancel()
        assert ticks > 0  # the loop ran other work while the plan ran
        return inside, awaited

    inside, awaited = asyncio.run(both())
    assert inside.final.rows == awaited.final.rows and inside.final.row_count > 0


def test_truncation_is_recorded_in_the_notes(demo_capabilities: CapabilitySet, example_plans: dict[str, Plan]) -> None:
    small = with_limits(demo_capabilities, "hr", max_rows=5, max_intermediate_rows=3)
    with Engine(small) as runner:
        final = runner.run(example_plans["华东区在职的研发部员工有哪些？"])
        passed_on = runner.run(example_plans["2026年3月绩效为A的员工都参与了哪些项目？"])
    assert final.final.row_count == 5 and final.final.truncated and final.truncated
    assert any("'engineers'" in n and "truncated at 5 rows" in n and "row limit" in n for n in final.notes)
    top = passed_on.steps["top"]
    assert top.row_count == 3 and top.truncated
    assert any("'top'" in n and "intermediate row cap" in n for n in passed_on.notes)


# ============================================================================================
# References
# ============================================================================================


def test_named_column_of_a_multi_column_step(engine: Engine, company: sqlite3.Connection) -> None:
    plan = plan_of([
        step("legal", "hr", "SELECT employee_id, name FROM employees WHERE department = '法务部'"),
        step("grades", "hr", "SELECT employee_id, performance_grade FROM employee_performance "
                             "WHERE assessment_month = '2026-03-01' AND employee_id IN (<legal.employee_id>)"),
    ])
    result = engine.run(plan)
    assert_same_rows(result.final.rows, sql(company, """
        SELECT p.employee_id, p.performance_grade FROM employee_performance AS p
        JOIN employees AS e ON e.employee_id = p.employee_id
        WHERE e.department = '法务部' AND p.assessment_month = '2026-03-01'"""))
    assert result.final.row_count > 0


def test_whole_reference_to_a_multi_column_step_is_a_plan_error(recording) -> None:
    runner, pool = recording()
    plan = plan_of([
        step_sql("legal", "SELECT employee_id, name FROM employees WHERE department = '法务部'"),
        step_sql("grades", "SELECT employee_id FROM employee_performance WHERE employee_id IN (<legal>)"),
    ])
    with pytest.raises(PlanError) as caught:
        runner.run(plan)
    assert caught.value.step == "grades"
    assert "<legal>" in str(caught.value) and "employee_id" in str(caught.value)
    assert "<legal.marker>" in (caught.value.hint or "")  # the hint names a column to pick
    assert [call.step for call in pool.calls] == ["legal"]


@pytest.mark.parametrize(("referenced", "reason"), [("later", "a later step"), ("nowhere", "an unknown step")])
def test_reference_forward_or_unknown_fails_before_anything_runs(recording, referenced: str, reason: str) -> None:
    runner, pool = recording()
    plan = plan_of([
        step_sql("first", "SELECT employee_id FROM employees WHERE department = '法务部'"),
        step_sql("second", f"SELECT employee_id FROM employees WHERE employee_id IN (<{referenced}>)"),
        step_sql("later", "SELECT employee_id FROM employees WHERE department = '财务部'"),
    ])
    with pytest.raises(PlanError, match=reason) as caught:
        runner.run(plan)
    assert caught.value.step == "second"
    assert pool.calls == []


@pytest.mark.parametrize(("step", "message", "suggestion"), [
    ({"output_key": "x", "source": "hrr", "query": "SELECT name FROM employees"}, "unknown source", "'hr'"),
    ({"output_key": "x", "source": "reports", "index": "weekly_report", "query": {"query": {"match_all": {}}}},
     "unknown index", "'weekly_reports'"),
])
def test_unknown_source_or_index_suggests_the_closest(recording, step: dict[str, Any], message: str,
                                                      suggestion: str) -> None:
    runner, pool = recording()
    with pytest.raises(PlanError, match=message) as caught:
        runner.run(plan_of([step]))
    assert caught.value.step == "x"
    assert f"did you mean {suggestion}?" in (caught.value.hint or "")
    assert pool.calls == []


def test_errors_name_their_step(recording) -> None:
    """A sandbox refusal, an executor's own bug: both say which step failed."""
    runner, _ = recording(fail={"broken": RuntimeError("driver crashed")})
    first = step_sql("first", "SELECT employee_id FROM employees WHERE department = '法务部'")
    with pytest.raises(SandboxViolation) as refused:
        runner.run(plan_of([first, step_sql("second", "SELECT salary FROM employees")]))
    assert refused.value.step == "second" and refused.value.code == "unknown_column"

    with pytest.raises(ExecutionError) as crashed:
        runner.run(plan_of([first, step_sql("broken", "SELECT COUNT(*) AS n FROM projects")]))
    assert crashed.value.step == "broken" and "driver crashed" in str(crashed.value)
    assert crashed.value.source == "hr"


def test_local_step_joins_results_of_two_sources(engine: Engine, company: sqlite3.Connection) -> None:
    """Sales' top representatives of 2025 joined with HR's sales staff, locally."""
    plan = plan_of([
        step("top_reps", "sales",
             "SELECT employee_id, SUM(amount) AS total_amount FROM sales WHERE sale_date >= '2025-01-01' "
             "AND sale_date <= '2025-12-31' GROUP BY employee_id ORDER BY total_amount DESC LIMIT 10"),
        step("staff", "hr", "SELECT employee_id, name, city FROM employees WHERE department = '销售部'"),
        step("joined", "local", "SELECT t.employee_id, s.name, s.city, t.total_amount FROM top_reps AS t "
                                "JOIN staff AS s ON s.employee_id = t.employee_id ORDER BY t.total_amount DESC"),
    ])
    result = engine.run(plan)
    want = sql(company, """
        SELECT e.employee_id, e.name, e.city, t.total FROM employees AS e
        JOIN (SELECT employee_id, SUM(amount) AS total FROM sales WHERE sale_date LIKE '2025-%'
              GROUP BY employee_id ORDER BY total DESC LIMIT 10) AS t ON t.employee_id = e.employee_id
        WHERE e.department = '销售部'""")
    assert want
    assert_same_rows(result.final.rows, want, order=lambda row: row[3], descending=True)


class _FixedPool(ExecutorPool):
    """Every source answers with the same result, notes included."""

    def __init__(self, capabilities: CapabilitySet, answer: ResultSet) -> None:
        super().__init__(capabilities)
        self.answer = answer

    def get(self, manifest: Manifest) -> Any:
        return SimpleNamespace(fetch=lambda query: self.answer, close=lambda: None)


def test_executor_notes_reach_the_run_notes_with_their_step(demo_capabilities: CapabilitySet) -> None:
    """A NUMERIC column as values.py hands it on: the local step compares it as numbers, and
    both the source's estimate and the local step's rounding are in the run's notes."""
    amounts = ResultSet(("amount",), [(9.5,), (100.25,), ("0.1000000000000000055",)],
                        notes=("the distinct count is an estimate",))
    plan = plan_of([
        {"output_key": "sales", "source": "hr", "query": "SELECT employee_id FROM employees"},
        {"output_key": "big", "source": "local", "query": "SELECT amount FROM sales WHERE amount > 50"},
    ])
    with Engine(demo_capabilities, executors=_FixedPool(demo_capabilities, amounts)) as runner:
        result = runner.run(plan)
    assert result.final.rows == [(100.25,)]
    assert result.notes == [
        "step 'sales': the distinct count is an estimate",
        "step 'big': column 'amount' of step 'sales': 1 value(s) have more digits than a double holds and "
        "were rounded for this step (e.g. 0.1000000000000000055 became 0.1)",
    ]
    assert result.steps["sales"].notes == ("the distinct count is an estimate",)


# ============================================================================================
# The CLI's JSON
# ============================================================================================


def test_cli_run_json_shape(demo_data, example_plans: dict[str, Plan], tmp_path: Path, engine: Engine) -> None:
    from typer.testing import CliRunner

    from structq.cli import app

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(example_plans["‘星火’项目负责人最近写的5份周报是什么？"].to_yaml(), encoding="utf-8")
    outcome = CliRunner().invoke(app, ["run", str(plan_file), "-m", str(REPO_ROOT / "capabilities"), "--json"],
                                 env={"STRUCTQ_DEMO_DIR": str(demo_data.directory)})
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.stdout)
    assert set(data) == {"steps", "notes"} and data["notes"] == []
    keys = {"output_key", "source", "query", "params", "columns", "rows", "row_count", "truncated", "elapsed_ms"}
    assert [step["output_key"] for step in data["steps"]] == ["owner", "reports"]
    for step in data["steps"]:
        assert keys <= set(step)
        assert step["row_count"] == len(step["rows"]) and step["truncated"] is False
        assert all(len(row) == len(step["columns"]) for row in step["rows"])
        assert isinstance(step["elapsed_ms"], (int, float))
    owner, found = data["steps"]
    assert owner["source"] == "hr" and isinstance(owner["query"], str) and owner["rows"] == [[owner["rows"][0][0]]]
    assert found["source"] == "reports" and isinstance(found["query"], dict) and found["row_count"] == 5
    assert found["params"] == {"owner": [owner["rows"][0][0]], "slot_n": 5}  # the example's own top N


# ============================================================================================
# 1 / 1,000 / 100,000 values through a reference, on every database, vs the equivalent JOIN
# ============================================================================================

BIG = 100_000


def create_reference_tables(url: str) -> None:
    """``ids`` 1…100,000 (with a text ``code``, ``K1``…); ``detail`` 120,000 rows pointing at
    some ids twice, some never, some at ids that do not exist.

    A thousand rows go in from Python; the rest are made by the database from their cross
    product (seconds faster on the servers than 220,000 inserted rows).
    """
    from sqlalchemy import (Column, Integer, MetaData, String, Table, cast, create_engine, insert, literal,
                            select, true)

    metadata = MetaData()
    ids = Table("ids", metadata, Column("id", Integer, primary_key=True, autoincrement=False),
                Column("code", String(8)))
    detail = Table("detail", metadata, Column("id", Integer, primary_key=True, autoincrement=False),
                   Column("id_ref", Integer, index=True), Column("amount", Integer))
    low, high = ids.alias("low"), ids.alias("high")
    pairs = low.join(high, true())  # the cross product, said on purpose
    n = low.c.id + 1000 * (high.c.id - 1)  # 1 … 1000 × high.id
    admin = create_engine(url)
    try:
        metadata.create_all(admin)
        with admin.begin() as connection:
            connection.execute(insert(ids), [{"id": i, "code": f"K{i}"} for i in range(1, 1001)])
            more = select(n, literal("K") + cast(n, String)).select_from(pairs).where(
                low.c.id <= 1000, high.c.id.between(2, BIG // 1000))
            connection.execute(insert(ids).from_select(["id", "code"], more))
            rows = select(n, (n * 7919) % (BIG + BIG // 10) + 1, n % 1000).select_from(pairs).where(
                low.c.id <= 1000, high.c.id <= (BIG + BIG // 5) // 1000)
            connection.execute(insert(detail).from_select(["id", "id_ref", "amount"], rows))
    finally:
        admin.dispose()


def fetch_all(url: str, query: str) -> list[Row]:
    from sqlalchemy import create_engine, text

    plain = create_engine(url)
    try:
        with plain.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query))]
    finally:
        plain.dispose()


@pytest.fixture(scope="module")
def sqlite_refs(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('refs') / 'refs.db'}"
    create_reference_tables(url)
    return url


@pytest.fixture(scope="module")
def postgres_refs(pg_server) -> str:
    url = pg_server.create_database("engine_refs")
    create_reference_tables(url)
    return url


@pytest.fixture(scope="module")
def mariadb_refs(mariadb_server) -> str:
    url = mariadb_server.create_database("engine_refs")
    create_reference_tables(url)
    return url


@pytest.mark.parametrize("size", [1, 1_000, BIG])
@pytest.mark.parametrize("database", ["sqlite_refs", "postgres_refs", "mariadb_refs"])
def test_reference_of_any_size_gives_the_join(database: str, size: int, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(database)
    manifest, _ = load_manifest_text(manifest_text("engine_refs_sql", url=url, big=BIG), f"<{database}>")
    plan = plan_of([
        {"output_key": "picked", "source": "refs", "query": f"SELECT id FROM ids WHERE id <= {size}"},
        {"output_key": "rows", "source": "refs",
         "query": "SELECT id, id_ref, amount FROM detail WHERE id_ref IN (<picked>)"},
    ])
    with Engine(CapabilitySet([manifest])) as runner:
        result = runner.run(plan)
    assert result.steps["picked"].row_count == size and result.notes == []
    want = fetch_all(url, "SELECT d.id, d.id_ref, d.amount FROM detail AS d "
                          f"JOIN ids AS i ON i.id = d.id_ref WHERE i.id <= {size}")
    assert want or size == 1
    assert_same_rows(result.final.rows, want)


@pytest.fixture(scope="module")
def search_refs(search_server) -> str:
    """5,000 documents with codes K0, K40, …, K199960: half of them among the ids' K1…K100000."""
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[search_server.url], timeout=60)
    try:
        client.indices.create(index="engine_refs", body={"mappings": {"properties": {
            "code": {"type": "keyword"}, "n": {"type": "long"}}}})
        lines: list[dict[str, Any]] = []
        for n in range(0, 2 * BIG, 40):
            lines += [{"index": {"_index": "engine_refs", "_id": str(n)}}, {"code": f"K{n}", "n": n}]
        assert not client.bulk(body=lines, refresh=True)["errors"]
    finally:
        client.close()
    return search_server.url


def test_hundred_thousand_ids_to_a_terms_query(sqlite_refs: str, search_refs: str) -> None:
    sql_manifest, _ = load_manifest_text(manifest_text("engine_refs_sql", url=sqlite_refs, big=BIG), "<refs>")
    search_manifest, _ = load_manifest_text(manifest_text("engine_refs_search", url=search_refs), "<docs>")
    expected = sorted(f"K{n}" for n in range(0, 2 * BIG, 40) if 1 <= n <= BIG)
    picked = {"output_key": "picked", "source": "refs", "query": "SELECT code FROM ids"}
    count = {"output_key": "count", "source": "docs", "index": "engine_refs",
             "query": {"size": 0, "query": {"terms": {"code": "<picked>"}}}}
    hits = {"output_key": "hits", "source": "docs", "index": "engine_refs",
            "query": {"size": 5000, "_source": ["code"], "query": {"terms": {"code": "<picked>"}}}}
    with Engine(CapabilitySet([sql_manifest, search_manifest])) as runner:
        counted = runner.run(plan_of([picked, count]))
        found = runner.run(plan_of([picked, hits]))
    assert counted.steps["picked"].row_count == BIG
    assert counted.final.rows == [(len(expected),)]
    assert sorted(column(found.final, "code")) == expected and not found.final.truncated
