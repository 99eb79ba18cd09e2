"""Multi-turn questions: earlier questions, plans and result summaries go into the next prompt,
so that "那他上个月的项目呢？" after a question about 张三 resolves 张三.

A conversation is history only: the agent reads it (``context``) before planning and adds the
answered question to it (``record``); ``Conversation.ask`` is a shorthand for
``agent.ask(question, conversation=…)``. It knows the agent only as something that answers
questions in a conversation (``Answers``), so the agent may build conversations without the
two modules depending on each other."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .answer import Answer

__all__ = ["Answers", "Conversation", "Turn"]

#: Rows of each step's result kept in the summary; enough to resolve "he", "those", "that project".
SUMMARY_ROWS = 5


class Answers(Protocol):
    """What a conversation asks its questions of (``Agent``)."""

    def ask(self, question: str, *, conversation: "Conversation", **kwargs: Any) -> "Answer": ...


@dataclass(frozen=True)
class Turn:
    question: str
    plan: dict[str, Any]
    summary: str


def summarise(answer: "Answer") -> str:
    """A short text of what an answer found: each step's columns and first rows, and the answer."""
    lines = []
    for result in answer.results.steps.values():
        head = json.dumps([list(r) for r in result.rows[:SUMMARY_ROWS]], ensure_ascii=False, default=str)
        more = f" (+{result.row_count - SUMMARY_ROWS} more)" if result.row_count > SUMMARY_ROWS else ""
        lines.append(f"  [{result.output_key}] columns {list(result.columns)}: {head}{more}")
    if answer.text:
        lines.append(f"  answer: {answer.text[:500]}")
    return "\n".join(lines)


@dataclass
class Conversation:
    """Questions asked in sequence on one agent; each sees the earlier turns."""

    agent: Answers
    turns: list[Turn] = field(default_factory=list)
    max_turns: int = 6

    def context(self) -> str:
        """The conversation so far as prompt text (the most recent ``max_turns`` turns)."""
        blocks = []
        for turn in self.turns[-self.max_turns :]:
            steps = "; ".join(f"{s['output_key']}: {s['query'] if isinstance(s['query'], str) else json.dumps(s['query'], ensure_ascii=False)}"
                              for s in turn.plan.get("steps", []))
            blocks.append(f"Q: {turn.question}\n  plan: {steps}\n{turn.summary}")
        return "\n".join(blocks)

    def ask(self, question: str, **kwargs: Any) -> "Answer":
        """``agent.ask`` in this conversation (which then records the turn)."""
        return self.agent.ask(question, conversation=self, **kwargs)

    def record(self, answer: "Answer") -> None:
        """Keep an answered question as the next turn."""
        self.turns.append(Turn(answer.question, answer.plan.to_dict(), summarise(answer)))

    def reset(self) -> None:
        self.turns.clear()
