"""``structq sandbox``: SQL and search bodies through the sandbox, human and --json output,
exit codes 0 (accepted), 1 (refused), 2 (usage), 3 (manifests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from structq.cli import app

HR = """\
source: hr
kind: sql
url: sqlite:///demo/company.db
limits: {max_rows: 50}
policies:
  row_filters:
    - {table: employees, where: "tenant_id = :tenant_id"}
tables:
  - name: employees
    columns:
      - {name: employee_id, type: text}
      - {name: name, type: text}
      - {name: tenant_id, type: integer}
      - {name: id_card, type: text, access: deny}
"""

REPORTS = """\
source: reports
kind: opensearch
url: http://127.0.0.1:9200
limits: {max_rows: 100}
policies:
  row_filters:
    - {index: weekly_reports, term: {tenant_id: ":tenant_id"}}
indices:
  - name: weekly_reports
    fields:
      - {name: author_id, type: keyword}
      - {name: department, type: keyword, values: {eng: Engineering, sales: Sales}}
      - {name: content, type: text}
      - {name: salary, type: double, access: deny}
      - {name: tenant_id, type: keyword}
"""

BODY = '{"query": {"match": {"content": "星火"}}, "size": 5}'
SCRIPT_BODY = '{"query": {"bool": {"filter": [{"match_all": {}}, {"script": {"script": "1"}}]}}}'


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    (tmp_path / "hr.yaml").write_text(HR, encoding="utf-8")
    (tmp_path / "reports.yaml").write_text(REPORTS, encoding="utf-8")
    return tmp_path


def invoke(manifests: Path, *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, ["sandbox", "-m", str(manifests), *args], input=input)


def sql(manifests: Path, *args: str, **kw: Any) -> Any:
    return invoke(manifests, "--source", "hr", "--var", "tenant_id=7", *args, **kw)


def dsl(manifests: Path, *args: str, **kw: Any) -> Any:
    return invoke(manifests, "--source", "reports", "--index", "weekly_reports", "--var", "tenant_id=7", *args, **kw)


# --- accepted ---------------------------------------------------------------------------

def test_sql_accepted(manifests: Path) -> None:
    result = sql(manifests, "SELECT * FROM employees")
    assert result.exit_code == 0, result.output
    assert "LIMIT 51" in result.stdout and "tenant_id" in result.stdout
    assert "id_card" not in result.stdout
    assert "tables: employees" in result.stdout and "limit: 51" in result.stdout


def test_sql_accepted_json(manifests: Path) -> None:
    result = sql(manifests, "--json", "SELECT name FROM employees")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"ok", "query", "index", "params", "tables", "columns", "limit"}
    assert doc["ok"] is True and isinstance(doc["query"], str) and "LIMIT 51" in doc["query"]
    assert doc["tables"] == ["employees"] and doc["limit"] == 51 and doc["index"] is None
    assert 7 in doc["params"].values()


def test_dsl_accepted(manifests: Path) -> None:
    result = dsl(manifests, BODY)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout.split("\nparams:")[0])
    assert body["query"] == {"bool": {"filter": [{"match": {"content": "星火"}}, {"term": {"tenant_id": 7}}]}}
    assert "salary" not in body["_source"]
    assert "tables: weekly_reports" in result.stdout and "limit: 101" in result.stdout


def test_dsl_accepted_json(manifests: Path) -> None:
    result = dsl(manifests, "--json", BODY)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["index"] == "weekly_reports"
    assert doc["query"]["size"] == 5 and doc["query"]["_source"] == ["author_id", "department", "content", "tenant_id"]
    assert doc["params"] == {"tenant_id": 7} and doc["tables"] == ["weekly_reports"] and doc["limit"] == 101
    assert "content" in doc["columns"]


@pytest.mark.parametrize(("kind", "text"), [("sql", "SELECT name FROM employees"), ("dsl", BODY)])
def test_query_from_stdin(manifests: Path, kind: str, text: str) -> None:
    result = (sql if kind == "sql" else dsl)(manifests, "--json", "-", input=text)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


# --- refused: exit 1 --------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "text", "code"), [
    ("sql", "DELETE FROM employees", "write"),
    ("sql", "SELECT id_card FROM employees", "denied_column"),
    ("dsl", SCRIPT_BODY, "script"),
    ("dsl", '{"query": {"term": {"department": "ops"}}}', "enum_value"),
    ("dsl", '["not", "an", "object"]', "invalid_body"),
    ("dsl", '{"query": {"terms": {"author_id": "<top>"}}}', "plan_error"),
])
def test_refused_json(manifests: Path, kind: str, text: str, code: str) -> None:
    result = (sql if kind == "sql" else dsl)(manifests, "--json", text)
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"ok", "code", "message", "hint"}
    assert doc["ok"] is False and doc["code"] == code and doc["message"]


def test_refused_human(manifests: Path) -> None:
    result = dsl(manifests, SCRIPT_BODY)
    assert result.exit_code == 1
    assert "[script]" in result.stderr and "query.bool.filter[1].script" in result.stderr
    assert "hint:" in result.stderr and result.stdout == ""


def test_missing_variable_is_refused(manifests: Path) -> None:
    result = invoke(manifests, "--source", "reports", "--index", "weekly_reports", "--json", "{}")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["code"] == "missing_variable"


def test_unknown_index_is_refused(manifests: Path) -> None:
    result = invoke(manifests, "--source", "reports", "--index", "weekly_*", "--var", "tenant_id=7", "--json", "{}")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["code"] == "unknown_index"


# --- usage: exit 2 ----------------------------------------------------------------------

def test_unknown_source_suggests(manifests: Path) -> None:
    result = invoke(manifests, "--source", "reprts", "{}")
    assert result.exit_code == 2
    assert "unknown source 'reprts'" in result.stderr and "did you mean 'reports'" in result.stderr


def test_search_source_needs_an_index(manifests: Path) -> None:
    result = invoke(manifests, "--source", "reports", "--var", "tenant_id=7", BODY)
    assert result.exit_code == 2
    assert "--index" in result.stderr and "weekly_reports" in result.stderr


def test_sql_source_takes_no_index(manifests: Path) -> None:
    result = sql(manifests, "--index", "weekly_reports", "SELECT name FROM employees")
    assert result.exit_code == 2 and "--index" in result.stderr


def test_invalid_json_names_its_position(manifests: Path) -> None:
    result = dsl(manifests, '{"query": {"match_all": {}},}')
    assert result.exit_code == 2
    assert "not valid JSON" in result.stderr and "line 1 column" in result.stderr


@pytest.mark.parametrize("args", [[], ["-"], ["   "]])
def test_no_query(manifests: Path, args: list[str]) -> None:
    result = sql(manifests, *args, input="")
    assert result.exit_code == 2 and "no query given" in result.stderr


def test_bad_var_and_missing_source_are_usage_errors(manifests: Path) -> None:
    assert invoke(manifests, "--source", "hr", "--var", "tenant_id", "SELECT 1").exit_code == 2
    assert invoke(manifests, "SELECT 1").exit_code == 2


# --- manifests: exit 3 ------------------------------------------------------------------

def test_manifest_error_exits_3(manifests: Path) -> None:
    (manifests / "hr.yaml").write_text(HR.replace("limits:", "limitz:"), encoding="utf-8")
    result = sql(manifests, "SELECT name FROM employees")
    assert result.exit_code == 3
    assert "hr.yaml" in result.stderr and "limitz" in result.stderr


def test_help_has_examples_for_sql_and_dsl() -> None:
    result = CliRunner().invoke(app, ["sandbox", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "SELECT * FROM employees" in result.stdout and "--index weekly_reports" in result.stdout
