"""Reading a plan file for ``structq run``: every mistake names the file, and the spot in it.

A plan file has the shape of a manifest example (``steps:`` of ``output_key``, ``source``,
``query``, ``index``, ``purpose``), so a misspelt key gets the closest valid one, and a YAML
error its ``file:line:column``. A file that cannot be read is a usage error (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from structq.agent import Plan

__all__ = ["read_plan_file"]


def read_plan_file(path: Path) -> "Plan":
    from structq.agent import Plan
    from structq.capabilities.loader import read_yaml
    from structq.errors import ManifestError, PlanError

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise typer.BadParameter(f"cannot read plan file {path}: {reason}", param_hint="PLAN.yaml") from None
    try:
        data, positions = read_yaml(text, str(path))
    except ManifestError as exc:
        raise PlanError(f"{exc.location}: {exc.message} in the plan file", hint=exc.hint) from None
    _check_keys(data, positions)
    try:
        return Plan.parse(data)
    except PlanError as exc:
        raise PlanError(f"{path}: {exc.message}", step=exc.step, hint=exc.hint) from None


def _check_keys(data: Any, positions: Any) -> None:
    """Unknown keys at the top or in a step, with the closest valid key and where they are."""
    from structq.agent.plan import Plan, Step
    from structq.capabilities.hints import closest
    from structq.errors import PlanError

    if not isinstance(data, dict):
        return
    places: list[tuple[tuple[str | int, ...], dict[str, Any], list[str]]] = [((), data, list(Plan.model_fields))]
    steps = data.get("steps")
    if isinstance(steps, list):
        places += [(("steps", i), step, list(Step.model_fields)) for i, step in enumerate(steps) if isinstance(step, dict)]
    for base, mapping, valid in places:
        for key in mapping:
            if key in valid:
                continue
            line, column = positions.of((*base, str(key)), key=True)
            where = ".".join(str(p) for p in base) or "the top level"
            suggestion = closest(str(key), valid)
            hint = f"did you mean {suggestion!r}?" if suggestion else f"valid keys: {', '.join(valid)}"
            raise PlanError(f"{positions.file}:{line}:{column}: unknown key {key!r} at {where}", hint=hint)
