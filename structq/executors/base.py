"""The executor contract and the registry of executors by source ``kind``.

An executor fetches the rows of ``SafeQuery`` objects from one source as a ``ResultSet``.
Executors are synchronous (database drivers are); the engine runs them in threads to run
independent steps concurrently. They register by kind, so a new engine is a new module with
``@register("kind")`` — no if/elif chains elsewhere.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from structq.errors import ConfigError

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["ResultSet", "Executor", "register", "executor_class", "create_executor"]


@dataclass(frozen=True)
class ResultSet:
    """Rows a query returned, with JSON-safe values (str, int, float, bool, None, lists, dicts).

    ``truncated`` is True when the source had more than ``max_rows`` rows; ``rows`` then
    holds exactly ``max_rows`` of them. ``query`` is what actually ran (SQL text or the
    request body), for citations and the audit log.

    ``startup_ms`` is what starting the source's engine cost before the query could be sent
    (the embedded search engine: starting it, or reaching the background one, and loading
    its indices); it is not part of ``elapsed_ms``, which stays the query's own time.

    ``notes`` say what about the rows is not exact, in words for the answer: estimates the
    engine made (approximate counts, percentiles) and values that had to be rounded or kept
    as text to be stored. The engine adds them to the run's notes, so nothing approximate
    reaches an answer as if it were exact.
    """

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    elapsed_ms: float = 0.0
    query: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    startup_ms: float = 0.0

    @property
    def row_count(self) -> int:
        return len(self.rows)


class Executor(Protocol):
    """Runs checked queries against one source. One instance per source, reused (pooled)."""

    kind: ClassVar[str]

    def fetch(self, query: "SafeQuery") -> ResultSet:
        """Run ``query`` and fetch its rows; raise ``ExecutionError``/``SourceUnavailable``/
        ``QueryTimeout``."""
        ...

    def close(self) -> None:
        """Release connections and anything started for this source."""
        ...


_REGISTRY: dict[str, type] = {}

#: Where the built-in executors live; imported on first use so the CLI starts fast.
_BUILTIN_MODULES = {
    "sql": "structq.executors.sql",
    "elasticsearch": "structq.executors.search",
    "opensearch": "structq.executors.search",
    "local": "structq.executors.local",
    "graphql": "structq.executors.graphql",
    "openapi": "structq.executors.openapi",
}


def register(kind: str) -> Callable[[type], type]:
    """Class decorator: make ``cls`` the executor for sources of ``kind``."""

    def decorate(cls: type) -> type:
        cls.kind = kind
        _REGISTRY[kind] = cls
        return cls

    return decorate


def executor_class(kind: str) -> type:
    """The executor class registered for ``kind`` (importing the built-in module lazily)."""
    if kind not in _REGISTRY and kind in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[kind])
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise ConfigError(
            f"no executor for sources of kind {kind!r}",
            hint=f"known kinds: {', '.join(sorted(set(_REGISTRY) | set(_BUILTIN_MODULES)))}",
        ) from None


def create_executor(manifest: "Manifest") -> Executor:
    """A new executor for ``manifest``'s source."""
    return executor_class(manifest.kind)(manifest)
