"""Every model call is bounded: a timeout per request, bounded retries with backoff on 429/5xx.

The model is a real OpenAI client (``ChatOpenAI``) against a scripted loopback server
(tests/model_stub.py) that replies, fails with a status, or hangs. Outcomes are asserted
(the error, the number of requests), never durations.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from model_stub import HANG, scripted_server

from structq.agent import Agent
from structq.agent.audit import AuditLog
from structq.agent.llm import CallBounds, CallLog, invoke, resolve_model
from structq.config import Settings
from structq.errors import ConfigError, ModelError

TODAY = dt.date(2026, 11, 30)
NO_WAIT = CallBounds(timeout_s=5, retries=2, backoff_s=0.0)


def chat_openai(base_url: str, **kwargs):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key="x", **{"max_retries": 0, **kwargs})


def ask(demo_capabilities, tmp_path: Path, model) -> None:
    with Agent(demo_capabilities, llm=model, settings=Settings(llm=None, cache_enabled=False),
               audit=AuditLog(tmp_path / "audit.jsonl")) as agent:
        agent.ask("一个没有验证过的问题", today=TODAY)


def test_a_model_server_that_never_answers_gives_model_error(demo_capabilities, tmp_path) -> None:
    with scripted_server(HANG) as stub:
        with pytest.raises(ModelError) as info:
            ask(demo_capabilities, tmp_path, chat_openai(stub.base_url, timeout=0.5))
    assert "Timeout" in str(info.value) and "STRUCTQ_LLM_TIMEOUT" in info.value.hint
    assert len(stub.requests) == 1  # a timeout is not retried


def test_configured_models_get_the_timeout_and_leave_retries_to_structq(
        demo_capabilities, tmp_path, monkeypatch) -> None:
    with scripted_server(HANG, HANG) as stub:
        monkeypatch.setenv("OPENAI_API_KEY", "x")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("STRUCTQ_LLM_TIMEOUT", "0.5")
        model = resolve_model("openai:gpt-4o-mini")
        assert model.request_timeout == 0.5 and model.max_retries == 0
        with pytest.raises(ModelError):
            ask(demo_capabilities, tmp_path, model)
    assert len(stub.requests) == 1


@pytest.mark.parametrize("failures", [[503], [429, 502], [500, 504]], ids=["503", "429-502", "500-504"])
def test_rate_limits_and_server_errors_are_retried(failures: list[int]) -> None:
    with scripted_server(*failures, "fine") as stub:
        log = CallLog()
        reply = invoke(chat_openai(stub.base_url), [], purpose="plan", log=log, bounds=NO_WAIT)
    assert reply.content == "fine" and len(stub.requests) == len(failures) + 1
    assert log.count() == 1 and log.calls[0].requests == len(failures) + 1


def test_retries_are_bounded(monkeypatch) -> None:
    with scripted_server(503, 503, 503, 503, "never reached") as stub:
        log = CallLog()
        with pytest.raises(ModelError) as info:
            invoke(chat_openai(stub.base_url), [], purpose="plan", log=log, bounds=NO_WAIT)
    assert len(stub.requests) == 3 and "after 3 requests" in str(info.value)
    assert log.calls[0].to_dict()["requests"] == 3


@pytest.mark.parametrize("status", [400, 401, 404], ids=str)
def test_client_errors_are_not_retried(status: int) -> None:
    with scripted_server(status, "never reached") as stub:
        with pytest.raises(ModelError):
            invoke(chat_openai(stub.base_url), [], purpose="plan", log=CallLog(), bounds=NO_WAIT)
    assert len(stub.requests) == 1


def test_backoff_doubles_honours_retry_after_and_is_capped() -> None:
    bounds = CallBounds(backoff_s=0.5, backoff_cap_s=4.0)
    assert [bounds.backoff(i) for i in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert bounds.backoff(0, retry_after=3.0) == 3.0 and bounds.backoff(0, retry_after=600) == 4.0


@pytest.mark.parametrize("name, value", [("STRUCTQ_LLM_TIMEOUT", "0"), ("STRUCTQ_LLM_TIMEOUT", "soon"),
                                         ("STRUCTQ_LLM_TIMEOUT", "-1"), ("STRUCTQ_LLM_RETRIES", "two"),
                                         ("STRUCTQ_LLM_RETRIES", "-1")])
def test_bad_bounds_in_the_environment_are_configuration_errors(monkeypatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        CallBounds.from_env()
    assert name in str(info.value)


def test_bounds_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("STRUCTQ_LLM_TIMEOUT", "12.5")
    monkeypatch.setenv("STRUCTQ_LLM_RETRIES", "0")
    assert CallBounds.from_env() == CallBounds(timeout_s=12.5, retries=0)
    monkeypatch.delenv("STRUCTQ_LLM_TIMEOUT")
    monkeypatch.delenv("STRUCTQ_LLM_RETRIES")
    assert CallBounds.from_env() == CallBounds(timeout_s=60.0, retries=2)
