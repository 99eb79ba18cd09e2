"""Checks a manifest set must pass beyond its shape: names unique, references resolvable,
policies pointing at declared objects, and verified examples that only read what is declared.

Each failure is a ``ManifestError`` at the offending spot, with the closest valid name. The
``*_problems`` functions yield every failure (``structq check`` reports them all in one run);
``check_manifest`` and ``check_examples`` raise the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import sqlglot
from sqlglot import exp


from structq.errors import ManifestError

from .functions import unsafe_reason
from .hints import closest, listing
from .loader import Positions
from .model import Index, Manifest, Table
from .api_checks import check_api_example_step, check_api_row_filter, check_operations
from .objects import OBJECT_TYPES
from .api import Operation
from .references import LOCAL_DIALECT, LOCAL_SOURCE, find_references, replace_references

__all__ = ["check_manifest", "check_examples", "manifest_problems", "example_problems"]

Problems = Iterator[ManifestError]


def _did_you_mean(name: str, options: list[str]) -> dict[str, str | None]:
    suggestion = closest(name, options)
    if suggestion:
        return {"suggestion": suggestion}
    return {"hint": f"declared: {listing(options, near=name) or '(none)'}"}


def _first(problems: Problems) -> None:
    for problem in problems:
        raise problem


def _check_unique(names: list[str], what: str, base: tuple, pos: Positions, key: str = "name") -> Problems:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name.lower() in seen:
            yield pos.error((*base, i, key), f"duplicate {what} {name!r}", hint=f"each {what} is declared once")
        seen.add(name.lower())


def check_manifest(m: Manifest, pos: Positions) -> None:
    """Structural rules of one source that pydantic cannot express; raises the first failure.
    (Row filters naming columns the table lacks are left to ``manifest_problems``: ``sync``
    checks a merged manifest with this and warns about such filters itself.)"""
    _first(manifest_problems(m, pos, filter_columns=False))


def manifest_problems(m: Manifest, pos: Positions, *, filter_columns: bool = True) -> Problems:
    """Every failure of the structural rules of one source; ``filter_columns``: also the
    columns each SQL row filter names."""
    if m.source == LOCAL_SOURCE:
        yield pos.error(("source",), "'local' is reserved for steps over earlier results",
                        hint="choose another source name")
    shape = m.object_type
    for other in (*OBJECT_TYPES, Operation):
        if other is not shape and getattr(m, other.plural):
            yield pos.error((other.plural,), f"a {m.kind} source declares {shape.plural}:, not {other.plural}:",
                            suggestion=shape.plural)
    if not m.objects:
        yield pos.error(("kind",), f"a {m.kind} source needs at least one entry under {shape.plural}:")
    yield from _OBJECT_CHECKS[shape](m, pos)
    yield from _check_row_filters(m, pos, filter_columns)
    yield from _check_functions(m, pos)


def _check_functions(m: Manifest, pos: Positions) -> Problems:
    """``functions:`` may widen the sandbox's allowlist only with harmless functions."""
    for i, name in enumerate(m.functions):
        reason = unsafe_reason(name)
        if reason:
            yield pos.error(("functions", i), f"function {name!r} may not be allowed: it {reason}",
                            hint="functions: may add only functions that cannot read files, write, "
                                 "reach the network or change the session")


def _check_tables(m: Manifest, pos: Positions) -> Problems:
    yield from _check_unique([t.name for t in m.tables], "table", ("tables",), pos)
    table_names = [t.name for t in m.tables]
    for ti, table in enumerate(m.tables):
        yield from _check_unique([c.name for c in table.columns], "column", ("tables", ti, "columns"), pos)
        for ci, column in enumerate(table.columns):
            if not column.references:
                continue
            here = ("tables", ti, "columns", ci, "references")
            ref_table, ref_column = column.references.split(".", 1)
            target = m.table(ref_table)
            if target is None:
                yield pos.error(here, f"references unknown table {ref_table!r}", **_did_you_mean(ref_table, table_names))
            elif target.column(ref_column) is None:
                yield pos.error(here, f"references unknown column {ref_table}.{ref_column}",
                                **_did_you_mean(ref_column, [c.name for c in target.columns]))


def _check_indices(m: Manifest, pos: Positions) -> Problems:
    yield from _check_unique([i.name for i in m.indices], "index", ("indices",), pos)


def _check_row_filters(m: Manifest, pos: Positions, filter_columns: bool) -> Problems:
    check = _ROW_FILTER_CHECKS[m.object_type]
    for fi, rf in enumerate(m.policies.row_filters):
        yield from check(m, rf, pos, ("policies", "row_filters", fi), filter_columns)


def _check_table_row_filter(m: Manifest, rf, pos: Positions, here: tuple, filter_columns: bool) -> Problems:
    problems = list(_check_sql_row_filter(m, rf, pos, here))
    yield from problems
    if filter_columns and not problems:
        yield from _check_row_filter_columns(m, rf, pos, here)


def _check_sql_row_filter(m: Manifest, rf, pos: Positions, here: tuple) -> Problems:
    if not rf.table or not rf.where or rf.index or rf.term:
        yield pos.error(here, "a sql row filter has exactly 'table' and 'where'",
                        hint="{table: employees, where: \"tenant_id = :tenant_id\"}")
        return
    if m.table(rf.table) is None:
        yield pos.error((*here, "table"), f"row filter on undeclared table {rf.table!r}",
                        **_did_you_mean(rf.table, [t.name for t in m.tables]))
        return
    try:
        condition = sqlglot.parse_one(rf.where, read=m.sql_dialect)  # parsed alone, never pasted into SQL
    except sqlglot.errors.ParseError as exc:
        yield pos.error((*here, "where"), f"row filter is not a valid SQL condition: {exc}")
        return
    if not isinstance(condition, exp.Condition):
        yield pos.error((*here, "where"), f"row filter must be one SQL condition, not a {condition.key.upper()} statement",
                        hint="e.g. \"tenant_id = :tenant_id\"")


def _check_row_filter_columns(m: Manifest, rf, pos: Positions, here: tuple) -> Problems:
    """The columns a (well-formed) SQL row filter names exist in its table."""
    table = m.table(rf.table)
    condition = sqlglot.parse_one(rf.where, read=m.sql_dialect)
    for column in condition.find_all(exp.Column):
        if column.find_ancestor(exp.Select):
            continue  # a subquery's columns belong to its own tables; the sandbox checks them
        if column.table and column.table.lower() != table.name.lower():
            yield pos.error((*here, "where"), f"row filter on {table.name!r} names another table's column {column.sql()!r}",
                            hint=f"a row filter reads only its own table's columns: {table.name}.COLUMN or COLUMN")
        elif table.column(column.name) is None:
            yield pos.error((*here, "where"), f"row filter on {table.name!r} names unknown column {column.name!r}",
                            **_did_you_mean(column.name, [c.name for c in table.columns]))


def _check_index_row_filter(m: Manifest, rf, pos: Positions, here: tuple, filter_columns: bool) -> Problems:
    """(A ``term`` filter's fields are always checked: the DSL sandbox could not apply it otherwise.)"""
    if not rf.index or not rf.term or rf.table or rf.where:
        yield pos.error(here, "a search row filter has exactly 'index' and 'term'",
                        hint="{index: reports, term: {tenant_id: \":tenant_id\"}}")
        return
    index = m.index(rf.index)
    if index is None:
        yield pos.error((*here, "index"), f"row filter on undeclared index {rf.index!r}",
                        **_did_you_mean(rf.index, [i.name for i in m.indices]))
        return
    fields = index.flat_fields()
    for name in rf.term:
        if name not in fields:
            yield pos.error((*here, "term"), f"row filter on undeclared field {name!r}",
                            **_did_you_mean(name, list(fields)))


def check_examples(m: Manifest, pos: Positions, sources: Mapping[str, Manifest]) -> None:
    """Verified examples name known sources and indices, reference earlier steps only, and
    read only declared tables (raises the first failure; the full sandbox runs on them in
    ``structq check``)."""
    _first(example_problems(m, pos, sources))


def example_problems(m: Manifest, pos: Positions, sources: Mapping[str, Manifest], *,
                     unloaded: frozenset[str] = frozenset()) -> Problems:
    """Every failure of ``check_examples``: one per step at most (steps on ``unloaded``
    sources are skipped)."""
    for ei, example in enumerate(m.examples):
        for name, slot in example.slots.items():
            if slot.column is not None and slot.column.split(".", 1)[0] not in unloaded:
                yield from _slot_column_problems(slot.column, sources, pos, ("examples", ei, "slots", name, "column"))
        earlier: list[str] = []
        for si, step in enumerate(example.steps):
            here = ("examples", ei, "steps", si)
            if step.source in unloaded:
                earlier.append(step.output_key)
                continue
            earlier.append(step.output_key)
            yield from _step_problems(step, earlier[:-1], sources, pos, here)


def _slot_column_problems(path: str, sources: Mapping[str, Manifest], pos: Positions, here: tuple) -> Problems:
    """A column slot names a declared, readable column (``source.table.column``) or search
    field (``source.index.field``)."""
    source, container, column = path.split(".", 2)
    target = sources.get(source)
    if target is None:
        yield pos.error(here, f"slot column {path!r}: unknown source {source!r}", **_did_you_mean(source, list(sources)))
        return
    obj = target.object(container)
    names = obj.flat_members() if obj is not None else None
    allowed = [p for p, f in (names or {}).items() if not f.denied]
    if names is None:
        yield pos.error(here, f"slot column {path!r}: {source!r} declares no {container!r}",
                        **_did_you_mean(container, [o.name for o in target.objects]))
    elif column not in allowed:
        what = "is not readable (access: deny)" if column in names else "is not declared"
        yield pos.error(here, f"slot column {path!r}: {column!r} {what}", **_did_you_mean(column, allowed))


def _step_problems(step, earlier: list[str], sources: Mapping[str, Manifest], pos: Positions, here: tuple) -> Problems:
    if step.output_key in earlier:
        yield pos.error((*here, "output_key"), f"duplicate output_key {step.output_key!r}")
        return
    target = sources.get(step.source)
    dialect = (target.query_dialect if target is not None else None) or LOCAL_DIALECT
    for ref in find_references(step.query, dialect):
        if ref.key not in earlier:
            yield pos.error((*here, "query"), f"reference <{ref.key}> to a step that does not come earlier",
                            hint=f"earlier steps: {', '.join(earlier) or '(none)'}")
            return
    if step.source == LOCAL_SOURCE:
        yield from _check_example_sql(step.query, LOCAL_DIALECT, earlier, pos, here)
        return
    if target is None:
        yield pos.error((*here, "source"), f"unknown source {step.source!r}",
                        **_did_you_mean(step.source, [*sources, LOCAL_SOURCE]))
    else:
        yield from _EXAMPLE_STEP[target.object_type](step, target, pos, here)


def _check_example_table(step, target: Manifest, pos: Positions, here: tuple) -> Problems:
    yield from _check_example_sql(step.query, target.sql_dialect, [t.name for t in target.tables], pos, here)


def _check_example_index(step, target: Manifest, pos: Positions, here: tuple) -> Problems:
    if not step.index:
        yield pos.error(here, f"a step on search source {target.source!r} names its index",
                        hint=f"index: one of {', '.join(i.name for i in target.indices)}")
    elif target.index(step.index) is None:
        yield pos.error((*here, "index"), f"unknown index {step.index!r}",
                        **_did_you_mean(step.index, [i.name for i in target.indices]))
    elif not isinstance(step.query, dict):
        yield pos.error((*here, "query"), "a search step's query is a mapping (the DSL body)")


def _check_example_sql(query, dialect: str, tables: list[str], pos: Positions, here: tuple) -> Problems:
    if not isinstance(query, str):
        yield pos.error((*here, "query"), "a SQL step's query is a string")
        return
    try:
        tree = sqlglot.parse_one(replace_references(query, dialect, lambda _: "NULL"), read=dialect)
    except sqlglot.errors.ParseError as exc:
        yield pos.error((*here, "query"), f"the example's SQL does not parse: {exc}")
        return
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    declared = {t.lower() for t in tables}
    for table in tree.find_all(exp.Table):
        name = table.name
        if name and name.lower() not in ctes and name.lower() not in declared:
            yield pos.error((*here, "query"), f"the example reads undeclared table {name!r}",
                            **_did_you_mean(name, tables))
            return


#: How the objects, a row filter and an example's step on a declared source are checked, by
#: what the source declares.
_OBJECT_CHECKS = {Table: _check_tables, Index: _check_indices, Operation: check_operations}
_ROW_FILTER_CHECKS = {Table: _check_table_row_filter, Index: _check_index_row_filter, Operation: check_api_row_filter}
_EXAMPLE_STEP = {Table: _check_example_table, Index: _check_example_index, Operation: check_api_example_step}
