"""``kind: graphql`` — a GraphQL API: a step sends one query document with its variables;
root query fields are the manifest's operations; ``check_graphql``; ``GraphqlExecutor``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from structq.capabilities.api import Operation
from structq.errors import ConfigError, PlanError

from .base import SourceKind, StepLike

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["GraphqlKind"]


class GraphqlKind(SourceKind):
    name: ClassVar[str] = "GraphQL"
    payload = str
    payload_words = "a GraphQL query document"
    object_word = Operation.word
    lists_values = False
    executors = {"graphql": "structq.executors.graphql:GraphqlExecutor"}

    def validate_step(self, step: StepLike, manifest: Manifest | None, earlier: Sequence[str]) -> None:
        if step.index or getattr(step, "operation", None) is not None:
            raise PlanError(f"a step on GraphQL source {step.source!r} gives query (a GraphQL document) and variables",
                            step=step.output_key, hint="no index, operation or params")
        self.validate_payload(step)

    def check_step(self, step: StepLike, manifest: Manifest, *, params: Mapping[str, Any], vars: Mapping[str, Any],
                   max_rows: int | None, slots: Mapping[str, Any] | None = None) -> SafeQuery:
        check_graphql = _sandbox()
        return check_graphql(step.query, manifest, variables=getattr(step, "variables", None), params=params,
                             vars=vars, max_rows=max_rows, slots=slots)

    def check(self, query: Any, manifest: Manifest, *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> SafeQuery:
        return _sandbox()(query, manifest, params=params, vars=vars, max_rows=max_rows, slots=slots)


def _sandbox() -> Any:
    """``check_graphql``, or a ``ConfigError`` saying which extra brings graphql-core."""
    try:
        from structq.safety.graphql import check_graphql
    except ImportError as exc:
        raise ConfigError(f"GraphQL sources need graphql-core ({exc.name} is not installed)",
                          hint='pip install "structq[api]"') from None
    return check_graphql
