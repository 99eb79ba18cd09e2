"""Verified examples must not answer the wrong period: an example with relative dates declares
the day it was written for and the period its words count in, and asked on another day its
dates move with them (or, with ``shift: false``, it does not match at all); a slotted example
reads its period slot on the day asked. Asked through the CLI with several ``--today`` values,
each answer reads the period a person would expect."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from structq.agent.relative import periods_between, shift_date
from structq.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = REPO_ROOT / "capabilities"
LAST_YEARS_Q3 = "去年第三季度在华东区销售额最高的产品是什么？"
PAST_THREE_QUARTERS = "产品X在过去三个季度的增长率变化"
FIRST_WEEK_OF_MARCH = "‘星火’项目组里，绩效为A的员工在三月第一周写了哪些周报？"
RANGE = re.compile(r"sale_date >= '(\d{4}-\d{2}-\d{2})' AND s\.sale_date <= '(\d{4}-\d{2}-\d{2})'")


@pytest.fixture
def ask(demo_env: dict[str, str], tmp_path: Path):
    env = {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
           "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_LLM": None, "OPENAI_API_KEY": None}

    def run(question: str, today: str):
        return CliRunner().invoke(app, ["ask", question, "--today", today, "-m", str(CAPABILITIES), "--json"], env=env)

    return run


def asked_range(result) -> tuple[str, str]:
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    if answer["plan_source"] == "template":  # a period slot: its days are bound parameters
        params = answer["steps"][0]["params"]
        return params["slot_period_start"], params["slot_period_end"]
    assert answer["plan_source"] == "verified"
    return RANGE.search(answer["steps"][0]["query"]).groups()


@pytest.mark.parametrize("today, expected", [
    ("2026-11-30", ("2025-07-01", "2025-09-30")),  # the day the example was written for
    ("2026-02-10", ("2025-07-01", "2025-09-30")),  # the same year: 去年 is still 2025
    ("2027-05-01", ("2026-07-01", "2026-09-30")),
    ("2028-03-01", ("2027-07-01", "2027-09-30")),
])
def test_last_years_third_quarter_is_the_year_before_today(ask, today, expected) -> None:
    assert asked_range(ask(LAST_YEARS_Q3, today)) == expected


@pytest.mark.parametrize("today, expected", [
    ("2026-11-30", ("2025-10-01", "2026-09-30")),  # Q1–Q3 2026, and Q4 2025 as the base
    ("2027-01-15", ("2026-01-01", "2026-12-31")),  # Q2–Q4 2026, and Q1 2026 as the base
    ("2026-08-01", ("2025-07-01", "2026-06-30")),  # Q4 2025–Q2 2026, and Q3 2025 as the base
])
def test_the_past_three_quarters_move_with_today(ask, today, expected) -> None:
    assert asked_range(ask(PAST_THREE_QUARTERS, today)) == expected


def test_a_shifted_plan_says_so_and_drops_texts_naming_the_old_dates(ask) -> None:
    answer = json.loads(ask(PAST_THREE_QUARTERS, "2028-03-01").stdout)
    assert answer["plan_source"] == "verified"
    assert "written for 2026-11-30" in answer["plan"]["reasoning"] and "+5 quarter" in answer["plan"]["reasoning"]
    assert "2025" not in json.dumps(answer["plan"], ensure_ascii=False)


def test_an_example_that_cannot_shift_matches_only_in_its_own_period(ask) -> None:
    same_year = ask(FIRST_WEEK_OF_MARCH, "2026-06-01")
    assert same_year.exit_code == 0 and json.loads(same_year.stdout)["plan_source"] == "verified"
    next_year = ask(FIRST_WEEK_OF_MARCH, "2027-06-01")
    assert next_year.exit_code == 3  # planned afresh: here no model, so it is not answered at all
    assert "no language model is configured" in next_year.stderr


@pytest.mark.parametrize("day, count, period, expected", [
    ("2025-09-30", 1, "quarter", "2025-12-31"),  # a month's last day stays the last day
    ("2025-07-01", 1, "quarter", "2025-10-01"),
    ("2024-02-29", 1, "year", "2025-02-28"),
    ("2025-02-28", -1, "year", "2024-02-29"),
    ("2026-01-31", 1, "month", "2026-02-28"),
    ("2026-03-02", 2, "week", "2026-03-16"),
])
def test_shift_date(day, count, period, expected) -> None:
    assert shift_date(dt.date.fromisoformat(day), count, period).isoformat() == expected


@pytest.mark.parametrize("a, b, period, expected", [
    ("2026-11-30", "2026-12-31", "quarter", 0),
    ("2026-11-30", "2027-01-01", "quarter", 1),
    ("2026-11-30", "2026-12-06", "week", 0),  # Monday to Sunday of the same week
    ("2026-11-30", "2026-12-07", "week", 1),
    ("2026-11-30", "2025-01-01", "year", -1),
])
def test_periods_between(a, b, period, expected) -> None:
    assert periods_between(dt.date.fromisoformat(a), dt.date.fromisoformat(b), period) == expected


def test_today_without_period_is_a_manifest_error(tmp_path, demo_env) -> None:
    text = (CAPABILITIES / "sales.yaml").read_text(encoding="utf-8").replace("    period: quarter\n", "", 1)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "sales.yaml").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["check", "-m", str(folder)], env={"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"]})
    assert result.exit_code == 3
    assert "gives both today:" in result.stderr and "period:" in result.stderr
