"""README is the user guide: every CLI command and every manifest key must be documented there."""

from __future__ import annotations

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
