"""The embedded search server's memory bound (``STRUCTQ_SEARCH_MEMORY`` → Go's ``GOMEMLIMIT``).

osmem-server is a Go program whose only memory bound is ``GOMEMLIMIT`` in its environment. The
end-to-end tests run real ``structq --no-daemon run`` commands whose search server is the real
binary behind a two-line shell wrapper (``OSMEM_SERVER_BIN``, which osmem's launcher honours)
that writes down the ``GOMEMLIMIT`` it was started with: the outcome observed is the
environment the engine really ran under, and the rows it really returned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from manifest_support import manifest_text

from structq.config import DEFAULT_SEARCH_MEMORY, search_memory
from structq.errors import EXIT_CONFIG, ConfigError

pytest.importorskip("osmem_server")

PLAN = """\
steps:
  - output_key: hits
    source: notes
    index: notes
    query: {"query": {"term": {"author": "a"}}}
"""
_HANG_GUARD_S = 120.0


@pytest.mark.parametrize(("env", "expected"), [
    ({}, DEFAULT_SEARCH_MEMORY),
    ({"STRUCTQ_SEARCH_MEMORY": "2GiB"}, "2GiB"),
    ({"STRUCTQ_SEARCH_MEMORY": " 300MiB "}, "300MiB"),
    ({"STRUCTQ_SEARCH_MEMORY": "1073741824"}, "1073741824"),
    ({"STRUCTQ_SEARCH_MEMORY": "off"}, None),
    ({"STRUCTQ_SEARCH_MEMORY": "0"}, None),
    ({"GOMEMLIMIT": "1GiB"}, None),  # the user's own bound is kept as it is
    ({"GOMEMLIMIT": "1GiB", "STRUCTQ_SEARCH_MEMORY": "256MiB"}, "256MiB"),
])
def test_the_bound_from_the_environment(env: dict[str, str], expected: str | None) -> None:
    assert search_memory(env) == expected


@pytest.mark.parametrize("value", ["512MB", "lots", "-1MiB", "1.5GiB"])
def test_a_bound_go_would_not_read_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        search_memory({"STRUCTQ_SEARCH_MEMORY": value})
    assert "STRUCTQ_SEARCH_MEMORY" in str(info.value) and "512MiB" in (info.value.hint or "")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """Manifest, documents, plan, and a wrapper around the real binary that records its bound."""
    from osmem_server import resolve_binary

    (tmp_path / "notes.yaml").write_text(manifest_text("notes_embedded"), encoding="utf-8")
    docs = [{"_id": "1", "author": "a", "body": "first"}, {"_id": "2", "author": "b", "body": "second"}]
    (tmp_path / "notes.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (tmp_path / "plan.yaml").write_text(PLAN, encoding="utf-8")
    wrapper = tmp_path / "osmem-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "${{GOMEMLIMIT-unset}}" > "{tmp_path / "bound"}"\n'
                       f'exec "{resolve_binary()}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return tmp_path


def run_plan(workspace: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("GOMEMLIMIT", "STRUCTQ_SEARCH_MEMORY")}
    full = {**base, "OSMEM_SERVER_BIN": str(workspace / "osmem-wrapper"), "STRUCTQ_AUDIT": "0",
            "STRUCTQ_CACHE": "0", "STRUCTQ_STATE_DIR": str(workspace / "state"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH")])), **env}
    return subprocess.run([sys.executable, "-m", "structq.cli", "--no-daemon", "run", str(workspace / "plan.yaml"),
                           "-m", str(workspace / "notes.yaml"), "--json"],
                          env=full, capture_output=True, text=True, timeout=_HANG_GUARD_S)


@pytest.mark.parametrize(("env", "bound"), [
    ({}, DEFAULT_SEARCH_MEMORY),
    ({"STRUCTQ_SEARCH_MEMORY": "300MiB"}, "300MiB"),
    ({"STRUCTQ_SEARCH_MEMORY": "off"}, "unset"),
    ({"GOMEMLIMIT": "1GiB"}, "1GiB"),
])
def test_the_search_server_runs_under_the_bound(workspace: Path, env: dict[str, str], bound: str) -> None:
    result = run_plan(workspace, **env)
    assert result.returncode == 0, result.stderr
    step = json.loads(result.stdout)["steps"][0]
    assert [row[step["columns"].index("body")] for row in step["rows"]] == ["first"]
    assert (workspace / "bound").read_text().strip() == bound


def test_a_wrong_bound_stops_the_command_with_its_name(workspace: Path) -> None:
    result = run_plan(workspace, STRUCTQ_SEARCH_MEMORY="lots")
    assert result.returncode == EXIT_CONFIG, result.stderr
    assert "STRUCTQ_SEARCH_MEMORY" in result.stderr
    assert not (workspace / "bound").exists()  # refused before any server started
