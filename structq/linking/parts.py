"""The share of the linking index one manifest determines, kept by that manifest's fingerprint.

Why: tokenizing every table's name, description, columns and values is most of building the
index, and it depends on one manifest only. So each manifest's share — its entities, the term
bags of its tables and columns, the name phrases, its source's header size, the languages it
is written in — is a ``Part``,
built once per version of that manifest and reused: in this process while the catalogue is
the last one linked, and across processes from the cache folder (``persist.cached_part``).
When one manifest of a large catalogue changes, only its part is built again; the rest is the
merge (``LinkingIndex.merge``): concatenation, the verified examples' questions (which may read
tables of any source) and the BM25 statistics, which are catalogue-wide.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import persist
from .entities import Entity, estimate_tokens, manifest_entities
from .languages import Reach, source_reach
from .tokens import terms

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest

__all__ = ["Part", "build_part", "parts"]

#: Field weights of a table document (see ``index``'s docstring); a column document weighs its
#: name and synonyms ``W_OWN_NAME``, its description 1, its values ``W_VALUES``.
W_NAME, W_SYNONYM, W_DESCRIPTION = 3.0, 3.0, 1.5
W_COLUMN_NAME, W_COLUMN_SYNONYM, W_COLUMN_DESCRIPTION, W_VALUES = 1.0, 1.0, 0.6, 0.5
W_EXAMPLE, W_SOURCE, W_OWN_NAME = 1.0, 0.3, 2.0

#: How many parts were built (not reused) in this process: what the tests count.
built = 0


def add_terms(bag: Counter, text: str, weight: float) -> None:
    """Add ``text``'s terms to ``bag``, each times ``weight``."""
    for term, w in terms(text):
        bag[term] += w * weight


@dataclass
class Part:
    """One manifest's entities and documents; entity numbers are local to the part."""

    source: str
    entities: list[Entity]
    #: Each entity's table document, before verified examples' questions are added.
    bags: list[Counter]
    column_bags: list[Counter]
    column_keys: list[tuple[int, int]]  # column document → (entity, member)
    #: (the full-weight terms of an entity's name or one synonym, the entity)
    names: list[tuple[frozenset[str], int]]
    #: Estimated tokens of the source's header lines.
    header_tokens: int
    #: The languages of the manifest's names and prose (``confidence.judge`` reads them).
    reach: Reach


def build_part(manifest: "Manifest") -> Part:
    """The part of ``manifest``, built from it alone."""
    global built
    built += 1
    found = manifest_entities(manifest)
    bags: list[Counter] = []
    column_bags: list[Counter] = []
    column_keys: list[tuple[int, int]] = []
    source_text = f"{manifest.source} {manifest.description or ''}"
    for i, e in enumerate(found):
        bag: Counter = Counter()
        add_terms(bag, e.name, W_NAME)
        for s in e.synonyms:
            add_terms(bag, s, W_SYNONYM)
        add_terms(bag, e.description, W_DESCRIPTION)
        add_terms(bag, source_text, W_SOURCE)
        for j, member in enumerate(e.members):
            col: Counter = Counter()
            add_terms(col, member.name.replace(".", " "), W_OWN_NAME)
            for s in member.synonyms:
                add_terms(col, s, W_OWN_NAME)
            add_terms(col, member.description, 1.0)
            for code, meaning in member.values:
                add_terms(col, f"{code} {meaning}", W_VALUES)
            column_bags.append(col)
            column_keys.append((i, j))
            add_terms(bag, member.name.replace(".", " "), W_COLUMN_NAME)
            for s in member.synonyms:
                add_terms(bag, s, W_COLUMN_SYNONYM)
            add_terms(bag, member.description, W_COLUMN_DESCRIPTION)
            for code, meaning in member.values:
                add_terms(bag, f"{code} {meaning}", W_VALUES)
        bags.append(bag)
    names = []
    for i, e in enumerate(found):
        for phrase in (e.name, *e.synonyms):
            needed = frozenset(t for t, w in terms(phrase) if w >= 1.0 and not t.startswith("#"))
            if needed:
                names.append((needed, i))
    from structq.capabilities.render import render_manifest

    header = estimate_tokens(render_manifest(manifest.model_copy(update={"tables": [], "indices": []}))) + 8
    return Part(manifest.source, found, bags, column_bags, column_keys, names, header, source_reach(manifest))


#: The parts of the catalogue linked last, by manifest fingerprint: what the next build reuses.
_HELD: dict[str, Part] = {}


def parts(capabilities: "CapabilitySet") -> list[Part]:
    """Every manifest's part, in manifest order: held, kept on disk, or built."""
    global _HELD
    held: dict[str, Part] = {}
    out = []
    for manifest in capabilities:
        key = capabilities.fingerprint_of(manifest.source)
        part = _HELD.get(key) or held.get(key)
        if part is None:
            part = persist.cached_part(key, lambda m=manifest: build_part(m), Part, keep=2 * len(capabilities))
        held[key] = part
        out.append(part)
    _HELD = held
    return out
