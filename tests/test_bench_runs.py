"""The benchmarks still run: a change of an internal signature once broke ``bench/linking.py``
unnoticed. Each runs here at its smallest size and its figures' shape is checked (never their
values: figures are for people, ``docs/performance.md``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench(*args: str, tmp_path: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "STRUCTQ_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_linking_on_synthetic_catalogues_rebuilds_one_part_per_changed_manifest(tmp_path: Path) -> None:
    out = _bench("bench/linking.py", "--synthetic", "100,200", "--no-process", tmp_path=tmp_path)
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0].isdigit()}
    assert set(rows) == {"100", "200"}, out
    assert rows["200"].endswith("1, 1 of 2"), out  # one part built in the process, one read from disk


def test_cli_compares_structq_run_with_the_langchain_script(tmp_path: Path) -> None:
    out = _bench("bench/cli.py", "--run-only", "--rounds", "1", tmp_path=tmp_path)
    assert "structq run ratio" in out and "its libraries alone (floor)" in out, out
