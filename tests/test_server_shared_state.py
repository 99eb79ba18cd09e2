"""Two real ``structq serve`` processes on one store — a SQLite file, then PostgreSQL — with
a scripted OpenAI-compatible model on loopback: what one conversation and one token share.

- follow-ups to one conversation sent at the same moment, to both servers, all become turns
  of it, in one order that the next follow-up's prompt shows (no turn is lost to a
  read–append–write race);
- a token's request rate is counted across both servers, not per process;
- an answer the model streams reaches the client in pieces, over real HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from openai_stub import OpenAIStub
from server_support import (
    SERIES_QUESTION,
    ServerProcess,
    auth,
    build_shop,
    sse_events,
    start_server,
)

from structq.server.store import Store

BY_CUSTOMER = "每个客户的订单总额是多少？"
FOLLOW_UP = "那只看图书呢？"
RULES = {
    BY_CUSTOMER: {"steps": [{"output_key": "by_customer", "source": "shop",
                             "query": "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer"}]},
    FOLLOW_UP: {"steps": [{"output_key": "books", "source": "shop",
                           "query": "SELECT customer, SUM(amount) AS total FROM orders WHERE category = '图书' "
                                    "GROUP BY customer"}]},
}
#: Follow-ups sent at once: the first question and these are the 6 turns a conversation keeps.
AT_ONCE = 5
#: Requests a token may make before it waits (the refill is far too slow to matter here).
BURST = 12


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[OpenAIStub, list[ServerProcess], str]]:
    directory = tmp_path_factory.mktemp(f"shared-{request.param}")
    shop = build_shop(directory / "shop", requests_per_minute=0.001, burst=BURST)
    if request.param == "sqlite":
        store = f"sqlite:///{directory / 'store.db'}"
    else:
        store = request.getfixturevalue("pg_server").create_database("structq_shared_state_store")
    with OpenAIStub(RULES) as stub:
        env = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "stub", "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0",
               "STRUCTQ_STORE_URL": store, "STRUCTQ_CACHE_DIR": str(directory / "cache")}
        started: list[ServerProcess] = []
        try:
            for name in ("a", "b"):
                started.append(start_server(["-m", str(shop.manifests), "--config", str(shop.config),
                                             "--llm", "openai:stub"], env=env, log=directory / f"serve-{name}.log"))
            yield stub, started, store
        finally:
            for process in started:
                process.stop()


def _ask(server: ServerProcess, question: str, **body: Any) -> dict[str, Any]:
    response = httpx.post(server.url + "/v1/ask", json={"question": question, "no_answer": True, **body},
                          headers=auth("tenant1"), timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def _stored_questions(store_url: str, cid: str) -> list[str]:
    store = Store(store_url)
    try:
        found = store.load_conversation(cid)
    finally:
        store.close()
    assert found is not None
    return [turn["question"] for turn in found[1]]


def test_follow_ups_sent_at_once_to_two_servers_all_become_turns_in_one_order(servers) -> None:
    stub, (first, second), store_url = servers
    cid = _ask(first, BY_CUSTOMER, start_conversation=True)["conversation"]
    questions = [f"第{n}问：{FOLLOW_UP}" for n in range(AT_ONCE)]
    with ThreadPoolExecutor(AT_ONCE) as pool:
        answers = list(pool.map(lambda n: _ask((first, second)[n % 2], questions[n], conversation=cid), range(AT_ONCE)))
    assert {a["conversation"] for a in answers} == {cid}
    stored = _stored_questions(store_url, cid)
    assert stored[0] == BY_CUSTOMER and sorted(stored[1:]) == sorted(questions)  # every follow-up, none lost
    # one order, the same from every server: the next follow-up's prompt shows the turns in it
    _ask(second, f"最后：{FOLLOW_UP}", conversation=cid)
    prompt = "\n".join(m.get("content") or "" for m in stub.requests[-1]["messages"] if m["role"] == "user")
    positions = [prompt.find(question) for question in stored]
    assert -1 not in positions and positions == sorted(positions)


def test_a_tokens_request_rate_is_counted_across_servers(servers) -> None:
    _, (first, second), _ = servers
    statuses = [httpx.get((first, second)[n % 2].url + "/v1/sources", headers=auth("tenant2"), timeout=30).status_code
                for n in range(2 * BURST)]
    assert statuses == [200] * BURST + [429] * BURST  # not BURST per process
    refused = httpx.get(first.url + "/v1/sources", headers=auth("tenant2"), timeout=30)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert httpx.get(second.url + "/v1/sources", headers=auth("shop_only"), timeout=30).status_code == 200


def test_a_streamed_answer_arrives_in_pieces_over_http(servers) -> None:
    import json

    stub, (first, _), _ = servers
    with httpx.stream("POST", first.url + "/v1/ask?stream=1", json={"question": SERIES_QUESTION},
                      headers=auth("tenant1"), timeout=120) as response:
        assert response.status_code == 200
        events = [(name, json.loads(data)) for name, data in sse_events(response.read().decode())]
    names = [name for name, _ in events]
    assert names[:2] == ["plan", "step"] and names[-2:] == ["answer", "done"]
    pieces = [data["delta"] for name, data in events[2:-2] if name == "answer"]
    assert len(pieces) == len(names) - 4 > 1  # only answer pieces between the step and the final answer
    assert "".join(pieces) == events[-1][1]["answer"] == "结果如下表所示 [by_month]。"
    assert events[-2][1]["replaces_stream"] is False
    assert stub.requests[-1].get("stream") is True  # the model was asked to stream
