"""The audit log keeps what the README promises and no more: after ``structq demo`` answers
every verified example, no value of any result row is in a default audit line (the question's
and the plan's own words excepted: the asker wrote those). The answer text, which quotes rows,
is kept only with ``STRUCTQ_AUDIT_ANSWERS=1``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from structq.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
VERIFIED = "华东区在职的研发部员工有哪些？"


def _texts(value: Any) -> set[str]:
    """The row values an audit line could leak, as text: words of two characters or more, and
    figures of five or more (shorter ones coincide with row counts and timings)."""
    if isinstance(value, (list, tuple)):
        return set().union(*(_texts(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return _texts(list(value.values()))
    text = str(value) if value is not None and not isinstance(value, bool) else ""
    numeric = text.replace(".", "", 1).replace("-", "", 1).isdigit()
    return {text} if len(text) >= (5 if numeric else 2) else set()


def _env(tmp_path: Path, **extra: str | None) -> dict[str, str | None]:
    return {"STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"), "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"),
            "STRUCTQ_LLM": None, "OPENAI_API_KEY": None, "STRUCTQ_AUDIT": None, "STRUCTQ_AUDIT_ANSWERS": None,
            "STRUCTQ_MANIFESTS": None, "COLUMNS": "200", **extra}


def test_no_result_row_value_is_in_a_default_audit_line_after_the_demo(tmp_path: Path) -> None:
    from structq.agent import Agent
    from structq.capabilities import CapabilitySet
    from structq.cli.demo import DEMO_TODAY, VARIANTS
    from structq.config import Settings

    demo_dir = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--dir", str(demo_dir), "--scale", "0.05"], env=_env(tmp_path))
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    capabilities = CapabilitySet.from_path(REPO_ROOT / "capabilities", env={"STRUCTQ_DEMO_DIR": str(demo_dir)})
    questions = [example.question for _, example in capabilities.examples()]
    assert [line["question"] for line in lines] == [*questions, *VARIANTS]

    settings = Settings(cache_enabled=False, audit_enabled=False)
    checked = 0
    with Agent(capabilities, settings=settings) as agent:
        for line in lines:
            answer = agent.ask(line["question"], today=DEMO_TODAY)
            assert answer.text and line["answer"] is None
            asked = line["question"] + json.dumps(line["plan"], ensure_ascii=False)
            values = {v for step in answer.results.steps.values() for v in _texts(step.rows)}
            leaks = sorted(v for v in values if v not in asked and v in json.dumps(line, ensure_ascii=False))
            assert leaks == [], (line["question"], leaks[:10])
            checked += len(values)
    assert checked > 100  # the rows were there to leak


def test_the_answer_is_audited_only_when_asked_for(tmp_path: Path, demo_env: dict[str, str]) -> None:
    argv = ["ask", VERIFIED, "-m", str(REPO_ROOT / "capabilities"), "--json"]
    default = CliRunner().invoke(app, argv, env=_env(tmp_path, STRUCTQ_DEMO_DIR=demo_env["STRUCTQ_DEMO_DIR"]))
    kept = CliRunner().invoke(app, argv, env=_env(tmp_path, STRUCTQ_DEMO_DIR=demo_env["STRUCTQ_DEMO_DIR"],
                                                  STRUCTQ_AUDIT_ANSWERS="1"))
    assert default.exit_code == kept.exit_code == 0, default.output + kept.output
    first, second = (json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines())
    assert first["answer"] is None
    assert second["answer"] == json.loads(kept.stdout)["answer"]
    assert "rows" not in second["steps"][0]  # the answer alone, not the rows
