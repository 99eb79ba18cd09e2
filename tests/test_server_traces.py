"""OpenTelemetry traces: with the ``OTEL_*`` variables set, a question is a span whose children are
its model calls and its steps, with their source, kind, rows and outcome; without them nothing
of OpenTelemetry is used.

The real SDK with its in-memory span exporter (no network); the two-tenant shop on a real
SQLite file; a scripted model writes the two-step plan.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from scripted import plan_reply, scripted
from server_support import auth, build_shop

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.service import Service
from structq.server.traces import Traces, traces_wanted

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is part of dev")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

QUESTION = "T1-客户0和T1-客户1各下了多少单？"
TWO_STEPS = {"steps": [
    {"output_key": "first", "source": "shop", "purpose": "客户0的订单数",
     "query": "SELECT COUNT(*) AS orders FROM orders WHERE customer = 'T1-客户0'"},
    {"output_key": "second", "source": "shop", "purpose": "客户1的订单",
     "query": "SELECT order_id FROM orders WHERE customer = 'T1-客户1'"}]}


def _service(shop, model: Any, traces: Traces | None) -> Service:
    capabilities = CapabilitySet.from_path(shop.manifests)
    settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=0)
    config = ServerConfig.from_file(shop.config, sources=capabilities.names)
    return Service(Service.agent_for(capabilities, llm=model, settings=settings), config, traces=traces)


def test_a_question_is_a_span_with_its_model_call_and_steps_as_children(tmp_path: Path) -> None:
    shop = build_shop(tmp_path)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    service = _service(shop, scripted(plan_reply(TWO_STEPS)), Traces(provider))
    with TestClient(create_app(service, mcp=False), raise_server_exceptions=False) as client:
        answer = client.post("/v1/ask", json={"question": QUESTION, "no_answer": True}, headers=auth("tenant1")).json()
    assert answer["plan_source"] == "model"
    rows = {s["output_key"]: len(s["rows"]) for s in answer["steps"]}

    spans = exporter.get_finished_spans()
    [question] = [s for s in spans if s.name == "structq.question"]
    assert question.parent is None
    assert dict(question.attributes) == {"structq.user": "ann", "structq.plan_source": "model", "structq.steps": 2,
                                         "structq.outcome": "ok"}
    children = [s for s in spans if s.parent is not None and s.parent.span_id == question.context.span_id]
    assert {s.context.trace_id for s in spans} == {question.context.trace_id}
    steps = {s.attributes["structq.output_key"]: s for s in children if s.name == "structq.step"}
    assert set(steps) == {"first", "second"}
    for key, span in steps.items():
        assert dict(span.attributes) == {"structq.output_key": key, "structq.source": "shop", "structq.kind": "sql",
                                         "structq.rows": rows[key], "structq.outcome": "ok"}
        assert question.start_time <= span.start_time <= span.end_time <= question.end_time
    assert rows == {"first": 1, "second": 9}
    [call] = [s for s in children if s.name == "structq.model_call"]
    assert call.attributes["structq.purpose"] == "plan" and call.attributes["structq.outcome"] == "ok"
    assert len(spans) == 4  # nothing else: the question, one model call, two steps


def test_a_refused_question_ends_its_span_with_the_error_code(tmp_path: Path) -> None:
    shop = build_shop(tmp_path)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    delete = {"steps": [{"output_key": "gone", "source": "shop", "query": "DELETE FROM orders"}]}
    service = _service(shop, scripted(*[plan_reply(delete)] * 4), Traces(provider))
    with TestClient(create_app(service, mcp=False), raise_server_exceptions=False) as client:
        refused = client.post("/v1/ask", json={"question": "删掉所有订单", "no_answer": True}, headers=auth("tenant1"))
    assert refused.status_code == 422, refused.text
    spans = exporter.get_finished_spans()
    [question] = [s for s in spans if s.name == "structq.question"]
    assert question.attributes["structq.outcome"] == refused.json()["error"]["code"] == "no_working_plan"
    assert not question.status.is_ok
    # each attempt's step was refused by the sandbox: its span says with which code
    steps = [s for s in spans if s.name == "structq.step"]
    assert len(steps) == 3 and {(s.attributes["structq.outcome"], s.attributes["structq.rows"]) for s in steps} == {("write", 0)}
    assert all(s.parent is not None and s.parent.span_id == question.context.span_id for s in steps)


def test_the_variables_decide_whether_there_are_traces() -> None:
    assert traces_wanted({}) == []
    assert traces_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]
    assert traces_wanted({"OTEL_TRACES_EXPORTER": "console"}) == ["console"]
    assert traces_wanted({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}) == []
    assert Traces.from_env({}) is None
    with_console = Traces.from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert with_console is not None
    with_console.close()
    # without the variables, serving a question imports nothing of OpenTelemetry
    script = ("import sys\nfrom structq.server.service import Service\nfrom structq.server.traces import Traces\n"
              "assert Traces.from_env() is None\n"
              "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
