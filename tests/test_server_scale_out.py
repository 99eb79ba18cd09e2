"""Scale-out: two real ``structq serve`` processes on one PostgreSQL-backed store
(``STRUCTQ_STORE_URL``), a scripted OpenAI-compatible model on loopback. A plan one server
cached is used by the other without a model call, and a conversation started on one
continues on the other."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from openai_stub import OpenAIStub
from server_support import ServerProcess, auth, build_shop, start_server

BY_CUSTOMER = "每个客户的订单总额是多少？"
FOLLOW_UP = "那只看图书呢？"
RULES = {
    BY_CUSTOMER: {"steps": [{
        "output_key": "by_customer", "source": "shop", "purpose": "按客户汇总订单金额",
        "query": "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer ORDER BY total DESC"}]},
    FOLLOW_UP: {"steps": [{
        "output_key": "books", "source": "shop", "purpose": "按客户汇总图书订单金额",
        "query": "SELECT customer, SUM(amount) AS total FROM orders WHERE category = '图书' "
                 "GROUP BY customer ORDER BY total DESC"}]},
}


@pytest.fixture(scope="module")
def servers(pg_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpenAIStub, ServerProcess, ServerProcess]]:
    directory = tmp_path_factory.mktemp("scale")
    shop = build_shop(directory / "shop")
    store = pg_server.create_database("structq_scale_out_store")
    with OpenAIStub(RULES) as stub:
        env = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "stub", "STRUCTQ_AUDIT": "0",
               "STRUCTQ_MAX_REPAIRS": "1", "STRUCTQ_STORE_URL": store, "STRUCTQ_CACHE_DIR": str(directory / "cache")}
        started: list[ServerProcess] = []
        try:
            for name in ("a", "b"):
                started.append(start_server(["-m", str(shop.manifests), "--config", str(shop.config),
                                             "--llm", "openai:stub"], env=env, log=directory / f"serve-{name}.log"))
            yield stub, started[0], started[1]
        finally:
            for process in started:
                process.stop()


def _ask(server: ServerProcess, question: str, **body: object) -> dict:
    response = httpx.post(server.url + "/v1/ask", json={"question": question, "no_answer": True, **body},
                          headers=auth("tenant1"), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def _planning_calls(stub: OpenAIStub) -> list[str]:
    """The user prompts of the planning requests the model received so far."""
    return ["\n".join(m.get("content") or "" for m in r["messages"] if m["role"] == "user")
            for r in stub.requests if r.get("tools")]


def test_a_plan_cached_by_one_server_is_used_by_the_other_without_the_model(servers) -> None:
    stub, first, second = servers
    before = len(_planning_calls(stub))
    planned = _ask(first, BY_CUSTOMER)
    assert planned["plan_source"] == "model" and planned["model_calls"]
    assert len(_planning_calls(stub)) == before + 1
    reused = _ask(second, BY_CUSTOMER)
    assert reused["plan_source"] == "cache" and reused["model_calls"] == []
    assert len(_planning_calls(stub)) == before + 1  # the model was not asked again
    assert reused["steps"][0]["rows"] == planned["steps"][0]["rows"]


def test_a_conversation_started_on_one_server_continues_on_the_other(servers) -> None:
    stub, first, second = servers
    started = _ask(first, BY_CUSTOMER, today="2026-06-15", start_conversation=True)  # another day: planned afresh, not from the cache
    follow_up = _ask(second, FOLLOW_UP, conversation=started["conversation"])
    assert follow_up["conversation"] == started["conversation"]
    assert follow_up["plan_source"] == "model"
    prompt = _planning_calls(stub)[-1]
    assert FOLLOW_UP in prompt and BY_CUSTOMER in prompt.split(FOLLOW_UP)[0]  # the earlier turn came first
    assert {row[0] for row in follow_up["steps"][0]["rows"]} <= {row[0] for row in started["steps"][0]["rows"]}
    other_caller = httpx.post(first.url + "/v1/ask", json={"question": FOLLOW_UP, "conversation": started["conversation"]},
                              headers=auth("tenant2"), timeout=60)
    assert other_caller.status_code == 404  # still owned by its caller, on every server
