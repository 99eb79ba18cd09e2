"""structq as a LangChain tool, for agents built with ``langchain.agents.create_agent``:
``as_tool(agent, vars=…)``.

This module imports the agent, never the other way round (DESIGN §2: ``langchain`` sits above
``agent``), which is why the tool is made here from an agent rather than by a method of it.

The tool's content is the answer with its citations; its artifact is the plan, the queries
that ran and the rows, for callers that want the data. Errors come back as ``ToolException``
carrying the hint, so the calling agent can rephrase instead of crashing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from structq.errors import RepairsExhausted, StructqError

if TYPE_CHECKING:
    from structq.agent import Agent, Answer
    from structq.capabilities import CapabilitySet

__all__ = ["StructqTool", "StructqToolInput", "as_tool", "describe_capabilities"]


class StructqToolInput(BaseModel):
    """Arguments of the tool: the question only.

    Row-filter variables (``tenant_id``…) are fixed by the application when it creates the tool
    (``as_tool(agent, vars=…)``), never chosen by the calling model: a prompt-injected model that
    could set them could read another tenant's rows.
    """

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The question about the company's data, in natural language (any language).")


def describe_capabilities(capabilities: "CapabilitySet", *, max_objects: int = 8) -> str:
    """A few lines on what each source can answer, for the tool description."""
    from structq.sources import objects as source_objects

    lines = ["Answers questions about the company's data by querying these sources read-only:"]
    for manifest in capabilities:
        objects = source_objects(manifest)
        names = ", ".join(f"{o.name} ({_one_line(o.description)})" if o.description else o.name
                          for o in objects[:max_objects])
        more = f", … {len(objects) - max_objects} more" if len(objects) > max_objects else ""
        about = f": {_one_line(manifest.description)}" if manifest.description else ""
        lines.append(f"- {manifest.source}{about} — {names}{more}")
    lines.append("Returns an answer that cites its sources. Ask one self-contained question per call.")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """A manifest description (often a multi-line YAML block) as one line of the list."""
    return " ".join(text.split())


def _sentence(text: str) -> str:
    """``text`` ending in exactly one full stop (or its own closing punctuation)."""
    text = text.strip()
    return text if text.endswith((".", "。", "!", "?", "！", "？")) else f"{text}."


def _artifact(answer: "Answer") -> dict[str, Any]:
    data = answer.to_dict()
    return {"plan": data["plan"], "steps": data["steps"], "citations": data["citations"], "notes": data["notes"]}


def _content(answer: "Answer") -> str:
    """The answer text, the steps it cites (``[step] source/index``), and any notes."""
    sources = "; ".join(f"[{c['step']}] {c['source']}" + (f"/{c['index']}" if c.get("index") else "")
                        for c in answer.citations)
    notes = "".join(f"\nNote: {n}" for n in answer.notes)
    return f"{answer.text}\n\nSources: {sources or 'none (no step ran)'}{notes}"


def _reply(answer: "Answer") -> tuple[str, dict[str, Any]]:
    """The tool's (content, artifact) pair."""
    return _content(answer), _artifact(answer)


def _tool_error(exc: StructqError) -> ToolException:
    """What the calling model reads: the error's kind (and code), what went wrong, the hint.

    For ``RepairsExhausted`` only the summary line is kept (it names the last error, its code
    and hint); the listing of every attempted plan is for the audit log, not the caller.
    """
    message = exc.message.split("\n", 1)[0] if isinstance(exc, RepairsExhausted) else exc.message
    code = getattr(exc, "code", None)
    step = getattr(exc, "step", None)
    kind = type(exc).__name__ + (f" [{code}]" if code else "") + (f" in step {step!r}" if step else "")
    hint = f" Hint: {_sentence(exc.hint)}" if exc.hint else ""
    return ToolException(f"{kind}: {_sentence(message)}{hint}")


@contextmanager
def _structq_errors_as_tool_errors() -> Iterator[None]:
    """Turn a ``StructqError`` into the ``ToolException`` the calling agent reads."""
    try:
        yield
    except StructqError as exc:
        raise _tool_error(exc) from exc


class StructqTool(BaseTool):
    """Ask structq a question; returns the answer with citations (artifact: plan, queries, rows)."""

    name: str = "company_data"
    description: str = "Answers questions about the company's data."
    args_schema: type[BaseModel] = StructqToolInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True
    agent: Any = Field(exclude=True)
    #: Row-filter variables for every question, set by the application (see ``StructqToolInput``).
    vars: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @classmethod
    def from_agent(cls, agent: "Agent", *, name: str = "company_data", description: str | None = None,
                   vars: dict[str, Any] | None = None) -> "StructqTool":
        return cls(agent=agent, name=name, vars=dict(vars or {}),
                   description=description or describe_capabilities(agent.capabilities))

    def _run(self, question: str, **_: Any) -> tuple[str, dict[str, Any]]:
        with _structq_errors_as_tool_errors():
            answer = self.agent.ask(question, vars=self.vars)  # safe inside a running event loop too
        return _reply(answer)

    async def _arun(self, question: str, **_: Any) -> tuple[str, dict[str, Any]]:
        with _structq_errors_as_tool_errors():
            answer = await self.agent.aask(question, vars=self.vars)
        return _reply(answer)


def as_tool(agent: "Agent", *, name: str = "company_data", description: str | None = None,
            vars: dict[str, Any] | None = None) -> StructqTool:
    """``agent`` as a LangChain tool. ``description`` defaults to what the manifests declare;
    ``vars`` (row-filter variables) are fixed here, by the application, for every question."""
    return StructqTool.from_agent(agent, name=name, description=description, vars=vars)
