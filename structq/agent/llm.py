"""Which chat model to use, and calling it with errors that say what went wrong.

Any LangChain chat model works: pass a ``BaseChatModel``, or a ``provider:model`` string
resolved by LangChain's ``init_chat_model`` (``--llm`` / ``STRUCTQ_LLM``). With only
``OPENAI_API_KEY`` set the default is an OpenAI model; ``OPENAI_BASE_URL`` is honoured by the
OpenAI client, so any OpenAI-compatible server works. LangChain is imported only here, lazily.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["resolve_model", "model_name", "ModelCall", "CallLog", "invoke", "reply_text", "DEFAULT_OPENAI_MODEL"]

DEFAULT_OPENAI_MODEL = "openai:gpt-4o-mini"

HOW_TO_CONFIGURE = (
    "configure a model: pass --llm provider:model (e.g. --llm openai:gpt-4o-mini), or set "
    "STRUCTQ_LLM=provider:model, or set OPENAI_API_KEY (and OPENAI_BASE_URL for an "
    "OpenAI-compatible server such as vLLM, Ollama, DeepSeek or llama.cpp). Verified example "
    "questions and `structq run PLAN.yaml` work without a model."
)


def resolve_model(llm: "BaseChatModel | str | None") -> "BaseChatModel":
    """A chat model from an instance, a ``provider:model`` string, or the environment."""
    if llm is not None and not isinstance(llm, str):
        return llm
    spec = llm or os.environ.get("STRUCTQ_LLM") or (DEFAULT_OPENAI_MODEL if os.environ.get("OPENAI_API_KEY") else None)
    if not spec:
        raise ConfigError("no language model is configured", hint=HOW_TO_CONFIGURE)
    from langchain.chat_models import init_chat_model

    provider, _, name = spec.partition(":")
    kwargs: dict[str, Any] = {"model": name or provider}
    if name:
        kwargs["model_provider"] = provider
    if (provider == "openai" or not name) and os.environ.get("OPENAI_BASE_URL"):
        kwargs["base_url"] = os.environ["OPENAI_BASE_URL"]
    try:
        return init_chat_model(**kwargs)
    except ImportError as exc:
        raise ConfigError(f"the model {spec!r} needs a package that is not installed: {exc}",
                          hint=f"pip install the LangChain integration for {provider!r} (e.g. langchain-{provider})") from None
    except Exception as exc:  # provider constructors raise their own types (missing key, bad name)
        raise ConfigError(f"cannot create the model {spec!r}: {exc}", hint=HOW_TO_CONFIGURE) from None


def model_name(model: "BaseChatModel") -> str:
    """A stable name of the model for cache keys and the audit log."""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


@dataclass(frozen=True)
class ModelCall:
    """One call to the model: what for, how long, and the tokens the provider reported."""

    purpose: str
    elapsed_ms: float
    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "elapsed_ms": round(self.elapsed_ms, 1),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass
class CallLog:
    """Every model call made for one question (counted in tests, written to the audit log)."""

    calls: list[ModelCall] = field(default_factory=list)

    def count(self, purpose: str | None = None) -> int:
        return sum(1 for c in self.calls if purpose is None or c.purpose == purpose)

    def to_list(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.calls]


def invoke(model: Any, messages: "list[BaseMessage]", *, purpose: str, log: CallLog) -> "AIMessage":
    """Call the model; any provider failure becomes ``ModelError`` with the provider's message."""
    started = time.perf_counter()
    try:
        reply = model.invoke(messages)
    except Exception as exc:
        log.calls.append(ModelCall(purpose, (time.perf_counter() - started) * 1000))
        raise ModelError(f"the model call failed ({type(exc).__name__}): {exc}",
                         hint="check the model name, the API key and OPENAI_BASE_URL, and that the server is reachable") from exc
    usage = getattr(reply, "usage_metadata", None) or {}
    log.calls.append(ModelCall(purpose, (time.perf_counter() - started) * 1000,
                               usage.get("input_tokens"), usage.get("output_tokens")))
    return reply


def reply_text(reply: Any) -> str:
    """The text of a model reply (content may be a string or a list of parts)."""
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content or "")
