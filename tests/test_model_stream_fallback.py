"""A model server that ignores ``stream``: the streamed call comes back as one whole completion,
which the client reads as no chunks; the answer is then asked for once more without
streaming and sent as one piece — in the agent and over the service's event stream.

A loopback OpenAI-compatible stub (``openai_stub.py``) with ``ignore_stream``; the shop's
verified question, so the only model call is the answer's.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from openai_stub import OpenAIStub
from server_support import SERIES_QUESTION, auth, build_shop, sse_events

from structq.agent.llm import CallLog, invoke
from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.service import Service


def _model(stub: OpenAIStub):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="stub", base_url=stub.base_url, api_key="stub", max_retries=0, timeout=30)


@pytest.mark.parametrize("ignore_stream", [True, False])
def test_a_streamed_call_falls_back_to_one_whole_reply(ignore_stream: bool) -> None:
    from langchain_core.messages import HumanMessage

    with OpenAIStub({}, ignore_stream=ignore_stream) as stub:
        pieces: list[str] = []
        log = CallLog()
        reply = invoke(_model(stub), [HumanMessage("Question: 多少？\n[by_month] …")], purpose="answer", log=log,
                       on_text=pieces.append)
        streamed = [r.get("stream", False) for r in stub.requests]
    assert reply.content and "".join(pieces) == reply.content
    if ignore_stream:
        assert pieces == [reply.content] and streamed == [True, False]  # one retry, not streamed
    else:
        assert len(pieces) > 1 and streamed == [True]
    assert log.count("answer") == 1


def test_the_page_stream_gets_the_answer_from_a_server_that_does_not_stream(tmp_path) -> None:
    shop = build_shop(tmp_path)
    capabilities = CapabilitySet.from_path(shop.manifests)
    with OpenAIStub({}, ignore_stream=True) as stub:
        settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=0)
        service = Service(Service.agent_for(capabilities, llm=_model(stub), settings=settings),
                          ServerConfig.from_file(shop.config, sources=capabilities.names))
        with TestClient(create_app(service, mcp=False)) as client:
            response = client.post("/v1/ask?stream=1", json={"question": SERIES_QUESTION}, headers=auth("tenant1"))
    events = [(name, json.loads(data)) for name, data in sse_events(response.text)]
    deltas = [data["delta"] for name, data in events if name == "answer" and "delta" in data]
    final = next(data for name, data in events if name == "answer" and "text" in data)
    assert [name for name, _ in events][-1] == "done"
    assert len(deltas) == 1 and deltas[0].strip() == final["text"] and not final["replaces_stream"]
    assert "showing the results instead" not in json.dumps(events[-1][1]["notes"], ensure_ascii=False)
