"""The value index: stored values of entity columns, so "星火" in a question finds its column.

Which columns qualify (``eligible_columns``): text columns (keyword fields) that are not
keys (identifiers, not names), not denied, carry no ``values`` (those are in the manifest
already), and do not belong to a row-filtered table or index — a row filter means the rows are
split between callers, and an index of their values would show one tenant's customer names to
another. ``structq sync --values`` reads them (``structq.sync.values``) and writes
``.values/<source>.json`` next to the manifests.

The file records the fingerprint of what made it (source, eligible columns, row filters). A
file whose fingerprint differs from the manifest's is reported as stale; whatever it holds,
only columns eligible *now* are ever read from it, so a column denied or a table row-filtered
after the build drops out at once, without a rebuild.

Lookup (``ValueIndex.match``) finds stored values written in the question, exactly (after
case and width folding) or nearly (edit distance ≤ 1 for values of 4+ letters or 3+ Chinese
characters, ≤ 2 from 8 letters or 6 characters),
and reports the stored spelling, so the prompt can tell the model what to write.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.capabilities.objects import Column, SearchField
from structq.errors import ConfigError

from .memo import Memo
from .tokens import is_cjk, latin_words

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest

__all__ = ["ValueMatch", "ValueIndex", "eligible_columns", "values_fingerprint", "values_path",
           "FORMAT_VERSION", "DEFAULT_MAX_DISTINCT", "MAX_VALUE_LENGTH", "load_values", "fold"]

FORMAT_VERSION = 1
#: Columns with more distinct values than this are left out (ids, free text, timestamps).
DEFAULT_MAX_DISTINCT = 5000
#: Longer values are prose, not names.
MAX_VALUE_LENGTH = 80
#: A word or bigram in at most this many stored values is rare enough to support a near match.
RARE_KEY = 5
#: Values tried for a near match per question, at most.
FUZZY_CANDIDATES = 32


def eligible_columns(manifest: "Manifest") -> list[tuple[str, str]]:
    """(table or index, column or field) pairs whose values may be indexed; see the module doc."""
    return [(obj.name, path) for obj in manifest.objects if not manifest.row_filters_for(obj.name)
            for path, member in obj.readable_members().items() if _ELIGIBLE[type(member)](member)]


def _eligible_column(c: Column) -> bool:
    return c.type == "text" and not (c.primary_key or c.references or c.values)


def _eligible_field(f: SearchField) -> bool:
    return f.type == "keyword" and not f.values  # analysed text cannot be aggregated


#: Whether a readable member's values may be indexed, by the member's type.
_ELIGIBLE: dict[type, Callable[[Any], bool]] = {Column: _eligible_column, SearchField: _eligible_field}


def values_fingerprint(manifest: "Manifest") -> str:
    """A hash of what decides a value file's contents: source, eligible columns, row filters."""
    basis = {
        "source": manifest.source,
        "columns": sorted(eligible_columns(manifest)),
        "filters": [f.model_dump(mode="json") for f in manifest.policies.row_filters],
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def values_path(manifest: "Manifest") -> Path | None:
    """``.values/<source>.json`` in the manifest's folder (None for a manifest built in code)."""
    if manifest.path is None:
        return None
    return manifest.path.parent / ".values" / f"{manifest.source}.json"


def fold(text: str) -> str:
    """Compare-form of a value: NFKC (full-width → ASCII), case-folded, blanks squeezed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass(frozen=True)
class ValueMatch:
    """A stored value found in the question."""

    source: str
    table: str
    column: str
    value: str  # the stored spelling
    matched: str  # the text of the question it matched
    exact: bool
    score: float

    def describe(self) -> str:
        quoted = self.value.replace("'", "''")
        note = "" if self.exact else f" (the question wrote {self.matched!r})"
        if self.value != self.value.strip():
            note += " (stored with leading/trailing spaces: write it exactly so, or compare TRIM())"
        return f"{self.source}.{self.table}.{self.column} = '{quoted}'{note}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "table": self.table, "column": self.column, "value": self.value,
                "matched": self.matched, "exact": self.exact, "score": round(self.score, 3)}


def _keys(folded: str) -> list[str]:
    """Lookup keys of a folded text: CJK bigrams (a single character alone) and latin words."""
    keys: list[str] = []
    run = ""
    for ch in folded + " ":
        if is_cjk(ch):
            run += ch
            continue
        if run:
            keys += [run[i : i + 2] for i in range(len(run) - 1)] or [run]
            run = ""
    keys += [w for w in latin_words(folded) if len(w) > 1]
    return keys


def _distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, giving up (returning ``limit + 1``) once it must exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def _allowed_edits(value: str) -> int:
    """Edits a near match may need: a Chinese character carries about a latin word's worth of
    meaning, so a three-character name (李浩华) already tolerates one typo; latin needs four letters."""
    short, long_ = (3, 6) if is_cjk(value) else (4, 8)
    return 0 if len(value) < short else 1 if len(value) < long_ else 2


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() and not is_cjk(ch)


@dataclass
class ValueIndex:
    """Stored values by column, with a key → values table for lookup."""

    #: (source, table, column) → stored values
    columns: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    #: Notes for ``--explain-linking``: missing or stale files.
    notes: list[str] = field(default_factory=list)
    _postings: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    _entries: list[tuple[str, str, tuple[str, str, str]]] = field(default_factory=list)
    _needed: list[int] = field(default_factory=list)  # distinct lookup keys of each entry

    def add(self, source: str, table: str, column: str, values: list[str]) -> None:
        """Index ``values`` (short, non-empty ones) of one column."""
        kept = [v for v in values if isinstance(v, str) and v.strip() and len(v) <= MAX_VALUE_LENGTH]
        self.columns[(source, table, column)] = kept
        for value in kept:
            folded = fold(value)
            if len(folded) < 2 or (len(folded) < 3 and not is_cjk(folded)):
                continue  # "A", "no": too short to tell a name from a word
            ident = len(self._entries)
            keys = set(_keys(folded))
            self._entries.append((value, folded, (source, table, column)))
            self._needed.append(len(keys))
            for key in keys:
                self._postings[key].add(ident)

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def load(cls, capabilities: "CapabilitySet") -> "ValueIndex":
        """The value files next to the manifests, reduced to the columns eligible now."""
        index = cls()
        for manifest in capabilities:
            path = values_path(manifest)
            if path is None or not path.is_file():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{path}: the value index cannot be read ({exc})",
                                  hint="rebuild it with `structq sync --values`, or delete the file") from None
            if data.get("version") != FORMAT_VERSION or data.get("source") != manifest.source:
                index.notes.append(f"{path}: not a value index of source {manifest.source!r} (format "
                                   f"{data.get('version')!r}); rebuild with `structq sync --values`")
                continue
            if data.get("fingerprint") != values_fingerprint(manifest):
                index.notes.append(f"{path}: built for other manifest contents (columns or row filters changed); "
                                   "only still-eligible columns are used; rebuild with `structq sync --values`")
            allowed = {(t.lower(), c.lower()): (t, c) for t, c in eligible_columns(manifest)}
            for entry in data.get("columns", []):
                names = allowed.get((str(entry.get("table", "")).lower(), str(entry.get("column", "")).lower()))
                if names is not None:
                    index.add(manifest.source, names[0], names[1], list(entry.get("values", [])))
        return index

    def match(self, question: str, *, limit: int = 8) -> list[ValueMatch]:
        """Stored values written in the question, best first (exact before fuzzy, longer first).

        A near match must share a *rare* word or bigram with the question (one that at most
        ``RARE_KEY`` stored values contain): 李浩化 ~ 李浩华 through 李浩, but never 产品是 ~ 产品部
        through the everyday word 产品. At most ``FUZZY_CANDIDATES`` values are tried for near
        matches per question, those sharing most first, so a long question stays fast.
        """
        folded = fold(question)
        counts: dict[int, int] = defaultdict(int)
        rare: set[int] = set()
        for key in set(_keys(folded)):
            posting = self._postings.get(key, ())
            for ident in posting:
                counts[ident] += 1
            if len(posting) <= RARE_KEY:
                rare.update(posting)
        found: dict[tuple[str, str, str, str], ValueMatch] = {}
        near: list[tuple[int, int]] = []
        for ident, shared in counts.items():
            needed = self._needed[ident]
            if shared * 2 < needed:
                continue  # not even half of its words/bigrams are in the question
            value, target, where = self._entries[ident]
            if self._exact(folded, target):
                self._record(found, ValueMatch(*where, value=value, matched=target, exact=True, score=len(target)))
                continue
            allowed = _allowed_edits(target)
            # one edit breaks at most two bigrams (or one word)
            if allowed and ident in rare and needed - shared <= 2 * allowed:
                near.append((needed - shared, ident))
        for _, ident in sorted(near)[:FUZZY_CANDIDATES]:
            value, target, where = self._entries[ident]
            hit = self._near(folded, target)
            if hit is not None:
                self._record(found, ValueMatch(*where, value=value, matched=hit[0], exact=False, score=0.6 * len(target)))
        ranked = sorted(found.values(), key=lambda m: (-m.exact, -m.score, m.value))
        return _drop_shadowed(ranked)[:limit]

    @staticmethod
    def _record(found: dict[tuple[str, str, str, str], ValueMatch], m: ValueMatch) -> None:
        key = (m.source, m.table, m.column, m.value)
        if key not in found or found[key].score < m.score:
            found[key] = m

    @staticmethod
    def _exact(folded: str, target: str) -> bool:
        """Whether ``target`` occurs in the question (latin values as whole words)."""
        start = folded.find(target)
        while start >= 0:
            end = start + len(target)
            latin_edges = not is_cjk(target[0]) and start > 0 and _is_word_char(folded[start - 1])
            latin_edges = latin_edges or (not is_cjk(target[-1]) and end < len(folded) and _is_word_char(folded[end]))
            if not latin_edges:
                return True
            start = folded.find(target, start + 1)
        return False

    @staticmethod
    def _near(folded: str, target: str) -> tuple[str, int] | None:
        """The question's span closest to ``target`` within its allowed edits: (span, edits), or None."""
        allowed = _allowed_edits(target)
        best: tuple[str, int] | None = None
        n = len(target)
        for length in sorted(range(n - allowed, n + allowed + 1), key=lambda k: abs(k - n)):  # same length first
            for i in range(0, len(folded) - length + 1):
                window = folded[i : i + length]
                if window[0] != target[0] and window[-1] != target[-1]:
                    continue
                d = _distance(window, target, allowed)
                if d <= allowed and (best is None or d < best[1]):
                    best = (window, d)
        return best


def _drop_shadowed(matches: list[ValueMatch]) -> list[ValueMatch]:
    """Drop a fuzzy match whose question text is already explained by an exact one."""
    exact_spans = [m.matched for m in matches if m.exact]
    return [m for m in matches if m.exact or not any(m.matched in s or s in m.matched for s in exact_spans)]


_LOADED: Memo[ValueIndex] = Memo()


def load_values(capabilities: "CapabilitySet") -> ValueIndex:
    """``ValueIndex.load``, cached until the manifests or a value file change."""
    stamps = []
    for manifest in capabilities:
        path = values_path(manifest)
        if path is not None and path.is_file():
            stamps.append((str(path), path.stat().st_mtime))
    return _LOADED.get((capabilities.fingerprint(), tuple(stamps)), lambda: ValueIndex.load(capabilities))
