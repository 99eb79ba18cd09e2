"""Matching a question to the slotted examples: one clear match, or an abstention with its reason.

Precision over recall. A question is answered from a template only when

1. its text is exactly the template's fixed words (case aside, declared column synonyms
   allowed) with something in each slot's place — an extra word anywhere fails;
2. the holes split the question one way only (the shortest and the longest fillings agree);
3. every slot reads as a value of its kind (``fillers``): one period of the slot's kind,
   a whole number in range, a code or meaning of the column, an entity found in the data;
4. no other template also matches.

When none does, the question may still be a *paraphrase* of a verified example (slotted or
not): the same words in another order and wording, every slot filled (``paraphrase``). The
match then says so (``Match.paraphrase``, read through ``Match.how``, ``Match.score`` and
``Match.why``: the score and the words it rests on).

The example's own question is answered with the example's own values (an entity it names is
not looked up again: a person verified it with the example).

Anything else abstains (``TemplateMatch.match`` is None, ``TemplateMatch.reason`` says why): a wrong
answer from a template is a defect, an abstention is not.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from .fillers import Filled, Lookup, read_coded, read_integer, read_period
from .paraphrase import Paraphrase, Paraphrases
from .pattern import Hole, Template, synonym_groups
from .text import match_text, normalise_question

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Example
    from structq.periods import PeriodMatch

__all__ = ["Match", "TemplateMatch", "TemplateSet"]


@dataclass(frozen=True)
class Match:
    """A template that answers the question, and the value each slot took."""

    template: Template
    filled: dict[str, Filled]
    #: How the question paraphrases the example, when it is not the example's wording: the one
    #: place that says how the match was made (``how``, ``score`` and ``why`` read it).
    paraphrase: Paraphrase | None = None

    @classmethod
    def of(cls, paraphrase: Paraphrase) -> Match:
        """The match a paraphrase makes: its example's template and slots."""
        return cls(paraphrase.template, paraphrase.filled, paraphrase)

    @property
    def how(self) -> str:
        """``words``: the example's wording with other values; ``paraphrase``: its words in other wording."""
        return "words" if self.paraphrase is None else "paraphrase"

    @property
    def score(self) -> float:
        """The share of the example's words the question contains (1.0 for ``words``)."""
        return 1.0 if self.paraphrase is None else self.paraphrase.score

    @property
    def why(self) -> str:
        """Why it matched, for people (a paraphrase: the score, the words implied, the slots)."""
        return "the example's words, with its slots filled" if self.paraphrase is None else self.paraphrase.why

    @property
    def example(self) -> Example:
        return self.template.example

    @property
    def params(self) -> dict[str, object]:
        """Every parameter the steps bind (``:month_start`` → ``2026-10-01``)."""
        return {k: v for f in self.filled.values() for k, v in f.params.items()}

    @property
    def shown(self) -> dict[str, str]:
        """Slot → its value as a person reads it (``grade`` → ``B``, ``month`` → ``2026-10 (上个月)``)."""
        return {name: f.shown for name, f in self.filled.items()}


@dataclass(frozen=True)
class TemplateMatch:
    """What matching a question to the verified examples found: a match, or why there is none."""

    match: Match | None
    reason: str
    #: The templates whose words fitted (with or without readable slot values).
    candidates: list[str] = field(default_factory=list)


class TemplateSet:
    """The manifests' slotted examples, compiled once."""

    def __init__(self, capabilities: CapabilitySet, *, paraphrases: bool = True) -> None:
        self.capabilities = capabilities
        self._synonyms = synonym_groups(capabilities)
        self.templates = [Template.build(m, ex, capabilities, self._synonyms)
                          for m, ex in capabilities.examples() if ex.slots]
        self._paraphrasing = paraphrases

    @cached_property
    def paraphrases(self) -> Paraphrases | None:
        """Paraphrase matching over the slotted examples and the unslotted ones whose dates
        cannot move (no period in the question, no ``today``); None when turned off or when no
        example qualifies. Built on first use — the unslotted examples' templates, the
        vocabulary — so a set that never needs it (turned off, or every question matched word
        for word) does not pay for it."""
        if not self._paraphrasing:
            return None
        slotted = iter(self.templates)  # the examples' order, the slotted ones already built
        templates = [next(slotted) if ex.slots else Template.build(m, ex, self.capabilities, self._synonyms)
                     for m, ex in self.capabilities.examples() if ex.slots or _fixed(ex)]
        return Paraphrases(self.capabilities, templates) if templates else None

    def __len__(self) -> int:
        return len(self.templates)

    def match(self, question: str, today: dt.date, lookup: Lookup | None = None) -> TemplateMatch:
        """The one template that answers ``question`` on ``today``, or why none does.

        ``lookup`` finds an entity slot's value as stored (without it, entity slots never fill).
        """
        text = match_text(question)
        found: list[Match] = []
        fitted: list[str] = []
        reasons: list[str] = []
        periods: list[PeriodMatch] | None = None
        for template in self.templates:
            lazy = template.lazy.fullmatch(text)
            if lazy is None:
                continue
            fitted.append(template.example.question)
            greedy = template.greedy.fullmatch(text)
            if template.has_periods:
                if periods is None:
                    from structq.periods import find_periods

                    periods = find_periods(text, today)
                if greedy is None or _spans(greedy) != _spans(lazy):
                    # Holes side by side ("产品X last year"): let each period hole take only the
                    # periods the grammar found, and see whether one split remains.
                    lazy_pattern, greedy_pattern = template.with_periods(sorted({p.text for p in periods}))
                    lazy, greedy = lazy_pattern.fullmatch(text), greedy_pattern.fullmatch(text)
            if lazy is None or greedy is None:
                reasons.append(f"{template.shape!r}: no period of the slot's kind where the slot stands")
                continue
            if _spans(greedy) != _spans(lazy):
                reasons.append(f"{template.shape!r}: the question splits into its slots in more than one way")
                continue
            # The example's own question: its values were verified with it (even on data too
            # small to hold them, as the demo at --scale 0.05).
            own = normalise_question(question) == normalise_question(template.example.question)
            filled, why = _fill(template, lazy, periods or [], _as_written if own else lookup)
            if filled is None:
                reasons.append(f"{template.shape!r}: {why}")
                continue
            found.append(Match(template, filled))
        if len(found) == 1:
            return TemplateMatch(found[0], "matched", fitted)
        if len(found) > 1:
            shapes = "; ".join(repr(m.template.shape) for m in found)
            return TemplateMatch(None, f"more than one verified example fits ({shapes})", fitted)
        strict = "; ".join(reasons) if reasons else "no verified example has this shape"
        if self.paraphrases is None:
            return TemplateMatch(None, strict, fitted)
        paraphrase, why = self.paraphrases.match(question, today, lookup)
        if paraphrase is None:
            return TemplateMatch(None, f"{strict}; {why}", fitted)
        return TemplateMatch(Match.of(paraphrase), "matched as a paraphrase", fitted)


def _fixed(example: Example) -> bool:
    """An unslotted example a paraphrase may plan from: its question names no period (its
    dates are the ones written) and is not pinned to a day."""
    from structq.periods import find_periods

    return example.today is None and not find_periods(match_text(example.question), dt.date.today())


def _as_written(column: str, text: str) -> str:
    """The lookup for an example's own question: its values are the verified ones."""
    return text


def _spans(match: re.Match[str]) -> dict[str, tuple[int, int]]:
    return {name: match.span(name) for name in match.groupdict()}


def _fill(template: Template, match: re.Match[str], periods: list[PeriodMatch],
          lookup: Lookup | None) -> tuple[dict[str, Filled] | None, str]:
    filled: dict[str, Filled] = {}
    for hole in template.holes:
        text = match.group(hole.name).strip()
        value = _read(hole, text, [p for p in periods if (p.start, p.end) == match.span(hole.name)], lookup)
        if value is None:
            return None, f"{text!r} is not a value of slot {hole.name!r} ({_kind(hole)})"
        filled[hole.name] = value
    return filled, ""


def _read(hole: Hole, text: str, periods: list[PeriodMatch], lookup: Lookup | None) -> Filled | None:
    """The hole's value; ``periods`` are the question's periods exactly where the hole stands."""
    if not text:
        return None
    kind = hole.slot.kind
    if kind == "integer":
        return read_integer(hole.name, hole.slot, text)
    if kind != "column":
        return read_period(hole.name, hole.slot, periods[0]) if len(periods) == 1 else None
    if hole.codes:
        return read_coded(hole.name, dict(hole.codes), text)
    if lookup is None:
        return None
    stored = lookup(hole.slot.column or "", text)
    if stored is None:
        return None
    return Filled({hole.name: stored}, stored if stored == text else f"{stored} ({text})")


def _kind(hole: Hole) -> str:
    return f"a value of {hole.slot.column}" if hole.slot.column else f"a {hole.slot.kind}"
