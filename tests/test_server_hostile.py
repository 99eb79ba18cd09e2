"""The service under hostile input, through an ASGI test client on the two-tenant shop (a real
SQLite file): every hand-made request that once froze it, crashed it (500), answered with
Python's words (502) or with JSON no parser reads, now a refusal with a stable code — on the
HTTP API and on MCP ``run_plan`` (the SDK's own streamable HTTP app, in process).

Each response is read as strict JSON (no ``NaN``, valid UTF-8) and checked to hold no Python
internals (a traceback, ``maximum recursion depth``, a path inside the package).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from server_support import auth, build_shop
from test_server_api import make_client, model_plan, shop  # noqa: F401 - fixtures

from structq.capabilities.nesting import MAX_DEPTH
from structq.server.errors import TRACEBACK_CHARS, error_body

DEEP = "SELECT " + "(" * 1000 + "1" + ")" * 1000 + " AS x FROM a"
HOSTILE_SQL = {
    "nested parentheses": "SELECT " + "(" * 1000 + "amount" + ")" * 1000 + " AS x FROM orders",
    "NOT chain": "SELECT order_id FROM orders WHERE " + "NOT " * 5000 + "amount > 1",
    "nested calls": "SELECT " + "abs(" * 2000 + "amount" + ")" * 2000 + " AS x FROM orders",
    "UNION parts": " UNION ".join(["SELECT 1 AS x"] * 1000),
    "chained CTEs": "WITH " + ", ".join(f"c{i} AS (SELECT * FROM {f'c{i - 1}' if i else 'orders'})" for i in range(300))
                    + " SELECT * FROM c299",
    # within the sandbox's limits, past SQLite's parser stack ("parser stack overflow")
    "25 nested subqueries": "SELECT " + "(SELECT " * 25 + "1" + ")" * 25 + " AS x FROM orders",
}
#: What no response may hold: Python's own words and the package's insides.
INTERNALS = ("Traceback", "maximum recursion depth", "structq/", "site-packages", "codec can't encode",
             "Python int too large", "parser stack overflow")


def strict(response: Any) -> Any:
    """The response body as strict JSON (RFC 8259), with no Python internals in it."""
    text = response.content.decode("utf-8")  # valid UTF-8, or this raises
    for words in INTERNALS:
        assert words not in text, f"the response shows {words!r}: {text[:300]}"

    def no_constant(name: str) -> Any:
        raise AssertionError(f"the response holds {name}, which is no JSON")

    return json.loads(text, parse_constant=no_constant)


def refused(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text[:500]
    error = strict(response)["error"]
    assert error["code"] == code or error.get("sandbox_code") == code, error
    return error


def run_plan(steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"plan": {"steps": steps, **extra}}


SHOP_STEP = {"output_key": "a", "source": "shop", "query": "SELECT order_id FROM orders ORDER BY order_id LIMIT 2"}


# --- 1. nothing recurses out, nothing stalls ------------------------------------------------


def test_a_deep_local_step_is_a_refusal_not_a_500(make_client) -> None:
    client = make_client()
    response = client.post("/v1/run", json=run_plan([SHOP_STEP, {"output_key": "b", "source": "local", "query": DEEP}]),
                           headers=auth("tenant1"))
    error = refused(response, 422, "too_complex")
    assert error["step"] == "b" and f"at most {MAX_DEPTH}" in error["message"]
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("shape", sorted(HOSTILE_SQL))
def test_a_hostile_query_is_refused_as_too_complex(make_client, shape: str) -> None:
    response = make_client().post("/v1/run", json=run_plan([{"output_key": "a", "source": "shop",
                                                               "query": HOSTILE_SQL[shape]}]), headers=auth("tenant1"))
    refused(response, 422, "too_complex")


def test_an_alias_the_sandbox_cannot_resolve_is_a_refusal(make_client) -> None:
    query = "SELECT x FROM (SELECT 1 AS x FROM orders AS ORDERS, orders) t"
    response = make_client().post("/v1/run", json=run_plan([{"output_key": "a", "source": "shop", "query": query}]),
                                  headers=auth("tenant1"))
    assert response.status_code == 422 and strict(response)["error"]["code"] == "sandbox_refused"


def test_an_internal_error_is_logged_as_a_short_plain_traceback(caplog: pytest.LogCaptureFixture) -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise KeyError("a bug")
        deep(n - 1)

    try:
        deep(800)
    except KeyError as exc:
        with caplog.at_level(logging.ERROR, logger="structq.server"):
            body = error_body(exc)
    assert body["error"]["code"] == "internal" and "a bug" not in json.dumps(body)
    (record,) = caplog.records
    assert record.exc_info is None  # nothing for a handler to render on the event loop
    assert "KeyError" in record.getMessage() and len(record.getMessage()) < TRACEBACK_CHARS + 200


# --- 2. text with no UTF-8 form, numbers no database or search server holds -----------------------

SURROGATE = "\ud800"


@pytest.mark.parametrize("path,body", [
    ("/v1/ask", {"question": "每个月的订单金额是多少？", "conversation": "c" + SURROGATE}),
    ("/v1/ask", {"question": "订单" + SURROGATE}),
    ("/v1/ask?stream=1", {"question": "订单" + SURROGATE}),
    ("/v1/plan", {"question": "订单" + SURROGATE}),
    ("/v1/run", run_plan([{**SHOP_STEP, "purpose": SURROGATE}])),
    ("/v1/run", run_plan([{"output_key": "a", "source": "shop", "query": f"SELECT '{SURROGATE}' AS x FROM orders"}])),
    ("/v1/run", run_plan([{"output_key": "a", "source": "search", "index": "i",
                           "query": {"query": {"term": {"title": SURROGATE}}}}])),
])
def test_a_lone_surrogate_is_invalid_text_at_the_boundary(make_client, path: str, body: dict[str, Any]) -> None:
    text = json.dumps(body)  # "\ud800" as a JSON escape: legal syntax, no character
    response = make_client().post(path, content=text, headers={**auth("tenant1"), "Content-Type": "application/json"})
    error = refused(response, 400, "invalid_text")
    assert "U+D800" in error["message"]


@pytest.mark.parametrize("raw", [
    '{"plan": {"steps": [{"output_key": "a", "source": "shop", "query": "SELECT 1 AS x FROM orders"}], '
    '"template": {"example": "e", "params": {"p": NaN}}}}',
    '{"plan": {"steps": [{"output_key": "a", "source": "s", "index": "i", "query": {"size": Infinity}}]}}',
    '{"question": "x", "plan": {"steps": [], "cannot_answer": -Infinity}}',
])
def test_nan_and_infinity_are_no_json(make_client, raw: str) -> None:
    response = make_client().post("/v1/run", content=raw, headers={**auth("tenant1"), "Content-Type": "application/json"})
    error = refused(response, 400, "bad_request")
    assert "no JSON number" in error["message"]


def test_an_integer_past_64_bits_is_invalid_value(make_client) -> None:
    body = run_plan([{"output_key": "a", "source": "shop", "query": "SELECT order_id FROM orders WHERE order_id = :p"}],
                    template={"example": "e", "params": {"p": 2**70}})
    refused(make_client().post("/v1/run", json=body, headers=auth("tenant1")), 400, "invalid_value")


def test_a_non_finite_result_is_strict_json() -> None:
    """SQLite's executor reads ``1e999`` as the text "Infinity"; a database that returns the float
    (PostgreSQL's ``'NaN'::float``) gets null: never the bare ``NaN`` no JSON parser reads."""
    from structq.server.app import render_json

    assert json.loads(render_json({"rows": [[float("nan"), float("-inf"), 1.5]]})) == {"rows": [[None, None, 1.5]]}


def test_an_infinite_result_from_sqlite_is_strict_json(make_client) -> None:
    body = run_plan([{"output_key": "a", "source": "shop", "query": "SELECT 1e999 AS x FROM orders LIMIT 1"}])
    response = make_client().post("/v1/run", json=body, headers=auth("tenant1"))
    assert response.status_code == 200 and strict(response)["steps"][0]["rows"] in ([[None]], [["Infinity"]])


# --- 3. bounded cost: steps, responses ------------------------------------------------------


def test_a_plan_has_at_most_max_steps_steps(make_client) -> None:
    steps = [{**SHOP_STEP, "output_key": f"s{i}"} for i in range(21)]
    error = refused(make_client().post("/v1/run", json=run_plan(steps), headers=auth("tenant1")), 422, "too_many_steps")
    assert "at most 20" in error["message"] and "max_steps" in error["hint"]
    small = make_client(max_steps=2)
    refused(small.post("/v1/run", json=run_plan(steps[:3]), headers=auth("tenant1")), 422, "too_many_steps")
    assert small.post("/v1/run", json=run_plan(steps[:2]), headers=auth("tenant1")).status_code == 200


def test_a_response_larger_than_the_cap_is_refused_saying_the_cap(make_client) -> None:
    client = make_client(max_response_bytes=2048)
    body = run_plan([{"output_key": "a", "source": "shop", "query": "SELECT order_id, customer, category FROM orders"}])
    error = refused(client.post("/v1/run", json=body, headers=auth("tenant1")), 422, "response_too_large")
    assert "at most 2048" in error["message"]


# --- 4. HTTP semantics ----------------------------------------------------------------------


def test_405_names_the_allowed_methods(make_client) -> None:
    response = make_client().get("/v1/run", headers=auth("tenant1"))
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert strict(response)["error"]["code"] == "method_not_allowed"
    assert make_client().delete("/healthz").headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/v1/sources", "/v1/examples", "/"])
def test_head_answers_where_get_does(make_client, path: str) -> None:
    client = make_client()
    response = client.head(path, headers=auth("tenant1"))
    assert response.status_code == client.get(path, headers=auth("tenant1")).status_code == 200
    assert response.content == b""


def test_401_comes_before_any_body_is_read(make_client) -> None:
    client = make_client()
    for body, kind in (("{not json", "application/json"), ("a=1", "application/x-www-form-urlencoded"),
                       ('{"plan": NaN}', "application/json")):
        response = client.post("/v1/run", content=body, headers={"Content-Type": kind})
        assert response.status_code == 401, (body, response.text)
    assert client.head("/v1/sources").status_code == 401


def test_a_body_that_is_not_json_is_415_and_malformed_json_is_bad_request(make_client) -> None:
    client = make_client()
    form = client.post("/v1/ask", data={"question": "x"}, headers=auth("tenant1"))
    refused(form, 415, "unsupported_media_type")
    for body in ("{not json", "", "[1, 2"):
        response = client.post("/v1/ask", content=body, headers={**auth("tenant1"), "Content-Type": "application/json"})
        refused(response, 400, "bad_request")


@pytest.mark.parametrize("body,code", [
    ({"question": "x", "no_answer": 0}, "bad_request"),
    ({"question": "x", "no_answer": "yes"}, "bad_request"),
    ({"question": ""}, "empty_question"),
    ({"question": "   "}, "empty_question"),
])
def test_validation_errors_share_one_vocabulary(make_client, body: dict[str, Any], code: str) -> None:
    refused(make_client().post("/v1/ask", json=body, headers=auth("tenant1")), 400, code)


def test_an_empty_plan_is_refused_as_the_schema_says(make_client) -> None:
    client = make_client()
    refused(client.post("/v1/run", json={"plan": {}}, headers=auth("tenant1")), 422, "invalid_plan")
    schema = client.get("/openapi.json").json()
    plan = schema["components"]["schemas"]["RunRequest"]["properties"]["plan"]
    assert {"required": ["cannot_answer"]} in plan["anyOf"]  # the schema too says {} is no plan


def test_a_stream_refused_before_its_first_event_has_its_status(make_client) -> None:
    client = make_client()
    unknown = client.post("/v1/ask?stream=1", json={"question": "每个月的订单金额是多少？", "conversation": "nope"},
                          headers=auth("tenant1"))
    refused(unknown, 404, "unknown_conversation")
    assert unknown.headers["content-type"] == "application/json"


def test_the_openapi_document_says_what_is_accepted_and_answered(make_client) -> None:
    schema = make_client().get("/openapi.json").json()
    components = schema["components"]["schemas"]
    plan = components["RunRequest"]["properties"]["plan"]
    assert "template" in plan["properties"] and "TemplateUse" in components and "Step" in components
    assert components["AskRequest"]["properties"]["question"]["minLength"] == 1
    assert components["AskRequest"]["properties"]["no_answer"]["type"] == "boolean"
    assert set(components["StreamEvent"]["properties"]["event"]["enum"]) == {"plan", "step", "answer", "done", "error"}
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            assert {"401", "500"} <= set(operation["responses"]) or path in ("/healthz", "/readyz"), (path, method)
            if method == "post":
                assert {"400", "413", "415", "422"} <= set(operation["responses"]), path


# --- MCP run_plan: the same cases -----------------------------------------------------------

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}


def mcp_run_plan(client: Any, arguments_json: str, tool: str = "run_plan") -> Any:
    """A ``tools/call`` of ``tool`` with its arguments as raw JSON text; the JSON-RPC reply."""
    raw = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "' + tool + '", "arguments": ' \
          + arguments_json + "}}"
    return client.post("/mcp", content=raw, headers={**MCP_HEADERS, **auth("tenant1")})


def tool_error(response: Any) -> str:
    """The text of a JSON-RPC reply that refused: a tool error's text or a protocol error's message."""
    reply = strict(response)
    if "error" in reply:
        return reply["error"]["message"]
    assert reply["result"]["isError"], reply
    return reply["result"]["content"][0]["text"]


@pytest.mark.parametrize("plan,words", [
    ({"steps": [SHOP_STEP, {"output_key": "b", "source": "local", "query": DEEP}]}, "too_complex"),
    ({"steps": [{"output_key": "a", "source": "shop", "query": HOSTILE_SQL["NOT chain"]}]}, "too_complex"),
    ({"steps": [{"output_key": "a", "source": "shop", "query": HOSTILE_SQL["25 nested subqueries"]}]}, "too_complex"),
    ({"steps": [{**SHOP_STEP, "output_key": f"s{i}"} for i in range(21)]}, "too_many_steps"),
    ({"steps": [SHOP_STEP], "template": {"example": "e", "params": {"p": 2**70}}}, "invalid_value"),
    # the SDK's JSON-RPC reader refuses the escape itself: the text never reaches a tool
    ({"steps": [{**SHOP_STEP, "purpose": SURROGATE}]}, "Parse error"),
])
def test_mcp_run_plan_refuses_alike(make_client, plan: dict[str, Any], words: str) -> None:
    client = make_client()
    response = mcp_run_plan(client, json.dumps({"plan": plan}))
    assert response.status_code in (200, 400)
    assert words in tool_error(response)
    assert client.get("/healthz").status_code == 200


def test_mcp_run_plan_refuses_nan(make_client) -> None:
    arguments = '{"plan": {"steps": [{"output_key": "a", "source": "shop", "query": "SELECT 1 AS x FROM orders"}], ' \
                '"template": {"example": "e", "params": {"p": NaN}}}}'
    text = tool_error(mcp_run_plan(make_client(), arguments))
    assert text.startswith("Error executing tool run_plan: invalid_value:"), text


@pytest.mark.parametrize("flag", ["no_answer", "start_conversation"])
def test_mcp_ask_takes_only_true_booleans(make_client, flag: str) -> None:
    """As on the HTTP API, 0 is no boolean: the tool refuses it before any question is asked."""
    text = tool_error(mcp_run_plan(make_client(), json.dumps({"question": "订单有多少？", flag: 0}), tool="ask"))
    assert flag in text and "bool" in text.lower(), text


def test_build_shop_limits_reach_the_server(tmp_path) -> None:
    """The fixture's ``make_client(**limits)`` writes them into server.yaml (guards the tests above)."""
    import yaml

    shop = build_shop(tmp_path, max_steps=3)
    assert yaml.safe_load(shop.config.read_text())["limits"]["max_steps"] == 3


def test_a_bug_is_a_500_logged_once_and_never_reraised_to_the_server(shop, monkeypatch, caplog) -> None:
    """Starlette re-raises an unhandled exception after answering it, for the server to log in
    full; ``Contained`` keeps it: the test client, which re-raises what reaches it, sees none."""
    from fastapi.testclient import TestClient

    from structq.capabilities import CapabilitySet
    from structq.config import Settings
    from structq.server.app import create_app
    from structq.server.config import ServerConfig
    from structq.server.service import Service

    def broken(self: Any, principal: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(Service, "sources", broken)
    capabilities = CapabilitySet.from_path(shop.manifests)
    agent = Service.agent_for(capabilities, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False))
    service = Service(agent, ServerConfig.from_file(shop.config, sources=capabilities.names))
    with TestClient(create_app(service, mcp=False), raise_server_exceptions=True) as client:
        with caplog.at_level(logging.ERROR, logger="structq.server"):
            response = client.get("/v1/sources", headers=auth("tenant1"))
    assert response.status_code == 500 and strict(response)["error"]["code"] == "internal"
    assert [r.getMessage().splitlines()[0] for r in caplog.records] == [
        "internal error while serving a request: Traceback (most recent call last):"]
