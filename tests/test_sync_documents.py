"""``sync`` on an ``embedded`` search source compares the manifest with its documents file (its
mapping on the search server is made from the manifest, so it could never show drift)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from manifest_support import manifest_text

from structq.cli import app

MANIFEST = manifest_text("notes_typed")

DOCUMENT = {"_id": "1", "author": "a", "body": "hello world", "day": "2024-01-02", "hours": 3,
            "pages": 2, "meta": {"team": "x"}}


def write(folder: Path, documents: list[dict[str, Any]]) -> Path:
    (folder / "notes.yaml").write_text(MANIFEST, encoding="utf-8")
    (folder / "notes.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents),
                                        encoding="utf-8")
    return folder


def check(folder: Path) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["sync", "--check", "-m", str(folder), "--json"])
    return result.exit_code, json.loads(result.stdout)["sources"][0]


def test_documents_that_match_the_manifest_are_in_sync(tmp_path: Path) -> None:
    second = {**DOCUMENT, "_id": "2", "hours": 2.5, "body": "x", "day": None}  # a null types nothing
    code, report = check(write(tmp_path, [DOCUMENT, second]))
    assert code == 0 and report["drift"] is False, report


@pytest.mark.parametrize(("change", "expected"), [
    ({"extra": "a new field"}, ("added", "notes.extra")),
    ({"meta": {"team": "x", "lead": "E1"}}, ("added", "notes.meta.lead")),
    ({"pages": "two"}, ("changed", "notes.pages")),
    ({"day": "last tuesday"}, ("changed", "notes.day")),
], ids=["new_field", "new_sub_field", "number_became_text", "date_not_a_date"])
def test_documents_that_differ_are_drift(tmp_path: Path, change: dict[str, Any],
                                         expected: tuple[str, str]) -> None:
    code, report = check(write(tmp_path, [DOCUMENT, {**DOCUMENT, "_id": "2", **change}]))
    assert code == 1 and report["drift"] is True
    kind, name = expected
    assert name in [entry["object"] for entry in report[kind]], report


def test_a_field_no_document_has_any_more_is_dropped(tmp_path: Path) -> None:
    without_pages = {k: v for k, v in DOCUMENT.items() if k != "pages"}
    code, report = check(write(tmp_path, [without_pages]))
    assert code == 1 and [entry["object"] for entry in report["dropped"]] == ["notes.pages"]


def test_a_missing_documents_file_is_unavailable(tmp_path: Path) -> None:
    write(tmp_path, [DOCUMENT])
    (tmp_path / "notes.jsonl").unlink()
    result = CliRunner().invoke(app, ["sync", "--check", "-m", str(tmp_path)])
    assert result.exit_code == 4
    assert "notes.jsonl" in result.output and "Traceback" not in result.output
