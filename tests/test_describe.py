"""``structq describe`` with a scripted model: drafts are described, people's words are kept,
and no value of a denied column or a row-filtered table ever reaches the model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from manifest_support import manifest_text
from scripted import scripted, text_reply
from structq.capabilities import load_manifest
from structq.cli import app

SECRET_VALUES = ["$2b$12$" + "s" * 53, "hunter2-secret-value"]
TENANT_VALUES = ["tenant-one-plan", "tenant-two-plan"]


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as c:
        c.executescript(f"""
            CREATE TABLE customers (id INTEGER PRIMARY KEY, tier TEXT, password_hash TEXT, note TEXT);
            INSERT INTO customers VALUES (1, 'gold', '{SECRET_VALUES[0]}', 'vip'), (2, 'silver', '{SECRET_VALUES[1]}', 'new');
            CREATE TABLE plans (id INTEGER PRIMARY KEY, tenant INTEGER, plan_name TEXT);
            INSERT INTO plans VALUES (1, 1, '{TENANT_VALUES[0]}'), (2, 2, '{TENANT_VALUES[1]}');
        """)
    path = tmp_path / "caps" / "shop.yaml"
    path.parent.mkdir()
    path.write_text(manifest_text("describe_shop", db=db), encoding="utf-8")
    return path


REPLY = {"objects": {
    "customers": {"description": "Shop customers", "synonyms": ["clients"],
                  "members": {"tier": {"description": "Loyalty tier", "synonyms": ["level"]},
                              "note": {"description": "must not replace the human one"},
                              "password_hash": {"description": "never written: not in the request"}}},
    "plans": {"description": "must not replace the human one",
              "members": {"plan_name": {"description": "Name of the plan"}}},
}}


def _describe(manifest: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, Any]:
    model = scripted(text_reply("```json\n" + json.dumps(REPLY) + "\n```"))
    monkeypatch.setattr("structq.agent.llm.resolve_model", lambda spec: model)
    result = CliRunner().invoke(app, ["describe", "-m", str(manifest.parent), *args])
    return result, model


def test_describe_fills_drafts_and_keeps_what_people_wrote(manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = manifest.read_text(encoding="utf-8")
    result, model = _describe(manifest, monkeypatch)
    assert result.exit_code == 0, result.output
    assert model.calls == 1
    after = manifest.read_text(encoding="utf-8")
    described, _ = load_manifest(manifest)
    customers, plans = described.table("customers"), described.table("plans")
    assert customers.description == "Shop customers" and customers.synonyms == ["clients"] and customers.draft
    assert customers.column("tier").description == "Loyalty tier" and customers.column("tier").draft
    assert customers.column("note").description == "free text by support"
    assert customers.column("password_hash").description == "" and customers.column("password_hash").denied
    assert plans.description == "subscription plans"
    assert plans.column("plan_name").description == "Name of the plan"
    # every line people wrote is still there, comments included
    assert all(line in after.splitlines() for line in before.splitlines() if "tier" not in line and "plan_name" not in line
               and "- name: customers" not in line)
    assert "# the shop, partly described by hand" in after and "# by hand" in after
    assert "  - name: customers\n    description: \"Shop customers\"\n    synonyms: [clients]\n    draft: true\n" in after


def test_no_denied_or_row_filtered_value_reaches_the_model(manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, model = _describe(manifest, monkeypatch, "--samples", "--dry-run")
    assert result.exit_code == 0, result.output
    prompt = "\n".join(model.prompt_text(i) for i in range(model.calls))
    assert "gold" in prompt and "silver" in prompt  # allowed samples are shown
    for value in [*SECRET_VALUES, *TENANT_VALUES]:
        assert value not in prompt
    assert "password_hash" not in prompt  # a denied column's very name stays out
    assert manifest.read_text(encoding="utf-8").count("description:") == 2  # --dry-run wrote nothing
    assert "+    description: \"Shop customers\"" in result.output


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STRUCTQ_LLM", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_a_dry_run_without_a_model_shows_what_the_model_would_be_sent(manifest: Path, no_model: None) -> None:
    before = manifest.read_text(encoding="utf-8")
    result = CliRunner().invoke(app, ["describe", "-m", str(manifest.parent), "--samples", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "1 model call would draft its descriptions" in result.stdout
    assert "customers" in result.stdout and "gold" in result.stdout  # the prompt, samples included
    assert "password_hash" not in result.stdout and SECRET_VALUES[1] not in result.stdout
    assert "no language model is configured" in result.stderr and "nothing was sent" in result.stderr
    assert manifest.read_text(encoding="utf-8") == before


def test_a_dry_run_without_a_model_as_json_carries_the_prompts(manifest: Path, no_model: None) -> None:
    result = CliRunner().invoke(app, ["describe", "-m", str(manifest.parent), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["model"] is None and "no language model" in document["why"]
    [entry] = document["sources"]
    assert entry["model_calls"] == 0 and not entry["written"] and len(entry["prompts"]) == 1
    assert "Source shop" in entry["prompts"][0]


def test_describe_without_dry_run_still_needs_a_model(manifest: Path, no_model: None) -> None:
    result = CliRunner().invoke(app, ["describe", "-m", str(manifest.parent)])
    assert result.exit_code == 3
    assert "no language model is configured" in result.stderr
