"""``structq sync`` for cron: a relative SQLite path resolves against the manifest's folder
(cron runs from elsewhere), ``--quiet`` prints nothing when in sync, and the README's recipe
(``scripts/sync_cron.sh``) runs under cron's bare environment and mails drift and errors as
what they are. ``mail`` is a stub that records its subject and body: no mail server can run
in a test."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from structq.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = Path(sys.executable).with_name("structq")
MANIFEST = """\
source: hr
kind: sql
url: sqlite:///hr.db
tables:
  - name: employees
    description: 员工
    columns:
      - {name: id, type: integer, description: 工号}
      - {name: status, type: text, description: 状态}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    caps = tmp_path / "caps"
    caps.mkdir()
    with sqlite3.connect(caps / "hr.db") as db:
        db.execute("CREATE TABLE employees (id INTEGER PRIMARY KEY, status TEXT)")
    (caps / "hr.yaml").write_text(MANIFEST, encoding="utf-8")
    return caps


def test_a_relative_sqlite_path_resolves_against_the_manifest_folder(folder: Path) -> None:
    assert Path.cwd() != folder
    result = CliRunner().invoke(app, ["sync", "--check", "-m", str(folder)])
    assert result.exit_code == 0, result.output
    assert "in sync hr" in result.stdout
    assert not (Path.cwd() / "hr.db").exists()


def test_a_relative_manifest_folder_is_found_from_where_the_command_runs(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder.parent)
    result = CliRunner().invoke(app, ["sync", "--check", "-m", folder.name])
    assert result.exit_code == 0, result.output
    assert "in sync hr" in result.stdout


def test_quiet_prints_nothing_in_sync_and_the_drift_otherwise(folder: Path) -> None:
    quiet = CliRunner().invoke(app, ["sync", "--check", "--quiet", "-m", str(folder)])
    assert quiet.exit_code == 0 and quiet.stdout == ""
    with sqlite3.connect(folder / "hr.db") as db:
        db.execute("ALTER TABLE employees ADD COLUMN region TEXT")
    drift = CliRunner().invoke(app, ["sync", "--check", "--quiet", "-m", str(folder)])
    assert drift.exit_code == 1 and "drift hr" in drift.stdout and "employees.region" in drift.stdout


@pytest.fixture
def cron(tmp_path: Path, folder: Path):
    """``run()``: the recipe under a cron-like environment; returns (exit code, mails sent)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    outbox = tmp_path / "outbox"
    (bin_dir / "mail").write_text(f'#!/bin/sh\n{{ echo "subject: $2"; cat; }} >> {outbox}\n')
    (bin_dir / "mail").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": "/bin/sh",
           "STRUCTQ": str(CONSOLE_SCRIPT), "MANIFESTS": str(folder), "ENV_FILE": str(tmp_path / "structq.env"),
           "MAIL_TO": "ops@example.com", "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO_ROOT))}

    def run() -> tuple[int, str]:
        outbox.unlink(missing_ok=True)
        done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "sync_cron.sh")], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        return done.returncode, outbox.read_text() if outbox.exists() else ""

    return run


def test_the_cron_recipe_mails_drift_and_errors_as_what_they_are(cron, folder: Path, tmp_path: Path) -> None:
    assert cron() == (0, "")  # in sync: no mail
    with sqlite3.connect(folder / "hr.db") as db:
        db.execute("ALTER TABLE employees ADD COLUMN region TEXT")
    code, mail = cron()
    assert code == 1 and mail.startswith("subject: structq: schema drift") and "employees.region" in mail
    (folder / "hr.yaml").write_text(MANIFEST.replace("sqlite:///hr.db", "${HR_DB_URL}"), encoding="utf-8")
    code, mail = cron()
    assert code == 3 and mail.startswith("subject: structq sync: ERROR in the manifests or configuration")
    assert "environment variable HR_DB_URL is not set" in mail  # the reason, from stderr
    (tmp_path / "structq.env").write_text(f"HR_DB_URL=sqlite:///{folder / 'hr.db'}\n")
    code, mail = cron()  # the env file gives the URL: back to the drift report
    assert code == 1 and mail.startswith("subject: structq: schema drift")


def test_the_diff_is_a_patch_that_applies(folder: Path, tmp_path: Path) -> None:
    import shutil

    with sqlite3.connect(folder / "hr.db") as db:
        db.execute("ALTER TABLE employees ADD COLUMN region TEXT")
    (folder / "hr.yaml").write_text(MANIFEST.rstrip("\n"), encoding="utf-8")  # no final newline, even
    copy = shutil.copytree(folder, tmp_path / "copy")
    report = CliRunner().invoke(app, ["sync", "--check", "--diff", "-m", str(folder)])
    assert report.exit_code == 1, report.output
    applied = subprocess.run(["patch", "-p1"], input=report.stdout, cwd=copy, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    written = CliRunner().invoke(app, ["sync", "--write", "-m", str(folder)])
    assert written.exit_code == 0, written.output
    assert (copy / "hr.yaml").read_bytes() == (folder / "hr.yaml").read_bytes()
