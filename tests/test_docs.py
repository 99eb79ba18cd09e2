"""README is the user guide: every CLI command, manifest key, refusal code and `STRUCTQ_*`
variable must be documented there."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from structq.capabilities.model import Manifest
from structq.cli import app

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _commands() -> list[str]:
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    names += [g.name for g in app.registered_groups]
    return names


def _keys(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    seen = seen or set()
    if model in seen:
        return set()
    seen.add(model)
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        keys.add(info.alias or name)
        for arg in _types(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                keys |= _keys(arg, seen)
    return keys


def _types(annotation: object) -> list[object]:
    args = typing.get_args(annotation)
    return [t for a in args for t in _types(a)] if args else [annotation]


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_in_readme(command: str) -> None:
    assert f"structq {command}" in README, f"README does not document `structq {command}`"


@pytest.mark.parametrize("key", sorted(_keys(Manifest)))
def test_every_manifest_key_is_in_readme(key: str) -> None:
    assert re.search(rf"`{re.escape(key)}`", README), f"README's manifest reference lacks the key `{key}`"


def test_readme_gives_the_two_commands() -> None:
    assert "structq demo" in README and "bash scripts/test.sh" in README
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci


# --------------------------------------------------------------------------------------------
# Refusal codes and STRUCTQ_* variables: found in the code, so a new one cannot go undocumented
# --------------------------------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "structq"

#: Calls that raise a SandboxViolation, and which positional argument is its code.
_CODE_ARGUMENT = {"fail": 0, "violation": 0, "refuse": 0, "SandboxViolation": 0, "refuse_name": 1}

#: ``STRUCTQ_*`` strings in the code that are not settings, and why.
NOT_SETTINGS = {
    "STRUCTQ_BOOLEAN": "a column type the local executor declares in its in-memory SQLite",
    "STRUCTQ_JSON_TEXT": "a column type the local executor declares in its in-memory SQLite",
    "STRUCTQ_SERVE_OPTIONS": "how `structq serve` hands its options to its own worker processes",
}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _refusal_codes() -> set[str]:
    """Every code the sandbox raises literally (``fail("code", …)``, ``code="…"``), plus the
    SQL sandbox's list (some of its codes are chosen at run time)."""
    from structq.safety.sql import CODES

    codes = set(CODES)
    for path in (PACKAGE / "safety").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            position = _CODE_ARGUMENT.get(_called_name(node) or "")
            arguments = [*([node.args[position]] if position is not None and len(node.args) > position else []),
                         *(k.value for k in node.keywords if k.arg == "code")]
            codes |= {a.value for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return codes


def _settings() -> set[str]:
    """Every whole string ``STRUCTQ_…`` in the code: the names it reads from the environment
    (messages and docstrings that mention one are not whole strings)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"STRUCTQ_[A-Z0-9_]+", node.value):
                    names.add(node.value)
    return names


def test_the_code_scans_find_what_they_look_for() -> None:
    """Guards the two scans below: a scan that silently found nothing would pass them."""
    codes = _refusal_codes()
    assert {"denied_field", "script", "unknown_column", "string_size", "leading_wildcard"} <= codes
    assert len(codes) > 25
    settings = _settings()
    assert {"STRUCTQ_LLM", "STRUCTQ_CACHE_DIR", "STRUCTQ_MANIFESTS", "STRUCTQ_STORE_URL"} <= settings
    assert set(NOT_SETTINGS) <= settings, "a name NOT_SETTINGS excuses is no longer in the code"


@pytest.mark.parametrize("code", sorted(_refusal_codes()))
def test_every_refusal_code_is_in_readme(code: str) -> None:
    assert f"| `{code}` |" in README, f"README's refusal codes lack `{code}`"


@pytest.mark.parametrize("name", sorted(_settings() - set(NOT_SETTINGS)))
def test_every_structq_variable_is_in_readme(name: str) -> None:
    assert re.search(rf"`{name}[`=]", README), f"README does not document the variable {name}"
