"""``kind: sql`` — relational databases: SQL text, tables and columns, ``check_sql``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .base import SourceKind

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.safety.query import SafeQuery

__all__ = ["SqlKind"]


class SqlKind(SourceKind):
    name: ClassVar[str] = "SQL"
    payload = str
    payload_words = "SQL text"
    executors = {"sql": "structq.executors.sql:SqlExecutor"}

    def check(self, query: Any, manifest: "Manifest", *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> "SafeQuery":
        from structq.safety.sql import check_sql

        return check_sql(query, manifest, params=params, vars=vars, max_rows=max_rows, slots=slots)

    def value_step(self, manifest: "Manifest", obj: str, member: str, *, every: bool) -> dict[str, Any]:
        """``SELECT DISTINCT`` built as a tree: names from the manifest, the value a parameter."""
        from sqlglot import exp

        column = exp.column(member)
        select = exp.select(column).distinct().from_(exp.to_table(obj))
        if not every:
            select = select.where(exp.EQ(this=column.copy(), expression=exp.Placeholder(this="value"))).limit(2)
        return {"output_key": "value", "source": manifest.source, "query": select.sql(dialect=manifest.sql_dialect)}
