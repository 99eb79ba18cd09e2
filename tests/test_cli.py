"""The ``structq`` command line on the demo company: every command's success path and its main
errors, with the documented exit codes (0 ok, 1 failed, 2 usage, 3 configuration, 4 source
unavailable) and --json documents. Commands run in-process through typer's ``CliRunner``; a
few run as the installed console script. No model is configured: verified example questions
and saved plans need none. ``sandbox`` and ``sync`` get smoke tests here; their own files
test them thoroughly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from structq.cli import app
from structq.cli.demo import DEMO_TODAY, MODEL_QUESTION, OFFLINE_QUESTION, next_steps_text

REPO_ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = REPO_ROOT / "capabilities"
CONSOLE_SCRIPT = Path(sys.executable).with_name("structq")

#: A verified example in hr.yaml with slots: planned from the manifest (a template), no model.
VERIFIED = "华东区在职的研发部员工有哪些？"
VERIFIED_SQL = "employees.department = :slot_department"
#: Not an example: it needs a model, and none is configured.
OPEN = "华东区有多少员工？"

ASK_KEYS = {"question", "answer", "citations", "plan", "plan_source", "steps", "notes", "model_calls", "rounds",
            "checks"}
STEP_KEYS = {"output_key", "source", "index", "purpose", "query", "params", "columns", "rows", "row_count",
             "truncated", "elapsed_ms", "startup_ms", "skipped"}
COMMANDS = ["demo", "ask", "plan", "run", "chat", "check", "sandbox", "sync", "eval", "cache", "cache info", "cache clear"]


@pytest.fixture
def cli_env(demo_env: dict[str, str], tmp_path: Path) -> dict[str, str | None]:
    """The demo data, private audit log and cache, no model, and a terminal wide enough for
    long questions (``None`` removes a variable for the run)."""
    return {
        "STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"],
        "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
        "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"),
        "STRUCTQ_LLM": None,
        "OPENAI_API_KEY": None,
        "STRUCTQ_DEBUG": None,
        "STRUCTQ_MANIFESTS": None,
        "COLUMNS": "200",
    }


@pytest.fixture
def structq(cli_env: dict[str, str | None]):
    """``structq(command, *args, manifests=…, input=…)``: ``-m`` goes right after the command."""

    def invoke(command: str, *args: str, manifests: Path | None = CAPABILITIES, input: str | None = None) -> Result:
        argv = [*command.split(), *(["-m", str(manifests)] if manifests else []), *args]
        return CliRunner().invoke(app, argv, env=cli_env, input=input)

    return invoke


def error_line(result: Result) -> str:
    return result.stderr.splitlines()[0]


def json_of(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def edited_manifests(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of the demo manifests with one edit in ``file``."""
    folder = shutil.copytree(CAPABILITIES, tmp_path / "capabilities", ignore=shutil.ignore_patterns("eval.yaml"))
    path = folder / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


def without_search(folder: Path) -> Path:
    """``folder`` with the SQL sources only: the search source and the examples that read it go."""
    (folder / "reports.yaml").unlink()
    for path in folder.glob("*.yaml"):
        manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
        manifest["examples"] = [e for e in manifest.get("examples", [])
                                if all(step["source"] != "reports" for step in e["steps"])]
        path.write_text(yaml.safe_dump(manifest, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return folder


def write_plan(tmp_path: Path, query: str, source: str = "hr") -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"steps": [{"output_key": "a", "source": source, "query": query}]},
                                   allow_unicode=True), encoding="utf-8")
    return str(path)


# --- ask ---------------------------------------------------------------------------------


def test_ask_answers_a_verified_example_without_a_model(structq, cli_env: dict[str, str | None]) -> None:
    answer = json_of(structq("ask", VERIFIED, "--json"))
    assert set(answer) == ASK_KEYS
    assert answer["question"] == VERIFIED and answer["plan_source"] == "template" and answer["model_calls"] == []
    [step] = answer["steps"]
    assert set(step) == STEP_KEYS and step["source"] == "hr" and step["row_count"] == len(step["rows"]) > 0
    assert VERIFIED_SQL in step["query"]
    assert [c["step"] for c in answer["citations"]] == ["engineers"]
    assert str(step["row_count"]) in answer["answer"]
    [audited] = Path(cli_env["STRUCTQ_AUDIT_LOG"]).read_text(encoding="utf-8").splitlines()
    assert json.loads(audited)["question"] == VERIFIED


def test_ask_show_plan_prints_the_plan_and_the_query_as_it_ran(structq) -> None:
    result = structq("ask", VERIFIED, "--show-plan")
    assert result.exit_code == 0, result.output
    assert "按大区、部门、在职状态筛选员工" in result.stdout  # the step's purpose
    assert "ran: engineers" in result.stdout and "LIMIT 1001" in result.stdout
    assert "Answer" in result.stdout and "plan: template; model calls: 0" in result.stdout


def test_ask_no_answer_prints_the_results_only(structq) -> None:
    result = structq("ask", VERIFIED, "--no-answer")
    assert result.exit_code == 0, result.output
    assert "employee_id" in result.stdout and "rows," in result.stdout
    assert "Answer" not in result.stdout


def test_ask_without_a_model_says_how_to_configure_one(structq) -> None:
    result = structq("ask", OPEN)
    assert result.exit_code == 3
    assert error_line(result) == "structq: error: no language model is configured"
    hint = result.stderr.splitlines()[1]
    assert hint.startswith("  hint:") and all(way in hint for way in ("--llm", "STRUCTQ_LLM", "OPENAI_API_KEY"))
    assert "Traceback" not in result.output


def test_verbose_adds_the_traceback(structq) -> None:
    result = structq("ask", OPEN, "-v")
    assert result.exit_code == 3
    assert "Traceback (most recent call last)" in result.stderr and "ConfigError" in result.stderr
    assert "structq: error: no language model is configured" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--var", "tenant_id"], "'tenant_id' is not NAME=VALUE"),
    (["--var", "=7"], "'=7' is not NAME=VALUE"),
    (["--today", "2026-13-01"], "'2026-13-01' is not a date like 2026-11-30"),
    (["--today", "yesterday"], "'yesterday' is not a date"),
])
def test_ask_usage_errors_exit_2(structq, args: list[str], message: str) -> None:
    result = structq("ask", VERIFIED, *args)
    assert result.exit_code == 2
    assert message in result.stderr


# --- plan and run --------------------------------------------------------------------------


def test_plan_prints_the_verified_plan(structq) -> None:
    plan = json_of(structq("plan", VERIFIED, "--json"))
    assert set(plan) >= {"reasoning", "steps", "answer_with"}
    assert [s["output_key"] for s in plan["steps"]] == ["engineers"]
    human = structq("plan", VERIFIED)
    assert human.exit_code == 0 and "engineers @ hr" in human.stdout


def test_a_saved_plan_runs_with_run(structq, tmp_path: Path) -> None:
    saved = tmp_path / "plan.json"
    planned = structq("plan", VERIFIED, "--json")  # structq plan … --json > plan.json
    assert planned.exit_code == 0, planned.output
    saved.write_text(planned.stdout, encoding="utf-8")
    ran = json_of(structq("run", str(saved), "--json"))
    asked = json_of(structq("ask", VERIFIED, "--json"))
    assert set(ran) == {"steps", "notes"}
    [step] = ran["steps"]
    assert set(step) == STEP_KEYS
    assert step["rows"] == asked["steps"][0]["rows"]


def test_run_prints_result_tables(structq, tmp_path: Path) -> None:
    result = structq("run", write_plan(tmp_path, "SELECT project_name, status FROM projects ORDER BY project_name"))
    assert result.exit_code == 0, result.output
    assert "project_name" in result.stdout and "星火" in result.stdout and "20 rows" in result.stdout


def test_run_of_a_missing_file_says_which(structq, tmp_path: Path) -> None:
    result = structq("run", str(tmp_path / "nowhere.yaml"))
    assert result.exit_code == 2  # a usage error: the argument names no readable file
    assert "cannot read plan file" in result.stderr
    assert "nowhere.yaml" in result.stderr and "Traceback" not in result.output


def test_run_of_a_plan_with_an_unknown_source_is_a_plan_error(structq, tmp_path: Path) -> None:
    result = structq("run", write_plan(tmp_path, "SELECT 1", source="payroll"))
    assert result.exit_code == 1
    assert error_line(result) == "structq: error: step 'a': unknown source 'payroll'"
    assert "hint: sources: hr, reports, sales, local" in result.stderr


@pytest.mark.parametrize("query, code", [
    ("DELETE FROM employees", "write"),
    ("SELECT id_card FROM employees", "denied_column"),
    ("SELECT name FROM salaries", "unknown_table"),
    ("SELECT name FROM employees; DROP TABLE employees", "multiple_statements"),
])
def test_run_of_a_plan_the_sandbox_refuses_names_the_violation(structq, tmp_path: Path, query: str, code: str) -> None:
    result = structq("run", write_plan(tmp_path, query))
    assert result.exit_code == 1
    assert error_line(result).startswith(f"structq: error: [{code}] ")
    assert "  hint: " in result.stderr


def test_a_missing_database_is_exit_4(structq, tmp_path: Path) -> None:
    folder = edited_manifests(tmp_path, "hr.yaml", "sqlite:///${STRUCTQ_DEMO_DIR}/company.db",
                              f"sqlite:///{tmp_path}/gone/company.db")
    result = structq("ask", VERIFIED, manifests=folder)
    assert result.exit_code == 4
    assert error_line(result).startswith("structq: error: source 'hr': cannot use the database")
    assert "does not exist" in error_line(result) and "Traceback" not in result.output


# --- check ---------------------------------------------------------------------------------


def test_check_validates_the_demo_manifests(structq) -> None:
    result = structq("check")
    assert result.exit_code == 0, result.output
    assert [line.split()[:2] for line in result.stdout.splitlines()] == [["ok", "hr"], ["ok", "reports"], ["ok", "sales"]]


def test_check_json(structq) -> None:
    report = json_of(structq("check", "--json"))
    assert set(report) == {"ok", "fingerprint", "sources", "problems", "account"}
    assert report["ok"] is True and report["problems"] == [] and report["account"] == [] and report["fingerprint"]
    assert {s["source"]: s["kind"] for s in report["sources"]} == {"hr": "sql", "reports": "opensearch", "sales": "sql"}


def test_check_points_at_the_broken_line(structq, tmp_path: Path) -> None:
    folder = edited_manifests(tmp_path, "hr.yaml", "    columns:", "    colums:")
    result = structq("check", manifests=folder)
    assert result.exit_code == 3
    assert error_line(result).startswith(f"structq: error: {folder / 'hr.yaml'}:14:5: unknown key 'colums'")
    assert "did you mean 'columns'?" in result.stderr


def test_check_connect_finds_every_declared_object(structq, tmp_path: Path) -> None:
    folder = without_search(shutil.copytree(CAPABILITIES, tmp_path / "sql", ignore=shutil.ignore_patterns("eval.yaml")))
    result = structq("check", "--connect", manifests=folder)
    assert result.exit_code == 0, result.output
    assert "missing" not in result.stdout


def test_check_connect_on_the_demo(structq) -> None:
    result = structq("check", "--connect")
    assert result.exit_code == 0, result.output


def test_check_says_what_is_left_to_review_in_a_drafted_manifest(structq, cli_env: dict[str, str | None],
                                                                 tmp_path: Path) -> None:
    """A manifest fresh from `structq init` is valid but all drafts and undescribed: `ok` alone
    would read as "done"."""
    import sqlite3

    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as c:
        c.executescript("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, password_hash TEXT);"
                        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id));")
    folder = tmp_path / "caps"
    cli_env["SHOP_URL"] = f"sqlite:///{db}"  # init keeps the URL out of the file: ${SHOP_URL}
    drafted = structq("init", "--source", "shop", "--url", f"sqlite:///{db}", manifests=folder)
    assert drafted.exit_code == 0, drafted.output
    result = structq("check", "--connect", manifests=folder)
    assert result.exit_code == 0, result.output
    # 2 tables + 5 columns are drafts; password_hash is denied, so it needs no description
    assert "to review: 7 drafts (grep -n 'draft: true' " in result.stdout
    assert f"6 without a description (structq describe -m {folder} --source shop --dry-run)" in result.stdout
    [source] = json_of(structq("check", "--connect", "--json", manifests=folder))["sources"]
    assert source["drafts"] == 7 and source["undescribed"] == 6


def test_check_of_reviewed_manifests_has_nothing_to_review(structq) -> None:
    result = structq("check", "--connect")
    assert result.exit_code == 0 and "to review" not in result.stdout


def test_check_connect_lists_a_missing_column(structq, tmp_path: Path) -> None:
    folder = edited_manifests(tmp_path, "hr.yaml", "      - {name: city,",
                              "      - {name: nickname, type: text, description: 昵称}\n      - {name: city,")
    without_search(folder)
    human = structq("check", "--connect", manifests=folder)
    assert human.exit_code == 1
    assert "missing hr: column employees.nickname is declared but does not exist" in human.stdout
    report = json.loads(structq("check", "--connect", "--json", manifests=folder).stdout)
    assert report["ok"] is False
    assert [(p["source"], p["object"], p["kind"]) for p in report["problems"]] == [("hr", "employees.nickname", "column")]


# --- demo ----------------------------------------------------------------------------------


def test_demo_answers_every_verified_example_and_builds_once(structq, demo_capabilities, tmp_path: Path) -> None:
    target = tmp_path / "demo"
    first = structq("demo", "--dir", str(target), "--scale", "0.05", manifests=None)
    assert first.exit_code == 0, first.output
    assert "Building the demo company" in first.stdout
    for _, example in demo_capabilities.examples():
        assert example.question in first.stdout
    assert "Next" in first.stdout and "--llm" in first.stdout
    assert OFFLINE_QUESTION in first.stdout and MODEL_QUESTION not in first.stdout
    again = structq("demo", "--dir", str(target), "--scale", "0.05", manifests=None)
    assert again.exit_code == 0, again.output
    assert "(already built)" in again.stdout and "Building" not in again.stdout


def test_the_question_the_demo_suggests_without_a_model_is_answered_without_one(structq) -> None:
    result = structq("ask", OFFLINE_QUESTION, "--today", DEMO_TODAY.isoformat(), "--json", manifests=None)
    document = json_of(result)
    assert document["plan_source"] == "template" and document["steps"][0]["row_count"] == 1


def test_the_demo_suggests_copying_the_installed_manifests_not_editing_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./capabilities here: the default reads the bundled manifests
    installed = tmp_path / "site-packages" / "structq" / "_bundled" / "capabilities"
    installed.mkdir(parents=True)
    monkeypatch.setattr("structq.cli.common.bundled_manifests", lambda: installed)
    text = next_steps_text(installed, None, with_model=False)
    ask_line = next(line for line in text.splitlines() if "structq ask" in line)
    assert " -m " not in ask_line and "STRUCTQ_DEMO_DIR" not in ask_line
    assert f"cp -r {installed} ./capabilities" in text
    elsewhere = next_steps_text(installed, tmp_path / "demo", with_model=True)
    assert f"STRUCTQ_DEMO_DIR={tmp_path / 'demo'} structq ask \"{MODEL_QUESTION}\"" in elsewhere
    assert OFFLINE_QUESTION not in elsewhere and "--llm" not in elsewhere


def test_the_demo_names_the_manifests_folder_of_a_checkout_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default reads the checkout's manifests: no -m needed
    text = next_steps_text(CAPABILITIES, None, with_model=False)
    assert " -m " not in text and f"The demo's manifests are in {CAPABILITIES}." in text
    assert "cp -r" not in text
    (tmp_path / "capabilities").mkdir()  # a folder of the user's own: the command must name the demo's
    assert f" -m {CAPABILITIES} " in next_steps_text(CAPABILITIES, None, with_model=False)


# --- chat ----------------------------------------------------------------------------------


def test_chat_commands(structq) -> None:
    result = structq("chat", input="/help\n/plan\n/reset\n/nonsense\n/quit\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("Commands: /plan") == 3  # the greeting, /help, and after /nonsense
    assert "no question asked yet" in result.stdout and "conversation forgotten" in result.stdout
    assert "unknown command /nonsense" in result.stdout


def test_chat_answers_and_shows_the_sql(structq) -> None:
    result = structq("chat", input=f"{VERIFIED}\n/plan\n/sql\n")  # ends at end of input
    assert result.exit_code == 0, result.output
    assert "Answer" in result.stdout and "engineers @ hr" in result.stdout
    assert "ran: engineers" in result.stdout and VERIFIED_SQL in result.stdout


def test_chat_survives_an_error(structq) -> None:
    result = structq("chat", input=f"{OPEN}\n{VERIFIED}\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "error: no language model is configured" in result.stdout and "hint:" in result.stdout
    assert "Answer" in result.stdout


def test_chat_with_broken_manifests_exits_3(structq, tmp_path: Path) -> None:
    folder = edited_manifests(tmp_path, "hr.yaml", "    columns:", "    colums:")
    result = structq("chat", manifests=folder, input="/quit\n")
    assert result.exit_code == 3
    assert "unknown key 'colums'" in error_line(result) and "Traceback" not in result.output


# --- cache, sandbox, sync ----------------------------------------------------------------------


def test_cache_info_and_clear(structq, cli_env: dict[str, str | None]) -> None:
    cache = Path(cli_env["STRUCTQ_CACHE_DIR"])
    paths = {"path": str(cache / "plans.sqlite"), "manifests_path": str(cache / "manifests"),
             "linking_path": str(cache / "linking")}
    assert json_of(structq("cache info", "--json", manifests=None)) == {"plans": 0, "manifests": 0, "linking": 0, **paths}
    assert json_of(structq("cache clear", "--json", manifests=None)) == {
        "removed": 0, "manifests_removed": 0, "linking_removed": 0, **paths}
    human = structq("cache info", manifests=None)
    assert human.exit_code == 0 and "0 cached plans in" in human.stdout and "0 kept manifests in" in human.stdout
    assert "0 kept linking indexes in" in human.stdout


def test_cache_clear_empties_the_kept_linking_indexes(structq, cli_env: dict[str, str | None],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan with --explain-linking keeps the catalogue's index; clear removes it."""
    from structq.linking import index
    from structq.linking.memo import Memo

    monkeypatch.setattr(index, "_CACHE", Memo())  # as in a new process: no index built in memory yet
    assert structq("plan", "星火项目有哪些成员？", "--explain-linking").exit_code == 0
    assert json_of(structq("cache info", "--json", manifests=None))["linking"] == 1
    assert json_of(structq("cache clear", "--json", manifests=None))["linking_removed"] == 1
    assert json_of(structq("cache info", "--json", manifests=None))["linking"] == 0


def test_cache_clear_empties_the_kept_manifests_too(structq, cli_env: dict[str, str | None], tmp_path: Path) -> None:
    from structq.capabilities import manifest_cache

    large = tmp_path / "large"
    large.mkdir()
    (large / "shop.yaml").write_text(
        "#" * manifest_cache.MIN_CHARS + "\n"  # a comment: large enough to be kept
        "source: shop\nkind: sql\nurl: sqlite:///shop.db\n"
        "tables:\n  - name: orders\n    columns:\n      - {name: id, type: integer}\n", encoding="utf-8")
    assert structq("check", manifests=large).exit_code == 0
    assert json_of(structq("cache info", "--json", manifests=None))["manifests"] == 1
    assert json_of(structq("cache clear", "--json", manifests=None))["manifests_removed"] == 1
    assert json_of(structq("cache info", "--json", manifests=None))["manifests"] == 0


def test_sandbox_smoke(structq) -> None:
    accepted = json_of(structq("sandbox", "--source", "hr", "SELECT name FROM employees", "--json"))
    assert accepted["ok"] is True and accepted["tables"] == ["employees"]
    refused = structq("sandbox", "--source", "hr", "DROP TABLE employees", "--json")
    assert refused.exit_code == 1 and json.loads(refused.stdout)["code"] == "write"


def test_sync_check_smoke(structq) -> None:
    result = structq("sync", "--check", "--source", "hr", "--json")
    report = json.loads(result.stdout)
    [source] = report["sources"]
    assert source["source"] == "hr"
    assert result.exit_code == (1 if source["drift"] else 0)


# --- the application ------------------------------------------------------------------------


def test_version(structq) -> None:
    from structq import __version__

    result = structq("--version", manifests=None)
    assert result.exit_code == 0 and result.stdout == f"structq {__version__}\n"


def test_no_arguments_shows_help(structq) -> None:
    result = structq("", manifests=None)
    assert result.exit_code == 2  # click: help for a bare group is a usage exit
    assert "Usage: structq" in result.stdout and all(c in result.stdout for c in ("ask", "demo", "eval"))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_has_an_example(structq, command: str) -> None:
    result = structq(command, "--help", manifests=None)
    assert result.exit_code == 0, result.output
    assert "Example" in result.stdout


def test_the_root_help_has_an_example(structq) -> None:
    assert "Example" in structq("--help", manifests=None).stdout


# --- the installed console script -------------------------------------------------------------


def console_script(*args: str, env: dict[str, str | None]) -> subprocess.CompletedProcess:
    merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run([str(CONSOLE_SCRIPT), *args], env=merged, capture_output=True, text=True, timeout=60)


def test_console_script_help(cli_env) -> None:
    result = console_script("--help", env=cli_env)
    assert result.returncode == 0 and "Usage: structq" in result.stdout


def test_console_script_answers_a_verified_example(cli_env) -> None:
    result = console_script("ask", VERIFIED, "-m", str(CAPABILITIES), "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["plan_source"] == "template"


def test_console_script_errors_are_one_line_without_a_traceback(cli_env) -> None:
    result = console_script("ask", OPEN, "-m", str(CAPABILITIES), env=cli_env)
    assert result.returncode == 3
    assert result.stderr.startswith("structq: error: no language model is configured\n  hint: ")
    assert "Traceback" not in result.stderr and result.stdout == ""


# --- the SQL shown is the SQL that ran ------------------------------------------------------------

COLON_QUERY = "SELECT project_name, '10:30' AS at FROM projects WHERE project_name <> 'a:b' ORDER BY project_name"


def test_run_and_sandbox_show_the_sql_the_database_received(structq, tmp_path: Path) -> None:
    """Colons inside literals are escaped for SQLAlchemy (``\\:``) but arrive unescaped; what
    ``run --json``, ``sandbox`` and ``sandbox --json`` show is what arrived."""
    ran = json_of(structq("run", write_plan(tmp_path, COLON_QUERY), "--json"))
    [step] = ran["steps"]
    assert "'10:30'" in step["query"] and "'a:b'" in step["query"] and "\\:" not in step["query"]
    assert step["rows"][0][1] == "10:30"
    human = structq("sandbox", "--source", "hr", COLON_QUERY)
    assert "'10:30'" in human.stdout and "\\:" not in human.stdout
    checked = json_of(structq("sandbox", "--source", "hr", COLON_QUERY, "--json"))
    assert "'10:30'" in checked["query"] and "\\:" not in checked["query"]


def test_the_audit_log_records_the_sql_the_database_received(demo_capabilities, tmp_path: Path) -> None:
    from structq.agent import Engine, Plan
    from structq.agent.audit import AuditLog

    plan = Plan.parse({"steps": [{"output_key": "a", "source": "hr", "query": COLON_QUERY}]})
    with Engine(demo_capabilities) as engine:
        run = engine.run(plan)
    entry = AuditLog(tmp_path / "audit.jsonl").record(
        question="q", vars={}, plan=plan.to_dict(), plan_source="given", run=run, model_calls=[], answer=None,
        error=None, attempts=1)
    [step] = entry["steps"]
    assert step["query_as"] == "ran" and "'10:30'" in step["query"] and "\\:" not in step["query"]
