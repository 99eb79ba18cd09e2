"""Conversations in the service: they go on without a model (verified and slotted examples
answer as follow-ups), the model that writes a follow-up's answer sees the earlier turns, a
conversation exists only when a caller asks for one or continues one, and those nobody
continued are forgotten after the configured retention.

The two-tenant shop on a real SQLite file; a scripted model where one is needed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from scripted import plan_reply, scripted, text_reply
from server_support import (
    CATEGORY_QUESTION,
    CUSTOMER_QUESTION,
    SERIES_QUESTION,
    add_customer_example,
    auth,
    build_shop,
    service_clients,
)

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.config import ServerConfig
from structq.server.service import Service
from structq.server.store import Store


@pytest.fixture
def shop(tmp_path: Path):
    return add_customer_example(build_shop(tmp_path))


@pytest.fixture
def served(shop):
    """``served(model=None, **config)`` → (client, service) on the shop; closed afterwards."""
    with service_clients() as open_client:
        def make(model: Any = None, **config: Any) -> tuple[TestClient, Service]:
            capabilities = CapabilitySet.from_path(shop.manifests)
            server = ServerConfig.from_file(shop.config, sources=capabilities.names)
            return open_client(capabilities, ServerConfig(**{**server.__dict__, **config}), model)

        yield make


def _conversations(store: Store) -> int:
    from sqlalchemy import func, select

    with store.database.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(store.conversations)).scalar() or 0)


def test_without_a_model_verified_and_slotted_questions_answer_as_follow_ups(served) -> None:
    client, service = served()
    first = client.post("/v1/ask", json={"question": SERIES_QUESTION, "start_conversation": True}, headers=auth("tenant1"))
    cid = first.json()["conversation"]
    assert first.status_code == 200 and cid
    for question, source in [(CATEGORY_QUESTION, "verified"), (CUSTOMER_QUESTION.replace("客户0", "客户4"), "template"),
                             (SERIES_QUESTION, "verified")]:
        follow = client.post("/v1/ask", json={"question": question, "conversation": cid}, headers=auth("tenant1"))
        assert follow.status_code == 200, follow.text
        assert follow.json()["plan_source"] == source and follow.json()["conversation"] == cid
    owner, turns = service.store.load_conversation(cid)
    assert len(turns) == 4 and turns[2]["question"] == CUSTOMER_QUESTION.replace("客户0", "客户4")
    # the stream follows up the same way
    streamed = client.post("/v1/ask?stream=1", json={"question": CATEGORY_QUESTION, "conversation": cid},
                           headers=auth("tenant1"))
    assert "event: done" in streamed.text and "event: error" not in streamed.text


def test_a_question_on_its_own_keeps_no_conversation(served) -> None:
    client, service = served()
    for _ in range(3):
        document = client.post("/v1/ask", json={"question": SERIES_QUESTION}, headers=auth("tenant1")).json()
        assert document["conversation"] is None
        streamed = client.post("/v1/ask?stream=1", json={"question": SERIES_QUESTION}, headers=auth("tenant1"))
        assert '"conversation": null' in streamed.text
    assert _conversations(service.store) == 0
    client.post("/v1/ask", json={"question": SERIES_QUESTION, "start_conversation": True}, headers=auth("tenant1"))
    assert _conversations(service.store) == 1


def test_the_answer_of_a_follow_up_is_written_seeing_the_earlier_turns(served) -> None:
    follow_plan = {"steps": [{"output_key": "books", "source": "shop", "purpose": "图书订单金额",
                              "query": "SELECT SUM(amount) AS total FROM orders WHERE category = '图书'"}]}
    model = scripted(text_reply("各品类见 [by_category]。"), plan_reply(follow_plan), text_reply("图书合计见 [books]。"))
    client, _ = served(model)
    first = client.post("/v1/ask", json={"question": CATEGORY_QUESTION, "start_conversation": True},
                        headers=auth("tenant1")).json()
    follow = client.post("/v1/ask", json={"question": "那只看图书呢？", "conversation": first["conversation"]},
                         headers=auth("tenant1"))
    assert follow.status_code == 200, follow.text
    assert model.calls == 3
    answer_prompt = model.prompt_text(2)
    assert "那只看图书呢？" in answer_prompt and "Earlier in this conversation" in answer_prompt
    assert f"Q: {CATEGORY_QUESTION}" in answer_prompt  # the earlier turn, with its plan and results
    assert "Earlier in this conversation" not in model.prompt_text(0)  # the first answer had none


def test_conversations_past_their_retention_are_forgotten(shop) -> None:
    capabilities = CapabilitySet.from_path(shop.manifests)
    store = Store(f"sqlite:///{shop.directory / 'store.db'}")
    from structq.agent.conversation import Turn

    store.append_turn("old", "k1", Turn("q", {"steps": []}, ""))
    store.append_turn("new", "k1", Turn("q", {"steps": []}, ""))
    with store.database.begin() as connection:
        connection.execute(store.conversations.update().where(store.conversations.c.id == "old")
                           .values(updated=time.time() - 3 * 24 * 3600))
    config = ServerConfig.from_data({"conversation_days": 2, "tokens": [{"sha256": "0" * 64, "user": "u"}]},
                                    sources=capabilities.names)
    assert config.conversation_days == 2
    settings = Settings(llm=None, cache_enabled=False, audit_enabled=False)
    service = Service(Service.agent_for(capabilities, settings=settings), config, store)
    assert store.load_conversation("old") is None and store.load_conversation("new") is not None
    service.close()


def test_a_follow_up_that_changes_a_slots_value_is_the_slotted_example_again(served) -> None:
    client, _ = served()
    first = client.post("/v1/ask", json={"question": CUSTOMER_QUESTION.replace("客户0", "客户4"), "start_conversation": True},
                        headers=auth("tenant1")).json()
    assert first["plan_source"] == "template"
    ask = lambda q: client.post("/v1/ask", json={"question": q, "conversation": first["conversation"]},  # noqa: E731
                                headers=auth("tenant1"))
    follow = ask("那T1-客户5呢？")
    assert follow.status_code == 200, follow.text
    assert follow.json()["plan_source"] == "template" and follow.json()["plan"]["template"]["params"] == {"customer": "T1-客户5"}
    assert follow.json()["question"] == "那T1-客户5呢？"
    again = ask("T1-客户6呢")  # a follow-up of the follow-up
    assert again.status_code == 200 and again.json()["plan"]["template"]["params"] == {"customer": "T1-客户6"}
    # the new value is looked up like any slot's: another tenant's customer is not found, nothing answers it
    assert ask("那T2-客户5呢？").status_code == 503
    assert ask("那这个月呢？").status_code == 503  # not a value of the slot
