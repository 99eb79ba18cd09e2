"""The embedded search server shared between commands (``structq/executors/search/server_daemon.py``).

Every test runs real ``structq`` commands as subprocesses with a state folder of its own, and
stops the search server it started. Timing is never asserted: idle stop is observed by polling for its
outcome (the processes gone), with a generous bound that only guards against a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from manifest_support import manifest_text

from structq.executors.search.daemon_state import DAEMON_MODULE, pid_alive

MANIFEST = manifest_text("notes_embedded")

PLAN = """\
steps:
  - output_key: hits
    source: notes
    index: notes
    query: {"query": {"term": {"author": "a"}}, "sort": [{"author": "asc"}]}
"""

DOCS = [{"_id": "1", "author": "a", "body": "first"}, {"_id": "2", "author": "b", "body": "second"}]
_HANG_GUARD_S = 60.0


def documents(json_output: str) -> list[dict[str, Any]]:
    """The first step's rows of ``structq run --json``, as author/body documents."""
    step = json.loads(json_output)["steps"][0]
    return [{name: row[step["columns"].index(name)] for name in ("author", "body")}
            for row in step["rows"]]


class Workspace:
    """A manifest folder, a plan and a state folder; runs commands against them."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.manifests = root / "manifests"
        self.manifests.mkdir()
        (self.manifests / "notes.yaml").write_text(MANIFEST, encoding="utf-8")
        self.plan = root / "plan.yaml"
        self.plan.write_text(PLAN, encoding="utf-8")
        self.state_dir = root / "state"
        self.env = env
        self.write_documents(DOCS)

    def write_documents(self, docs: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs)
        (self.manifests / "notes.jsonl").write_text(text, encoding="utf-8")

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "structq.cli", *args]

    def run_plan(self, *root_options: str) -> list[dict[str, Any]]:
        result = subprocess.run(
            self.command(*root_options, "run", str(self.plan), "-m", str(self.manifests), "--json"),
            env=self.env, capture_output=True, text=True, timeout=_HANG_GUARD_S)
        assert result.returncode == 0, result.stderr
        self.last_stderr = result.stderr
        return documents(result.stdout)

    def structq(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), env=self.env, capture_output=True, text=True,
                              timeout=_HANG_GUARD_S)

    def state(self) -> dict[str, Any] | None:
        path = self.state_dir / "search-server" / "daemon.json"
        return json.loads(path.read_text()) if path.exists() else None

    def supervisors(self) -> list[int]:
        """Pids of running supervisors that serve this workspace's state folder."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if DAEMON_MODULE.encode() in command and str(self.state_dir).encode() in b" ".join(command):
                if pid_alive(int(entry.name)):
                    found.append(int(entry.name))
        return found


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    env = {**os.environ, "STRUCTQ_STATE_DIR": str(tmp_path / "state"),
           "STRUCTQ_SEARCH_DAEMON": "1", "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    space = Workspace(tmp_path, env)
    yield space
    space.structq("search-server", "stop")
    for pid in space.supervisors():  # whatever a failed test left behind
        os.kill(pid, signal.SIGKILL)


def wait_until(condition: Any, what: str) -> None:
    """Poll for an outcome; the bound only turns a hang into a failure."""
    deadline = time.monotonic() + _HANG_GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for: {what}")
        time.sleep(0.1)


def test_two_commands_share_one_search_server_and_load_once(workspace: Workspace) -> None:
    assert workspace.run_plan() == [{"author": "a", "body": "first"}]
    first = workspace.state()
    assert first is not None
    assert "started the embedded search server in the background" in workspace.last_stderr
    assert "structq search-server status | stop" in workspace.last_stderr
    assert workspace.run_plan() == [{"author": "a", "body": "first"}]
    assert "started" not in workspace.last_stderr  # said once, by the command that started it
    second = workspace.state()
    assert second is not None
    assert second["supervisor_pid"] == first["supervisor_pid"]
    assert second["indices"] == first["indices"]  # same load: not indexed again
    (record,) = second["indices"].values()
    assert record["count"] == len(DOCS)
    assert workspace.supervisors() == [first["supervisor_pid"]]


def test_search_server_start_up_is_reported_apart_from_the_query(workspace: Workspace) -> None:
    """The step's ``elapsed_ms`` is the search; reaching (here: starting) the search server is
    ``startup_ms``, in ``--json`` and in the text output."""
    text = workspace.structq("run", str(workspace.plan), "-m", str(workspace.manifests))
    assert text.returncode == 0, text.stderr
    assert "ms search server start-up)" in " ".join(text.stdout.split())  # the caption may wrap
    result = workspace.structq("run", str(workspace.plan), "-m", str(workspace.manifests), "--json")
    (step,) = json.loads(result.stdout)["steps"]
    assert step["startup_ms"] > 0  # this command still had to reach the running search server
    assert isinstance(step["elapsed_ms"], float)


def test_a_changed_documents_file_is_reloaded(workspace: Workspace) -> None:
    workspace.run_plan()
    before = workspace.state()
    workspace.write_documents([*DOCS, {"_id": "3", "author": "a", "body": "third, longer"}])
    rows = workspace.run_plan()
    after = workspace.state()
    assert [row["body"] for row in rows] == ["first", "third, longer"]
    assert after["supervisor_pid"] == before["supervisor_pid"]
    (record,) = after["indices"].values()
    assert record["count"] == 3


def test_status_and_stop(workspace: Workspace) -> None:
    workspace.run_plan()
    report = json.loads(workspace.structq("search-server", "status", "--json").stdout)
    assert report["running"] is True
    assert report["holders"] == []  # the command that used it has finished
    (index,) = report["indices"].values()
    assert index["documents_loaded"] == len(DOCS)
    assert report["memory_bytes"] is None or report["memory_bytes"] > 0
    server_pid = report["server_pid"]

    assert json.loads(workspace.structq("search-server", "stop", "--json").stdout) == {"stopped": True}
    wait_until(lambda: not pid_alive(server_pid), "the search server process to exit")
    assert workspace.supervisors() == []
    assert json.loads(workspace.structq("search-server", "status", "--json").stdout)["running"] is False
    assert workspace.structq("search-server", "stop").stdout.strip() == "not running"


def test_idle_search_server_stops_itself(workspace: Workspace) -> None:
    """Nobody stops the search server here: it goes by itself, and the next command starts another.

    With one second of idleness allowed, the search server may already be gone when this test looks
    at it right after the command (a loaded machine can take that long between two lines), so
    what it asserts is the outcome: the search server and its supervisor gone, the state file removed.
    """
    workspace.env["STRUCTQ_SEARCH_DAEMON_IDLE"] = "1s"
    started = workspace.run_plan()
    state = workspace.state()
    if state is not None:
        assert state["idle_s"] == 1.0
    wait_until(lambda: workspace.state() is None and not workspace.supervisors(), "the idle search server to stop")
    if state is not None:
        wait_until(lambda: not pid_alive(state["server_pid"]), "the idle search server process to exit")
    assert "started the embedded search server in the background" in workspace.last_stderr
    assert workspace.run_plan() == started == [{"author": "a", "body": "first"}]  # and starts again
    assert "started the embedded search server in the background" in workspace.last_stderr


def test_concurrent_first_commands_start_one_search_server(workspace: Workspace) -> None:
    command = workspace.command("run", str(workspace.plan), "-m", str(workspace.manifests), "--json")
    processes = [subprocess.Popen(command, env=workspace.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [process.communicate(timeout=_HANG_GUARD_S) for process in processes]
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err
        assert documents(out) == [{"author": "a", "body": "first"}]
    state = workspace.state()
    assert workspace.supervisors() == [state["supervisor_pid"]]
    (record,) = state["indices"].values()
    assert record["count"] == len(DOCS)


@pytest.mark.parametrize("stale", ["dead_pid", "foreign_pid", "garbage"])
def test_a_stale_state_file_is_replaced(workspace: Workspace, stale: str) -> None:
    folder = workspace.state_dir / "search-server"
    folder.mkdir(parents=True)
    finished = subprocess.run(["true"])  # its pid is free now (or reused: then it is not ours)
    del finished
    pid = {"dead_pid": 2**22 + 12345, "foreign_pid": os.getpid(), "garbage": 0}[stale]
    body = ("{not json" if stale == "garbage" else json.dumps(
        {"supervisor_pid": pid, "server_pid": pid, "url": "http://127.0.0.1:9",
         "started_at": 0, "idle_s": 900, "indices": {}}))
    (folder / "daemon.json").write_text(body)

    assert workspace.run_plan() == [{"author": "a", "body": "first"}]
    state = workspace.state()
    assert state["supervisor_pid"] not in (pid, os.getpid())
    assert pid_alive(os.getpid())  # a pid that is not ours is never signalled (we are alive)


def test_no_daemon_keeps_the_search_server_in_the_command(workspace: Workspace) -> None:
    assert workspace.run_plan("--no-daemon") == [{"author": "a", "body": "first"}]
    assert workspace.state() is None
    assert workspace.supervisors() == []
    workspace.env["STRUCTQ_SEARCH_DAEMON"] = "0"
    assert workspace.run_plan() == [{"author": "a", "body": "first"}]
    assert workspace.state() is None


def test_a_bad_idle_setting_is_a_config_error(workspace: Workspace) -> None:
    workspace.env["STRUCTQ_SEARCH_DAEMON_IDLE"] = "soon"
    result = workspace.structq("run", str(workspace.plan), "-m", str(workspace.manifests))
    assert result.returncode == 3
    assert "STRUCTQ_SEARCH_DAEMON_IDLE='soon'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_search_server_nobody_can_find_stops(workspace: Workspace) -> None:
    """Its state folder deleted (a removed temporary HOME, a cleaned state dir): the search server
    stops instead of running unseen."""
    import shutil

    workspace.run_plan()
    state = workspace.state()
    shutil.rmtree(workspace.state_dir)
    wait_until(lambda: not pid_alive(state["server_pid"]) and not workspace.supervisors(),
               "the disowned search server to stop")
