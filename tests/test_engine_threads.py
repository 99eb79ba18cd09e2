"""The engine's thread pools (``Engine.call``, ``STRUCTQ_THREADS``): concurrent ``aask``
calls are limited by the configured size, or one sized from the sources (``work_threads``), not
by ``asyncio.to_thread``'s default pool of ``cores + 4`` threads; steps on in-process sources
at most ``cores + 4`` at once. Outcomes only: a barrier that N calls must reach together (its timeout
only turns a hang into a failure), the context variables a call sees, the error a bad setting
raises. The capability set is empty: no source is needed to exercise the pools."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from structq.agent import Engine, Plan
from structq.agent.engine import in_process
from structq.capabilities import CapabilitySet, Manifest
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
    assert Engine(CapabilitySet([]), threads=Settings.from_env().threads).threads == 7
    monkeypatch.delenv("STRUCTQ_THREADS")
    assert Settings.from_env().threads is None  # sized from the sources


def _manifest(source: str, url: str) -> Manifest:
    return Manifest(source=source, kind="sql", url=url,
                    tables=[{"name": "t", "columns": [{"name": "id", "type": "integer"}]}])


def test_the_pool_size_comes_from_the_work() -> None:
    """In-process sources only (SQLite): the cores' worth that ``asyncio.to_thread`` has;
    any server among them: threads that wait on the network."""
    files = CapabilitySet([_manifest("a", "sqlite:///a.db"), _manifest("b", "sqlite:///b.db")])
    assert Engine(files).threads == min(Engine.NETWORK_THREADS, (os.cpu_count() or 1) + 4)
    mixed = CapabilitySet([_manifest("a", "sqlite:///a.db"), _manifest("s", "postgresql://h/db")])
    assert Engine(mixed).threads == Engine.NETWORK_THREADS
    assert in_process("local", mixed) and in_process("a", mixed) and not in_process("s", mixed)


def _search_manifest(source: str, url: str) -> Manifest:
    return Manifest(source=source, kind="opensearch", url=url,
                    indices=[{"name": "docs", "fields": [{"name": "title", "type": "text"}]}])


def test_the_embedded_search_server_counts_as_this_machine() -> None:
    """A SQLite file beside the embedded search server (the demo): every source runs on this
    machine's cores, so the pools have the cores' worth; a search cluster elsewhere is a
    server to wait on. The embedded server's steps are still not in-process steps."""
    demo = CapabilitySet([_manifest("a", "sqlite:///a.db"), _search_manifest("docs", "embedded")])
    assert Engine(demo).threads == min(Engine.NETWORK_THREADS, (os.cpu_count() or 1) + 4)
    assert not in_process("docs", demo)
    cluster = CapabilitySet([_manifest("a", "sqlite:///a.db"), _search_manifest("docs", "http://search:9200")])
    assert Engine(cluster).threads == Engine.NETWORK_THREADS


def test_in_process_steps_run_at_most_in_process_slots_at_once(tmp_path: Path) -> None:
    """However many plans run at once, no more SQLite steps than ``in_process_slots`` are
    inside their check and fetch together (the slots are counted from inside the fetch)."""
    import sqlite3

    database = tmp_path / "n.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE t (id INTEGER)")
        connection.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    engine = Engine(CapabilitySet([_manifest("n", f"sqlite:///{database}")]), threads=32)
    assert engine.in_process_slots == min(32, (os.cpu_count() or 1) + 4)
    inside, most = 0, 0
    lock = threading.Lock()
    fetch = engine.fetch

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        try:
            return fetch(*args, **kwargs)
        finally:
            with lock:
                inside -= 1

    engine.fetch = counted  # type: ignore[method-assign]
    plan = Plan.parse({"steps": [{"output_key": "n", "source": "n", "query": "SELECT count(*) AS n FROM t"}]})

    async def many() -> list[Any]:
        return await asyncio.gather(*(engine.arun(plan) for _ in range(40)))

    try:
        results = asyncio.run(many())
    finally:
        engine.close()
    assert all(r.final.rows == [(100,)] for r in results)
    assert 1 <= most <= engine.in_process_slots


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_thread_count_is_a_config_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("STRUCTQ_THREADS", value)
    with pytest.raises(ConfigError, match="STRUCTQ_THREADS"):
        _engine(Settings.from_env().threads)
