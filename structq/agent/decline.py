"""Declining honestly: the answer to a plan that says ``cannot_answer``.

A planning model that finds the question unanswerable (the data is denied, no source holds it,
it is ambiguous beyond repair) returns ``{"cannot_answer": "reason", "steps": []}``. That is an
answer, not an error: no query runs, nothing is repaired, and it costs the one planning call.
The text is the model's reason (written in the question's language, as the planning prompt asks)
followed by questions that *can* be asked: the verified examples closest to the question, so the
suggestion is always something that works.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .engine import PlanResult
from .synthesis import is_chinese

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

    from .plan import Plan

__all__ = ["decline_text", "declined_run", "suggested_questions"]

#: Verified example questions offered after a refusal.
SUGGESTIONS = 3


def _grams(text: str) -> set[str]:
    """Character bigrams of the CJK runs and lower-cased words of the rest: enough to rank a
    handful of example questions by how much they share with the question."""
    grams = {w.lower() for w in re.findall(r"[A-Za-z0-9_]+", text)}
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        grams.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return grams


def suggested_questions(question: str, capabilities: "CapabilitySet", limit: int = SUGGESTIONS) -> list[str]:
    """The verified example questions most similar to ``question`` (ties keep manifest order)."""
    asked = _grams(question)
    examples = [example.question for _, example in capabilities.examples()]
    ranked = sorted(enumerate(examples), key=lambda item: (-len(asked & _grams(item[1])), item[0]))
    return [text for _, text in ranked[:limit]]


def decline_text(question: str, plan: "Plan", capabilities: "CapabilitySet") -> str:
    """The refusal: the reason, then questions that can be answered instead."""
    zh = is_chinese(question)
    reason = (plan.cannot_answer or "").strip()
    lines = [f"无法回答：{reason}" if zh else f"This cannot be answered: {reason}"]
    suggestions = suggested_questions(question, capabilities)
    if suggestions:
        lines += ["", "可以这样问，例如：" if zh else "Questions that can be answered, for example:"]
        lines += [f"- {s}" for s in suggestions]
    return "\n".join(lines)


def declined_run(plan: "Plan") -> PlanResult:
    """The (empty) run of a declined plan: no step, no note."""
    return PlanResult(plan, {}, [], 0.0)
