"""Output for pipes and for people: piped output carries no colour codes and is not wrapped,
help texts are whole, and the answer without a model is a sentence in the question's
language that names the rows (or the single value). Commands run as the installed console
script, so stdout really is a pipe."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from structq.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = REPO_ROOT / "capabilities"
CONSOLE_SCRIPT = Path(sys.executable).with_name("structq")
VERIFIED = "华东区在职的研发部员工有哪些？"
ANSI = re.compile(r"\x1b\[")


def console_script(*args: str, env: dict[str, str | None]) -> subprocess.CompletedProcess:
    merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run([str(CONSOLE_SCRIPT), *args], env=merged, capture_output=True, text=True, timeout=120)


@pytest.fixture
def env(demo_env: dict[str, str], tmp_path: Path) -> dict[str, str | None]:
    """A narrow terminal size in the environment: piped output must ignore it."""
    return {"STRUCTQ_DEMO_DIR": demo_env["STRUCTQ_DEMO_DIR"], "STRUCTQ_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
            "STRUCTQ_CACHE_DIR": str(tmp_path / "cache"), "STRUCTQ_LLM": None, "OPENAI_API_KEY": None,
            "STRUCTQ_MANIFESTS": None, "COLUMNS": None, "FORCE_COLOR": None, "TERM": "xterm-256color"}


def test_piped_answers_are_neither_coloured_nor_wrapped(env) -> None:
    result = console_script("ask", VERIFIED, "-m", str(CAPABILITIES), "--show-plan", env=env)
    assert result.returncode == 0, result.stderr
    assert not ANSI.search(result.stdout)
    ran = [line for line in result.stdout.splitlines() if "FROM (SELECT employee_id" in line]
    assert len(ran) == 1 and "LIMIT 1001" in ran[0]  # the whole query on one line, past column 80
    assert max(len(line) for line in result.stdout.splitlines()) > 80


def test_piped_errors_are_plain_text(env) -> None:
    result = console_script("ask", "", env=env)
    assert result.returncode == 2
    assert not ANSI.search(result.stderr) and "╭" not in result.stderr
    assert "the question is empty" in result.stderr


def _option_helps(command: object) -> list[tuple[str, str]]:
    return [(param.name, param.help) for param in getattr(command, "params", []) if getattr(param, "help", None)]


def _commands() -> list[tuple[str, object]]:
    root = typer.main.get_command(app)
    out = []
    for name, command in root.commands.items():
        if hasattr(command, "commands"):
            out += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
        else:
            out.append((name, command))
    return out


@pytest.mark.parametrize("name, command", _commands(), ids=[n for n, _ in _commands()])
def test_piped_help_texts_are_whole(name, command, env) -> None:
    result = console_script(*name.split(), "--help", env=env)
    assert result.returncode == 0, result.stderr
    assert not ANSI.search(result.stdout) and "…" not in result.stdout
    flat = " ".join(result.stdout.split())
    for param, text in _option_helps(command):
        assert " ".join(text.split()) in flat, (param, text)


def test_the_answer_without_a_model_names_the_rows_in_the_questions_language(env) -> None:
    import json

    result = console_script("ask", VERIFIED, "-m", str(CAPABILITIES), "--json", env=env)
    answer = json.loads(result.stdout)
    [step] = answer["steps"]
    names = [row[step["columns"].index("name")] for row in step["rows"]]
    summary = answer["answer"].splitlines()[0]
    assert summary == f"共 {len(names)} 行结果：{'、'.join(names[:10])}{'、…（前 10 行）' if len(names) > 10 else ''} [engineers]。"


@pytest.mark.parametrize("text, chinese", [
    ("华东区在职的研发部员工有哪些？", True),
    ("列出 SKU 为 A100 的订单", True),
    ("How many weekly reports did 张伟 write in March?", False),
    ("Which projects is 刘萍萍 a member of?", False),
    ("Top 3 products in 2025", False),
])
def test_the_language_is_the_questions_not_the_names_it_quotes(text, chinese) -> None:
    from structq.agent.synthesis import is_chinese

    assert is_chinese(text) is chinese


def test_a_plan_run_without_a_question_answers_in_the_plans_language(demo_capabilities) -> None:
    from structq.agent import Agent, Plan
    from structq.config import Settings

    plan = Plan.parse({"reasoning": "列出项目", "steps": [{"output_key": "p", "source": "hr", "purpose": "全部项目",
                                                        "query": "SELECT project_name FROM projects"}]})
    with Agent(demo_capabilities, settings=Settings(cache_enabled=False, audit_enabled=False)) as agent:
        text = agent.run(plan).text
    assert text.startswith("共 ") and "行结果：" in text.splitlines()[0]


def test_the_answer_prompt_asks_for_the_questions_language(demo_capabilities) -> None:
    from scripted import scripted, text_reply

    from structq.agent import Agent, Plan
    from structq.config import Settings

    plan = Plan.parse({"steps": [{"output_key": "p", "source": "hr",
                                  "query": "SELECT name FROM employees WHERE name = '刘萍萍'"}]})
    model = scripted(text_reply("刘萍萍 is an employee [p]."))
    with Agent(demo_capabilities, llm=model, settings=Settings(cache_enabled=False, audit_enabled=False)) as agent:
        agent.run(plan, question="Is 刘萍萍 an employee?", answer=True)
    prompt = model.prompt_text(0)
    assert "(Chinese)" not in prompt and "the language the question is written in" in prompt
