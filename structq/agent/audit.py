"""The audit log: one JSON line per question.

Time, who asked (``user`` and ``request_id`` when a service sets them with ``audited_as``: the
request id ties the line to the server's access line), the question, the caller's variables
with their values (they decide which rows a tenant sees: a tenant id, a region), the sources
the plan reads, the plan and where it came from, each step's final query, parameters, row
counts, truncation and timings, the model calls with token usage and any error. Row contents,
parameter values and the answer (which quotes rows: names, report text) are left out unless
asked for (``include_data=True``; ``include_answer=True`` or ``STRUCTQ_AUDIT_ANSWERS=1`` for the
answer alone): the log must be safe to ship to a log store.

Answering never depends on the log: when it cannot be written (a read-only home, a path under
a file) the question is still answered and one warning goes to the ``structq`` logger.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import PlanResult

__all__ = ["AuditLog", "default_audit_path", "audited_as"]

_log = logging.getLogger("structq")

#: Who the questions asked in this context are for (set by a service around each request).
_who: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("structq_audit_who", default=None)


@contextmanager
def audited_as(*, user: str | None, request_id: str | None = None) -> Iterator[None]:
    """Every audit line written in this context names ``user`` and ``request_id``."""
    token = _who.set({"user": user, "request_id": request_id})
    try:
        yield
    finally:
        _who.reset(token)


def default_audit_path() -> Path:
    from structq.config import user_state_dir

    return user_state_dir() / "audit.jsonl"


class AuditLog:
    """Appends one JSON line per question to ``path`` (thread-safe; each line written whole)."""

    def __init__(self, path: Path | None = None, *, include_data: bool = False, include_answer: bool = False) -> None:
        self.path = Path(path) if path else default_audit_path()
        self.include_data = include_data
        self.include_answer = include_answer or include_data
        self._lock = threading.Lock()
        self._warned = False

    def record(
        self,
        *,
        question: str,
        vars: dict[str, Any],
        plan: dict[str, Any] | None,
        plan_source: str | None,
        run: "PlanResult | None",
        model_calls: list[dict[str, Any]],
        answer: str | None,
        error: BaseException | None,
        attempts: int,
        rounds: list[dict[str, Any]] | None = None,
        checks: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        planned = {step["output_key"]: step.get("query") for step in (plan or {}).get("steps", [])}
        who = _who.get() or {}
        entry = {
            "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            "user": who.get("user"),
            "request_id": who.get("request_id"),
            "question": question,
            "vars": {k: vars[k] for k in sorted(vars)},
            "sources": sorted({step["source"] for step in (plan or {}).get("steps", [])}),
            "plan_source": plan_source,
            "plan": plan,
            "attempts": attempts,
            "rounds": rounds or [],
            "steps": [self._step(s, planned.get(s.output_key)) for s in run.steps.values()] if run else [],
            "notes": run.notes if run else [],
            "model_calls": model_calls,
            "answer": answer if self.include_answer else None,
            # The answer check's verdict per figure; what a figure says only with the answer.
            "checks": checks or [],
            "error": {"type": type(error).__name__, "message": str(error)} if error else None,
        }
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            try:
                self._append(line)
            except OSError as exc:
                self._warn(exc)
        return entry

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (line + "\n").encode("utf-8"))
        finally:
            os.close(fd)

    def _warn(self, exc: OSError) -> None:
        """Once per log: the audit line is lost, the answer is not."""
        if not self._warned:
            self._warned = True
            _log.warning("structq: warning: cannot write the audit log %s (%s); answering without it "
                         "(set STRUCTQ_AUDIT_LOG to a writable file, or STRUCTQ_AUDIT=0)",
                         self.path, exc.strerror or exc)

    def _step(self, step: Any, planned_query: Any) -> dict[str, Any]:
        # SQL runs with placeholders, so its final text holds no values. A search body runs with
        # the values substituted (row-filter variables, earlier steps' rows): log it as planned.
        holds_values = step.index is not None and not self.include_data
        out = {
            "output_key": step.output_key,
            "source": step.source,
            "index": step.index,
            "query": planned_query if holds_values else step.query,
            "query_as": "planned" if holds_values else "ran",
            "params": {k: _describe(v) for k, v in step.params.items()},
            "row_count": step.row_count,
            "truncated": step.truncated,
            "elapsed_ms": round(step.elapsed_ms, 3),
            "startup_ms": round(step.startup_ms, 3),
            "skipped": step.skipped,
        }
        if self.include_data:
            out["params"] = step.params
            out["columns"] = list(step.columns)
            out["rows"] = [list(r) for r in step.rows]
        return out


def _describe(value: Any) -> str:
    """A parameter's shape without its content (values can be personal data)."""
    if isinstance(value, (list, tuple)):
        return f"list[{len(value)}]"
    if isinstance(value, str) and value.startswith("["):
        return "json-list"
    return type(value).__name__
