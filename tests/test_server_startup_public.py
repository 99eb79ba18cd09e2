"""A tenancy config that cannot work does not start, and callers learn nothing about the
infrastructure: the refusals of ``serve``/``mcp`` name the user and the variable,
``--new-token`` prints the variables the manifests need, anonymous ``/readyz`` says only
ready or not per source, errors carry no URL or path, hints are written for the surface.

The two-tenant shop on a real SQLite file; real ``structq`` processes for the commands.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from server_support import SERIES_QUESTION, auth, build_shop

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.errors import ConfigError, SandboxViolation
from structq.server.app import create_app
from structq.server.config import ServerConfig, check_variables
from structq.server.public import hint_for, scrub
from structq.server.service import Service


@pytest.fixture
def shop(tmp_path: Path):
    return build_shop(tmp_path)


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"}
    return subprocess.run([sys.executable, "-m", "structq.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def _token(user: str, **extra: object) -> dict[str, object]:
    return {"sha256": hashlib.sha256(user.encode()).hexdigest(), "user": user, **extra}


def test_a_token_without_a_row_filter_variable_stops_the_server(shop) -> None:
    capabilities = CapabilitySet.from_path(shop.manifests)
    broken = ServerConfig.from_data({"tokens": [_token("ann", vars={"tenant_id": 1}), _token("eve", vars={})]},
                                    sources=capabilities.names)
    with pytest.raises(ConfigError) as info:
        check_variables(broken, capabilities)
    assert "'eve'" in info.value.message and "'tenant_id'" in info.value.message and "'shop'" in info.value.message
    # a token limited to a source without row filters needs no variable; an empty value is no value
    fine = ServerConfig.from_data({"tokens": [_token("nia", sources=["notes"])]}, sources=capabilities.names)
    check_variables(fine, capabilities)
    empty = ServerConfig.from_data({"tokens": [_token("ned", vars={"tenant_id": None})]}, sources=capabilities.names)
    with pytest.raises(ConfigError, match="'ned'"):
        check_variables(empty, capabilities)


def test_serve_and_mcp_refuse_to_start_without_the_variables(shop, tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"tokens": [_token("eve")]}), encoding="utf-8")
    served = _cli("serve", "-m", str(shop.manifests), "--config", str(config), "--port", "9")
    assert served.returncode == 3 and "'eve'" in served.stderr and "tenant_id" in served.stderr, served.stderr
    local = _cli("serve", "-m", str(shop.manifests), "--port", "9")
    assert local.returncode == 3 and "--var tenant_id=VALUE" in local.stderr, local.stderr
    stdio = _cli("mcp", "-m", str(shop.manifests))
    assert stdio.returncode == 3 and "structq mcp" in stdio.stderr and "--var tenant_id=VALUE" in stdio.stderr
    assert "Traceback" not in served.stderr + local.stderr + stdio.stderr


def test_new_token_prints_the_variables_the_manifests_need(shop) -> None:
    result = _cli("serve", "-m", str(shop.manifests), "--new-token", "dora")
    assert result.returncode == 0, result.stderr
    entry = yaml.safe_load(result.stdout.split("server.yaml entry (under tokens:):", 1)[1])
    assert entry[0]["user"] == "dora" and entry[0]["vars"] == {"tenant_id": None}
    assert "row filter of shop" in result.stdout


@pytest.fixture
def client(shop):
    capabilities = CapabilitySet.from_path(shop.manifests)
    settings = Settings(llm=None, cache_enabled=False, audit_enabled=False)
    service = Service(Service.agent_for(capabilities, settings=settings),
                      ServerConfig.from_file(shop.config, sources=capabilities.names))
    with TestClient(create_app(service, mcp=False), raise_server_exceptions=False) as client:
        yield client


def test_anonymous_readyz_says_only_ready_or_not_per_source(client, shop, caplog) -> None:
    assert client.get("/readyz").json() == {"ready": True, "sources": {"notes": "ok", "shop": "ok"}}
    (shop.directory / "shop.db").rename(shop.directory / "moved.db")
    anonymous = client.get("/readyz")
    assert anonymous.status_code == 503
    assert anonymous.json()["sources"] == {"notes": "unavailable", "shop": "unavailable"}
    detailed = client.get("/readyz", headers=auth("tenant1")).json()["sources"]
    assert detailed["shop"] not in ("ok", "unavailable") and str(shop.directory) not in str(detailed)
    assert str(shop.directory) in caplog.text  # the log keeps the whole story
    asked = client.post("/v1/ask", json={"question": SERIES_QUESTION}, headers=auth("tenant1"))
    assert asked.status_code == 503 and str(shop.directory) not in asked.text and "sqlite:" not in asked.text


def test_no_model_hints_speak_to_the_api_and_the_page(client) -> None:
    api = client.post("/v1/ask", json={"question": "谁买得最多？"}, headers=auth("tenant1")).json()["error"]
    page = client.post("/v1/ask", json={"question": "谁买得最多？"},
                       headers={**auth("tenant1"), "X-Structq-Client": "page"}).json()["error"]
    assert "GET /v1/examples" in api["hint"] and "--llm" not in api["hint"]
    assert "on this page" in page["hint"] and "--llm" not in page["hint"]
    streamed = client.post("/v1/ask?stream=1", json={"question": "谁买得最多？"},
                           headers={**auth("tenant1"), "X-Structq-Client": "page"})
    assert "on this page" in streamed.text and "--llm" not in streamed.text


def test_missing_variable_hints_per_surface() -> None:
    refusal = SandboxViolation("missing_variable", "table 'orders' has a row filter that needs the variable "
                               "'tenant_id', which was not supplied", hint="pass vars={'tenant_id': …}")
    assert "server.yaml" in hint_for(refusal, "api") and "vars=" not in hint_for(refusal, "api")
    assert "server.yaml" in hint_for(refusal, "mcp-http")
    assert "structq mcp with --var tenant_id=VALUE" in hint_for(refusal, "mcp-stdio")
    assert "structq serve with --var tenant_id=VALUE" in hint_for(refusal, "page", open_server=True)


@pytest.mark.parametrize("text,kept", [
    ("cannot open postgresql://app:pw@db.internal:5432/sales (timeout)", "cannot open <url> (timeout)"),
    ("unable to open database file /var/lib/structq/shop.db", "unable to open database file <path>"),
    ("connection refused by 10.0.3.7:5432", "connection refused by <address>"),
    ("see GET /v1/examples, ratio a/b", "see GET /v1/examples, ratio a/b"),
])
def test_scrub_takes_out_urls_paths_and_addresses(text: str, kept: str) -> None:
    assert scrub(text) == kept
