"""Scripted chat models: the only models tests use. Nothing here reaches a network.

``ScriptedModel`` replays a list of replies and records every prompt it was sent, so tests can
count calls and read what the model was told. ``tool_calling=True`` makes it accept
``bind_tools`` (replies are then tool-call messages); without it, ``bind_tools`` raises
``NotImplementedError`` like LangChain's fake models, and the planner reads JSON text.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedModel(FakeMessagesListChatModel):
    """Replays ``responses`` in order and keeps the prompts in ``prompts``."""

    prompts: list[list[BaseMessage]] = []
    tool_calling: bool = False
    model_name: str = "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        if not self.tool_calling:
            raise NotImplementedError("this scripted model does not call tools")
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        if len(self.prompts) > len(self.responses):
            raise AssertionError(f"the scripted model was called {len(self.prompts)} times; "
                                 f"only {len(self.responses)} replies were scripted")
        return ChatResult(generations=[ChatGeneration(message=self.responses[len(self.prompts) - 1])])

    @property
    def calls(self) -> int:
        return len(self.prompts)

    def prompt_text(self, call: int) -> str:
        """Everything sent in call ``call`` (0-based) as one string."""
        return "\n".join(str(m.content) for m in self.prompts[call])


def plan_reply(plan: dict[str, Any], *, tool: bool = False, fenced: bool = True) -> AIMessage:
    """A model reply carrying ``plan``: a tool call, or JSON text (optionally in a ```json fence)."""
    if tool:
        return AIMessage(content="", tool_calls=[{"name": "submit_plan", "args": plan, "id": "call_1"}])
    body = json.dumps(plan, ensure_ascii=False, indent=1)
    return AIMessage(content=f"Here is the plan.\n```json\n{body}\n```" if fenced else body)


def text_reply(text: str) -> AIMessage:
    return AIMessage(content=text)


def scripted(*replies: AIMessage, tool_calling: bool = False) -> ScriptedModel:
    return ScriptedModel(responses=list(replies), prompts=[], tool_calling=tool_calling)
