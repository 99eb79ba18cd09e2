"""Operating the service: Prometheus ``/metrics`` (its content after a few requests, who may
read it), JSON log lines (access lines with the user and the request id, errors with the
traceback in one field) and the audit line's user, variable values, sources and request id.

The two-tenant shop on a real SQLite file, through the ASGI test client and a real
``structq serve`` process; a scripted model where a model call is counted.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from scripted import plan_reply, scripted, text_reply
from server_support import SERIES_QUESTION, TOKENS, auth, build_shop, sha, start_server

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.logs import JsonFormatter
from structq.server.service import Service


@pytest.fixture
def shop(tmp_path: Path):
    return build_shop(tmp_path)


def _client(shop, config: ServerConfig | None = None, model: Any = None) -> TestClient:
    capabilities = CapabilitySet.from_path(shop.manifests)
    settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=0)
    config = config or ServerConfig.local_only({"tenant_id": 1})
    return TestClient(create_app(Service(Service.agent_for(capabilities, llm=model, settings=settings), config)),
                      raise_server_exceptions=False)


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the exposition ``text`` (labels in any order), or None."""
    for line in text.splitlines():
        found = re.fullmatch(rf"{re.escape(name)}(?:\{{(.*)\}})? (\S+)", line)
        if found is None:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1) or ""))
        if have == labels:
            return float(found.group(2))
    return None


def test_metrics_after_a_few_requests(shop) -> None:
    plan = {"steps": [{"output_key": "rows", "source": "shop", "purpose": "订单",
                       "query": "SELECT customer, amount FROM orders ORDER BY amount DESC LIMIT 3"}]}
    model = scripted(plan_reply(plan), text_reply("最大的一单见 [rows]。"))
    with _client(shop, model=model) as client:
        for _ in range(2):
            assert client.post("/v1/ask", json={"question": SERIES_QUESTION, "no_answer": True}).status_code == 200
        assert client.post("/v1/ask", json={"question": "金额最大的三单？"}).status_code == 200, model.calls
        refused = {"steps": [{"output_key": "c", "source": "shop", "query": "SELECT card_number FROM orders"}]}
        assert client.post("/v1/run", json={"plan": refused}).status_code == 422
        response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert _sample(text, "structq_requests_total", route="/v1/ask", status="200") == 3
    assert _sample(text, "structq_requests_total", route="/v1/run", status="422") == 1
    assert _sample(text, "structq_request_duration_seconds_count", route="/v1/ask", status="200") == 3
    assert _sample(text, "structq_step_duration_seconds_count", source="shop", kind="sql") == 3
    assert _sample(text, "structq_rows_returned_total", source="shop") == 6 + 6 + 3
    assert _sample(text, "structq_sandbox_refusals_total", code="denied_column") == 1
    assert _sample(text, "structq_plans_total", plan_source="verified") == 2
    assert _sample(text, "structq_plans_total", plan_source="model") == 1
    assert _sample(text, "structq_plan_cache_hits_total") == 0
    assert _sample(text, "structq_model_calls_total", purpose="plan", outcome="ok") == 1
    assert _sample(text, "structq_model_calls_total", purpose="answer", outcome="ok") == 1
    assert _sample(text, "structq_model_call_duration_seconds_count", purpose="plan", outcome="ok") == 1
    assert _sample(text, "structq_source_breaker_open", source="shop") == 0


def test_metrics_need_a_metrics_token_on_a_server_with_tokens(shop) -> None:
    capabilities = CapabilitySet.from_path(shop.manifests)
    data = {"tokens": [{"sha256": sha(TOKENS["tenant1"]), "user": "ann", "vars": {"tenant_id": 1}},
                       {"sha256": sha("tok-prom"), "user": "prometheus", "metrics": True, "sources": []}]}
    with _client(shop, ServerConfig.from_data(data, sources=capabilities.names)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers=auth("tenant1")).status_code == 403
        allowed = client.get("/metrics", headers={"Authorization": "Bearer tok-prom"})
        assert allowed.status_code == 200 and "structq_requests_total" in allowed.text
        # the monitoring token reads no data
        assert client.post("/v1/ask", json={"question": SERIES_QUESTION},
                           headers={"Authorization": "Bearer tok-prom"}).status_code == 403


def test_an_error_is_one_json_line_with_its_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("structq.server", logging.ERROR, __file__, 1, "internal error", (), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "error" and entry["message"] == "internal error"
    assert "ValueError: boom" in entry["traceback"] and "Traceback" in entry["traceback"]


def test_json_access_lines_and_the_audit_line_share_the_request_id(shop, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    log = tmp_path / "serve.log"
    server = start_server(["-m", str(shop.manifests), "--config", str(shop.config), "--log-format", "json"], log=log,
                          env={"STRUCTQ_AUDIT_LOG": str(audit), "STRUCTQ_CACHE": "0"})
    try:
        asked = httpx.post(server.url + "/v1/ask", json={"question": SERIES_QUESTION, "start_conversation": True},
                           headers={**auth("tenant2"), "X-Request-ID": "req-42"}, timeout=60)
        assert asked.status_code == 200 and asked.headers["x-request-id"] == "req-42"
        anonymous = httpx.post(server.url + "/v1/ask", json={"question": SERIES_QUESTION}, timeout=60)
        assert anonymous.status_code == 401 and len(anonymous.headers["x-request-id"]) == 32
    finally:
        server.stop()
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()
               if line.startswith("{")]
    assert entries and all(line.startswith("{") for line in log.read_text().splitlines()[1:])  # after the banner
    access = next(e for e in entries if e.get("request_id") == "req-42" and e["logger"] == "structq.access")
    assert access["user"] == "bob" and access["route"] == "/v1/ask" and access["status"] == 200
    assert access["conversation"] == asked.json()["conversation"] and access["duration_ms"] > 0
    refused = next(e for e in entries if e["logger"] == "structq.access" and e["status"] == 401)
    assert refused["user"] is None
    [line] = [json.loads(x) for x in audit.read_text(encoding="utf-8").splitlines()]
    assert line["user"] == "bob" and line["request_id"] == "req-42"
    assert line["vars"] == {"tenant_id": 2} and line["sources"] == ["shop"] and line["plan_source"] == "verified"


def test_an_unknown_log_format_is_refused(shop) -> None:
    import subprocess

    result = subprocess.run([sys.executable, "-m", "structq.cli", "serve", "-m", str(shop.manifests), "--var",
                             "tenant_id=1", "--log-format", "xml", "--port", "9"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 3 and "unknown log format 'xml'" in result.stderr


