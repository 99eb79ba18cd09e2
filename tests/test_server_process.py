"""A real ``structq serve`` process on a loopback port, spoken to over HTTP: tokens, tenants,
streaming, workers, and the refusals the command line makes before it listens."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import (
    CATEGORY_QUESTION,
    NOTES_QUESTION,
    SERIES_QUESTION,
    ServerProcess,
    auth,
    build_shop,
    serving_shop,
    sse_events,
)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    return build_shop(tmp_path_factory.mktemp("shop"))


@pytest.fixture(scope="module")
def server(shop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serving_shop(shop, tmp_path_factory.mktemp("log") / "serve.log") as process:
        yield process


def test_tokens_are_required_and_sources_are_granted(server) -> None:
    assert httpx.get(server.url + "/v1/sources").status_code == 401
    assert httpx.get(server.url + "/v1/sources", headers={"Authorization": "Bearer wrong"}).status_code == 401
    refused = httpx.post(server.url + "/v1/ask", json={"question": NOTES_QUESTION}, headers=auth("shop_only"))
    assert refused.status_code == 403 and refused.json()["error"]["source"] == "notes"


@pytest.mark.parametrize("token,tenant", [("tenant1", 1), ("tenant2", 2)])
def test_each_token_sees_only_its_tenant_whatever_the_request_says(server, shop, token, tenant) -> None:
    other = 3 - tenant
    plan = {"steps": [{"output_key": "o", "source": "shop",
                       "query": f"SELECT customer FROM orders WHERE tenant_id = {other} OR tenant_id = {tenant}"}]}
    response = httpx.post(f"{server.url}/v1/run?tenant_id={other}", json={"plan": plan},
                          headers={**auth(token), "X-Tenant-Id": str(other)}, timeout=30)
    assert response.status_code == 200, response.text
    seen = {row[0] for row in response.json()["steps"][0]["rows"]}
    assert seen == shop.tenant_customers(tenant)
    sneaky = httpx.post(server.url + "/v1/ask", json={"question": CATEGORY_QUESTION, "vars": {"tenant_id": other}},
                        headers=auth(token))
    assert sneaky.status_code == 400 and sneaky.json()["error"]["code"] == "vars_not_accepted"


def test_streamed_answer_arrives_as_plan_step_answer_done(server) -> None:
    with httpx.stream("POST", server.url + "/v1/ask?stream=1", json={"question": SERIES_QUESTION},
                      headers=auth("tenant1"), timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = "".join(response.iter_text())
    events = sse_events(body)
    assert [name for name, _ in events] == ["plan", "step", "answer", "done"]
    assert json.loads(events[-1][1])["steps"][0]["row_count"] == 6


def test_health_readiness_and_the_openapi_document(server) -> None:
    assert httpx.get(server.url + "/healthz").json()["status"] == "ok"
    assert httpx.get(server.url + "/readyz").json() == {"ready": True, "sources": {"notes": "ok", "shop": "ok"}}
    from openapi_spec_validator import validate

    validate(httpx.get(server.url + "/openapi.json").json())


def test_the_page_and_its_files_are_served(server) -> None:
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for name in ("app.js", "style.css"):
        assert httpx.get(f"{server.url}/static/{name}").status_code == 200


def test_two_workers_serve_the_same_api(shop, tmp_path: Path) -> None:
    with serving_shop(shop, tmp_path / "serve.log", "--workers", "2") as process:
        for _ in range(4):
            answer = httpx.post(process.url + "/v1/ask", json={"question": SERIES_QUESTION}, headers=auth("tenant2"),
                                timeout=60)
            assert answer.status_code == 200 and answer.json()["plan_source"] == "verified"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "structq.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.internal"])
def test_a_public_address_without_a_config_is_refused(host) -> None:
    from structq.errors import ConfigError
    from structq.server.run import ServeOptions

    with pytest.raises(ConfigError, match=f"refusing to listen on {host} without --config"):
        ServeOptions(manifests=".", host=host).check_host()
    ServeOptions(manifests=".", host=host, config="server.yaml").check_host()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
def test_loopback_addresses_need_no_config(host) -> None:
    from structq.server.run import ServeOptions

    ServeOptions(manifests=".", host=host).check_host()


def test_the_command_refuses_a_public_address_in_one_line_before_listening(shop) -> None:
    result = run_cli("serve", "-m", str(shop.manifests), "--host", "0.0.0.0")
    assert result.returncode == 3
    assert "refusing to listen on 0.0.0.0 without --config" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("config,message", [
    ({"tokens": []}, "lists no tokens"),
    ({"tokens": [{"sha256": "abc", "user": "x"}]}, "sha256"),
    ({"tokens": [{"sha256": "a" * 64, "user": "x", "sources": ["shopp"]}]}, "unknown sources: shopp"),
    ({"tokens": [{"sha256": "a" * 64, "user": "x"}] * 2}, "listed twice"),
    ({"limits": {"requests_per_minute": 0}, "tokens": [{"sha256": "a" * 64, "user": "x"}]}, "requests_per_minute"),
    ({"tokenz": []}, "tokenz"),
])
def test_a_bad_server_config_says_what_and_where(config, message) -> None:
    from structq.errors import ConfigError
    from structq.server.config import ServerConfig

    with pytest.raises(ConfigError, match=message):
        ServerConfig.from_data(config, sources=["shop", "notes"])


def test_the_command_reports_a_bad_config_in_one_line(shop, tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text("tokens: [{sha256: abc, user: x}]")
    result = run_cli("serve", "-m", str(shop.manifests), "--config", str(path))
    assert result.returncode == 3 and "tokens.0.sha256" in result.stderr and "Traceback" not in result.stderr


def test_new_token_prints_a_token_and_its_hash(shop) -> None:
    from structq.server.config import hash_token

    result = run_cli("serve", "--new-token", "dora")
    lines = result.stdout.splitlines()
    token = lines[1].strip()
    assert f"sha256: {hash_token(token)}" in result.stdout and "user: dora" in result.stdout
