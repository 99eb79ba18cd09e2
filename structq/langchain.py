"""structq as a LangChain tool, for agents built with ``langchain.agents.create_agent``.

The tool's content is the answer with its citations; its artifact is the plan, the queries
that ran and the rows, for callers that want the data. Errors come back as ``ToolException``
carrying the hint, so the calling agent can rephrase instead of crashing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from structq.errors import StructqError

if TYPE_CHECKING:
    from structq.agent import Agent, Answer
    from structq.capabilities import CapabilitySet

__all__ = ["StructqTool", "StructqToolInput", "describe_capabilities"]


class StructqToolInput(BaseModel):
    """Arguments of the tool."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The question about the company's data, in natural language (any language).")
    vars: dict[str, str | int | float] | None = Field(
        default=None,
        description="Caller variables required by row-level policies, e.g. {\"tenant_id\": 7}. Usually omitted.",
    )


def describe_capabilities(capabilities: "CapabilitySet", *, max_objects: int = 8) -> str:
    """A few lines on what each source can answer, for the tool description."""
    lines = ["Answers questions about the company's data by querying these sources read-only:"]
    for manifest in capabilities:
        objects = manifest.indices if manifest.is_search else manifest.tables
        names = ", ".join(f"{o.name} ({o.description})" if o.description else o.name for o in objects[:max_objects])
        more = f", … {len(objects) - max_objects} more" if len(objects) > max_objects else ""
        about = f": {manifest.description}" if manifest.description else ""
        lines.append(f"- {manifest.source}{about} — {names}{more}")
    lines.append("Returns an answer that cites its sources. Ask one self-contained question per call.")
    return "\n".join(lines)


def _artifact(answer: "Answer") -> dict[str, Any]:
    data = answer.to_dict()
    return {"plan": data["plan"], "steps": data["steps"], "citations": data["citations"], "notes": data["notes"]}


def _content(answer: "Answer") -> str:
    sources = "; ".join(f"[{c['step']}] {c['source']}" + (f"/{c['index']}" if c["index"] else "") for c in answer.citations)
    notes = "".join(f"\nNote: {n}" for n in answer.notes)
    return f"{answer.text}\n\nSources: {sources}{notes}"


def _tool_error(exc: StructqError) -> ToolException:
    hint = f" Hint: {exc.hint}" if exc.hint else ""
    return ToolException(f"{type(exc).__name__}: {exc.message}.{hint}")


class StructqTool(BaseTool):
    """Ask structq a question; returns the answer with citations (artifact: plan, queries, rows)."""

    name: str = "company_data"
    description: str = "Answers questions about the company's data."
    args_schema: type[BaseModel] = StructqToolInput
    response_format: str = "content_and_artifact"
    handle_tool_error: bool = True
    agent: Any = Field(exclude=True)

    @classmethod
    def from_agent(cls, agent: "Agent", *, name: str = "company_data", description: str | None = None) -> "StructqTool":
        return cls(agent=agent, name=name, description=description or describe_capabilities(agent.capabilities))

    def _run(self, question: str, vars: dict[str, Any] | None = None, **_: Any) -> tuple[str, dict[str, Any]]:
        try:
            answer = self.agent.ask(question, vars=vars)
        except StructqError as exc:
            raise _tool_error(exc) from exc
        return _content(answer), _artifact(answer)

    async def _arun(self, question: str, vars: dict[str, Any] | None = None, **_: Any) -> tuple[str, dict[str, Any]]:
        try:
            answer = await self.agent.aask(question, vars=vars)
        except StructqError as exc:
            raise _tool_error(exc) from exc
        return _content(answer), _artifact(answer)
