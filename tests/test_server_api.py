"""The HTTP API through an ASGI test client, on the two-tenant shop (real SQLite file) and a
scripted model: authentication, fixed variables, access to sources, SSE, errors, limits,
OpenAPI. A real ``structq serve`` process is exercised in test_server_process.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from scripted import plan_reply, scripted, text_reply
from server_support import (
    CATEGORY_QUESTION,
    NOTES_QUESTION,
    SERIES_QUESTION,
    auth,
    build_shop,
    sse_events,
)

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.service import Service

OPEN_QUESTION = "T1 的客户里谁下单最多？"


def model_plan(query: str) -> dict[str, Any]:
    return {"reasoning": "", "steps": [{"output_key": "rows", "source": "shop", "purpose": "订单", "query": query}]}


@pytest.fixture
def shop(tmp_path: Path):
    return build_shop(tmp_path)


@pytest.fixture
def make_client(shop, tmp_path: Path):
    clients: list[TestClient] = []

    def make(model: Any = None, *, config: ServerConfig | None = None, **limits: Any) -> TestClient:
        capabilities = CapabilitySet.from_path(shop.manifests)
        if config is None:
            config = ServerConfig.from_file(build_shop(tmp_path / f"cfg{len(clients)}", **limits).config
                                            if limits else shop.config, sources=capabilities.names)
        settings = Settings(llm=None, cache_enabled=False, audit_enabled=False)
        agent = Service.agent_for(capabilities, llm=model, settings=settings)
        client = TestClient(create_app(Service(agent, config)), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def customers(document: dict[str, Any]) -> set[str]:
    """Every customer name in every step's rows."""
    out = set()
    for step in document["steps"]:
        if "customer" in step["columns"]:
            i = step["columns"].index("customer")
            out |= {row[i] for row in step["rows"]}
    return out


# --- authentication and access ---------------------------------------------------------------

ROUTES = [("post", "/v1/ask", {"question": SERIES_QUESTION}), ("post", "/v1/plan", {"question": SERIES_QUESTION}),
          ("post", "/v1/run", {"plan": model_plan("SELECT 1")}), ("get", "/v1/sources", None),
          ("get", "/v1/examples", None)]


@pytest.mark.parametrize("method,path,body", ROUTES)
@pytest.mark.parametrize("header", [None, "Bearer not-a-token", "Basic dG9rLXRlbmFudC1vbmU6"])
def test_every_route_refuses_a_missing_or_unknown_token(make_client, method, path, body, header) -> None:
    client = make_client()
    headers = {"Authorization": header} if header else {}
    response = client.request(method, path, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "unauthorized" and "Authorization: Bearer" in error["hint"]


@pytest.mark.parametrize("request_kind", ["ask", "run", "plan"])
def test_a_source_outside_the_token_is_403_naming_it(make_client, request_kind) -> None:
    client = make_client()
    notes_plan = {"steps": [{"output_key": "n", "source": "notes", "query": "SELECT body FROM notes"}]}
    body = {"ask": ("/v1/ask", {"question": NOTES_QUESTION}), "plan": ("/v1/plan", {"question": NOTES_QUESTION}),
            "run": ("/v1/run", {"plan": notes_plan})}[request_kind]
    response = client.post(body[0], json=body[1], headers=auth("shop_only"))
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "forbidden" and error["source"] == "notes" and "'notes'" in error["message"]
    # the same request with a token that has the source goes through
    assert client.post(body[0], json=body[1], headers=auth("tenant1")).status_code == 200


def test_sources_list_only_granted_sources_and_never_denied_columns(make_client) -> None:
    client = make_client()
    limited = client.get("/v1/sources", headers=auth("shop_only")).json()["sources"]
    everything = client.get("/v1/sources", headers=auth("tenant1")).json()["sources"]
    assert [s["source"] for s in limited] == ["shop"]
    assert sorted(s["source"] for s in everything) == ["notes", "shop"]
    shop = next(s for s in everything if s["source"] == "shop")
    columns = [c["name"] for c in shop["tables"][0]["columns"]]
    assert "card_number" not in columns and "amount" in columns
    assert shop["tables"][0]["row_filtered"] is True
    assert "card_number" not in json.dumps(everything)
    examples = client.get("/v1/examples", headers=auth("shop_only")).json()["examples"]
    assert {e["question"] for e in examples} == {SERIES_QUESTION, CATEGORY_QUESTION}


# --- fixed variables: a tenant-1 token never sees tenant 2 --------------------------------------

HOSTILE_QUERIES = [
    "SELECT customer, amount FROM orders",
    "SELECT customer, amount FROM orders WHERE tenant_id = 2",
    "SELECT customer, amount FROM orders WHERE tenant_id = 2 OR 1 = 1",
    "SELECT o.customer, o.amount FROM orders AS o JOIN orders AS p ON p.order_id = o.order_id + 1 WHERE p.tenant_id = 2",
    "SELECT customer, amount FROM (SELECT * FROM orders) AS t WHERE t.tenant_id <> 1",
    "SELECT customer, amount FROM orders UNION ALL SELECT customer, amount FROM orders WHERE tenant_id = 2",
    "WITH x AS (SELECT * FROM orders WHERE tenant_id = 2) SELECT customer, amount FROM x",
    "SELECT customer, tenant_id FROM orders WHERE tenant_id IN (SELECT tenant_id FROM orders WHERE tenant_id = 2)",
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_a_posted_plan_sees_only_its_tokens_tenant(make_client, shop, query) -> None:
    client = make_client()
    response = client.post("/v1/run?tenant_id=2", json={"plan": model_plan(query)},
                           headers={**auth("tenant1"), "X-Tenant-Id": "2"})
    assert response.status_code == 200, response.text
    seen = customers(response.json())
    assert seen <= shop.tenant_customers(1)
    assert not seen & shop.tenant_customers(2)


@pytest.mark.parametrize("query", HOSTILE_QUERIES[:3])
def test_a_model_plan_sees_only_its_tokens_tenant(make_client, shop, query) -> None:
    client = make_client(scripted(plan_reply(model_plan(query)), text_reply("好的")))
    response = client.post("/v1/ask", json={"question": OPEN_QUESTION, "no_answer": True}, headers=auth("tenant1"))
    assert response.status_code == 200, response.text
    assert not customers(response.json()) & shop.tenant_customers(2)


@pytest.mark.parametrize("field", ["vars", "variables", "var"])
@pytest.mark.parametrize("route", ["/v1/ask", "/v1/plan", "/v1/run"])
def test_a_request_cannot_carry_variables(make_client, field, route) -> None:
    client = make_client()
    body: dict[str, Any] = {"question": SERIES_QUESTION} if route != "/v1/run" else {"plan": model_plan("SELECT 1")}
    body[field] = {"tenant_id": 2}
    response = client.post(route, json=body, headers=auth("tenant1"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "vars_not_accepted"


def test_the_same_verified_question_gives_each_tenant_its_own_totals(make_client, shop) -> None:
    import sqlite3

    client = make_client()
    for name, tenant in (("tenant1", 1), ("tenant2", 2)):
        document = client.post("/v1/ask", json={"question": CATEGORY_QUESTION}, headers=auth(name)).json()
        assert document["plan_source"] == "verified"
        with sqlite3.connect(shop.directory / "shop.db") as db:
            expected = dict(db.execute("SELECT category, SUM(amount) FROM orders WHERE tenant_id = ? GROUP BY category",
                                       (tenant,)).fetchall())
        assert dict(map(tuple, document["steps"][0]["rows"])) == expected


# --- the answer document and streaming ----------------------------------------------------------


def test_ask_returns_the_ask_json_document_with_a_conversation(make_client) -> None:
    client = make_client()
    document = client.post("/v1/ask", json={"question": SERIES_QUESTION}, headers=auth("tenant1")).json()
    assert set(document) == {"question", "answer", "citations", "plan", "plan_source", "steps", "notes",
                             "model_calls", "rounds", "checks", "conversation", "answer_id"}
    assert document["steps"][0]["row_count"] == 6 and document["citations"][0]["step"] == "by_month"


def test_stream_sends_plan_step_answer_done_in_order(make_client) -> None:
    client = make_client()
    response = client.post("/v1/ask?stream=1", json={"question": SERIES_QUESTION}, headers=auth("tenant1"))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert [name for name, _ in events] == ["plan", "step", "answer", "done"]
    step = json.loads(events[1][1])
    assert step["output_key"] == "by_month" and step["row_count"] == 6 and "LIMIT" in step["query"]
    assert json.loads(events[3][1])["answer"] == json.loads(events[2][1])["text"]


def test_stream_shows_each_repaired_plan_before_its_steps(make_client) -> None:
    bad = model_plan("SELECT customer FROM orderz")
    good = model_plan("SELECT customer, amount FROM orders ORDER BY amount DESC LIMIT 3")
    client = make_client(scripted(plan_reply(bad), plan_reply(good)))
    response = client.post("/v1/ask?stream=1", json={"question": OPEN_QUESTION, "no_answer": True},
                           headers=auth("tenant1"))
    events = sse_events(response.text)
    assert [name for name, _ in events] == ["plan", "step", "plan", "step", "answer", "done"]
    failed, ran = json.loads(events[1][1]), json.loads(events[3][1])
    assert failed["status"] == "failed" and failed["error"]["code"] == "sandbox_refused" and failed["error"]["hint"]
    assert ran["status"] == "ok" and ran["row_count"] == 3


def test_a_stream_that_fails_before_its_first_event_is_an_error_with_its_status(make_client) -> None:
    client = make_client()  # no model: an open question cannot be planned
    response = client.post("/v1/ask?stream=1", json={"question": OPEN_QUESTION}, headers=auth("tenant1"))
    assert response.status_code == 503 and response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "not_configured" and "GET /v1/examples" in error["hint"]


def test_a_follow_up_sees_the_conversation_and_stays_with_its_owner(make_client) -> None:
    model = scripted(plan_reply(model_plan("SELECT customer FROM orders WHERE category = '图书' LIMIT 1")))
    client = make_client(model)
    first = client.post("/v1/ask", json={"question": CATEGORY_QUESTION, "no_answer": True, "start_conversation": True},
                        headers=auth("tenant1")).json()
    follow = client.post("/v1/ask", json={"question": "那图书是谁买的？", "conversation": first["conversation"],
                                          "no_answer": True}, headers=auth("tenant1"))
    assert follow.status_code == 200 and follow.json()["conversation"] == first["conversation"]
    assert CATEGORY_QUESTION in model.prompt_text(0)  # the earlier turn went into the prompt
    stolen = client.post("/v1/ask", json={"question": "那图书是谁买的？", "conversation": first["conversation"]},
                         headers=auth("tenant2"))
    assert stolen.status_code == 404 and stolen.json()["error"]["code"] == "unknown_conversation"


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("query,status,code", [
    ("DELETE FROM orders", 422, "sandbox_refused"),
    ("SELECT card_number FROM orders", 422, "sandbox_refused"),
    ("SELECT nope FROM orders", 422, "sandbox_refused"),
    ("SELECT customer FROM orders; SELECT 1", 422, "sandbox_refused"),
])
def test_sandbox_refusals_are_422_with_their_hint(make_client, query, status, code) -> None:
    client = make_client()
    response = client.post("/v1/run", json={"plan": model_plan(query)}, headers=auth("tenant1"))
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["sandbox_code"] and error["message"]


@pytest.mark.parametrize("plan,message", [
    ({"steps": []}, "malformed plan"),
    ({"steps": [{"output_key": "a", "source": "shopp", "query": "SELECT 1"}]}, "unknown source"),
    ({"steps": [{"output_key": "a", "source": "shop", "query": "SELECT customer FROM orders WHERE customer IN (<b>)"}]},
     "reference"),
])
def test_invalid_plans_are_422(make_client, plan, message) -> None:
    response = make_client().post("/v1/run", json={"plan": plan}, headers=auth("tenant1"))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_plan" and message in response.json()["error"]["message"]


def test_a_source_that_is_down_is_503_and_the_process_keeps_serving(make_client, shop) -> None:
    client = make_client()
    # Ready first: the start-up warm-up has then pooled a connection to shop.db, which must
    # not keep answering from the moved file (it used to race the rename below).
    assert client.get("/readyz").json()["ready"] is True
    (shop.directory / "shop.db").rename(shop.directory / "moved.db")
    down = client.post("/v1/ask", json={"question": SERIES_QUESTION}, headers=auth("tenant1"))
    assert down.status_code == 503 and down.json()["error"]["code"] == "source_unavailable"
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["sources"]["shop"] != "ok"
    (shop.directory / "moved.db").rename(shop.directory / "shop.db")
    assert client.post("/v1/ask", json={"question": SERIES_QUESTION}, headers=auth("tenant1")).status_code == 200
    assert client.get("/readyz").json() == {"ready": True, "sources": {"notes": "ok", "shop": "ok"}}


def test_a_query_past_its_timeout_is_504(tmp_path: Path) -> None:
    slow = build_shop(tmp_path / "slow", timeout_s=0.05)
    capabilities = CapabilitySet.from_path(slow.manifests)
    agent = Service.agent_for(capabilities, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False))
    config = ServerConfig.from_file(slow.config, sources=capabilities.names)
    # a cross join of 120 orders five times over: far more than 50 ms of work on any machine
    query = ("SELECT COUNT(*) AS n FROM orders AS a, orders AS b, orders AS c, orders AS d, orders AS e "
             "WHERE a.amount + b.amount + c.amount + d.amount + e.amount > 0")
    with TestClient(create_app(Service(agent, config)), raise_server_exceptions=False) as client:
        response = client.post("/v1/run", json={"plan": model_plan(query)}, headers=auth("tenant1"))
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "query_timeout" and response.json()["error"]["hint"]
        assert client.get("/healthz").status_code == 200


def test_the_engine_runs_plans_only_for_a_caller_and_with_the_callers_variables(shop) -> None:
    from structq.agent import Plan
    from structq.server.config import Principal
    from structq.server.observe import GuardedEngine, request_scope

    plan = Plan.parse(model_plan("SELECT customer FROM orders"))
    with GuardedEngine(CapabilitySet.from_path(shop.manifests)) as engine:
        with pytest.raises(RuntimeError, match="outside a request scope"):
            engine.run(plan, vars={"tenant_id": 2})
        with request_scope(Principal("ann", {"tenant_id": 1})):
            result = engine.run(plan, vars={"tenant_id": 2})  # what a caller passes does not count
    assert {row[0] for row in result.final.rows} == shop.tenant_customers(1)


def test_a_failing_model_is_502(make_client) -> None:
    class Broken:
        """A provider whose connection drops: what a real client raises, without a network."""

        model_name = "broken"

        def bind_tools(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

        def invoke(self, *a: Any, **k: Any) -> Any:
            raise ConnectionResetError("connection reset by the provider")

    response = make_client(Broken()).post("/v1/ask", json={"question": OPEN_QUESTION}, headers=auth("tenant1"))
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_error"


@pytest.mark.parametrize("name,status", [
    ("AccessDenied", 403), ("SandboxViolation", 422), ("PlanError", 422), ("RepairsExhausted", 422),
    ("QueryTimeout", 504), ("SourceUnavailable", 503), ("ExecutionError", 502), ("ConfigError", 503),
    ("ManifestError", 503), ("ModelError", 502), ("SynthesisError", 502),
])
def test_every_error_class_has_its_status(name, status) -> None:
    from structq import errors
    from structq.agent import RepairsExhausted
    from structq.agent.planner import Attempt
    from structq.server.errors import AccessDenied, error_body, error_status

    make = {
        "AccessDenied": lambda: AccessDenied("hr", "ann"),
        "SandboxViolation": lambda: errors.SandboxViolation("write", "no writes", hint="read only"),
        "RepairsExhausted": lambda: RepairsExhausted([Attempt(errors.PlanError("bad"), None, None)]),
    }.get(name, lambda: getattr(errors, name)("it failed", hint="do this"))
    exc = make()
    assert error_status(exc)[0] == status
    body = error_body(exc)["error"]
    assert body["message"] and body["code"] == error_status(exc)[1]


def test_an_unexpected_failure_is_a_500_without_details_and_the_next_request_works(make_client, monkeypatch) -> None:
    client = make_client()
    from structq.server.service import Service

    monkeypatch.setattr(Service, "sources", lambda self, p: 1 / 0)
    response = client.get("/v1/sources", headers=auth("tenant1"))
    assert response.status_code == 500 and "ZeroDivision" not in response.text
    monkeypatch.undo()
    assert client.get("/v1/sources", headers=auth("tenant1")).status_code == 200


# --- limits -------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413(make_client) -> None:
    client = make_client(max_body_bytes=2048)
    response = client.post("/v1/ask", json={"question": "长" * 5000}, headers=auth("tenant1"))
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"


def test_a_question_over_the_limit_is_400(make_client) -> None:
    client = make_client(max_question_chars=20)
    for stream in ("0", "1"):
        response = client.post(f"/v1/ask?stream={stream}", json={"question": "很" * 21}, headers=auth("tenant1"))
        assert response.status_code == 400 and response.json()["error"]["code"] == "question_too_long"


def test_the_rate_limit_is_per_token_and_says_when_to_retry(make_client) -> None:
    client = make_client(requests_per_minute=1, burst=2)
    statuses = [client.get("/v1/sources", headers=auth("tenant1")).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    refused = client.get("/v1/sources", headers=auth("tenant1"))
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == "rate_limited"
    assert client.get("/v1/sources", headers=auth("tenant2")).status_code == 200  # another token's allowance


# --- the contract -------------------------------------------------------------------------------


def test_openapi_document_is_valid_and_lists_the_api(make_client) -> None:
    from openapi_spec_validator import validate

    document = make_client().get("/openapi.json").json()
    validate(document)
    for path in ("/v1/ask", "/v1/plan", "/v1/run", "/v1/sources", "/healthz", "/readyz"):
        assert path in document["paths"], path
    ask = document["paths"]["/v1/ask"]["post"]
    assert {"401", "403", "422", "429", "502", "503", "504"} <= set(ask["responses"])
    assert "text/event-stream" in ask["responses"]["200"]["content"]
    assert "vars" not in json.dumps(document["components"]["schemas"]["AskRequest"])


def test_without_a_config_one_local_caller_needs_no_token(make_client) -> None:
    client = make_client(config=ServerConfig.local_only({"tenant_id": 2}))
    document = client.post("/v1/ask", json={"question": SERIES_QUESTION}).json()
    assert document["steps"][0]["row_count"] == 6
    assert client.get("/healthz").json()["status"] == "ok"
