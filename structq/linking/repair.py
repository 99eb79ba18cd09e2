"""No loss of recall by pruning: what a failed plan shows the planner was missing.

The sandbox checks queries against the full manifests, so a pruned table the model names
correctly simply runs. What pruning can cause is a model that guesses: a table it never saw
written under the wrong source, a near-miss of a name (``singers`` for ``singer``), a column
of a table whose other columns were hidden. The sandbox (or plan validation) refuses those;
this module reads the refused plan and the error's text for names that exist in the full
catalogue, so the repair round's prompt shows them. Denied columns are not in the linking
index, so no repair ever brings one into a prompt.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .index import linking_index

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

__all__ = ["names_to_restore"]

_QUOTED = re.compile(r"['\"`]([^'\"`\s]{1,128})['\"`]")
_DOTTED = re.compile(r"\b([A-Za-z_][\w$]*)\.([A-Za-z_][\w$]*)\b")
#: At most this many tables are restored for one unknown name (a close match, not a flood).
_PER_NAME = 3


def _sql_names(query: str, dialect: str) -> tuple[set[str], set[str]]:
    """(tables, columns) named in a SQL text; nothing when it does not parse."""
    import sqlglot
    from sqlglot import exp

    from structq.capabilities.references import replace_references

    try:
        tree = sqlglot.parse_one(replace_references(query, dialect, lambda _: "NULL"), read=dialect)
    except sqlglot.errors.SqlglotError:
        return set(), set()
    if tree is None:
        return set(), set()
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = {t.name for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes}
    return tables, {c.name for c in tree.find_all(exp.Column) if c.name}


def _body_names(body: Any) -> set[str]:
    """Field names in a search body: keys below the clause level and ``field`` values."""
    out: set[str] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            out.add(str(key))
            if key == "field" and isinstance(value, str):
                out.add(value)
            out |= _body_names(value)
    elif isinstance(body, list):
        for item in body:
            out |= _body_names(item)
    return out


def _mentions(error: Exception, plan: Any, capabilities: "CapabilitySet") -> tuple[set[str], set[str], set[str]]:
    """(table names, column names, sources) the failed plan and the error's text mention."""
    tables: set[str] = set()
    columns: set[str] = set()
    sources: set[str] = set()
    for step in getattr(plan, "steps", None) or ():
        manifest = capabilities.get(step.source)
        if manifest is not None:
            sources.add(manifest.source)
        if getattr(step, "index", None):
            tables.add(step.index)
        if isinstance(step.query, str):
            dialect = (manifest.query_dialect if manifest is not None else None) or "sqlite"
            t, c = _sql_names(step.query, dialect)
            tables |= t
            columns |= c
        else:
            columns |= _body_names(step.query)
    text = f"{getattr(error, 'message', error)} {getattr(error, 'hint', '') or ''}"
    for name in _QUOTED.findall(text):
        tables.add(name)
        columns.add(name)
    for table, column in _DOTTED.findall(text):
        tables.add(table)
        columns.add(column)
    if getattr(error, "source", None):
        sources.add(error.source)
    return tables, columns, sources


def names_to_restore(error: Exception, plan: Any, capabilities: "CapabilitySet") -> list[tuple[str, str, str | None]]:
    """(source, table, column or None) in the full catalogue that the failed plan reached for."""
    index = linking_index(capabilities)
    tables, columns, sources = _mentions(error, plan, capabilities)
    by_name: dict[str, list[int]] = {}  # from the keys, so that no table's record is made to read its name
    for (_, name), i in index.position.items():
        by_name.setdefault(name, []).append(i)
    chosen: set[int] = set()
    for name in tables:
        exact = by_name.get(name.lower())
        if exact:
            chosen.update(exact[:_PER_NAME])
            continue
        for close in difflib.get_close_matches(name.lower(), list(by_name), n=1, cutoff=0.8):
            chosen.update(by_name[close][:_PER_NAME])
    out: list[tuple[str, str, str | None]] = [(index.entities[i].source, index.entities[i].name, None) for i in sorted(chosen)]
    wanted = {c.lower() for c in columns}
    scope: Iterable[int] = chosen or [i for i, source in enumerate(index.source_of) if source in sources]
    found: dict[str, int] = {}
    for i in scope:
        e = index.entities[i]
        for member in e.members:
            name = member.name.lower()
            if name in wanted and (chosen or found.get(name, 0) < _PER_NAME):
                found[name] = found.get(name, 0) + 1
                out.append((e.source, e.name, member.name))
    return out
