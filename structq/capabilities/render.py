"""Render a manifest set as compact text for the planning prompt.

One line per column or field, denied ones left out (the model should not even learn their
names), enum values with their meanings, references as arrows, row filters as notes.
Objects that ``structq sync`` added but nobody has described yet are rendered too (they are
real and queryable), marked ``(undescribed)`` so the model treats their meaning with care.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .model import Column, Index, Manifest, SearchField, Table

if TYPE_CHECKING:
    from .catalog import CapabilitySet

__all__ = ["render_capabilities", "render_manifest"]


def _values(values: dict[str, str] | None) -> str:
    if not values:
        return ""
    return " values: " + ", ".join(f"{k}={v}" if v and v != k else k for k, v in values.items())


def _described(text: str, draft: bool) -> str:
    if text:
        return f" — {text}"
    return " (undescribed)" if draft else ""


def _synonyms(synonyms: list[str]) -> str:
    return f" (also: {', '.join(synonyms)})" if synonyms else ""


def _column(c: Column) -> str:
    flags = " PK" if c.primary_key else ""
    ref = f" → {c.references}" if c.references else ""
    return f"    {c.name} {c.type}{flags}{ref}{_described(c.description, c.draft)}{_synonyms(c.synonyms)}{_values(c.values)}"


def _table(t: Table, m: Manifest) -> list[str]:
    lines = [f"  table {t.name}{_described(t.description, t.draft)}{_synonyms(t.synonyms)}"]
    lines += [_column(c) for c in t.allowed_columns]
    lines += [f"    [row filter, added automatically: {f.where}]" for f in m.row_filters_for(t.name)]
    return lines


def _field(f: SearchField, prefix: str = "") -> list[str]:
    if f.denied:
        return []
    name = prefix + f.name
    lines = [f"    {name} {f.type}{_described(f.description, f.draft)}{_synonyms(f.synonyms)}{_values(f.values)}"]
    for sub in f.fields:
        lines += _field(sub, name + ".")
    return lines


def _index(i: Index, m: Manifest) -> list[str]:
    lines = [f"  index {i.name}{_described(i.description, i.draft)}{_synonyms(i.synonyms)}"]
    for f in i.fields:
        lines += _field(f)
    filters = m.row_filters_for(i.name)
    for rf in filters:
        lines.append(f"    [row filter, added automatically: {json.dumps(rf.term, ensure_ascii=False)}]")
    if filters:  # the sandbox refuses the rest (safety.dsl._tenant): say so before a plan tries
        lines.append("    [matches without relevance scores: sort by a field; no min_score, fuzzy, "
                     "fuzziness or phrase_prefix]")
    return lines


def render_manifest(m: Manifest) -> str:
    """One source as text: header, limits, then each table/index with its columns/fields."""
    if m.is_search:
        header = f"source {m.source} ({m.kind} query DSL)"
    else:
        header = f"source {m.source} (sql, dialect {m.sql_dialect})"
    lines = [header + (f": {m.description}" if m.description else "")]
    lines.append(f"  limits: at most {m.limits.max_rows} rows returned, {m.limits.timeout_s:g}s per query")
    if m.functions:
        lines.append(f"  extra functions allowed: {', '.join(m.functions)}")
    for table in m.tables:
        lines += _table(table, m)
    for index in m.indices:
        lines += _index(index, m)
    return "\n".join(lines)


def render_capabilities(capabilities: "CapabilitySet") -> str:
    """Every source, separated by blank lines, in a stable order."""
    return "\n\n".join(render_manifest(m) for m in capabilities)
