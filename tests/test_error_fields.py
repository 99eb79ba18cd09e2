"""Errors carry what they are about (the plan step, the model's unusable reply) as constructor
fields: an error made without a step is re-made with it (``at_step``), never patched afterwards.
Pure: no engine or model involved."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from scripted import text_reply

from structq import errors
from structq.errors import ExecutionError, PlanError, QueryTimeout, RepairsExhausted, SandboxViolation, StructqError

PACKAGE = Path(__file__).resolve().parent.parent / "structq"

#: One error of every class that names a plan step, made without one.
STEPLESS: list[StructqError] = [
    PlanError("bad reference", hint="name the column"),
    SandboxViolation("unknown_column", "no column x", hint="columns: a, b", source="hr"),
    ExecutionError("the query failed", source="hr", query="SELECT 1", cause="driver said no", hint="fix it"),
    errors.SourceUnavailable("connection refused", source="hr"),
    QueryTimeout("took too long", source="hr", query="SELECT pg_sleep(9)"),
]


def _fields(exc: StructqError) -> dict[str, object]:
    return {k: v for k, v in vars(exc).items() if k != "step"}


@pytest.mark.parametrize("exc", STEPLESS, ids=lambda e: type(e).__name__)
def test_at_step_makes_the_same_error_naming_the_step(exc: StructqError) -> None:
    located = exc.at_step("grades")  # type: ignore[attr-defined]
    assert type(located) is type(exc) and located is not exc
    assert located.step == "grades" and exc.step is None
    assert _fields(located) == _fields(exc)  # nothing else lost on the way
    assert located.retryable == exc.retryable


@pytest.mark.parametrize("exc", STEPLESS, ids=lambda e: type(e).__name__)
def test_an_error_that_names_its_step_keeps_it(exc: StructqError) -> None:
    first = exc.at_step("first")  # type: ignore[attr-defined]
    assert first.at_step("second") is first


def test_repairs_exhausted_lives_in_the_error_tree_and_the_old_import_still_works() -> None:
    from structq.agent import RepairsExhausted as from_agent

    assert from_agent is RepairsExhausted and issubclass(RepairsExhausted, errors.ModelError)
    assert "RepairsExhausted" in errors.__all__ and "RepairsExhausted" in (errors.__doc__ or "")


def test_an_unreadable_reply_is_a_plan_error_carrying_the_reply(demo_capabilities) -> None:
    from structq.agent.planner import Planner

    planner = Planner(None, demo_capabilities)
    with pytest.raises(PlanError) as info:
        planner.parse_reply(text_reply("I would rather not write JSON today"))
    assert info.value.raw == "I would rather not write JSON today"


def _bolted_on(tree: ast.AST) -> list[int]:
    """Lines assigning ``step``/``raw`` on anything but ``self`` (an error patched after it was made)."""
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            if (isinstance(target, ast.Attribute) and target.attr in {"step", "raw"}
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self")):
                lines.append(target.lineno)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in {"step", "raw"}):
            lines.append(node.lineno)
    return lines


def test_no_error_gets_its_step_or_reply_bolted_on_after_construction() -> None:
    found = {path.relative_to(PACKAGE.parent).as_posix(): lines for path in sorted(PACKAGE.rglob("*.py"))
             if (lines := _bolted_on(ast.parse(path.read_text(encoding="utf-8"))))}
    assert not found, f"assignments to .step / .raw outside a constructor: {found}"


def test_the_bolted_on_finder_sees_what_it_looks_for() -> None:
    assert _bolted_on(ast.parse("exc.step = key\nsetattr(e, 'raw', r)\nself.step = step")) == [1, 2]
