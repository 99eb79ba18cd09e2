"""What one request may touch and what it wants to hear, carried to the engine's threads.

The agent's engine is shared by every request. A request sets ``scope`` (a context variable)
to its principal and, when it streams, an ``emit`` callback; ``GuardedEngine`` reads it:

- before running any plan (the model's, a verified example, a cached one, or a plan posted to
  ``/v1/run``) every source it names must be granted to the principal, else ``AccessDenied``
  naming the source; and the plan runs with the principal's variables, never others. Both
  sit in the engine, so no path around them exists (a run outside any scope is refused).
- each plan it starts is emitted as a ``plan`` event (again after a repair), and each step as
  a ``step`` event as soon as it is settled: run, not run (an empty input, a source down) or
  failed (a repair follows, or the error ends the stream).

Context variables follow ``asyncio.to_thread``; the engine's own worker threads (steps that
run side by side) get a copy of the caller's context through ``submit``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.agent.engine import Engine
from structq.errors import SandboxViolation
from structq.sources import is_builtin

from .errors import AccessDenied

if TYPE_CHECKING:
    from concurrent.futures import Future

    from structq.agent import Plan, PlanResult, Step, StepResult
    from structq.errors import StructqError

    from .config import Principal
    from .metrics import Metrics
    from .traces import Traces

__all__ = ["GuardedEngine", "RequestScope", "request_scope", "check_access", "STEP_EVENT_ROWS"]

#: Rows of a step carried by its ``step`` event; the final document carries them all.
STEP_EVENT_ROWS = 50

Emit = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class RequestScope:
    principal: "Principal"
    emit: Emit | None = None


_scope: contextvars.ContextVar[RequestScope | None] = contextvars.ContextVar("structq_request", default=None)


@contextmanager
def request_scope(principal: "Principal", emit: Emit | None = None) -> Iterator[None]:
    token = _scope.set(RequestScope(principal, emit))
    try:
        yield
    finally:
        _scope.reset(token)


def check_access(principal: "Principal", plan: "Plan") -> None:
    """``AccessDenied`` naming the first source of ``plan`` the principal may not use (a
    built-in source needs no grant: it reads only the plan's earlier results)."""
    for step in plan.steps:
        if not is_builtin(step.source) and not principal.may_use(step.source):
            raise AccessDenied(step.source, principal.user)


def _caller() -> RequestScope:
    scope = _scope.get()
    if scope is None:  # fail closed: every path of the service sets a scope
        raise RuntimeError("a plan was run outside a request scope; refusing to run it without a caller")
    return scope


class GuardedEngine(Engine):
    """The agent's engine in the service: it runs a plan only inside a request scope, with
    that principal's variables (whatever its caller passed) and sources, and reports progress
    (and, once the service sets ``metrics``, each step's duration, rows and refusal)."""

    metrics: "Metrics | None" = None
    #: Set by the service when the ``OTEL_*`` variables ask for traces.
    traces: "Traces | None" = None

    def run(self, plan: "Plan", *, vars: Mapping[str, Any] | None = None,
            done: Mapping[str, "StepResult"] | None = None, upto: int | None = None) -> "PlanResult":
        scope = _caller()
        check_access(scope.principal, plan)
        if scope.emit is not None:
            scope.emit("plan", {"plan": plan.to_dict()})
        # The caller's fixed variables, whatever was passed: the engine is the last word.
        return super().run(plan, vars=scope.principal.vars, done=done, upto=upto)

    def look_up(self, plan: "Plan", *, vars: Mapping[str, Any] | None = None) -> "PlanResult":
        """A template slot's look-up: checked and run as the caller, reported to nobody (it
        is not the answer's plan)."""
        principal = _caller().principal
        check_access(principal, plan)
        with request_scope(principal):
            return super().run(plan, vars=principal.vars)

    def view(self, vars: Mapping[str, Any] | None) -> str:
        """The caller's variables and sources: what a look-up's rows depend on."""
        principal = _caller().principal
        sources = sorted(principal.sources) if principal.sources is not None else None
        return super().view({"vars": principal.vars, "sources": sources})

    def submit(self, fn: Any, *args: Any) -> "Future[Any]":
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args)

    def on_step(self, step: "Step", result: "StepResult | None", error: "StructqError | None") -> None:
        if self.metrics is not None:
            if result is not None and result.skipped is None:
                self.metrics.step(step.source, result.elapsed_ms / 1000, result.row_count)
            elif isinstance(error, SandboxViolation):
                self.metrics.refusal(error.code)
        if self.traces is not None:
            self.traces.step(step, self.metrics.kind(step.source) if self.metrics is not None else step.source,
                             result, error)
        scope = _scope.get()
        if scope is not None and scope.emit is not None:
            scope.emit("step", step_event(step, result, error))


def step_event(step: "Step", result: "StepResult | None", error: "StructqError | None" = None) -> dict[str, Any]:
    """A settled step for the stream: ``status`` ``ok`` (what ran, and its first rows),
    ``skipped`` (not run, and why: an empty input, an input that could not be read, a source
    that is down) or ``failed`` (the error, as the API reports errors; a repaired plan follows)."""
    event: dict[str, Any] = {"output_key": step.output_key, "source": step.source, "index": step.index,
                             "purpose": step.purpose}
    if result is None:
        from .errors import error_body

        return {**event, "status": "failed", "query": step.query,
                "error": error_body(error)["error"] if error is not None else None}
    if result.skipped is not None:
        return {**event, "status": "skipped", "skipped": result.skipped, "query": step.query}
    return {
        **event,
        "status": "ok",
        "query": result.query,
        "columns": list(result.columns),
        "rows": [list(r) for r in result.rows[:STEP_EVENT_ROWS]],
        "row_count": result.row_count,
        "rows_shown": min(result.row_count, STEP_EVENT_ROWS),
        "truncated": result.truncated,
        "elapsed_ms": round(result.elapsed_ms, 3),
    }
