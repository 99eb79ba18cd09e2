"""Checks a manifest set must pass beyond its shape: names unique, references resolvable,
policies pointing at declared objects, and verified examples that only read what is declared.

Each failure is a ``ManifestError`` at the offending spot, with the closest valid name.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp


from .loader import Positions, closest
from .model import Manifest
from .references import LOCAL_DIALECT, LOCAL_SOURCE, find_references, replace_references

__all__ = ["check_manifest", "check_examples"]

def _did_you_mean(name: str, options: list[str]) -> dict[str, str | None]:
    suggestion = closest(name, options)
    if suggestion:
        return {"suggestion": suggestion}
    return {"hint": f"declared: {', '.join(options) or '(none)'}"}


def _check_unique(names: list[str], what: str, base: tuple, pos: Positions, key: str = "name") -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name.lower() in seen:
            raise pos.error((*base, i, key), f"duplicate {what} {name!r}", hint=f"each {what} is declared once")
        seen.add(name.lower())


def check_manifest(m: Manifest, pos: Positions) -> None:
    """Structural rules of one source that pydantic cannot express."""
    if m.source == LOCAL_SOURCE:
        raise pos.error(("source",), "'local' is reserved for steps over earlier results",
                        hint="choose another source name")
    if m.kind == "sql":
        if m.indices:
            raise pos.error(("indices",), "a sql source declares tables:, not indices:", suggestion="tables")
        if not m.tables:
            raise pos.error(("kind",), "a sql source needs at least one entry under tables:")
        _check_tables(m, pos)
    else:
        if m.tables:
            raise pos.error(("tables",), f"a {m.kind} source declares indices:, not tables:", suggestion="indices")
        if not m.indices:
            raise pos.error(("kind",), f"a {m.kind} source needs at least one entry under indices:")
        _check_unique([i.name for i in m.indices], "index", ("indices",), pos)
    _check_row_filters(m, pos)


def _check_tables(m: Manifest, pos: Positions) -> None:
    _check_unique([t.name for t in m.tables], "table", ("tables",), pos)
    table_names = [t.name for t in m.tables]
    for ti, table in enumerate(m.tables):
        _check_unique([c.name for c in table.columns], "column", ("tables", ti, "columns"), pos)
        for ci, column in enumerate(table.columns):
            if not column.references:
                continue
            here = ("tables", ti, "columns", ci, "references")
            ref_table, ref_column = column.references.split(".", 1)
            target = m.table(ref_table)
            if target is None:
                raise pos.error(here, f"references unknown table {ref_table!r}", **_did_you_mean(ref_table, table_names))
            if target.column(ref_column) is None:
                raise pos.error(here, f"references unknown column {ref_table}.{ref_column}",
                                **_did_you_mean(ref_column, [c.name for c in target.columns]))


def _check_row_filters(m: Manifest, pos: Positions) -> None:
    check = _check_sql_row_filter if m.kind == "sql" else _check_search_row_filter
    for fi, rf in enumerate(m.policies.row_filters):
        check(m, rf, pos, ("policies", "row_filters", fi))


def _check_sql_row_filter(m: Manifest, rf, pos: Positions, here: tuple) -> None:
    if not rf.table or not rf.where or rf.index or rf.term:
        raise pos.error(here, "a sql row filter has exactly 'table' and 'where'",
                        hint="{table: employees, where: \"tenant_id = :tenant_id\"}")
    if m.table(rf.table) is None:
        raise pos.error((*here, "table"), f"row filter on undeclared table {rf.table!r}",
                        **_did_you_mean(rf.table, [t.name for t in m.tables]))
    try:
        condition = sqlglot.parse_one(rf.where, read=m.sql_dialect)  # parsed alone, never pasted into SQL
    except sqlglot.errors.ParseError as exc:
        raise pos.error((*here, "where"), f"row filter is not a valid SQL condition: {exc}") from None
    if not isinstance(condition, exp.Condition):
        raise pos.error((*here, "where"), f"row filter must be one SQL condition, not a {condition.key.upper()} statement",
                        hint="e.g. \"tenant_id = :tenant_id\"")


def _check_search_row_filter(m: Manifest, rf, pos: Positions, here: tuple) -> None:
    if not rf.index or not rf.term or rf.table or rf.where:
        raise pos.error(here, "a search row filter has exactly 'index' and 'term'",
                        hint="{index: reports, term: {tenant_id: \":tenant_id\"}}")
    index = m.index(rf.index)
    if index is None:
        raise pos.error((*here, "index"), f"row filter on undeclared index {rf.index!r}",
                        **_did_you_mean(rf.index, [i.name for i in m.indices]))
    fields = index.flat_fields()
    for name in rf.term:
        if name not in fields:
            raise pos.error((*here, "term"), f"row filter on undeclared field {name!r}",
                            **_did_you_mean(name, list(fields)))


def check_examples(m: Manifest, pos: Positions, sources: Mapping[str, Manifest]) -> None:
    """Verified examples name known sources and indices, reference earlier steps only, and
    read only declared tables. (The full sandbox runs on them in ``structq check``.)"""
    for ei, example in enumerate(m.examples):
        earlier: list[str] = []
        for si, step in enumerate(example.steps):
            here = ("examples", ei, "steps", si)
            if step.output_key in earlier:
                raise pos.error((*here, "output_key"), f"duplicate output_key {step.output_key!r}")
            target = sources.get(step.source)
            dialect = target.sql_dialect if target is not None and not target.is_search else LOCAL_DIALECT
            for ref in find_references(step.query, dialect):
                if ref.key not in earlier:
                    raise pos.error((*here, "query"), f"reference <{ref.key}> to a step that does not come earlier",
                                    hint=f"earlier steps: {', '.join(earlier) or '(none)'}")
            if step.source == LOCAL_SOURCE:
                _check_example_sql(step.query, LOCAL_DIALECT, earlier, pos, here)
            elif target is None:
                raise pos.error((*here, "source"), f"unknown source {step.source!r}",
                                **_did_you_mean(step.source, [*sources, LOCAL_SOURCE]))
            elif target.is_search:
                _check_example_index(step, target, pos, here)
            else:
                _check_example_sql(step.query, target.sql_dialect, [t.name for t in target.tables], pos, here)
            earlier.append(step.output_key)


def _check_example_index(step, target: Manifest, pos: Positions, here: tuple) -> None:
    if not step.index:
        raise pos.error(here, f"a step on search source {target.source!r} names its index",
                        hint=f"index: one of {', '.join(i.name for i in target.indices)}")
    if target.index(step.index) is None:
        raise pos.error((*here, "index"), f"unknown index {step.index!r}",
                        **_did_you_mean(step.index, [i.name for i in target.indices]))
    if not isinstance(step.query, dict):
        raise pos.error((*here, "query"), "a search step's query is a mapping (the DSL body)")


def _check_example_sql(query, dialect: str, tables: list[str], pos: Positions, here: tuple) -> None:
    if not isinstance(query, str):
        raise pos.error((*here, "query"), "a SQL step's query is a string")
    try:
        tree = sqlglot.parse_one(replace_references(query, dialect, lambda _: "NULL"), read=dialect)
    except sqlglot.errors.ParseError as exc:
        raise pos.error((*here, "query"), f"the example's SQL does not parse: {exc}") from None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    declared = {t.lower() for t in tables}
    for table in tree.find_all(exp.Table):
        name = table.name
        if name and name.lower() not in ctes and name.lower() not in declared:
            raise pos.error((*here, "query"), f"the example reads undeclared table {name!r}",
                            **_did_you_mean(name, tables))
