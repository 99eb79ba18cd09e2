"""Which chat model to use, and calling it with errors that say what went wrong.

Any LangChain chat model works: pass a ``BaseChatModel``, or a ``provider:model`` string
resolved by LangChain's ``init_chat_model`` (``--llm`` / ``STRUCTQ_LLM``). With only
``OPENAI_API_KEY`` set the default is an OpenAI model; ``OPENAI_BASE_URL`` is honoured by the
OpenAI client, so any OpenAI-compatible server works. All of that is read once, by
``structq.config.Settings``; this module only uses it. LangChain is imported only here, lazily.

Every call is bounded: a model built from a ``provider:model`` string gets a request timeout
(``STRUCTQ_LLM_TIMEOUT``, default 60 s; the OpenAI client's own default is 600 s) and no
retries of its own; ``invoke`` retries rate limits and server errors (429, 5xx) at most
``STRUCTQ_LLM_RETRIES`` times (default 2) with exponential backoff. A timeout is not retried:
a server that did not answer in time once is unlikely to answer the same prompt faster.
A model instance passed in keeps its own timeout and retries.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structq.config import DEFAULT_OPENAI_MODEL, Settings
from structq.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["resolve_model", "model_name", "ModelCall", "CallLog", "invoke", "reply_text", "observing_model_calls",
           "DEFAULT_OPENAI_MODEL", "CallBounds"]

HOW_TO_CONFIGURE = (
    "configure a model: pass --llm provider:model (e.g. --llm openai:gpt-4o-mini), or set "
    "STRUCTQ_LLM=provider:model, or set OPENAI_API_KEY (and OPENAI_BASE_URL for an "
    "OpenAI-compatible server such as vLLM, Ollama, DeepSeek or llama.cpp). Verified example "
    "questions and `structq run PLAN.yaml` work without a model."
)


@dataclass(frozen=True)
class CallBounds:
    """How long one model request may take, and how often a 429/5xx is retried."""

    timeout_s: float = 60.0
    retries: int = 2
    #: First backoff; doubled per retry, capped at ``backoff_cap_s`` (a server's Retry-After too).
    backoff_s: float = 0.5
    backoff_cap_s: float = 8.0

    @classmethod
    def of(cls, settings: Settings) -> "CallBounds":
        """The bounds ``settings`` name (``STRUCTQ_LLM_TIMEOUT``, ``STRUCTQ_LLM_RETRIES``)."""
        return cls(timeout_s=settings.llm_timeout_s, retries=settings.llm_retries)

    @classmethod
    def from_env(cls) -> "CallBounds":
        """The bounds of ``Settings.from_env()``."""
        return cls.of(Settings.from_env())

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based)."""
        wait = retry_after if retry_after is not None else self.backoff_s * 2**attempt
        return max(0.0, min(wait, self.backoff_cap_s))


def resolve_model(llm: "BaseChatModel | str | None", settings: Settings | None = None) -> "BaseChatModel":
    """A chat model from an instance, a ``provider:model`` string, or ``settings.llm``
    (``settings``: by default ``Settings.from_env()``, where the model configuration is read)."""
    if llm is not None and not isinstance(llm, str):
        return llm
    settings = settings or Settings.from_env()
    spec = llm or settings.llm
    if not spec:
        raise ConfigError("no language model is configured", hint=HOW_TO_CONFIGURE)
    from langchain.chat_models import init_chat_model

    provider, _, name = spec.partition(":")
    kwargs: dict[str, Any] = {"model": name or provider}
    if name:
        kwargs["model_provider"] = provider
    if (provider == "openai" or not name) and settings.llm_base_url:
        kwargs["base_url"] = settings.llm_base_url
    bounds = CallBounds.of(settings)
    try:
        try:  # retries are ours (invoke); the provider only bounds each request
            return init_chat_model(**kwargs, timeout=bounds.timeout_s, max_retries=0)
        except (TypeError, ValueError):  # a provider without these settings
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
    #: Requests sent: 1, plus one per retried rate limit or server error.
    requests: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "elapsed_ms": round(self.elapsed_ms, 1),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "requests": self.requests}


@dataclass
class CallLog:
    """Every model call made for one question (counted in tests, written to the audit log)."""

    calls: list[ModelCall] = field(default_factory=list)

    def count(self, purpose: str | None = None) -> int:
        return sum(1 for c in self.calls if purpose is None or c.purpose == purpose)

    def to_list(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.calls]


def _status(exc: BaseException) -> int | None:
    """The HTTP status of a provider error, when it carries one."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        return float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None


def _retryable(exc: BaseException) -> bool:
    """Rate limits and server errors pass; a bad request, a bad key or a timeout will not."""
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500)


def invoke(model: Any, messages: "list[BaseMessage]", *, purpose: str, log: CallLog,
           bounds: CallBounds | None = None, on_text: "Callable[[str], None] | None" = None) -> "AIMessage":
    """Call the model, retrying 429/5xx with backoff; any other failure, or a retryable one
    that outlasts the retries, becomes ``ModelError`` with the provider's message.

    ``on_text``: stream the reply, handing each piece of text to it as it arrives (a model
    that cannot stream gives one piece). A request fails over to a retry only while nothing
    was handed on: text already shown cannot be taken back by a second, different reply."""
    bounds = bounds or CallBounds.from_env()
    started = time.perf_counter()
    requests = 0
    streamed = [False]

    def passed_on(text: str) -> None:
        streamed[0] = True
        on_text(text)  # type: ignore[misc]

    while True:
        requests += 1
        try:
            reply = model.invoke(messages) if on_text is None else _stream(model, messages, passed_on)
            break
        except Exception as exc:
            if _retryable(exc) and requests <= bounds.retries and not streamed[0]:
                time.sleep(bounds.backoff(requests - 1, _retry_after(exc)))
                continue
            _logged(log, ModelCall(purpose, (time.perf_counter() - started) * 1000, requests=requests), "error")
            tried = f" after {requests} requests" if requests > 1 else ""
            raise ModelError(f"the model call failed{tried} ({type(exc).__name__}): {exc}",
                             hint="check the model name, the API key and OPENAI_BASE_URL, that the server is "
                                  "reachable, and STRUCTQ_LLM_TIMEOUT") from exc
    usage = getattr(reply, "usage_metadata", None) or {}
    _logged(log, ModelCall(purpose, (time.perf_counter() - started) * 1000,
                           usage.get("input_tokens"), usage.get("output_tokens"), requests), "ok")
    return reply


#: Who else hears of each model call in this context (a service's metrics), with its outcome.
_call_listener: contextvars.ContextVar[Callable[[ModelCall, str], None] | None] = contextvars.ContextVar(
    "structq_model_calls", default=None)


@contextmanager
def observing_model_calls(listener: Callable[[ModelCall, str], None]) -> Iterator[None]:
    """``listener(call, "ok" | "error")`` after each model call made in this context."""
    token = _call_listener.set(listener)
    try:
        yield
    finally:
        _call_listener.reset(token)


def _logged(log: CallLog, call: ModelCall, outcome: str) -> None:
    log.calls.append(call)
    listener = _call_listener.get()
    if listener is not None:
        listener(call, outcome)


def _stream(model: Any, messages: "list[BaseMessage]", on_text: "Callable[[str], None]") -> "AIMessage":
    """The whole reply of a streamed call (chunks added up, usage included), each piece of
    text handed to ``on_text`` on the way.

    Some OpenAI-compatible servers ignore ``stream`` and send one whole completion, which the
    client reads as a stream of no chunks ("No generation chunks were returned"): then the
    call is made once more without streaming, and its text handed on as one piece."""
    from langchain_core.messages import AIMessage

    reply: Any = None
    try:
        for chunk in model.stream(messages):
            reply = chunk if reply is None else reply + chunk
            text = reply_text(chunk)
            if text:
                on_text(text)
    except ValueError as exc:
        if reply is not None or "no generation chunks" not in str(exc).lower():
            raise
    if reply is not None:
        return reply  # type: ignore[no-any-return]
    whole = model.invoke(messages)
    text = reply_text(whole)
    if text:
        on_text(text)
    return whole if whole is not None else AIMessage(content="")  # type: ignore[no-any-return]


def reply_text(reply: Any) -> str:
    """The text of a model reply (content may be a string or a list of parts)."""
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content or "")
