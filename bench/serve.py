"""``structq serve`` under load: concurrent clients asking verified demo questions.

Starts ``structq serve`` on the demo company (bundled manifests; SQLite and the embedded
search server), waits until ``/readyz`` says every source answers, then runs CLIENTS
concurrent clients that ask verified questions (SQL and search) in turn for SECONDS seconds.
Prints requests/s, p50/p95/p99 latency, errors (target 0), and the RSS of the server, its
workers and the search server at the start and the end of the load (and at every fifth of it,
to show a trend), the idle RSS after IDLE_S seconds with the search server's share, and how many "Connection pool is full" warnings the server logged (target 0). Then, for comparison, each question once through the command line, one
process each (``structq ask --json``), as a person would without the server: with
``--no-daemon`` (start-up and the search server's index load every time), and sharing the
background search server the server left warm (start-up only). The search server runs under a state folder
of the bench's own and is stopped at the end. Figures only; nothing is asserted. Traffic goes
to 127.0.0.1 only.

Run: ``python bench/serve.py [--clients 50] [--seconds 30] [--workers 1] [--demo-dir DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from figures import percentile

QUESTIONS = [
    "2025年各大区的销售额分别是多少？",                      # sql
    "华东区在职的研发部员工有哪些？",                          # sql
    "2026年3月各部门绩效为A的人数是多少？",                   # sql
    "2026年10月有哪些周报提到了灰度发布？",                   # search
    "2026年第三季度各部门分别提交了多少份周报？",              # search (aggregation)
]


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children (uvicorn workers, the search server)."""
    return sum(_rss_kb(p) for p in [pid, *_children(pid)]) / 1024


def _rss_kb(pid: int) -> int:
    """Resident memory of one process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):  # a child started by any thread of pid
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids + [g for k in kids for g in _children(k)]


def search_server_rss_mb(pid: int) -> float:
    """Resident memory of the search server processes (osmem-server) among ``pid``'s descendants."""
    return sum(_rss_kb(p) for p in _children(pid) if _is_search_server(p)) / 1024


def _is_search_server(pid: int) -> bool:
    try:
        return b"osmem" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


#: Seconds the server is left alone after it is ready, before its idle memory is read.
IDLE_S = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_demo(directory: Path) -> None:
    if not (directory / "company.db").exists():
        from structq.demo import build_demo

        print(f"building the demo company in {directory} …", flush=True)
        build_demo(directory)


def start(env: dict[str, str], port: int, workers: int, log: Path) -> subprocess.Popen[bytes]:
    """The server, its stderr (warnings, access lines) in ``log``."""
    import httpx

    process = subprocess.Popen([sys.executable, "-m", "structq.cli", "serve", "--port", str(port), "--no-cache",
                                "--workers", str(workers)], env=env, stdout=subprocess.DEVNULL,
                               stderr=log.open("wb"))
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    while time.perf_counter() - started < 300:
        try:
            if httpx.get(url + "/readyz", timeout=120).status_code == 200:
                print(f"server ready (sources warm) after {time.perf_counter() - started:.1f} s", flush=True)
                return process
        except httpx.HTTPError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("the server did not become ready within 300 s")


async def load(url: str, clients: int, seconds: float, pid: int) -> tuple[list[float], Counter[str], list[float]]:
    import httpx

    latencies: list[float] = []
    errors: Counter[str] = Counter()
    rss: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            i = n
            while time.perf_counter() < stop_at:
                question = QUESTIONS[i % len(QUESTIONS)]
                i += 1
                started = time.perf_counter()
                try:
                    response = await http.post("/v1/ask", json={"question": question, "today": "2026-11-30"})
                    if response.status_code != 200:
                        errors[f"HTTP {response.status_code} {response.json()['error']['code']}"] += 1
                except httpx.HTTPError as exc:
                    errors[type(exc).__name__] += 1
                latencies.append(time.perf_counter() - started)

    async def sample() -> None:
        while time.perf_counter() < stop_at:
            rss.append(rss_mb(pid))
            await asyncio.sleep(seconds / 5)

    await asyncio.gather(sample(), *(client(n) for n in range(clients)))
    rss.append(rss_mb(pid))
    return latencies, errors, rss


def cli_each(env: dict[str, str], *root: str) -> list[tuple[str, float, str]]:
    """Each question through ``structq [ROOT…] ask``, one process each: (question, seconds,
    and on a failure its exit status and the last line it wrote to stderr)."""
    out = []
    for question in QUESTIONS:
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "structq.cli", *root, "ask", question, "--json",
                                 "--today", "2026-11-30", "--no-cache"], env=env, capture_output=True)
        said = result.stderr.decode(errors="replace").strip().splitlines()
        failed = f" exit {result.returncode}: {said[-1] if said else '(nothing on stderr)'}" if result.returncode else ""
        out.append((question, time.perf_counter() - started, failed))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--demo-dir", type=Path, default=Path(tempfile.gettempdir()) / "structq-bench-demo")
    parser.add_argument("--skip-cli", action="store_true", help="do not run the one-process-per-question comparison")
    args = parser.parse_args()
    ensure_demo(args.demo_dir)
    state = tempfile.mkdtemp(prefix="structq-bench-state-")  # a search server of the bench's own, stopped at the end
    env = {**os.environ, "STRUCTQ_DEMO_DIR": str(args.demo_dir), "STRUCTQ_AUDIT": "0", "STRUCTQ_LLM": "",
           "STRUCTQ_STATE_DIR": state, "STRUCTQ_SEARCH_DAEMON": "1"}
    env.pop("OPENAI_API_KEY", None)
    try:
        run(args, env)
    finally:
        subprocess.run([sys.executable, "-m", "structq.cli", "search-server", "stop"], env=env, capture_output=True, check=False)


def run(args: argparse.Namespace, env: dict[str, str]) -> None:
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="structq-bench-log-")) / "serve.log"
    process = start(env, port, args.workers, log)
    try:
        time.sleep(IDLE_S)
        before, server = rss_mb(process.pid), search_server_rss_mb(process.pid)
        print(f"idle after {IDLE_S} s: RSS {before:.0f} MB, of which the search server {server:.0f} MB "
              f"(STRUCTQ_SEARCH_MEMORY={env.get('STRUCTQ_SEARCH_MEMORY', 'unset')})", flush=True)
        latencies, errors, rss = asyncio.run(load(f"http://127.0.0.1:{port}", args.clients, args.seconds, process.pid))
    finally:
        process.terminate()
        process.wait(timeout=30)
    n = len(latencies)
    print(f"\nstructq serve --workers {args.workers}, {args.clients} clients for {args.seconds:g} s, "
          f"{len(QUESTIONS)} verified questions (SQL and search)")
    print(f"  requests      {n}  ({n / args.seconds:.1f}/s)")
    print(f"  errors        {sum(errors.values())}" + (f"  ({dict(errors)})" if errors else ""))
    if latencies:
        print(f"  latency       p50 {percentile(latencies, 50) * 1000:.0f} ms   p95 {percentile(latencies, 95) * 1000:.0f} ms"
              f"   p99 {percentile(latencies, 99) * 1000:.0f} ms   mean {statistics.mean(latencies) * 1000:.0f} ms")
    print(f"  RSS           start {before:.0f} MB, end {rss[-1]:.0f} MB; during: {', '.join(f'{r:.0f}' for r in rss)} MB")
    said = log.read_text(encoding="utf-8", errors="replace")
    print(f"  pool warnings {said.count('Connection pool is full')}  (\"Connection pool is full\" in the server log {log})")
    if args.skip_cli:
        return
    print("\nthe same questions through the command line, one process each:")
    print("  --no-daemon   shared server   (seconds; the first: start-up and index load every time)")
    for (question, cold, cold_failed), (_, warm, warm_failed) in zip(cli_each(env, "--no-daemon"), cli_each(env)):
        print(f"  {cold:6.1f} s   {warm:6.1f} s   {question}")
        for label, failed in (("--no-daemon", cold_failed), ("shared server", warm_failed)):
            if failed:
                print(f"      {label}:{failed}")


if __name__ == "__main__":
    main()
