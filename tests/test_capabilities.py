"""Capability manifests: loading, interpolation, cross-checks, errors with file:line:column."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from manifest_support import manifest_text

from structq.capabilities import CapabilitySet, load_manifest_text, render_capabilities
from structq.errors import ManifestError

GOOD = manifest_text("capabilities_hr")

SEARCH = manifest_text("capabilities_reports")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(folder: Path, *files: tuple[str, str]) -> ManifestError:
    for name, text in files:
        write(folder, name, text)
    with pytest.raises(ManifestError) as info:
        CapabilitySet.from_path(folder)
    return info.value


def line_of(text: str, needle: str) -> int:
    """1-based line number of the first line containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_good_manifests_load(tmp_path: Path) -> None:
    write(tmp_path, "hr.yaml", GOOD)
    write(tmp_path, "reports.yaml", SEARCH)
    caps = CapabilitySet.from_path(tmp_path)
    assert caps.names == ["hr", "reports"]
    hr = caps["hr"]
    assert hr.sql_dialect == "sqlite"
    assert hr.table("EMPLOYEES").column("id_card").denied
    assert hr.table("employee_performance").column("performance_grade").values["A"] == "优秀"
    assert hr.row_filters_for("employees")[0].variables == ["tenant_id"]
    reports = caps["reports"]
    assert set(reports.index("weekly_reports").flat_fields()) == {"author_id", "content", "meta", "meta.team"}
    assert reports.resolve_path("reports.jsonl") == tmp_path.resolve() / "reports.jsonl"


def test_interpolation_uses_environment_then_default(tmp_path: Path) -> None:
    manifest, _ = load_manifest_text(GOOD, env={})
    assert manifest.url == "sqlite:///demo/company.db"
    manifest, _ = load_manifest_text(GOOD, env={"HR_DB_URL": "postgresql://ro@db/hr"})
    assert manifest.url == "postgresql://ro@db/hr"
    assert manifest.sql_dialect == "postgres"


def test_missing_variable_without_default_points_at_it() -> None:
    text = GOOD.replace("${HR_DB_URL:-sqlite:///demo/company.db}", "${HR_DB_URL}")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, "hr.yaml", env={})
    err = info.value
    assert (err.file, err.line, err.column) == ("hr.yaml", 3, 6)
    assert "HR_DB_URL" in err.message and "${HR_DB_URL:-" in err.hint


def test_misspelt_key_suggests_the_valid_one(tmp_path: Path) -> None:
    text = GOOD.replace("    columns:\n      - {name: employee_id, type: text, primary_key", "    colums:\n      - {name: employee_id, type: text, primary_key")
    err = load_error(tmp_path, ("hr.yaml", text))
    assert err.line == line_of(text, "colums:") and err.column == 5
    assert err.suggestion == "columns"
    assert re.search(r"hr\.yaml:\d+:5: unknown key 'colums'.*did you mean 'columns'\?", str(err))


def test_unknown_column_type_lists_the_valid_ones(tmp_path: Path) -> None:
    text = GOOD.replace("{name: tenant_id, type: integer}", "{name: tenant_id, type: integr}")
    err = load_error(tmp_path, ("hr.yaml", text))
    assert err.line == line_of(text, "integr")
    assert err.column == text.splitlines()[err.line - 1].index("integr") + 1
    assert err.suggestion == "integer"
    assert "text, integer" in err.hint


def test_duplicate_source_names_both_files(tmp_path: Path) -> None:
    err = load_error(tmp_path, ("a.yaml", GOOD), ("b.yaml", GOOD))
    assert err.file.endswith("b.yaml") and (err.line, err.column) == (1, 9)
    assert "duplicate source 'hr'" in err.message and "a.yaml" in err.message


def test_example_reading_an_undeclared_table(tmp_path: Path) -> None:
    text = GOOD.replace("FROM employees WHERE employee_id IN", "FROM employes WHERE employee_id IN")
    err = load_error(tmp_path, ("hr.yaml", text))
    assert err.line == line_of(text, "FROM employes")
    assert "undeclared table 'employes'" in err.message and err.suggestion == "employees"


def test_example_reference_to_a_later_step(tmp_path: Path) -> None:
    text = GOOD.replace("IN (<top>)", "IN (<later>)")
    err = load_error(tmp_path, ("hr.yaml", text))
    assert err.line == line_of(text, "<later>") and "does not come earlier" in err.message


def test_broken_yaml_keeps_its_line(tmp_path: Path) -> None:
    text = GOOD.replace("values: {A: 优秀,", "values: {A: 优秀 {")
    err = load_error(tmp_path, ("hr.yaml", text))
    assert err.line == line_of(text, "values: {A:")
    assert err.column is not None and "YAML syntax error" in err.message


def test_duplicate_yaml_key_is_an_error_not_a_silent_override(tmp_path: Path) -> None:
    text = GOOD.replace("{name: id_card, type: text, access: deny}", "{name: id_card, type: text, access: deny, access: allow}")
    err = load_error(tmp_path, ("hr.yaml", text))
    assert "duplicate key 'access'" in err.message and err.line == line_of(text, "id_card")


@pytest.mark.parametrize(
    ("old", "new", "message", "suggestion"),
    [
        ("references: employees.employee_id", "references: employees.employe_id", "references unknown column", "employee_id"),
        ("- {table: employees, where", "- {table: employes, where", "row filter on undeclared table", "employees"),
        ("      - {name: assessment_month, type: date}", "      - {name: assessment_month, type: date}\n      - {name: assessment_month, type: text}", "duplicate column", None),
        ("kind: sql", "kind: sqll", "invalid value 'sqll'", "sql"),
    ],
)
def test_semantic_errors_point_at_the_spot(tmp_path: Path, old: str, new: str, message: str, suggestion: str | None) -> None:
    assert old in GOOD
    err = load_error(tmp_path, ("hr.yaml", GOOD.replace(old, new)))
    assert message in err.message
    assert err.line is not None and err.column is not None
    assert err.suggestion == suggestion


def test_search_row_filter_on_undeclared_field(tmp_path: Path) -> None:
    err = load_error(tmp_path, ("reports.yaml", SEARCH.replace("meta.team: ", "meta.teem: ")))
    assert "undeclared field 'meta.teem'" in err.message and err.suggestion == "meta.team"


def test_fingerprint_changes_with_any_manifest(tmp_path: Path) -> None:
    write(tmp_path, "hr.yaml", GOOD)
    write(tmp_path, "reports.yaml", SEARCH)
    first = CapabilitySet.from_path(tmp_path).fingerprint()
    assert CapabilitySet.from_path(tmp_path).fingerprint() == first
    write(tmp_path, "reports.yaml", SEARCH.replace("type: text}", "type: text, description: 正文}"))
    second = CapabilitySet.from_path(tmp_path).fingerprint()
    assert second != first
    write(tmp_path, "hr.yaml", GOOD.replace("max_rows: 100", "max_rows: 99"))
    assert CapabilitySet.from_path(tmp_path).fingerprint() not in (first, second)


def test_folder_skips_question_sets_and_history(tmp_path: Path) -> None:
    write(tmp_path, "hr.yaml", GOOD)
    write(tmp_path, "eval.yaml", "questions: []\n")
    (tmp_path / ".history").mkdir()
    write(tmp_path / ".history", "old.yaml", "not: a manifest\n")
    assert CapabilitySet.from_path(tmp_path).names == ["hr"]


def test_empty_folder_and_missing_path_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"no manifest files"):
        CapabilitySet.from_path(tmp_path)
    with pytest.raises(ManifestError, match=r"no such file or folder"):
        CapabilitySet.from_path(tmp_path / "nope")


def test_render_shows_meanings_and_hides_denied_columns(tmp_path: Path) -> None:
    write(tmp_path, "hr.yaml", GOOD)
    write(tmp_path, "reports.yaml", SEARCH)
    text = render_capabilities(CapabilitySet.from_path(tmp_path))
    assert "source hr (sql, dialect sqlite): 人事与项目数据库" in text
    assert "performance_grade text — 绩效等级 values: A=优秀, B=良好, C=合格, D=待改进" in text
    assert "employee_id text → employees.employee_id — 员工工号" in text
    assert "row filter, added automatically: tenant_id = :tenant_id" in text
    assert "id_card" not in text
    assert "meta.team keyword" in text


def test_variables_expand_only_in_url_and_documents(tmp_path: Path) -> None:
    text = GOOD.replace("description: 人事与项目数据库", "description: 预算 $5 与 ${NOT_EXPANDED}")
    manifest, _ = load_manifest_text(text, env={"NOT_EXPANDED": "x"})
    assert manifest.description == "预算 $5 与 ${NOT_EXPANDED}"  # text, not a variable
    manifest, _ = load_manifest_text(SEARCH.replace("documents: reports.jsonl", "documents: ${DOCS}/r.jsonl"),
                                     env={"DOCS": "/data"})
    assert manifest.index("weekly_reports").documents == "/data/r.jsonl"


def test_relative_sqlite_path_resolves_against_the_manifest_folder(tmp_path: Path) -> None:
    from structq.capabilities import load_manifest

    (tmp_path / "sub").mkdir()
    path = write(tmp_path / "sub", "hr.yaml", GOOD)
    manifest, _ = load_manifest(path, env={})
    assert manifest.url == f"sqlite:///{(tmp_path / 'sub' / 'demo' / 'company.db').resolve()}"
    absolute, _ = load_manifest(write(tmp_path, "abs.yaml", GOOD.replace(
        "${HR_DB_URL:-sqlite:///demo/company.db}", "sqlite:////srv/hr.db?mode=ro")), env={})
    assert absolute.url == "sqlite:////srv/hr.db?mode=ro"


@pytest.mark.parametrize("where", ["DROP TABLE employees", "tenant_id = 1; DELETE FROM employees", "tenant_id = ("])
def test_a_row_filter_must_be_one_condition(tmp_path: Path, where: str) -> None:
    err = load_error(tmp_path, ("hr.yaml", GOOD.replace('"tenant_id = :tenant_id"', f'"{where}"')))
    assert "row filter" in err.message and err.line == line_of(GOOD, "tenant_id = :tenant_id")
