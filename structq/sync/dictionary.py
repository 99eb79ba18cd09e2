"""Descriptions companies already have: dbt projects and data dictionaries, read into manifests.

``structq describe --from FILE`` reads one of:

- a dbt ``manifest.json`` (``target/manifest.json``): models, seeds, snapshots and sources,
  with their columns; a table is matched by its ``alias``/``identifier`` or ``name``. dbt has
  already rendered ``{{ doc(...) }}`` blocks into the descriptions there;
- a dbt ``schema.yml`` (``models:`` and ``sources:`` → ``tables:``, with ``columns:``);
  ``{{ doc("name") }}`` is resolved from the ``{% docs name %}`` blocks of the ``.md`` files
  beside it and below it;
- a data dictionary, CSV (header ``table,column,description`` and optionally ``synonyms``,
  separated by ``|`` or ``;``; an empty column describes the table) or JSON (a list of such
  records).

Synonyms come from ``synonyms`` (dictionary) or ``meta.synonyms`` (dbt). What is written is
what ``structq describe`` writes with a model — a ``description`` and ``synonyms`` where there
were none, on draft objects and members only, never on a denied member — plus one comment at
the top of the file naming the origin; everything stays ``draft: true`` for a person to review.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from structq.errors import ConfigError

__all__ = ["Dictionary", "read_dictionary"]


@dataclass
class Entry:
    """What the file says about one table and its columns."""

    description: str = ""
    synonyms: list[str] = field(default_factory=list)
    columns: dict[str, tuple[str, list[str]]] = field(default_factory=dict)


@dataclass
class Dictionary:
    """Table name (lower case) → ``Entry``, and where it was read from."""

    origin: str
    tables: dict[str, Entry] = field(default_factory=dict)

    def entry(self, table: str) -> Entry:
        return self.tables.setdefault(table.lower(), Entry())

    def as_reply(self) -> dict[str, Any]:
        """The shape a describing model replies in (``sync.describe``), so one writer serves both."""
        return {"objects": {name: {"description": e.description, "synonyms": e.synonyms,
                                   "members": {c: {"description": d, "synonyms": s} for c, (d, s) in e.columns.items()}}
                            for name, e in self.tables.items()}}


def _synonyms(value: Any) -> list[str]:
    if isinstance(value, str):
        return [s.strip() for s in re.split(r"[|;]", value) if s.strip()]
    if isinstance(value, list):
        return [str(s).strip() for s in value if str(s).strip()]
    return []


def _meta_synonyms(node: dict[str, Any]) -> list[str]:
    meta = node.get("meta") or (node.get("config") or {}).get("meta") or {}
    return _synonyms(meta.get("synonyms")) if isinstance(meta, dict) else []


def _dbt_node(dictionary: Dictionary, name: str, node: dict[str, Any], resolve: Any = str) -> None:
    entry = dictionary.entry(name)
    entry.description = resolve(node.get("description") or "").strip()
    entry.synonyms = _meta_synonyms(node)
    columns = node.get("columns") or {}
    for column in (columns.values() if isinstance(columns, dict) else columns):
        if isinstance(column, dict) and column.get("name"):
            entry.columns[str(column["name"]).lower()] = (resolve(column.get("description") or "").strip(),
                                                          _meta_synonyms(column))


def _dbt_manifest(data: dict[str, Any], origin: str) -> Dictionary:
    out = Dictionary(origin)
    for node in (data.get("nodes") or {}).values():
        if isinstance(node, dict) and node.get("resource_type") in ("model", "seed", "snapshot"):
            _dbt_node(out, node.get("alias") or node["name"], node)
    for node in (data.get("sources") or {}).values():
        if isinstance(node, dict):
            _dbt_node(out, node.get("identifier") or node["name"], node)
    return out


_DOC_BLOCK = re.compile(r"{%-?\s*docs\s+(\w+)\s*-?%}(.*?){%-?\s*enddocs\s*-?%}", re.S)
_DOC_CALL = re.compile(r"{{\s*doc\(\s*['\"](\w+)['\"]\s*\)\s*}}")


def _doc_blocks(folder: Path) -> dict[str, str]:
    blocks: dict[str, str] = {}
    for path in sorted(folder.rglob("*.md")):
        for name, body in _DOC_BLOCK.findall(path.read_text(encoding="utf-8")):
            blocks[name] = " ".join(body.split())
    return blocks


def _dbt_schema(data: dict[str, Any], origin: str, folder: Path) -> Dictionary:
    blocks = _doc_blocks(folder)

    def resolve(text: str) -> str:
        return _DOC_CALL.sub(lambda m: blocks.get(m.group(1), ""), text)

    out = Dictionary(origin)
    for model in data.get("models") or []:
        if isinstance(model, dict) and model.get("name"):
            _dbt_node(out, (model.get("config") or {}).get("alias") or model["name"], model, resolve)
    for source in data.get("sources") or []:
        for table in (source or {}).get("tables") or []:
            if isinstance(table, dict) and table.get("name"):
                _dbt_node(out, table.get("identifier") or table["name"], table, resolve)
    return out


def _records(records: list[Any], origin: str) -> Dictionary:
    out = Dictionary(origin)
    for record in records:
        if not isinstance(record, dict):
            continue
        lowered = {str(k).strip().lower(): v for k, v in record.items()}
        table = str(lowered.get("table") or "").strip()
        if not table:
            continue
        column = str(lowered.get("column") or "").strip()
        description = str(lowered.get("description") or "").strip()
        synonyms = _synonyms(lowered.get("synonyms"))
        entry = out.entry(table)
        if column:
            entry.columns[column.lower()] = (description, synonyms)
        else:
            entry.description, entry.synonyms = description, synonyms
    return out


def read_dictionary(path: Path) -> Dictionary:
    """The descriptions in ``path`` (dbt ``manifest.json`` or ``schema.yml``, CSV or JSON dictionary)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})", hint="check the path given to --from") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text)
            if isinstance(data, dict) and "nodes" in data:
                return _dbt_manifest(data, f"dbt manifest {path.name}")
            if isinstance(data, list):
                return _records(data, f"data dictionary {path.name}")
        elif suffix in (".yml", ".yaml"):
            data = yaml.safe_load(text) or {}
            if isinstance(data, dict) and ("models" in data or "sources" in data):
                return _dbt_schema(data, f"dbt {path.name}", path.parent)
        elif suffix in (".csv", ".tsv"):
            dialect = "excel-tab" if suffix == ".tsv" else "excel"
            return _records(list(csv.DictReader(io.StringIO(text), dialect=dialect)), f"data dictionary {path.name}")
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not readable as {suffix[1:]} ({exc})", hint="check the file's format") from None
    raise ConfigError(f"{path}: not a dbt manifest.json or schema.yml, nor a CSV/JSON data dictionary",
                      hint="give a dbt target/manifest.json, a dbt schema.yml (models:/sources:), or a CSV/JSON "
                           "with table, column, description (and optionally synonyms)")
