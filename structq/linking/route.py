"""Routing: when linking is not confident, one model call says where to look.

Lexical linking cannot bridge languages on its own (a Chinese question, English names). When
``select`` is not confident (``confidence.py``), the planner makes **one** extra, bounded model
call before planning. The model is shown a compact map of the catalogue — each source with its
one-line description and its tables' names — and the question, and answers with the sources
and tables to open and the question's key terms written in the catalogue's language. Linking
then runs again on those: the named tables are kept, the terms join the question's, and only
the named sources compete. A confident question costs no call at all.

The map fits ``Budget.route_tokens`` (``STRUCTQ_ROUTE_TOKENS``; 0 turns routing off). When the
catalogue's table names do not fit, the map is hierarchical: sources first (name, description,
how many tables, a few table names), the sources the question's language cannot reach listed
first; the model then names sources, and linking ranks their tables by the translated terms.

The reply is only advice: names the catalogue does not have are dropped, the sandbox checks
every query against the full manifests as always, and a reply that does not parse leaves the
first selection in place (no second call).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .entities import estimate_tokens

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

    from .confidence import Confidence

__all__ = ["Route", "catalogue_map", "routing_prompt", "parse_route", "ROUTE_PURPOSE"]

#: The ``purpose`` of the routing call in the call log (``agent.llm.CallLog``).
ROUTE_PURPOSE = "route"

_INSTRUCTIONS = """You route a question to the part of a database catalogue that can answer it.
The catalogue's names may be in another language than the question. Read the map and answer
with ONE JSON object, nothing else:
{"sources": ["source", ...], "tables": ["source.table", ...], "terms": ["word", ...]}
- sources: the sources to open (at most 3), most likely first;
- tables: the tables the question needs, when the map shows them (at most 8);
- terms: the question's key words (entities, measures, filters) translated into the language
  of the catalogue's names, as they would appear in table or column names (at most 12).
Name only sources and tables that are on the map."""


@dataclass(frozen=True)
class Route:
    """Where the model said to look: sources, (source, table) pairs, and terms in the catalogue's language."""

    sources: tuple[str, ...] = ()
    tables: tuple[tuple[str, str], ...] = ()
    terms: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.sources or self.tables or self.terms)

    def to_dict(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "tables": [f"{s}.{t}" for s, t in self.tables], "terms": list(self.terms)}


def _describe(text: str, limit: int = 80) -> str:
    line = " ".join((text or "").split())
    return f": {line[:limit]}{'…' if len(line) > limit else ''}" if line else ""


def catalogue_map(capabilities: "CapabilitySet", budget_tokens: int, first: tuple[str, ...] = ()) -> str:
    """Sources with their description and every table's name, within ``budget_tokens``; when
    that does not fit, sources only (with a few table names each), ``first`` sources first."""
    order = sorted(capabilities, key=lambda m: (m.source not in first,))
    full = [f"- {m.source}{_describe(m.description)} — tables: {', '.join(o.name for o in m.objects)}" for m in order]
    text = "\n".join(full)
    if estimate_tokens(text) <= budget_tokens:
        return "Catalogue (source: description — tables):\n" + text
    lines = ["Catalogue, sources only (source: description — how many tables, some of them):"]
    used = estimate_tokens(lines[0])
    for m in order:
        names = [o.name for o in m.objects]
        some = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
        line = f"- {m.source}{_describe(m.description, 60)} — {len(names)} tables: {some}"
        cost = estimate_tokens(line)
        if used + cost > budget_tokens:
            lines.append(f"- … ({len(capabilities) - len(lines) + 1} more sources not listed)")
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)


def routing_prompt(question: str, capabilities: "CapabilitySet", confidence: "Confidence", budget_tokens: int) -> str:
    """The one message of the routing call: instructions, the map, why linking was unsure (the
    selection's ``confidence``), the question."""
    unsure = "; ".join(confidence.reasons)
    return (f"{_INSTRUCTIONS}\n\n{catalogue_map(capabilities, budget_tokens, confidence.unreachable)}\n\n"
            f"Why word matching was not enough: {unsure}\n\nQuestion: {question}")


def _strings(value: Any, limit: int) -> list[str]:
    if not isinstance(value, list):
        return []
    return [v.strip() for v in value if isinstance(v, str) and v.strip()][:limit]


def parse_route(text: str, capabilities: "CapabilitySet") -> Route:
    """The model's reply as a ``Route``; unknown sources and tables dropped, nothing on a bad reply."""
    match = re.search(r"\{.*\}", text or "", re.S)
    try:
        data = json.loads(match.group(0)) if match else {}
    except json.JSONDecodeError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    by_name = {m.source.lower(): m for m in capabilities}
    sources = [by_name[s.lower()].source for s in _strings(data.get("sources"), 3) if s.lower() in by_name]
    tables: list[tuple[str, str]] = []
    for name in _strings(data.get("tables"), 8):
        source, _, table = name.rpartition(".")
        manifests = [by_name[source.lower()]] if source.lower() in by_name else list(capabilities) if not source else []
        for m in manifests:
            found = next((o for o in m.objects if o.name.lower() == table.lower()), None)
            if found is not None:
                tables.append((m.source, found.name))
                break
    for source, _ in tables:
        if source not in sources:
            sources.append(source)
    return Route(tuple(sources), tuple(dict.fromkeys(tables)), tuple(_strings(data.get("terms"), 12)))
