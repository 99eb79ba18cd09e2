"""Concurrent ``Agent.aask`` calls next to the same calls one after another.

Asks the demo company's verified SQL questions (no model call: a verified plan runs as is)
``--calls`` times (default 50), first sequentially, then all at once on one event loop, in
interleaved rounds, and prints the median wall times and their ratio (sequential ÷
concurrent: how much the concurrency bought). Two configurations side by side:

- ``now``: the engine's own call pool (``Engine.call``, ``STRUCTQ_THREADS`` or sized from the
  sources: ``agent.engine.work_threads``), with steps on in-process sources at most one per core;
- ``to_thread``: the blocking calls sent through ``asyncio.to_thread`` as before, whose
  default pool holds ``min(32, cores + 4)`` threads.

On SQLite the queries hold the interpreter lock part of the time and the machine has few
cores, so the ceiling is low; the figure that matters is that nothing but the work limits it.
Figures only; nothing is asserted. The demo data is built into a temporary folder unless
``$STRUCTQ_DEMO_DIR`` already holds a built demo.

    python bench/concurrency.py [--calls 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from engine import demo_directory  # noqa: E402

from structq import Agent  # noqa: E402
from structq.agent.engine import Engine  # noqa: E402
from structq.capabilities import CapabilitySet  # noqa: E402
from structq.config import Settings  # noqa: E402


async def _to_thread(self: Engine, fn, /, *args, **kwargs):  # the old path, for comparison
    return await asyncio.to_thread(fn, *args, **kwargs)


def _questions(capabilities: CapabilitySet) -> list[str]:
    """Verified questions whose steps all read SQL sources (no search server to start)."""
    found = []
    for manifest in capabilities:
        for example in manifest.examples:
            sources = {s.source for s in example.steps}
            if all(s == "local" or not capabilities[s].is_search for s in sources):
                found.append(example.question)
    return found


def _timed(agent: Agent, questions: list[str], concurrent: bool) -> float:
    async def one(question: str) -> None:
        await agent.aask(question, answer=False, use_cache=False)

    async def many() -> None:
        if concurrent:
            await asyncio.gather(*(one(q) for q in questions))
        else:
            for q in questions:
                await one(q)

    started = time.perf_counter()
    asyncio.run(many())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with demo_directory() as directory:
        env = {**os.environ, "STRUCTQ_DEMO_DIR": str(directory)}
        capabilities = CapabilitySet.from_path(REPO / "capabilities", env=env)
        pool = _questions(capabilities)
        questions = [pool[i % len(pool)] for i in range(args.calls)]
        os.environ.pop("STRUCTQ_LLM", None)  # verified plans only: no model
        settings = Settings.from_env(audit_enabled=False, cache_enabled=False, max_replans=0)
        agent = Agent(capabilities, settings=settings)
        own_call = Engine.call
        times: dict[str, dict[str, list[float]]] = {"now": {"seq": [], "conc": []},
                                                    "to_thread": {"seq": [], "conc": []}}
        _timed(agent, questions[: len(pool)], concurrent=False)  # warm-up: pools, imports
        for _ in range(args.rounds):
            for label, call in (("now", own_call), ("to_thread", _to_thread)):
                Engine.call = call  # type: ignore[method-assign]
                times[label]["seq"].append(_timed(agent, questions, concurrent=False))
                times[label]["conc"].append(_timed(agent, questions, concurrent=True))
        Engine.call = own_call  # type: ignore[method-assign]
        engine_threads = agent.engine.threads
        in_process_slots = getattr(agent.engine, "in_process_slots", "unbounded")
        agent.close()
    print(f"{args.calls} aask calls over {len(pool)} verified SQL questions, median of {args.rounds} interleaved rounds")
    print(f"{'path':<10} {'sequential':>11} {'concurrent':>11} {'speed-up':>9}")
    for label, t in times.items():
        seq, conc = statistics.median(t["seq"]), statistics.median(t["conc"])
        print(f"{label:<10} {seq:>10.2f}s {conc:>10.2f}s {seq / conc:>8.2f}×")
    print(f"threads: Engine call and step pools {engine_threads} each (STRUCTQ_THREADS or sized from the "
          f"sources), in-process steps at once {in_process_slots}; "
          f"asyncio.to_thread's default pool {min(32, (os.cpu_count() or 1) + 4)}; cores {os.cpu_count()}")


if __name__ == "__main__":
    main()
