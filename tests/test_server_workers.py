"""``structq serve --workers 2`` on an embedded search source: the workers share the one
background search server (``server_daemon.py``) instead of each starting its own and indexing the
documents again; with the daemon turned off each worker has its own, as before.

Real processes throughout (the server, its workers, the search server's supervisor, osmem-server),
with a state folder of the test's own; the search server is stopped afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from server_support import ServerProcess, start_server
from test_search_server_daemon import DOCS, MANIFEST  # the same one-index notes source

from structq.executors.search.daemon_state import DAEMON_MODULE, live_leases

PLAN = {"steps": [{"output_key": "hits", "source": "notes", "index": "notes",
                   "query": {"query": {"term": {"author": "a"}}}}]}
_HANG_GUARD_S = 120.0


def _children(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, …)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _search_servers_below(pid: int) -> list[int]:
    return [p for p in _children(pid) if b"osmem" in _command(p)]


def _workers(server: ServerProcess) -> list[int]:
    """The uvicorn worker processes (python, not the search servers nor uvicorn's helpers)."""
    return [p for p in _children(server.process.pid)
            if b"multiprocessing" in _command(p) and b"resource_tracker" not in _command(p)]


def _wait(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + _HANG_GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for: {what}")
        time.sleep(0.2)


@pytest.fixture
def workspace(tmp_path: Path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "notes.yaml").write_text(MANIFEST, encoding="utf-8")
    (manifests / "notes.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    env = {"STRUCTQ_STATE_DIR": str(tmp_path / "state"), "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"}
    yield manifests, env, tmp_path
    subprocess.run([sys.executable, "-m", "structq.cli", "search-server", "stop"], env={**os.environ, **env},
                   capture_output=True, timeout=60)
    for entry in Path("/proc").iterdir():  # whatever a failed test left behind
        if entry.name.isdigit() and DAEMON_MODULE.encode() in _command(int(entry.name)) \
                and str(tmp_path / "state").encode() in _command(int(entry.name)):
            os.kill(int(entry.name), signal.SIGKILL)


def _run_plan(server: ServerProcess) -> list[list[object]]:
    response = httpx.post(server.url + "/v1/run", json={"plan": PLAN}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["steps"][0]["rows"]


def test_two_workers_share_one_background_search_server(workspace) -> None:
    manifests, env, root = workspace
    server = start_server(["-m", str(manifests), "--workers", "2"], env={**env, "STRUCTQ_SEARCH_DAEMON": "1"},
                          log=root / "serve.log")
    try:
        _wait(lambda: len(_workers(server)) == 2, "two workers")
        workers = set(_workers(server))
        folder = root / "state" / "search-server"
        # each worker warms its sources at start: both hold a lease on the one search server
        _wait(lambda: folder.exists() and set(live_leases(folder)) == workers, "both workers on the search server")
        state = json.loads((folder / "daemon.json").read_text())
        assert b"osmem" in _command(state["server_pid"])
        # the one search server is the daemon's (its supervisor may have been spawned by a worker);
        # no worker started one of its own
        assert _search_servers_below(server.process.pid) in ([], [state["server_pid"]])
        for _ in range(4):  # whichever worker answers, from the one search server
            assert len(_run_plan(server)) == 1
        record = json.loads((folder / "daemon.json").read_text())
        assert record["server_pid"] == state["server_pid"] and record["indices"] == state["indices"]  # loaded once
    finally:
        server.stop()


def test_without_the_daemon_each_worker_has_its_own_search_server(workspace) -> None:
    manifests, env, root = workspace
    server = start_server(["-m", str(manifests), "--workers", "2"], env={**env, "STRUCTQ_SEARCH_DAEMON": "0"},
                          log=root / "serve.log")
    try:
        _wait(lambda: len(_search_servers_below(server.process.pid)) == 2, "a search server in each worker")
        assert len(_run_plan(server)) == 1
        assert not (root / "state" / "search-server" / "daemon.json").exists()
    finally:
        server.stop()
