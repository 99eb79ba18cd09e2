"""``/healthz`` latency of ``structq serve`` while hostile requests are being refused.

Starts ``structq serve`` on a small SQLite shop of the bench's own (one table, 2,000 rows; no
model, no config: loopback only), then measures ``/healthz`` every PROBE_S seconds in two
phases: quiet, and while ATTACKERS clients send hostile requests in turn as fast as they are
answered — the shapes that once crashed or stalled the service (1,000 nested parentheses in a
``local`` step, ``NOT`` × 5,000, ``abs(`` × 2,000, 1,000 UNION parts, 300 chained CTEs, 25
nested subqueries that reach SQLite's parser, lone surrogates, ``NaN``, a 4,400-step plan) and
the largest query the sandbox still reads (an ``IN`` list of 4,900 values, just under
``max_query_tokens``: checked and run). Prints the
probes' p50/p95/p99/max and how many went unanswered within PROBE_TIMEOUT_S, and per hostile
request its status, code and latency. Figures only; nothing is asserted. Traffic goes to
127.0.0.1 only.

Run: ``python bench/hostile.py [--seconds 20] [--attackers 4]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

PROBE_S = 0.05
PROBE_TIMEOUT_S = 5.0

MANIFEST = """source: shop
kind: sql
url: sqlite:///{db}
description: orders
tables:
  - name: orders
    description: one row per order
    columns:
      - {{name: order_id, type: integer, description: id}}
      - {{name: customer, type: text, description: who}}
      - {{name: amount, type: real, description: how much}}
"""


def build_shop(directory: Path) -> Path:
    db = directory / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer TEXT, amount REAL)")
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, f"c{i % 50}", i * 1.5) for i in range(2000)])
    manifests = directory / "manifests"
    manifests.mkdir()
    (manifests / "shop.yaml").write_text(MANIFEST.format(db=db), encoding="utf-8")
    return manifests


def plan(*queries: str, **extra: object) -> str:
    steps = [{"output_key": f"s{i}", "source": "local" if q.startswith("local:") else "shop",
              "query": q.removeprefix("local:")} for i, q in enumerate(queries)]
    return json.dumps({"plan": {"steps": steps, **extra}})


def hostile_requests() -> dict[str, tuple[str, str]]:
    """name → (path, raw JSON body)."""
    deep = "(" * 1000 + "1" + ")" * 1000
    listed = "SELECT order_id FROM orders WHERE order_id IN (" + ", ".join(str(i) for i in range(4_900)) + ")"
    many = json.dumps({"plan": {"steps": [{"output_key": f"k{i}", "source": "shop", "query": "SELECT 1"}
                                          for i in range(4400)]}}, separators=(",", ":"))
    return {
        "deep local step (1,000 parentheses)": ("/v1/run", plan("SELECT order_id FROM orders LIMIT 2",
                                                                f"local:SELECT {deep} AS x FROM s0")),
        "NOT x 5,000": ("/v1/run", plan("SELECT order_id FROM orders WHERE " + "NOT " * 5000 + "amount > 1")),
        "abs( x 2,000": ("/v1/run", plan("SELECT " + "abs(" * 2000 + "amount" + ")" * 2000 + " AS x FROM orders")),
        "1,000 UNION parts": ("/v1/run", plan(" UNION ".join(["SELECT 1 AS x"] * 1000))),
        "300 chained CTEs": ("/v1/run", plan("WITH " + ", ".join(
            f"c{i} AS (SELECT * FROM {f'c{i - 1}' if i else 'orders'})" for i in range(300)) + " SELECT * FROM c299")),
        "25 nested subqueries (SQLite's parser)": ("/v1/run", plan("SELECT " + "(SELECT " * 25 + "1" + ")" * 25
                                                                   + " AS x FROM orders")),
        "lone surrogate in a question": ("/v1/ask", '{"question": "orders \\ud800"}'),
        "NaN in a template parameter": ("/v1/run", plan("SELECT order_id FROM orders LIMIT 1")[:-2]
                                        + ', "template": {"example": "e", "params": {"p": NaN}}}}'),
        f"4,400-step plan ({len(many) // 1024} KB)": ("/v1/run", many),
        f"largest query read ({len(listed.encode()) // 1024} KB IN list, runs)": ("/v1/run", plan(listed)),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(manifests: Path, state: Path) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = free_port()
    env = {**os.environ, "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0", "STRUCTQ_LLM": "",
           "STRUCTQ_STORE_URL": f"sqlite:///{state / 'store.db'}"}
    process = subprocess.Popen([sys.executable, "-m", "structq.cli", "serve", "-m", str(manifests), "--port", str(port)],
                               env=env, stdout=subprocess.DEVNULL, stderr=open(state / "serve.log", "wb"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not answer /healthz within 120 s")


def probe(url: str, seconds: float) -> tuple[list[float], int]:
    """``/healthz`` every PROBE_S for ``seconds``: latencies (s) and the probes unanswered.

    Runs in a process of its own (``probing``): a probe sharing the attackers' event loop (or
    their GIL) would measure the bench's own client, not the server."""
    import httpx

    latencies: list[float] = []
    unanswered = 0
    stop_at = time.perf_counter() + seconds
    with httpx.Client(base_url=url, timeout=PROBE_TIMEOUT_S) as http:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            try:
                http.get("/healthz").raise_for_status()
                latencies.append(time.perf_counter() - started)
            except httpx.HTTPError:
                unanswered += 1
            time.sleep(max(0.0, PROBE_S - (time.perf_counter() - started)))
    return latencies, unanswered


def _probe_into(url: str, seconds: float, results: Any) -> None:
    results.put(probe(url, seconds))


async def probing(url: str, seconds: float) -> tuple[list[float], int]:
    """``probe`` in another process, awaited without blocking the attackers."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_probe_into, args=(url, seconds, results))
    process.start()
    found = await asyncio.to_thread(results.get)
    process.join()
    return found


async def attack(url: str, seconds: float, attackers: int) -> dict[str, list[tuple[str, float]]]:
    """ATTACKERS clients sending the hostile requests in turn: name → [(outcome, seconds)]."""
    import httpx

    requests = list(hostile_requests().items())
    outcomes: dict[str, list[tuple[str, float]]] = defaultdict(list)
    stop_at = time.perf_counter() + seconds

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            i = n
            while time.perf_counter() < stop_at:
                name, (path, body) = requests[i % len(requests)]
                i += 1
                started = time.perf_counter()
                try:
                    response = await http.post(path, content=body.encode("utf-8"),
                                               headers={"Content-Type": "application/json"})
                    code = response.json().get("error", {}) if response.status_code != 200 else {}
                    outcome = f"{response.status_code} {code.get('sandbox_code') or code.get('code') or 'ok'}"
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                outcomes[name].append((outcome, time.perf_counter() - started))

    await asyncio.gather(*(client(n) for n in range(attackers)))
    return outcomes


def summary(latencies: list[float], unanswered: int) -> str:
    if not latencies:
        return f"no probe answered ({unanswered} unanswered)"
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] * 1000

    return (f"{len(latencies)} probes: p50 {pct(50):.1f} ms, p95 {pct(95):.1f} ms, p99 {pct(99):.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms; unanswered within {PROBE_TIMEOUT_S:g} s: {unanswered}")


async def phases(url: str, seconds: float, attackers: int) -> None:
    quiet = await probing(url, min(seconds, 5))
    print(f"/healthz, quiet:            {summary(*quiet)}", flush=True)
    (latencies, unanswered), outcomes = await asyncio.gather(probing(url, seconds), attack(url, seconds, attackers))
    print(f"/healthz, under {attackers} attackers: {summary(latencies, unanswered)}")
    print("\nhostile requests (outcome: count, median latency):")
    for name, results in outcomes.items():
        counts = Counter(outcome for outcome, _ in results)
        median = statistics.median(t for _, t in results) * 1000
        print(f"  {name:48s} {', '.join(f'{o} × {n}' for o, n in counts.items())}; median {median:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--attackers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="structq-bench-hostile-") as tmp:
        state = Path(tmp)
        process, url = start(build_shop(state), state)
        try:
            asyncio.run(phases(url, args.seconds, args.attackers))
        finally:
            process.terminate()
            process.wait(timeout=30)
        log = (state / "serve.log").read_text(errors="replace")
        print(f"\nserver log: {len(log.encode()) // 1024} KB, {log.count('Traceback')} tracebacks")


if __name__ == "__main__":
    main()
