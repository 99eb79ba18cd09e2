"""A slotted example as a pattern: its question's fixed words, with a hole where each slot is.

``2026年3月各部门绩效为A的人数是多少？`` with slots ``month`` (2026年3月) and ``grade`` (A)
becomes ``⟨month⟩各部门绩效为⟨grade⟩的人数是多少``. A question matches when the fixed words are
all there, in order, and nothing else is (case aside; a word may be replaced by a synonym the
manifests declare for the same column); each hole must then read as a value of its slot.

Two regular expressions are made: holes taking as little text as possible, and as much. A
question they split differently has two readings, and is not matched (``Reading.ambiguous``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from structq.capabilities.slots import PERIOD_KINDS
from structq.errors import ManifestError

from .fillers import INTEGER_PATTERN, coded_pattern, coded_values, period_value
from .text import match_text

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Example, Manifest
    from structq.capabilities.slots import Slot

__all__ = ["Hole", "Template", "synonym_groups", "word_pattern"]


@dataclass(frozen=True)
class Hole:
    """Where a slot sits in the question, and what may fill it."""

    name: str
    slot: Slot
    #: Folded text → code, for a coded column; empty for the other kinds.
    codes: Mapping[str, str] = field(default_factory=dict)
    #: The regular expression of the accepted texts (``codes``), made once.
    codes_pattern: str = ""

    def pattern(self, greedy: bool, periods: list[str] | None = None) -> str:
        """What may fill the hole; a period slot, once the question's periods are known
        (``periods``: their texts), exactly one of them."""
        if periods is not None and self.slot.kind in PERIOD_KINDS:
            return f"(?P<{self.name}>{'|'.join(re.escape(p) for p in sorted(periods, key=len, reverse=True))})"
        if self.codes:
            return f"(?P<{self.name}>{self.codes_pattern})"
        if self.slot.kind == "integer":
            return f"(?P<{self.name}>{INTEGER_PATTERN})"
        # Never starting or ending with a blank: the blanks around a hole are the join's (`` ?``).
        return f"(?P<{self.name}>\\S(?:.*\\S)?)" if greedy else f"(?P<{self.name}>\\S(?:.*?\\S)?)"


@dataclass(frozen=True)
class Template:
    """One slotted example, compiled."""

    source: str
    example: Example
    #: The fixed words and the holes, in question order.
    parts: tuple[str | Hole, ...]
    lazy: re.Pattern[str]
    greedy: re.Pattern[str]
    #: Each fixed part as a regular expression (synonyms as alternatives), None for a hole.
    fixed_patterns: tuple[str | None, ...]

    @property
    def holes(self) -> list[Hole]:
        return [p for p in self.parts if isinstance(p, Hole)]

    @property
    def shape(self) -> str:
        """The question with its slots as placeholders: ``{month}各部门绩效为{grade}的人数是多少``
        (a blank between a placeholder and a Latin letter or digit, as it was written)."""
        out = ""
        for part in self.parts:
            text = part if isinstance(part, str) else "{" + part.name + "}"
            latin_before = bool(out) and out[-1].isascii() and out[-1].isalnum()
            latin_after = text[0].isascii() and text[0].isalnum()
            if (latin_before and text[0] == "{") or (out.endswith("}") and latin_after):
                out += " "
            out += text
        return out

    @property
    def fixed(self) -> str:
        """The fixed words only (for ranking close questions)."""
        return "".join(p for p in self.parts if isinstance(p, str))

    @classmethod
    def build(cls, manifest: Manifest, example: Example, capabilities: CapabilitySet,
              synonyms: Mapping[str, frozenset[str]]) -> Template:
        text = match_text(example.question)
        # Periods first, then longer examples: "5" is not looked for inside "2025年".
        order = sorted(example.slots.items(), key=lambda kv: (kv[1].kind not in PERIOD_KINDS, -len(kv[1].example)))
        spans: list[tuple[int, int, str]] = []
        for name, slot in order:
            spans.append(_slot_span(text, name, slot, example, manifest, taken=spans))
        spans.sort()
        parts: list[str | Hole] = []
        at = 0
        for start, end, name in spans:
            if text[at:start].strip():  # the blanks around a slot are optional (``_compile``)
                parts.append(text[at:start].strip())
            slot = example.slots[name]
            codes = _codes(slot, capabilities)
            parts.append(Hole(name, slot, codes, coded_pattern(codes) if codes else ""))
            at = end
        if text[at:].strip():
            parts.append(text[at:].strip())
        fixed = tuple(_fixed_pattern(p, synonyms) if isinstance(p, str) else None for p in parts)
        lazy, greedy = (_compile(parts, fixed, greedy) for greedy in (False, True))
        return cls(manifest.source, example, tuple(parts), lazy, greedy, fixed)

    @property
    def has_periods(self) -> bool:
        return any(h.slot.kind in PERIOD_KINDS for h in self.holes)

    def with_periods(self, periods: list[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """The lazy and greedy patterns with each period hole limited to ``periods`` (the
        texts the date grammar found in the question, read in context: ``2024`` is a year in
        ``in 2024``)."""
        return (_compile(self.parts, self.fixed_patterns, False, periods),
                _compile(self.parts, self.fixed_patterns, True, periods))


def _slot_error(manifest: Manifest, example: Example, message: str) -> ManifestError:
    return ManifestError(f"example {example.question!r}: {message}", file=str(manifest.path or manifest.source),
                         hint="give each slot's example as it is written in the question")


def word_pattern(written: str) -> str:
    """The example as a pattern that does not start or end inside a word or number (``5`` is
    not found in ``2025``, ``A`` not in ``What``)."""
    pattern = re.escape(written)
    if written[:1].isascii() and written[:1].isalnum():
        pattern = r"(?<![0-9A-Za-z])" + pattern
    if written[-1:].isascii() and written[-1:].isalnum():
        pattern += r"(?![0-9A-Za-z])"
    return pattern


def _slot_span(text: str, name: str, slot: Slot, example: Example, manifest: Manifest, *,
               taken: list[tuple[int, int, str]]) -> tuple[int, int, str]:
    """Where the slot's example stands in the question's match text, clear of the slots found."""
    written = match_text(slot.example)
    found = [m.start() for m in re.finditer(word_pattern(written), text, re.IGNORECASE)
             if not any(m.start() < end and start < m.end() for start, end, _ in taken)] if written else []
    if len(found) == 1:
        return found[0], found[0] + len(written), name
    if len(found) > 1:
        raise _slot_error(manifest, example, f"slot {name!r}: {slot.example!r} occurs {len(found)} times")
    if slot.kind in PERIOD_KINDS:
        from structq.periods import find_periods

        today = example.today or dt.date.today()
        for period in find_periods(text, today):
            if (period_value(slot.kind, period.first, period.last) == slot.example
                    and not any(period.start < end and start < period.end for start, end, _ in taken)):
                return period.start, period.end, name
    raise _slot_error(manifest, example, f"slot {name!r}: {slot.example!r} is not in the question"
                      + (" as a period of that kind" if slot.kind in PERIOD_KINDS else ""))


def _codes(slot: Slot, capabilities: CapabilitySet) -> dict[str, str]:
    """A coded column's accepted texts; empty for an entity column or another kind of slot."""
    if slot.column is None:
        return {}
    source, container, name = slot.column.split(".", 2)
    manifest = capabilities.get(source)
    if manifest is None:
        return {}
    obj = manifest.object(container)
    column = obj.member(name) if obj is not None else None
    values = getattr(column, "values", None) or {}
    return coded_values(dict(values))


def _compile(parts: Sequence[str | Hole], fixed: Sequence[str | None], greedy: bool,
             periods: list[str] | None = None) -> re.Pattern[str]:
    """The pattern of the whole question: the fixed parts as made once, each hole's pattern."""
    pieces = [f if f is not None else p.pattern(greedy, periods) for p, f in zip(parts, fixed, strict=True)]  # type: ignore[union-attr]
    # A blank where a slot meets its neighbours is not a word ("last month 研发部", "March 2026 的").
    return re.compile(r" ?".join(pieces), re.IGNORECASE)


def _fixed_pattern(text: str, synonyms: Mapping[str, frozenset[str]]) -> str:
    """The fixed words, each declared synonym replaced by the alternatives that mean the same."""
    if not synonyms:
        return re.escape(text)
    terms = sorted(synonyms, key=len, reverse=True)
    out, at = [], 0
    finder = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    for m in finder.finditer(text):
        out.append(re.escape(text[at:m.start()]))
        alternatives = sorted(synonyms[m.group().casefold()], key=len, reverse=True)
        out.append("(?:" + "|".join(re.escape(a) for a in alternatives) + ")")
        at = m.end()
    out.append(re.escape(text[at:]))
    return "".join(out)


def synonym_groups(capabilities: CapabilitySet) -> dict[str, frozenset[str]]:
    """Term → the terms that may replace it: those every column declaring the term also
    declares (``销售额`` → {销售额, 金额} when one column says [金额, 销售额, 成交额] and another
    [合同金额, 销售额, 金额]). Only column synonyms count: a table's are too broad (销量 is not 销售额).
    Terms with no alternative are left out."""
    groups: dict[str, frozenset[str]] = {}
    for columns in _column_synonyms(capabilities):
        members = frozenset(s.casefold() for s in columns)
        for term in members:
            groups[term] = groups[term] & members if term in groups else members
    return {term: alts for term, alts in groups.items() if len(alts) > 1}


def _column_synonyms(capabilities: CapabilitySet) -> Iterator[list[str]]:
    for manifest in capabilities:
        for container in manifest.objects:
            for item in container.flat_members().values():
                if len(item.synonyms) > 1:
                    yield [s for s in item.synonyms if s.strip()]
