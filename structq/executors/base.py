"""The executor contract: what every executor returns and answers to.

An executor fetches the rows of ``SafeQuery`` objects from one source as a ``ResultSet``.
Executors are synchronous (database drivers are); ``Engine`` runs them in threads to run
independent steps concurrently. Which executor serves which manifest ``kind:`` is said once, by
the source kind (``structq.sources``, ``SourceKind.executors``), which imports it on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from structq.safety.query import SafeQuery

__all__ = ["ResultSet", "Executor"]


@dataclass(frozen=True)
class ResultSet:
    """Rows a query returned, with JSON-safe values (str, int, float, bool, None, lists, dicts).

    ``truncated`` is True when the source had more than ``max_rows`` rows; ``rows`` then
    holds exactly ``max_rows`` of them. ``query`` is what actually ran (SQL text or the
    request body), for citations and the audit log.

    ``startup_ms`` is what starting the source's server cost before the query could be sent
    (the embedded search server: starting it, or reaching the background one, and loading
    its indices); it is not part of ``elapsed_ms``, which stays the query's own time.

    ``notes`` say what about the rows is not exact, in words for the answer: estimates the
    database or search server made (approximate counts, percentiles) and values that had to
    be rounded or kept as text to be stored. ``Engine`` adds them to the run's notes, so nothing approximate
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

    def fetch(self, query: "SafeQuery") -> ResultSet:
        """Run ``query`` and fetch its rows; raise ``ExecutionError``/``SourceUnavailable``/
        ``QueryTimeout``."""
        ...

    def close(self) -> None:
        """Release connections and anything started for this source."""
        ...
