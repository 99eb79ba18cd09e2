"""``kind: openapi`` — a REST API described by OpenAPI: a step names an ``operation`` and
its ``params``; ``check_rest``; ``OpenapiExecutor``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from structq.capabilities.api import Operation
from structq.errors import PlanError

from .base import SourceKind, StepLike

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["OpenapiKind"]


class OpenapiKind(SourceKind):
    name: ClassVar[str] = "REST"
    payload = dict
    payload_words = "an operation and its params"
    object_word = Operation.word
    lists_values = False
    executors = {"openapi": "structq.executors.openapi:OpenapiExecutor"}

    def read_payload(self, text: str) -> Any:
        """``{"operation": …, "params": {…}}`` as JSON."""
        import json

        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"a REST step is JSON: {exc.msg}", hint='{"operation": "listTickets", "params": {}}') from None
        if not isinstance(value, dict) or "operation" not in value:
            raise PlanError("a REST step names its operation", hint='{"operation": "listTickets", "params": {}}')
        return value

    def validate_step(self, step: StepLike, manifest: Manifest | None, earlier: Sequence[str]) -> None:
        if step.index or step.query is not None or getattr(step, "operation", None) is None:
            raise PlanError(f"a step on REST source {step.source!r} gives operation and params (no query or index)",
                            step=step.output_key, hint='"operation": "listTickets", "params": {"status": "open"}')

    def check_step(self, step: StepLike, manifest: Manifest, *, params: Mapping[str, Any], vars: Mapping[str, Any],
                   max_rows: int | None, slots: Mapping[str, Any] | None = None) -> SafeQuery:
        from structq.safety.rest import check_rest

        return check_rest(getattr(step, "operation", None), manifest, values=getattr(step, "params", None),
                          params=params, vars=vars, max_rows=max_rows, slots=slots)

    def check(self, query: Any, manifest: Manifest, *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> SafeQuery:
        """``query`` as ``read_payload`` gives it: ``{"operation", "params"}``."""
        from structq.safety.rest import check_rest

        query = query if isinstance(query, dict) else {}
        return check_rest(query.get("operation"), manifest, values=query.get("params"), params=params, vars=vars,
                          max_rows=max_rows, slots=slots)
