"""Settings: command-line flags > environment (``STRUCTQ_*``) > defaults.

Kept free of heavy imports: the CLI reads it before deciding what else to load.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "DEFAULT_OPENAI_MODEL", "DEFAULT_SEARCH_MEMORY", "default_demo_dir", "user_cache_dir",
           "user_state_dir", "threads_from_env", "search_memory", "search_memory_bound"]

APP = "structq"

#: The model when only ``OPENAI_API_KEY`` is set (no ``--llm``, no ``STRUCTQ_LLM``).
DEFAULT_OPENAI_MODEL = "openai:gpt-4o-mini"


def _platform_dir(kind: str) -> Path:
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")(APP))


def cache_enabled(env: Mapping[str, str]) -> bool:
    """Whether ``STRUCTQ_CACHE`` leaves the caches (plans, large manifests) on."""
    return env.get("STRUCTQ_CACHE", "1") not in ("0", "off", "false")


def user_cache_dir() -> Path:
    """Where the plan cache lives (``STRUCTQ_CACHE_DIR`` overrides)."""
    return Path(os.environ.get("STRUCTQ_CACHE_DIR") or _platform_dir("cache"))


def user_state_dir() -> Path:
    """Where the audit log lives (``STRUCTQ_STATE_DIR`` overrides)."""
    return Path(os.environ.get("STRUCTQ_STATE_DIR") or _platform_dir("state"))


def default_demo_dir() -> Path:
    """Where ``structq demo`` builds the demo company unless ``--dir``/``STRUCTQ_DEMO_DIR`` says."""
    return Path(os.environ.get("STRUCTQ_DEMO_DIR") or (_platform_dir("data") / "demo"))


@dataclass(frozen=True)
class Settings:
    """What a run needs to know besides the manifests; built by the CLI or the caller.

    The model configuration is read here and nowhere else: ``llm`` is the ``provider:model``
    to create (``--llm``, else ``STRUCTQ_LLM``, else ``DEFAULT_OPENAI_MODEL`` when
    ``OPENAI_API_KEY`` is set; None: no model), with its endpoint and call bounds.
    """

    llm: str | None = None
    #: ``OPENAI_BASE_URL``: any OpenAI-compatible server (vLLM, Ollama, DeepSeek, llama.cpp).
    llm_base_url: str | None = None
    #: Seconds one model request may take (``STRUCTQ_LLM_TIMEOUT``), and how often a 429/5xx
    #: is retried (``STRUCTQ_LLM_RETRIES``); see ``agent.llm.CallBounds``.
    llm_timeout_s: float = 60.0
    llm_retries: int = 2
    max_repairs: int = 2
    #: Revised plans after a run that came back empty (see ``agent.loop``); 0 turns it off.
    max_replans: int = 1
    #: Ask the model after each step whether to go on, revise the rest or stop (``agent.adaptive``).
    adaptive: bool = False
    timezone: str = "local"
    audit_path: Path | None = None
    audit_enabled: bool = True
    #: Keep the answer text in the audit line (it quotes result rows, so off by default).
    audit_answers: bool = False
    cache_enabled: bool = True
    #: Schema linking: a catalogue of at most this many tokens of manifest text is shown whole;
    #: a larger one is pruned per question to about ``link_tokens`` (see ``structq.linking``).
    prompt_tokens: int = 8000
    link_tokens: int = 3000
    #: The catalogue map of the routing call made when linking is not confident; 0: never route.
    route_tokens: int = 2000
    #: Verified examples shown in the planning prompt, the most relevant first (0: all of them).
    plan_examples: int = 3
    #: Threads for concurrent questions: plans in flight, and steps running, at once (``Engine``);
    #: None sizes them from the sources (``agent.engine.work_threads``).
    threads: int | None = None
    #: When a question cannot be planned: "keywords" runs a labelled keyword search over the
    #: search indices instead (``agent.fallback``); None raises the planning error.
    fallback: str | None = None

    @classmethod
    def from_env(cls, **overrides: object) -> "Settings":
        """Defaults, then ``STRUCTQ_*`` variables, then the explicit ``overrides`` (flags)."""
        env = os.environ
        values: dict[str, object] = {
            "llm": env.get("STRUCTQ_LLM") or (DEFAULT_OPENAI_MODEL if env.get("OPENAI_API_KEY") else None),
            "llm_base_url": env.get("OPENAI_BASE_URL") or None,
            "llm_timeout_s": _seconds("STRUCTQ_LLM_TIMEOUT", env.get("STRUCTQ_LLM_TIMEOUT", "60")),
            "llm_retries": _whole_number("STRUCTQ_LLM_RETRIES", env.get("STRUCTQ_LLM_RETRIES", "2")),
            "max_repairs": _whole_number("STRUCTQ_MAX_REPAIRS", env.get("STRUCTQ_MAX_REPAIRS", "2")),
            "max_replans": _whole_number("STRUCTQ_MAX_REPLANS", env.get("STRUCTQ_MAX_REPLANS", "1")),
            "adaptive": env.get("STRUCTQ_ADAPTIVE", "0") in ("1", "on", "true"),
            "timezone": env.get("STRUCTQ_TIMEZONE", "local"),
            "audit_path": Path(env["STRUCTQ_AUDIT_LOG"]) if env.get("STRUCTQ_AUDIT_LOG") else None,
            "audit_enabled": env.get("STRUCTQ_AUDIT", "1") not in ("0", "off", "false"),
            "audit_answers": env.get("STRUCTQ_AUDIT_ANSWERS", "0") in ("1", "on", "true"),
            "cache_enabled": cache_enabled(env),
            "prompt_tokens": _whole_number("STRUCTQ_PROMPT_TOKENS", env.get("STRUCTQ_PROMPT_TOKENS", "8000")),
            "link_tokens": _whole_number("STRUCTQ_LINK_TOKENS", env.get("STRUCTQ_LINK_TOKENS", "3000")),
            "route_tokens": _whole_number("STRUCTQ_ROUTE_TOKENS", env.get("STRUCTQ_ROUTE_TOKENS", "2000")),
            "plan_examples": _whole_number("STRUCTQ_PLAN_EXAMPLES", env.get("STRUCTQ_PLAN_EXAMPLES", "3")),
            "threads": _whole_number("STRUCTQ_THREADS", env["STRUCTQ_THREADS"]) if env.get("STRUCTQ_THREADS") else None,
            "fallback": env.get("STRUCTQ_FALLBACK") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["fallback"] = _fallback(values["fallback"])
        return cls(**values)  # type: ignore[arg-type]


def _fallback(value: object) -> str | None:
    """``keywords`` or None (``off``); anything else is a ConfigError naming what is accepted."""
    from structq.errors import ConfigError

    text = str(value).strip().lower() if value is not None else ""
    if text in ("", "off", "none", "0"):
        return None
    if text != "keywords":
        raise ConfigError(f"fallback {value!r} is not known",
                          hint="use keywords (STRUCTQ_FALLBACK=keywords or --fallback keywords), or off")
    return text


def threads_from_env(env: Mapping[str, str] | None = None) -> int:
    """``STRUCTQ_THREADS`` (default 32, the engine's size when any source is on a server): the
    connections a search client's pool keeps, one per step the engine may run on it at once
    (fewer would be opened and thrown away under load)."""
    env = os.environ if env is None else env
    return _whole_number("STRUCTQ_THREADS", env.get("STRUCTQ_THREADS", "32"))


def _whole_number(name: str, text: str) -> int:
    from structq.errors import ConfigError

    if not text.strip().isdigit():
        raise ConfigError(f"{name}={text!r} is not a whole number", hint=f"set {name} to 0, 1, 2, …")
    return int(text)


def _seconds(name: str, text: str) -> float:
    from structq.errors import ConfigError

    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:  # also NaN
        raise ConfigError(f"{name}={text!r} is not a positive number of seconds", hint=f"set {name} to e.g. 60")
    return seconds


#: The embedded search server's memory bound unless ``STRUCTQ_SEARCH_MEMORY`` says otherwise.
#: Indexing the demo's 12,854 reports (7.9 MB of JSON lines) peaks at ~820 MiB without a bound
#: (Go's collector lets the heap grow to twice what is live before it collects) and ~520 MiB
#: with this one; what stays live is ~250 MiB. Documents of more than ~15 MB need a higher
#: bound (docs/serving.md).
DEFAULT_SEARCH_MEMORY = "512MiB"
_GO_MEMORY = re.compile(r"[0-9]+(B|KiB|MiB|GiB|TiB)?")


def search_memory(env: Mapping[str, str] | None = None) -> str | None:
    """The embedded search server's soft memory bound, in the form Go's ``GOMEMLIMIT`` reads
    (``512MiB``), or None for no bound of structq's own.

    osmem-server is a Go program: its heap has no limit but ``GOMEMLIMIT``, near which the
    collector runs more often (a soft bound: the live data is never dropped; documents that
    need more than the bound make indexing slower, not fail). ``STRUCTQ_SEARCH_MEMORY`` sets
    it (``0``/``off``: none); unset, ``DEFAULT_SEARCH_MEMORY`` applies, unless the user's own
    ``GOMEMLIMIT`` is set, which is then kept."""
    from structq.errors import ConfigError

    env = os.environ if env is None else env
    text = env.get("STRUCTQ_SEARCH_MEMORY", "").strip()
    if not text:
        return None if env.get("GOMEMLIMIT") else DEFAULT_SEARCH_MEMORY
    if text.lower() in ("0", "off", "none"):
        return None
    if not _GO_MEMORY.fullmatch(text):
        raise ConfigError(f"STRUCTQ_SEARCH_MEMORY={text!r} is not an amount of memory",
                          hint="set it like 512MiB or 2GiB (units B, KiB, MiB, GiB, TiB), or to off")
    return text


@contextmanager
def search_memory_bound() -> Iterator[None]:
    """Around the start of the embedded search server: its bound (``search_memory``) in
    ``GOMEMLIMIT``, which the server process inherits (its launcher passes no environment of
    its own), and this process's own ``GOMEMLIMIT`` back afterwards."""
    bound = search_memory()
    if bound is None:
        yield
        return
    before = os.environ.get("GOMEMLIMIT")
    os.environ["GOMEMLIMIT"] = bound
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GOMEMLIMIT", None)
        else:
            os.environ["GOMEMLIMIT"] = before
