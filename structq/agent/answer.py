"""What a question comes back as: the text, its citations, the plan that ran and its results.

Its own module because everything that reads an answer — a conversation keeping it as a turn,
the CLI, the server, the LangChain tool — needs the answer and not the agent that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .llm import CallLog
from .plan import Plan
from .results import PlanResult

if TYPE_CHECKING:
    from .figures import FigureCheck
    from .loop import Round

__all__ = ["Answer"]


@dataclass
class Answer:
    """What ``ask`` returns: the text, its citations, the plan and every step's result."""

    question: str
    text: str
    plan: Plan
    results: PlanResult
    citations: list[dict[str, Any]]
    notes: list[str]
    plan_source: str
    model_calls: CallLog = field(default_factory=CallLog)
    #: Each evaluation of a run that came back empty, and what came of it.
    rounds: list[Round] = field(default_factory=list)
    #: The answer check's verdict on each figure of the model-written reply (``figures``).
    checks: list[FigureCheck] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The stable shape of ``structq ask --json``."""
        return {
            "question": self.question,
            "answer": self.text,
            "citations": self.citations,
            "plan": self.plan.to_dict(),
            "plan_source": self.plan_source,
            "steps": [s.to_dict() for s in self.results.steps.values()],
            "notes": self.notes,
            "model_calls": self.model_calls.to_list(),
            "rounds": [r.to_dict() for r in self.rounds],
            "checks": [c.to_dict() for c in self.checks],
        }
