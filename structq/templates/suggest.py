"""The verified questions closest to one that nothing answers ("did you mean …").

Closeness is the similarity of the question's text to each example's fixed words (a slotted
example counts only the words outside its slots, so its values do not pull it up or down).
Slotted examples are shown with their slots as placeholders: ``{month}各部门绩效为{grade}的人数是多少``.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import TYPE_CHECKING

from .text import match_text

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

    from .match import TemplateSet

__all__ = ["closest_questions"]

#: Below this similarity an example is not worth suggesting.
MIN_SIMILARITY = 0.25


def closest_questions(question: str, capabilities: CapabilitySet, templates: TemplateSet,
                      limit: int = 3) -> list[str]:
    """Up to ``limit`` verified questions (slot placeholders shown), closest first."""
    text = match_text(question).casefold()
    shapes = {t.example.question: (t.shape, t.fixed) for t in templates.templates}
    scored: list[tuple[float, int, str]] = []
    for i, (_, example) in enumerate(capabilities.examples()):
        shape, fixed = shapes.get(example.question, (match_text(example.question),) * 2)
        matcher = SequenceMatcher(None, text, fixed.casefold(), autojunk=False)
        score = matcher.ratio()
        if score >= MIN_SIMILARITY:
            scored.append((-score, i, shape))
    return [shape for _, _, shape in sorted(scored)[:limit]]
