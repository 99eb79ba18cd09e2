"""Render a manifest set as compact text for the planning prompt.

One line per column or field, denied ones left out (the model should not even learn their
names), enum values with their meanings, references as arrows, row filters as notes.
Objects that ``structq sync`` added but nobody has described yet are rendered too (they are
real and queryable), with no filler where the description would be (a marker on every line
cost a fifth of a large prompt and told the model nothing its name does not); the ``values``
of such a draft were profiled from the data, so they are shown as values seen, not as the only
legal ones (the sandbox does not enforce them either). Columns declared ``access: restricted``
are named on one line as restricted — never their type, description or values — so the model
can say why it cannot answer instead of reaching for another column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .model import Column, Index, Manifest, SearchField, Table
from .render_api import api_language, render_api

__all__ = ["render_capabilities", "render_manifest", "render_table", "render_index"]


def _values(values: dict[str, str] | None, draft: bool = False) -> str:
    """Accepted values are the only legal literals; a draft's were seen in the data (suggestions)."""
    if not values:
        return ""
    label = " values seen in the data (not a complete list): " if draft else " values: "
    return label + ", ".join(f"{k}={v}" if v and v != k else k for k, v in values.items())


def _described(text: str) -> str:
    return f" — {text}" if text else ""


def _synonyms(synonyms: list[str]) -> str:
    return f" (also: {', '.join(synonyms)})" if synonyms else ""


def _coverage(c: Column) -> str:
    """``sale_date: 2023-01-01 … 2026-10-31, ISO date text``: which period exists, and how to write it."""
    if c.coverage is None:
        return ""
    stored = f", stored as {c.coverage.format}" if c.coverage.format else ""
    return f" (data covers {c.coverage.min} … {c.coverage.max}{stored})"


def _column(c: Column) -> str:
    flags = " PK" if c.primary_key else ""
    ref = f" → {c.references}" if c.references else ""
    return (f"    {c.name} {c.type}{flags}{ref}{_described(c.description)}{_synonyms(c.synonyms)}"
            f"{_coverage(c)}{_values(c.values, c.draft)}")


def render_table(t: Table, m: Manifest) -> list[str]:
    """A table's lines: its header, one line per allowed column, then its row filters."""
    lines = [f"  table {t.name}{_described(t.description)}{_synonyms(t.synonyms)}"]
    lines += [_column(c) for c in t.allowed_columns]
    lines += [f"    [row filter, added automatically: {f.where}]" for f in m.row_filters_for(t.name)]
    restricted = [c.name for c in t.columns if c.restricted]
    if restricted:
        lines.append(f"    [restricted, exists but may not be read: {', '.join(restricted)}]")
    return lines


def _field(f: SearchField, prefix: str = "") -> list[str]:
    if f.denied:
        return []
    name = prefix + f.name
    lines = [f"    {name} {f.type}{_described(f.description)}{_synonyms(f.synonyms)}{_values(f.values, f.draft)}"]
    for sub in f.fields:
        lines += _field(sub, name + ".")
    return lines


def render_index(i: Index, m: Manifest) -> list[str]:
    """An index's lines: its header, one line per allowed field, then its row filters."""
    lines = [f"  index {i.name}{_described(i.description)}{_synonyms(i.synonyms)}"]
    for f in i.fields:
        lines += _field(f)
    restricted = [f.name for f in i.fields if f.restricted]
    if restricted:
        lines.append(f"    [restricted, exists but may not be read: {', '.join(restricted)}]")
    filters = m.row_filters_for(i.name)
    for rf in filters:
        lines.append(f"    [row filter, added automatically: {json.dumps(rf.term, ensure_ascii=False)}]")
    if filters:  # the sandbox refuses the rest (safety.dsl._tenant): say so before a plan tries
        lines.append("    [matches without relevance scores: sort by a field; no min_score, fuzzy, "
                     "fuzziness or phrase_prefix]")
    return lines


def render_manifest(m: Manifest) -> str:
    """One source as text: header, limits, then each table/index with its columns/fields."""
    language = f"{m.kind}, dialect {m.query_dialect}" if m.query_dialect else f"{m.kind} query DSL"
    if m.operations:
        language = api_language(m)
    header = f"source {m.source} ({language})"
    lines = [header + (f": {m.description}" if m.description else "")]
    lines.append(f"  limits: at most {m.limits.max_rows} rows returned, {m.limits.timeout_s:g}s per query")
    if m.functions:
        lines.append(f"  extra functions allowed: {', '.join(m.functions)}")
    for table in m.tables:
        lines += render_table(table, m)
    for index in m.indices:
        lines += render_index(index, m)
    lines += render_api(m)
    return "\n".join(lines)


def render_capabilities(capabilities: Iterable[Manifest]) -> str:
    """Every source, separated by blank lines, in the order given (a ``CapabilitySet``
    iterates its manifests in a stable order)."""
    return "\n\n".join(render_manifest(m) for m in capabilities)
