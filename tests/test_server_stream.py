"""The event stream of ``POST /v1/ask?stream=1`` through an ASGI test client, on the
two-tenant shop (a real SQLite file): the answer arrives in pieces while a streaming model
writes it — each piece checked for invented figures before it is sent — and every step is
reported once settled, also when it was skipped or failed.

The answering models are LangChain's own fake chat models (``FakeListChatModel`` streams its
reply one character at a time, and can fail after a given chunk); planning replies come from
the scripted models of ``scripted.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from scripted import plan_reply, scripted
from server_support import SERIES_QUESTION, auth, build_shop, sse_events

from structq.agent.synthesis import NumberGate, known_figures, unsupported_numbers
from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.service import Service


@pytest.fixture
def shop(tmp_path: Path):
    return build_shop(tmp_path)


@pytest.fixture
def stream(shop):
    """``stream(model, question, **body)`` → the (event, data) pairs of one streamed ask."""
    clients: list[TestClient] = []

    def ask(model: Any, question: str = SERIES_QUESTION, **body: Any) -> list[tuple[str, Any]]:
        capabilities = CapabilitySet.from_path(shop.manifests)
        settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=0)
        service = Service(Service.agent_for(capabilities, llm=model, settings=settings),
                          ServerConfig.from_file(shop.config, sources=capabilities.names))
        client = TestClient(create_app(service), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        response = client.post("/v1/ask?stream=1", json={"question": question, **body}, headers=auth("tenant1"))
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        return [(name, json.loads(data)) for name, data in sse_events(response.text)]

    yield ask
    for client in clients:
        client.__exit__(None, None, None)


def order(events: list[tuple[str, Any]]) -> str:
    """The event names as one word each, answer pieces collapsed: ``plan step answer* answer done``."""
    names = ["answer*" if name == "answer" and "delta" in data else name for name, data in events]
    return re.sub(r"(answer\* )+", "answer* ", " ".join(names) + " ").strip()


def pieces(events: list[tuple[str, Any]]) -> list[str]:
    return [data["delta"] for name, data in events if name == "answer" and "delta" in data]


def final(events: list[tuple[str, Any]]) -> dict[str, Any]:
    (answer,) = [data for name, data in events if name == "answer" and "delta" not in data]
    return answer


# --- the answer as the model writes it ---------------------------------------------------------


def test_a_streaming_model_s_answer_arrives_in_pieces_before_done(stream) -> None:
    text = "2026年每个月都有订单，各月金额见表 [by_month]。"
    events = stream(FakeListChatModel(responses=[text]))
    assert order(events) == "plan step answer* answer done"
    assert len(pieces(events)) > 1  # token by token, not one block at the end
    assert "".join(pieces(events)) == text
    assert final(events) == {"text": text, "citations": events[-1][1]["citations"], "replaces_stream": False}
    assert events[-1][1]["answer"] == text


def test_an_invented_figure_is_never_streamed_and_the_checked_text_replaces_the_pieces(stream) -> None:
    events = stream(FakeListChatModel(responses=["每月订单金额合计为 987654.5 元 [by_month]。"]))
    assert order(events) == "plan step answer* answer done"
    shown = "".join(pieces(events))
    assert shown == "每月订单金额合计为 "  # stopped before the figure that is in no result
    answer = final(events)
    assert answer["replaces_stream"] is True and "987654" not in answer["text"]
    assert "[by_month]" in answer["text"]  # the deterministic rendering, citing the step
    assert any("not found in the results" in note for note in events[-1][1]["notes"])


def test_a_model_that_fails_mid_answer_leaves_the_results_shown_instead(stream) -> None:
    model = FakeListChatModel(responses=["各月金额见表，请参阅 [by_month]。"], error_on_chunk_number=4)
    events = stream(model)
    assert order(events) == "plan step answer* answer done"
    assert "".join(pieces(events)) == "各月金额"
    assert final(events)["replaces_stream"] is True
    assert any("could not be written" in note for note in events[-1][1]["notes"])


def test_without_an_answering_model_there_are_no_pieces(stream) -> None:
    events = stream(None)
    assert order(events) == "plan step answer done"
    assert final(events)["replaces_stream"] is False


# --- steps that did not run -------------------------------------------------------------------


def test_a_step_skipped_for_an_empty_input_has_its_own_event(stream) -> None:
    plan = {"steps": [
        {"output_key": "nobody", "source": "shop", "purpose": "不存在的客户",
         "query": "SELECT customer FROM orders WHERE customer = '没有这个人'"},
        {"output_key": "their_orders", "source": "shop", "purpose": "他们的订单",
         "query": "SELECT order_id FROM orders WHERE customer IN (<nobody>)"}]}
    events = stream(scripted(plan_reply(plan)), "没有这个人的订单有哪些？", no_answer=True)
    assert order(events) == "plan step step answer done"
    ran, skipped = events[1][1], events[2][1]
    assert ran["status"] == "ok" and ran["row_count"] == 0
    assert skipped["status"] == "skipped" and skipped["output_key"] == "their_orders"
    assert "nobody" in skipped["skipped"] and "no rows" in skipped["skipped"]
    assert skipped["purpose"] == "他们的订单" and "rows" not in skipped


def test_a_failed_step_has_an_event_with_the_error_then_the_stream_ends_with_it(stream) -> None:
    bad = {"steps": [{"output_key": "o", "source": "shop", "query": "SELECT card_number FROM orders"}]}
    events = stream(scripted(plan_reply(bad), plan_reply(bad), plan_reply(bad)), "卡号是什么？", no_answer=True)
    assert order(events) == "plan step plan step plan step error"
    for _, data in events[1:-1:2]:
        assert data["status"] == "failed" and data["error"]["code"] == "sandbox_refused"
        assert data["query"] == "SELECT card_number FROM orders" and data["error"]["hint"]
    assert events[-1][1]["error"]["code"] == "no_working_plan"


# --- the gate, as a property ------------------------------------------------------------------

def _run_with(*values: Any) -> Any:
    """A run whose one step returned ``values``: the figures an answer may state."""
    from structq.agent import Plan, PlanResult, StepResult

    plan = Plan.parse({"steps": [{"output_key": "s", "source": "shop", "query": "SELECT v FROM t"}]})
    step = StepResult("s", "shop", columns=("v",), rows=[(v,) for v in values])
    return PlanResult(plan, {"s": step}, [], 0.0)


RUN = _run_with(12.5, 125, 2026, -3, "2026-01-01")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="0123456789,.-年元 [s]x", max_size=40), cuts=st.lists(st.integers(0, 40), max_size=12))
def test_the_gate_passes_a_prefix_with_only_known_figures_and_all_of_a_clean_reply(text: str, cuts: list[int]) -> None:
    """However the reply is cut into pieces: what was passed on is a prefix of it, holds no
    figure the results lack at any moment, and is all of it when the whole reply checks."""
    passed: list[str] = []
    gate = NumberGate(known_figures(RUN), passed.append)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    for start, end in zip(bounds, bounds[1:]):
        gate.feed(text[start:end])
        shown = "".join(passed)
        assert text.startswith(shown)
        assert not unsupported_numbers(shown, RUN)
    gate.finish()
    if not unsupported_numbers(text, RUN):
        assert "".join(passed) == text
