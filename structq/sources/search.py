"""``kind: elasticsearch`` / ``opensearch`` — a JSON DSL body on one named index of the
source; indices and their fields; ``check_dsl``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from structq.capabilities.objects import Index
from structq.errors import PlanError

from .base import SourceKind, StepLike

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["SearchKind"]


class SearchKind(SourceKind):
    name: ClassVar[str] = "search"
    payload = dict
    payload_words = "a JSON object (the DSL body)"
    indexed = True
    object_word = Index.word
    lists_values = False
    executors = {"elasticsearch": "structq.executors.search.executor:ElasticsearchExecutor",
                 "opensearch": "structq.executors.search.executor:OpenSearchExecutor"}

    def read_payload(self, text: str) -> Any:
        """The JSON body; a syntax error names its line and column."""
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"the search body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                            hint="quote the body in single quotes so the shell keeps its double quotes") from None

    def validate_step(self, step: StepLike, manifest: "Manifest | None", earlier: Sequence[str]) -> None:
        from structq.capabilities.hints import closest, listing

        assert manifest is not None
        names = [i.name for i in manifest.indices]
        if not step.index:
            raise PlanError(f"a step on search source {step.source!r} must name its index", step=step.output_key,
                            hint=f"index: one of {listing(names)}")
        if manifest.index(step.index) is None:
            suggestion = closest(step.index, names)
            raise PlanError(f"unknown index {step.index!r} in source {step.source!r}", step=step.output_key,
                            hint=f"did you mean {suggestion!r}?" if suggestion else f"indices: {listing(names, near=step.index)}")
        if not isinstance(step.query, dict):
            raise PlanError("a search step's query is a JSON object (the DSL body)", step=step.output_key)

    def check(self, query: Any, manifest: "Manifest", *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> "SafeQuery":
        from structq.safety.dsl import check_dsl

        return check_dsl(query, manifest, index, params=params, vars=vars, max_rows=max_rows, slots=slots)  # type: ignore[arg-type]

    def value_step(self, manifest: "Manifest", obj: str, member: str, *, every: bool) -> dict[str, Any]:
        """A terms aggregation (``every``) or a term query on ``:value``."""
        query: dict[str, Any] = ({"size": 0, "aggs": {"values": {"terms": {"field": member, "size": manifest.limits.max_rows}}}}
                                 if every else {"query": {"term": {member: ":value"}}, "_source": [member], "size": 2})
        return {"output_key": "value", "source": manifest.source, "index": obj, "query": query}

    def probe(self, executor: Any, manifest: "Manifest") -> None:
        """A document count of the first index."""
        from structq.safety.query import SafeQuery

        executor.fetch(SafeQuery(source=manifest.source, kind="search", limit=1, max_rows=0,
                               index=manifest.indices[0].name, body={"size": 0}))
