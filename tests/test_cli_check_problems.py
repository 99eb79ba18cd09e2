"""``structq check`` finds what would fail later, all of it in one run: problems in every file,
verified examples through the sandbox, row filters on columns that do not exist, and
``functions:`` that would widen the sandbox with something dangerous. ``--json`` prints the
problems document on failure too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from structq.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = REPO_ROOT / "capabilities"


@pytest.fixture
def env(demo_env: dict[str, str], tmp_path: Path) -> dict[str, str | None]:
    return {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
            "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_LLM": None, "STRUCTQ_MANIFESTS": None}


def manifests_with(tmp_path: Path, *edits: tuple[str, str, str]) -> Path:
    """A copy of the demo manifests with text replaced: ``(file, old, new)``."""
    folder = shutil.copytree(CAPABILITIES, tmp_path / "capabilities", ignore=shutil.ignore_patterns("eval.yaml"))
    for file, old, new in edits:
        text = (folder / file).read_text(encoding="utf-8")
        assert old in text, (file, old)
        (folder / file).write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


def check(folder: Path, env: dict[str, str | None], *args: str):
    return CliRunner().invoke(app, ["check", "-m", str(folder), *args], env=env)


ROW_FILTER = ("hr.yaml", "policies:\n  row_filters: []",
              'policies:\n  row_filters:\n    - {table: employees, where: "regionn = :region"}')
DENIED_IN_EXAMPLE = ("hr.yaml", "SELECT employee_id, name, title, city, hire_date",
                     "SELECT employee_id, id_card, name, title, city, hire_date")
UNKNOWN_IN_EXAMPLE = ("sales.yaml", "SELECT", "SELECT nonexistent_column,")
DANGEROUS = ("sales.yaml", "functions: [strftime, date, julianday]",
             "functions: [strftime, date, julianday, pg_read_file]")


@pytest.mark.parametrize("edit, fragment", [
    (DENIED_IN_EXAMPLE, "the sandbox refuses it: [denied_column] column 'id_card'"),
    (UNKNOWN_IN_EXAMPLE, "the sandbox refuses it: [unknown_column]"),
    (ROW_FILTER, "row filter on 'employees' names unknown column 'regionn' (did you mean 'region'?)"),
], ids=["denied-column-in-example", "unknown-column-in-example", "row-filter-column"])
def test_check_finds_what_ask_would_fail_on(edit, fragment, tmp_path, env) -> None:
    folder = manifests_with(tmp_path, edit)
    result = check(folder, env)
    assert result.exit_code == 3, result.output
    assert fragment in result.stderr and f"structq: error: {folder / edit[0]}:" in result.stderr
    assert "Traceback" not in result.output


def test_check_reports_every_problem_in_every_file_in_one_run(tmp_path, env) -> None:
    folder = manifests_with(tmp_path, DENIED_IN_EXAMPLE, DANGEROUS, ("reports.yaml", "    fields:", "    feilds:"))
    result = check(folder, env)
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert any("hr.yaml" in line and "[denied_column]" in line for line in lines)
    assert any("sales.yaml" in line and "'pg_read_file' may not be allowed" in line for line in lines)
    assert any("reports.yaml" in line and "unknown key 'feilds'" in line for line in lines)
    assert all(line.startswith("structq: error: ") for line in lines)


def test_check_json_prints_the_problems_document_on_failure(tmp_path, env) -> None:
    folder = manifests_with(tmp_path, DENIED_IN_EXAMPLE, ROW_FILTER)
    result = check(folder, env, "--json")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["fingerprint"] is None
    [problem] = report["problems"]  # hr.yaml's own problem; its examples wait for it to be fixed
    assert problem["kind"] == "manifest" and problem["source"] == "hr" and problem["line"] == 9
    assert "regionn" in problem["message"]
    fixed = manifests_with(tmp_path / "again", DENIED_IN_EXAMPLE)
    [problem] = json.loads(check(fixed, env, "--json").stdout)["problems"]
    assert (problem["kind"], problem["code"], problem["source"]) == ("sandbox", "denied_column", "hr")


@pytest.mark.parametrize("name", [
    "load_extension", "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "lo_import", "lo_export", "dblink",
    "dblink_exec", "sys_exec", "sys_eval", "load_file", "utl_http_request", "xp_cmdshell", "query_to_xml",
    "nextval", "set_config", "pg_sleep", "sleep", "benchmark", "pg_advisory_lock", "readfile", "writefile",
    "public.pg_read_file", "PG_READ_FILE",
])
def test_dangerous_functions_are_refused_with_the_reason(name, tmp_path, env) -> None:
    folder = manifests_with(tmp_path, ("sales.yaml", "functions: [strftime, date, julianday]",
                                       f"functions: [strftime, date, julianday, {name}]"))
    result = check(folder, env)
    assert result.exit_code == 3
    assert f"function {name!r} may not be allowed: it " in result.stderr
    assert "cannot read files, write, reach the network" in result.stderr


@pytest.mark.parametrize("name", ["julianday", "strftime", "my_format_code", "fiscal_quarter"])
def test_harmless_functions_are_accepted(name, tmp_path, env) -> None:
    folder = manifests_with(tmp_path, ("sales.yaml", "functions: [strftime, date, julianday]",
                                       f"functions: [strftime, date, julianday, {name}]"))
    assert check(folder, env).exit_code == 0
