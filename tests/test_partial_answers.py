"""Partial answers and the circuit breaker.

A source that is down or answers 503 costs only the steps that need it: a real PostgreSQL
killed mid-run, and a search server behind a proxy that answers 503 (tests/es_proxy.py). The
breaker's states are driven by a fake clock (the cool-down is time; the tests must not wait).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from es_proxy import EsProxy
from scripted import plan_reply, scripted, text_reply
from search_support import load_indices
from manifest_support import manifest_text

from structq.agent import Agent, Engine, Plan
from structq.agent.breaker import CircuitBreaker, CircuitOpen
from structq.capabilities import CapabilitySet
from structq.capabilities.loader import load_manifest_text
from structq.config import Settings
from structq.errors import ExecutionError, QueryTimeout, SourceUnavailable

TODAY = dt.date(2026, 11, 30)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def down() -> Any:
    raise SourceUnavailable("source 'db' is down", source="db")


def up() -> str:
    return "rows"


# --- the breaker alone --------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [SourceUnavailable, QueryTimeout], ids=["unavailable", "timeout"])
def test_breaker_opens_after_n_failures_in_a_row_then_half_opens_and_closes(failure: type[ExecutionError]) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(threshold=3, cooldown_s=30, clock=clock)

    def failing() -> Any:
        raise failure("no answer", source="db")

    for _ in range(2):
        with pytest.raises(failure):
            breaker.call("db", failing)
        assert breaker.state("db") == "closed"
    with pytest.raises(failure):
        breaker.call("db", failing)
    assert breaker.state("db") == "open"

    ran: list[str] = []
    with pytest.raises(CircuitOpen) as info:
        breaker.call("db", lambda: ran.append("x"))
    assert ran == [] and "failed 3 times in a row" in str(info.value) and "30 s" in str(info.value)
    assert breaker.state("other") == "closed"  # per source

    clock.now += 30
    assert breaker.state("db") == "half_open"
    with pytest.raises(failure):  # the probe fails: open for another cool-down
        breaker.call("db", failing)
    assert breaker.state("db") == "open"
    clock.now += 29
    with pytest.raises(CircuitOpen):
        breaker.call("db", up)
    clock.now += 1
    assert breaker.call("db", up) == "rows" and breaker.state("db") == "closed"
    with pytest.raises(failure):  # closed again: counting starts from zero
        breaker.call("db", failing)
    assert breaker.state("db") == "closed"


def test_half_open_lets_exactly_one_probe_through() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(threshold=1, cooldown_s=10, clock=clock)
    with pytest.raises(SourceUnavailable):
        breaker.call("db", down)
    clock.now += 10

    def probe() -> str:
        with pytest.raises(CircuitOpen) as info:  # a concurrent step while the probe runs
            breaker.call("db", up)
        assert "being probed" in str(info.value)
        return "probed"

    assert breaker.call("db", probe) == "probed" and breaker.state("db") == "closed"


def test_a_query_error_is_the_query_s_fault_not_the_source_s() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown_s=10, clock=FakeClock())

    def rejected() -> Any:
        raise ExecutionError("no such column", source="db")

    with pytest.raises(SourceUnavailable):
        breaker.call("db", down)
    with pytest.raises(ExecutionError):
        breaker.call("db", rejected)  # the source answered: the count restarts
    with pytest.raises(SourceUnavailable):
        breaker.call("db", down)
    assert breaker.state("db") == "closed"


@pytest.mark.parametrize("name, value", [("STRUCTQ_BREAKER_FAILURES", "0"), ("STRUCTQ_BREAKER_FAILURES", "x"),
                                         ("STRUCTQ_BREAKER_COOLDOWN", "-1"), ("STRUCTQ_BREAKER_COOLDOWN", "soon")])
def test_bad_breaker_settings_are_configuration_errors(monkeypatch, name: str, value: str) -> None:
    from structq.errors import ConfigError

    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        CircuitBreaker.from_env()
    assert name in str(info.value)


def hr_alone(demo_capabilities: CapabilitySet) -> Any:
    """The demo's hr source without its examples (they name the demo's other sources)."""
    return demo_capabilities["hr"].model_copy(update={"examples": []})


# --- a PostgreSQL server killed mid-run -----------------------------------------------------------


PG_PLAN = Plan.parse({"steps": [
    {"output_key": "incidents", "source": "ops", "purpose": "open incidents",
     "query": "SELECT id, owner_id FROM incidents"},
    {"output_key": "staff", "source": "hr", "purpose": "staff",
     "query": "SELECT employee_id FROM employees WHERE employee_id IN ('E0001', 'E0002')"},
    {"output_key": "owners", "source": "hr", "purpose": "incident owners",
     "query": "SELECT employee_id, name FROM employees WHERE employee_id IN (<incidents.owner_id>)"},
    {"output_key": "others", "source": "hr", "purpose": "staff without incidents",
     "query": "SELECT COUNT(*) AS n FROM employees WHERE employee_id NOT IN (<incidents.owner_id>)"},
]})


@pytest.fixture
def ops_and_hr(fresh_pg_server, demo_capabilities) -> Iterator[tuple[Any, CapabilitySet]]:
    url = fresh_pg_server.create_database("ops")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE incidents (id INTEGER, owner_id TEXT)"))
        connection.execute(sa.text("INSERT INTO incidents VALUES (1, 'E0001'), (2, 'E0003')"))
    engine.dispose()
    ops, _ = load_manifest_text(manifest_text("partial_ops", url=url), "<ops>", env={})
    yield fresh_pg_server, CapabilitySet([ops, hr_alone(demo_capabilities)])


@pytest.mark.postgres
def test_postgres_killed_mid_run_gives_partial_answers_then_the_breaker_opens(ops_and_hr) -> None:
    server, caps = ops_and_hr
    clock = FakeClock()
    with Engine(caps, breaker=CircuitBreaker(threshold=2, cooldown_s=60, clock=clock)) as engine:
        healthy = engine.run(PG_PLAN)
        assert [r.row_count for r in healthy.steps.values()] == [2, 2, 2, 1] and healthy.notes == []

        server.kill()
        for _ in range(2):
            partial = engine.run(PG_PLAN)
            incidents, staff, owners, others = partial.steps.values()
            assert staff.skipped is None and staff.row_count == 2  # does not need ops: still runs
            assert incidents.skipped and "cannot use the database" in incidents.skipped
            assert owners.skipped == "not run: its input step 'incidents' could not be read"
            # unknown is not empty: NOT IN over a missing list must not run as NOT IN ()
            assert others.skipped == "not run: its input step 'incidents' could not be read"
            assert any(n.startswith("partial answer: steps 'incidents', 'owners', 'others'") for n in partial.notes)
        assert engine.breaker.state("ops") == "open"

        skipped = engine.run(PG_PLAN).steps["incidents"]  # not even tried during the cool-down
        assert "skipped: it failed 2 times in a row" in skipped.skipped and "tried again in 60 s" in skipped.skipped

        clock.now += 60
        assert engine.breaker.state("ops") == "half_open"
        probed = engine.run(PG_PLAN).steps["incidents"]  # the probe reaches the dead server
        assert "cannot use the database" in probed.skipped and engine.breaker.state("ops") == "open"


@pytest.mark.postgres
def test_nothing_readable_is_an_error_not_an_answer(ops_and_hr) -> None:
    server, caps = ops_and_hr
    only_ops = Plan.parse({"steps": [PG_PLAN.steps[0]]})
    with Engine(caps, breaker=CircuitBreaker(threshold=5, clock=FakeClock())) as engine:
        server.kill()
        with pytest.raises(SourceUnavailable):
            engine.run(only_ops)


# --- a search server answering 503, through the agent ---------------------------------------------


@pytest.fixture(scope="module")
def notes_proxy(search_server) -> Iterator[EsProxy]:
    load_indices(search_server.url, [("partial_notes", {"properties": {
        "author_id": {"type": "keyword"}, "title": {"type": "text"}}},
        [{"_id": "1", "author_id": "E0001", "title": "周报"}])])
    with EsProxy(search_server.url) as proxy:
        yield proxy


def test_search_503_leaves_the_sql_part_of_the_answer(notes_proxy, demo_capabilities, tmp_path) -> None:
    notes, _ = load_manifest_text(manifest_text("partial_notes", url=notes_proxy.url), "<notes>", env={})
    caps = CapabilitySet([notes, hr_alone(demo_capabilities)])
    plan = {"steps": [
        {"output_key": "headcount", "source": "hr", "purpose": "在职人数",
         "query": "SELECT COUNT(*) AS n FROM employees WHERE status = '在职'"},
        {"output_key": "notes", "source": "notes", "index": "partial_notes", "purpose": "周报",
         "query": {"query": {"match_all": {}}}},
    ]}
    with Engine(caps) as engine:
        headcount = engine.run(Plan.parse({"steps": [plan["steps"][0]]})).final.rows[0][0]
    answer_text = f"在职员工 {headcount} 人 [headcount]；周报暂时无法读取。"
    model = scripted(plan_reply(plan), text_reply(answer_text))
    notes_proxy.fail_next(503, count=10)
    try:
        with Agent(caps, llm=model, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False)) as agent:
            answer = agent.ask("在职多少人，他们写了哪些周报？", today=TODAY)
    finally:
        notes_proxy.clear_faults()
    assert answer.results.steps["headcount"].rows == [(headcount,)]
    assert "HTTP 503" in answer.results.steps["notes"].skipped
    assert answer.text == answer_text and [c["step"] for c in answer.citations] == ["headcount"]
    answer_prompt = model.prompt_text(1)  # the answering model is told what is missing and why
    assert "partial answer: steps 'notes'" in answer_prompt and "HTTP 503" in answer_prompt
    assert any("partial answer" in n for n in answer.notes)
