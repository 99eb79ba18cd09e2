"""``source: local`` — SQL over earlier steps' results, each ``output_key`` a table.

Built in, with no manifest: binding a step describes the results it reads as typed tables
once (``executors.local.describe_results``), and the same tables give both the manifest the
sandbox checks against and the executor that runs the checked query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from structq.capabilities.references import LOCAL_SOURCE, local_inputs
from structq.errors import PlanError

from .base import Bound, Rows, StepLike
from .sql import SqlKind

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest

__all__ = ["LocalKind"]


class LocalKind(SqlKind):
    name: ClassVar[str] = "local"
    builtin_sources = (LOCAL_SOURCE,)
    executors = {}

    def validate_step(self, step: StepLike, manifest: "Manifest | None", earlier: Sequence[str]) -> None:
        if not isinstance(step.query, str):
            raise PlanError("a local step's query is SQL text", step=step.output_key)
        if not earlier:
            raise PlanError("a local step needs earlier steps to read", step=step.output_key)

    def intermediate_cap(self, manifest: "Manifest | None") -> int:
        from structq.capabilities.model import Limits

        return Limits().max_intermediate_rows

    def tables_read(self, step: StepLike, earlier: Sequence[str]) -> list[str]:
        return local_inputs(step.query, earlier) if isinstance(step.query, str) else []

    def bind(self, step: StepLike, inputs: Mapping[str, Rows], capabilities: "CapabilitySet") -> Bound:
        """The results ``step`` reads, typed once: the manifest and the executor share them."""
        from structq.executors.base import ResultSet
        from structq.executors.local import LocalExecutor, describe_results, manifest_for

        read = {key: ResultSet(columns=inputs[key].columns, rows=inputs[key].rows)
                for key in self.tables_read(step, list(inputs))}
        tables = describe_results(read)
        return Bound(self, manifest_for(tables, None), lambda: LocalExecutor.of_tables(tables))

    def executor(self, manifest: "Manifest") -> Any:
        raise TypeError("the local source has no executor of its own: bind a step to get one")
