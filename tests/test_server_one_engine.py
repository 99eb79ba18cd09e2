"""One engine, injected: every data access of the service — the plan's steps and a template
slot's look-up alike — goes through the guarded engine, as the caller, on the caller's sources;
what a look-up found is kept per caller's view, never shared between tenants.

Real SQLite (the two-tenant shop) and the demo company; no model (templates answer).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from server_support import CUSTOMER_QUESTION, add_customer_example, auth, build_shop, service_clients

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.config import ServerConfig
from structq.server.service import Service


def _settings() -> Settings:
    return Settings(llm=None, cache_enabled=False, audit_enabled=False)


@pytest.fixture
def slotted_shop(tmp_path: Path):
    return add_customer_example(build_shop(tmp_path))


@pytest.fixture
def client_for():
    with service_clients() as open_client:
        yield open_client


def test_the_agent_keeps_the_engine_it_was_given(slotted_shop) -> None:
    from structq.agent import Agent
    from structq.server.observe import GuardedEngine

    capabilities = CapabilitySet.from_path(slotted_shop.manifests)
    engine = GuardedEngine(capabilities)
    agent = Agent(capabilities, settings=_settings(), engine=engine)
    assert agent.engine is engine and agent.templates.engine is engine
    with pytest.raises(AttributeError):
        agent.engine = GuardedEngine(capabilities)  # type: ignore[misc]
    with pytest.raises(TypeError, match="GuardedEngine"):
        Service(Agent(capabilities, settings=_settings()), ServerConfig.local_only())
    agent.close()


def test_a_tenants_looked_up_value_never_answers_another_tenant(slotted_shop, client_for) -> None:
    capabilities = CapabilitySet.from_path(slotted_shop.manifests)
    client, _ = client_for(capabilities, ServerConfig.from_file(slotted_shop.config, sources=capabilities.names))
    body = {"question": CUSTOMER_QUESTION.replace("T1-客户0", "T1-客户3")}
    for _ in range(2):  # the second time from the look-up cache
        ann = client.post("/v1/ask", json=body, headers=auth("tenant1"))
        assert ann.status_code == 200, ann.text
        assert ann.json()["plan_source"] == "template"
        # tenant 2 has no customer T1-客户3: its own look-up finds nothing, the cache of tenant 1 is not asked
        bob = client.post("/v1/ask", json=body, headers=auth("tenant2"))
        assert bob.status_code == 503 and bob.json()["error"]["code"] == "not_configured", bob.text
    # and the other way round: tenant 2's customer is found for tenant 2 only
    theirs = {"question": CUSTOMER_QUESTION.replace("T1-客户0", "T2-客户5")}
    assert client.post("/v1/ask", json=theirs, headers=auth("tenant2")).json()["plan_source"] == "template"
    assert client.post("/v1/ask", json=theirs, headers=auth("tenant1")).status_code == 503
    assert client.post("/v1/plan", json=theirs, headers=auth("tenant1")).status_code == 503


def test_look_ups_are_kept_per_view_on_a_plain_agent_too(slotted_shop) -> None:
    """Outside the service (the CLI, a library caller), the variables passed are the view."""
    import datetime as dt

    from structq.agent import Agent

    with Agent(CapabilitySet.from_path(slotted_shop.manifests), settings=_settings()) as agent:
        question = CUSTOMER_QUESTION.replace("T1-客户0", "T2-客户1")
        today = dt.date(2026, 7, 1)
        assert agent.templates.plan(question, today, {"tenant_id": 2}) is not None
        assert agent.templates.plan(question, today, {"tenant_id": 1}) is None
        assert agent.templates.plan(question, today, {"tenant_id": 2}) is not None


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.mark.parametrize("project", ["星火", "不存在的项目"])
def test_a_token_without_hr_cannot_make_a_template_read_hr(demo_capabilities, client_for, project: str) -> None:
    """The project-owner example looks its project up in ``hr``: for a ``reports``-only token
    that look-up is refused (403) whether the project exists or not — no answer, and no way
    to tell the two apart."""
    config = ServerConfig.from_data({"tokens": [
        {"sha256": _sha("reports-only"), "user": "rita", "sources": ["reports"]},
        {"sha256": _sha("everything"), "user": "ed"}]}, sources=demo_capabilities.names)
    client, _ = client_for(demo_capabilities, config)
    question = f"‘{project}’项目负责人最近写的5份周报是什么？"
    for route in ("/v1/ask", "/v1/plan"):
        response = client.post(route, json={"question": question}, headers={"Authorization": "Bearer reports-only"})
        assert response.status_code == 403, response.text
        error: dict[str, Any] = response.json()["error"]
        assert error["code"] == "forbidden" and error["source"] == "hr"
    allowed = client.post("/v1/ask", json={"question": question}, headers={"Authorization": "Bearer everything"})
    assert allowed.status_code == (200 if project == "星火" else 503), allowed.text
