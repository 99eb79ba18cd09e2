"""The engine's thread pools (``Engine.call``, ``STRUCTQ_THREADS``): concurrent ``aask``
calls are limited by the configured size, not by ``asyncio.to_thread``'s default pool of
``cores + 4`` threads. Outcomes only: a barrier that N calls must reach together (its timeout
only turns a hang into a failure), the context variables a call sees, the error a bad setting
raises. The capability set is empty: no source is needed to exercise the pools."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from structq.agent import Engine
from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.errors import ConfigError

_HANG_GUARD_S = 30.0
LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("LABEL", default="unset")


def _engine(threads: int) -> Engine:
    return Engine(CapabilitySet([]), threads=threads)


@pytest.mark.parametrize("calls", [20, 40])
def test_as_many_calls_run_at_once_as_the_pool_has_threads(calls: int) -> None:
    """``calls`` blocking calls that each wait for all the others complete only if they all
    run at the same time: more than ``asyncio.to_thread``'s default pool allows here."""
    barrier = threading.Barrier(calls, timeout=_HANG_GUARD_S)
    engine = _engine(calls)

    async def all_at_once() -> list[str]:
        return await asyncio.gather(*(engine.call(lambda: (barrier.wait(), threading.current_thread().name)[1])
                                      for _ in range(calls)))

    try:
        names = asyncio.run(all_at_once())
    finally:
        engine.close()
    assert len(set(names)) == calls
    assert all(name.startswith("structq-call") for name in names)


def test_a_call_sees_the_callers_context_variables() -> None:
    engine = _engine(2)

    async def labelled() -> str:
        LABEL.set("from the caller")
        return await engine.call(LABEL.get)

    try:
        assert asyncio.run(labelled()) == "from the caller"
    finally:
        engine.close()


def test_the_pool_size_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTQ_THREADS", "7")
    assert Settings.from_env().threads == 7
    monkeypatch.delenv("STRUCTQ_THREADS")
    assert Settings.from_env().threads == Engine.DEFAULT_THREADS


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_thread_count_is_a_config_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("STRUCTQ_THREADS", value)
    with pytest.raises(ConfigError, match="STRUCTQ_THREADS"):
        _engine(Settings.from_env().threads)
