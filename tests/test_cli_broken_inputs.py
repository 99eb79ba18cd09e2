"""A new user's mistakes, through the command line: every command meets broken input (bad YAML,
a wrong type for every manifest key, missing files, folders it cannot write, an empty
question) and answers with one clear line and a documented exit code (1 failed, 2 usage,
3 configuration), never a traceback. Folders "nobody can write" are paths under a regular
file, which fail for every user, root included."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from structq.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = REPO_ROOT / "capabilities"
CONSOLE_SCRIPT = Path(sys.executable).with_name("structq")
VERIFIED = "华东区在职的研发部员工有哪些？"

#: A SQL manifest and a search manifest that between them use every manifest key.
SQL_MANIFEST: dict[str, Any] = {
    "source": "hr", "kind": "sql", "url": "sqlite:///company.db", "dialect": "sqlite", "schema": "main",
    "description": "people",
    "limits": {"max_rows": 10, "timeout_s": 2, "max_intermediate_rows": 100},
    "policies": {"row_filters": [{"table": "employees", "where": "tenant_id = :tenant_id"}]},
    "tables": [{
        "name": "employees", "description": "staff", "synonyms": ["staff"], "draft": False,
        "columns": [
            {"name": "employee_id", "type": "text", "description": "id", "primary_key": True, "nullable": False},
            {"name": "tenant_id", "type": "integer"},
            {"name": "gender", "type": "text", "values": {"M": "male", "F": "female"}, "synonyms": ["sex"]},
            {"name": "boss_id", "type": "text", "references": "employees.employee_id", "draft": False},
            {"name": "id_card", "type": "text", "access": "deny"},
        ],
    }],
    "functions": ["julianday"],
    "examples": [{"question": "all staff", "reasoning": "one table", "answer_with": "a list",
                  "today": "2026-11-30", "period": "year", "shift": True,
                  "steps": [{"output_key": "staff", "source": "hr", "purpose": "everyone",
                             "query": "SELECT employee_id FROM employees"}]}],
    "sync": {"schema": "main", "include": ["*"], "exclude": ["tmp_*"]},
}
SEARCH_MANIFEST: dict[str, Any] = {
    "source": "docs", "kind": "opensearch", "url": "http://127.0.0.1:9",
    "policies": {"row_filters": [{"index": "notes", "term": {"tenant_id": ":tenant_id"}}]},
    "indices": [{
        "name": "notes", "description": "notes", "synonyms": ["memo"], "documents": "notes.jsonl", "draft": False,
        "fields": [
            {"name": "tenant_id", "type": "long"},
            {"name": "kind", "type": "keyword", "values": {"a": "first"}, "access": "allow", "synonyms": ["type"],
             "draft": False},
            {"name": "meta", "type": "object", "fields": [{"name": "tag", "type": "keyword"}]},
        ],
    }],
}

#: Values that hold a YAML type different from the one each key expects.
WRONG_FOR = {
    dict: [3, [1, 2]],
    list: [3, "text"],
    str: [[1, 2], {"a": 1}],
    bool: [[1]],
    int: ["many", [1]],
    float: ["slow", {"a": 1}],
}
#: Replacements that are valid after all: a step's query may be a search body (a mapping).
#: A search row filter's term may name a list of literals.
STILL_VALID = {("examples", 0, "steps", 0, "query", "{'a': 1}"), ("policies", "row_filters", 0, "term", "tenant_id", "[1, 2]")}


def _paths(node: Any, base: tuple = ()) -> list[tuple]:
    out = [base] if base else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*base, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*base, i))
    return out


def _mutations() -> list[Any]:
    cases = []
    for name, manifest in (("sql", SQL_MANIFEST), ("search", SEARCH_MANIFEST)):
        for path in _paths(manifest):
            value: Any = manifest
            for part in path:
                value = value[part]
            for wrong in WRONG_FOR[type(value)]:
                if (*path, str(wrong)) not in STILL_VALID:
                    cases.append(pytest.param(manifest, path, wrong, id=f"{name}:{'.'.join(map(str, path))}={wrong!r}"))
    return cases


def invoke(argv: list[str], env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(app, argv, env=env)


def assert_one_clean_line(result: Result | subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    """The documented exit code, the fragments in the output, and nothing like a traceback."""
    exit_code = result.exit_code if isinstance(result, Result) else result.returncode
    output = result.stdout + result.stderr
    assert exit_code == code, output
    assert "Traceback" not in output and "Error:" not in output.replace("│ Error", ""), output
    if isinstance(result, Result):
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for fragment in fragments:
        assert fragment in output, output


@pytest.fixture
def env(demo_env: dict[str, str], tmp_path: Path) -> dict[str, str | None]:
    return {
        "STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"],
        "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
        "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"),
        "STRUCTQ_LLM": None, "OPENAI_API_KEY": None, "STRUCTQ_DEBUG": None, "STRUCTQ_MANIFESTS": None,
        "COLUMNS": "200",
    }


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A regular file: no folder can be created under it, whoever runs the test."""
    path = tmp_path / "plain-file"
    path.write_text("not a folder\n")
    return path


# --- every manifest key with a value of the wrong type -------------------------------------


@pytest.mark.parametrize("manifest, path, wrong", _mutations())
def test_a_wrong_type_for_any_manifest_key_is_one_line_at_its_position(manifest, path, wrong, tmp_path, env) -> None:
    broken = copy.deepcopy(manifest)
    target = broken
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = wrong
    file = tmp_path / "m.yaml"
    file.write_text(yaml.safe_dump(broken, allow_unicode=True, sort_keys=False), encoding="utf-8")
    result = invoke(["check", "-m", str(file)], env)
    assert_one_clean_line(result, 3, f"structq: error: {file}:")
    assert len(result.stderr.strip().splitlines()) <= 2  # the line and, at most, its hint


@pytest.mark.parametrize("written, fixed", [
    ("[男, 女]", "write it as values: {男: <meaning>, 女: <meaning>}"),
    ("3", "write it as values: {3: <meaning>}"),
])
def test_values_not_a_mapping_explains_the_mapping_and_shows_the_fixed_form(written, fixed, tmp_path, env) -> None:
    text = yaml.safe_dump(SQL_MANIFEST, allow_unicode=True, sort_keys=False)
    text = text.replace("values:\n      M: male\n      F: female\n", f"values: {written}\n")
    assert f"values: {written}" in text
    file = tmp_path / "hr.yaml"
    file.write_text(text, encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "values:" in row)
    result = invoke(["check", "-m", str(file)], env)
    assert_one_clean_line(result, 3, f"{file}:{line}:", "maps each stored literal to its meaning", fixed)


# --- every command × a table of broken inputs -------------------------------------------------


def _bad_yaml(folder: Path) -> Path:
    folder.mkdir()
    (folder / "hr.yaml").write_text("source: hr\nkind: sql\nurl: [sqlite\n", encoding="utf-8")
    return folder


def _eval_file(folder: Path, text: str) -> Path:
    path = folder / "questions.yaml"
    path.write_text(text, encoding="utf-8")
    return path


BROKEN_MANIFESTS = ["ask", "plan", "run", "chat", "check", "sandbox", "eval", "sync"]


@pytest.mark.parametrize("command", BROKEN_MANIFESTS)
@pytest.mark.parametrize("broken", ["bad-yaml", "missing"])
def test_every_command_reports_broken_manifests_as_exit_3(command, broken, tmp_path, env, a_file) -> None:
    folder = _bad_yaml(tmp_path / "m") if broken == "bad-yaml" else tmp_path / "nowhere"
    plan = tmp_path / "plan.yaml"
    plan.write_text("steps: [{output_key: a, source: hr, query: SELECT 1}]\n", encoding="utf-8")
    args = {
        "ask": ["ask", VERIFIED], "plan": ["plan", VERIFIED], "run": ["run", str(plan)], "chat": ["chat"],
        "check": ["check"], "sandbox": ["sandbox", "--source", "hr", "SELECT 1"], "sync": ["sync", "--check"],
        "eval": ["eval", str(_eval_file(tmp_path, "questions: [{question: q, expect_rows: [[1]]}]\n"))],
    }[command]
    result = CliRunner().invoke(app, [*args, "-m", str(folder)], env=env, input="/quit\n")
    expected = "YAML syntax error" if broken == "bad-yaml" else "no such file or folder"
    assert_one_clean_line(result, 3, f"structq: error: {folder}", expected)


@pytest.mark.parametrize("argv, code, fragment", [
    (["ask", ""], 2, "the question is empty"),
    (["ask", "   "], 2, "the question is empty"),
    (["plan", ""], 2, "the question is empty"),
    (["ask", VERIFIED, "--today", "soon"], 2, "'soon' is not a date"),
    (["ask", VERIFIED, "--var", "novalue"], 2, "is not NAME=VALUE"),
    (["run", "{tmp}/none.yaml"], 2, "cannot read plan file"),
    (["run", "{tmp}/bad.yaml"], 1, "{tmp}/bad.yaml:3:1: YAML syntax error"),
    (["run", "{tmp}/typo.yaml"], 1, "did you mean 'query'?"),
    (["eval", "{tmp}/none.yaml"], 3, "cannot read the question set"),
    (["eval", "{tmp}/bad.yaml"], 3, "cannot read the question set"),
    (["sandbox", "--source", "nope", "SELECT 1"], 2, "nope"),
    (["sandbox", "--source", "hr", "SELECT FROM WHERE"], 1, "parse"),
    (["demo", "--dir", "{file}"], 2, "is a file, not a folder"),
    (["demo", "--dir", "{file}/demo"], 2, "cannot create the folder"),
    (["sync", "--check", "-m", "{tmp}/nowhere"], 3, "no such file or folder"),
])
def test_broken_arguments_are_one_line_with_the_documented_exit_code(argv, code, fragment, tmp_path, env, a_file) -> None:
    (tmp_path / "bad.yaml").write_text("steps:\n  - output_key: [a\n", encoding="utf-8")
    (tmp_path / "typo.yaml").write_text("steps:\n  - output_key: a\n    source: hr\n    querry: SELECT 1\n",
                                        encoding="utf-8")
    fill = {"tmp": str(tmp_path), "file": str(a_file)}
    argv = [a.format(**fill) for a in argv]
    if argv[0] in ("ask", "plan", "run", "sandbox", "eval") and "-m" not in argv:
        argv += ["-m", str(CAPABILITIES)]
    assert_one_clean_line(invoke(argv, env), code, fragment.format(**fill))


def test_a_cache_command_on_a_cache_it_cannot_create_is_exit_3(env, a_file) -> None:
    for command in (["cache", "info"], ["cache", "clear"]):
        result = invoke(command, {**env, "STRUCTQ_CACHE_DIR": str(a_file / "cache")})
        assert_one_clean_line(result, 3, "cannot use the plan cache", "STRUCTQ_CACHE_DIR")


# --- answering does not depend on the audit log or the cache being writable ---------------------


def console_script(*args: str, env: dict[str, str | None]) -> subprocess.CompletedProcess:
    merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run([str(CONSOLE_SCRIPT), *args], env=merged, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("setting, warnings", [
    ({"STRUCTQ_AUDIT_LOG": "{file}/audit.jsonl"}, ["cannot write the audit log"]),
    ({"STRUCTQ_CACHE_DIR": "{file}/cache"}, ["cannot use the plan cache"]),
    ({"HOME": "{file}", "STRUCTQ_AUDIT_LOG": None, "STRUCTQ_CACHE_DIR": None, "STRUCTQ_STATE_DIR": None,
      "XDG_CACHE_HOME": None, "XDG_STATE_HOME": None},
     ["cannot write the audit log", "cannot use the plan cache"]),
], ids=["audit-log", "cache-dir", "read-only-home"])
def test_ask_answers_when_audit_log_or_cache_cannot_be_written(setting, warnings, env, a_file) -> None:
    unwritable = {k: v.format(file=a_file) if v else None for k, v in setting.items()}
    result = console_script("ask", VERIFIED, "-m", str(CAPABILITIES), "--json", env={**env, **unwritable})
    assert_one_clean_line(result, 0)
    assert json.loads(result.stdout)["plan_source"] == "template"  # a slotted example
    for warning in warnings:
        assert result.stderr.count(warning) == 1, result.stderr  # warned once
    assert all(line.startswith("structq: warning: ") for line in result.stderr.splitlines())


# --- the demo: data not built, or only the core install -------------------------------------


def test_the_demo_data_not_built_yet_says_to_run_structq_demo(env, tmp_path) -> None:
    result = invoke(["ask", VERIFIED], {**env, "STRUCTQ_DEMO_DIR": str(tmp_path / "never-built")})
    assert_one_clean_line(result, 4, "hint: the demo data is not built yet", "run `structq demo` first")
    assert "server is running" not in result.stderr


def test_the_demo_with_only_the_core_install_answers_the_sql_examples(tmp_path, demo_capabilities) -> None:
    """The embedded extra is made absent by a package of its name that fails to import,
    first on the path: what a core-only install looks like to structq."""
    blocker = tmp_path / "site" / "osmem_server"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("not installed")\n')
    env = {"PYTHONPATH": os.pathsep.join([str(blocker.parent), str(REPO_ROOT)]),
           "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0", "STRUCTQ_LLM": None, "OPENAI_API_KEY": None}
    result = console_script("demo", "--dir", str(tmp_path / "demo"), "--scale", "0.05", env=env)
    assert_one_clean_line(result, 0)
    search = [e.question for m, e in demo_capabilities.examples() if any(s.source == "reports" for s in e.steps)]
    sections = result.stdout.split("\n── ")[1:]
    from structq.cli.demo import VARIANTS

    assert len(sections) == len(list(demo_capabilities.examples())) + len(VARIANTS) and search
    for section in sections:
        skipped = 'skipped: the embedded search server is not installed (pip install "structq[embedded]")' in section
        assert skipped == any(section.split("\n", 1)[0].endswith(q) for q in search), section[:300]
        assert skipped or "Answer" in section
