"""The model configuration (which model, its endpoint, its call bounds) is read once, by
``Settings``; everything else takes it from there. Pure: no model is called."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from structq.agent.llm import CallBounds
from structq.config import DEFAULT_OPENAI_MODEL, Settings

PACKAGE = Path(__file__).resolve().parent.parent / "structq"
MODEL_VARIABLES = ("STRUCTQ_LLM", "STRUCTQ_LLM_TIMEOUT", "STRUCTQ_LLM_RETRIES", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    for name in MODEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def set_env(values: dict[str, str]) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


@pytest.mark.parametrize(("values", "flag", "llm"), [
    ({}, None, None),
    ({"STRUCTQ_LLM": "ollama:qwen3"}, None, "ollama:qwen3"),
    ({"OPENAI_API_KEY": "k"}, None, DEFAULT_OPENAI_MODEL),
    ({"OPENAI_API_KEY": "k", "STRUCTQ_LLM": "openai:gpt-4o"}, None, "openai:gpt-4o"),
    ({"STRUCTQ_LLM": "openai:gpt-4o"}, "deepseek:deepseek-chat", "deepseek:deepseek-chat"),
], ids=["nothing", "STRUCTQ_LLM", "key only", "both", "flag wins"])
def test_which_model_is_decided_by_the_settings(env, values: dict[str, str], flag: str | None, llm: str | None) -> None:
    env(values)
    assert Settings.from_env(llm=flag).llm == llm


def test_endpoint_and_bounds_come_from_the_settings(env) -> None:
    env({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "STRUCTQ_LLM_TIMEOUT": "12.5", "STRUCTQ_LLM_RETRIES": "0"})
    settings = Settings.from_env()
    assert settings.llm_base_url == "http://127.0.0.1:9/v1"
    assert CallBounds.of(settings) == CallBounds(timeout_s=12.5, retries=0)


def test_an_agent_uses_its_settings_not_the_environment(env, demo_capabilities) -> None:
    from structq.agent import Agent

    env({"STRUCTQ_LLM": "openai:gpt-4o", "OPENAI_API_KEY": "k"})
    with Agent(demo_capabilities, settings=Settings(llm=None), cache=None, audit=None) as agent:
        assert not agent.has_model
    with Agent(demo_capabilities, settings=Settings.from_env(), cache=None, audit=None) as agent:
        assert agent.has_model


def _reads_of(tree: ast.AST, names: tuple[str, ...]) -> list[int]:
    """Lines where one of ``names`` is read from the environment (``environ.get``, ``getenv``,
    ``environ[...]``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            key = node.args[0]
            if node.func.attr in {"get", "getenv"} and isinstance(key, ast.Constant) and key.value in names:
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in names:
            lines.append(node.lineno)
    return lines


def test_the_model_variables_are_read_only_by_the_settings() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "config.py":
            continue
        if lines := _reads_of(ast.parse(path.read_text(encoding="utf-8")), MODEL_VARIABLES):
            found[path.relative_to(PACKAGE.parent).as_posix()] = lines
    assert not found, f"model configuration read outside structq/config.py: {found}"
    assert _reads_of(ast.parse((PACKAGE / "config.py").read_text(encoding="utf-8")), MODEL_VARIABLES)
