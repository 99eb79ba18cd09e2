"""Paraphrases of a verified example: the same question in other words, or not at all.

The strict matcher (``match``) takes a question only when it is the example's wording with
other values. This one reads both texts as a handful of meaningful *words* and compares those,
so that word order, particles, question words of one kind (多少 = 几 = how many), declared
synonyms (大区 = 地区, 销售额 = 金额) and English inflection do not matter:

``2026年3月每个部门有多少人绩效是A？`` reads as {period 2026-03, each, 部门, how-many, people,
绩效, value A}, which is ``2026年3月各部门绩效为A的人数是多少？`` read the same way, with the
example's slots ``month`` and ``grade`` filled from the question's period and value.

A word is one of (``Word.kind``):

- ``period`` (the date grammar's), ``number``, ``value`` (a code or meaning of a coded column),
  ``entity`` (a stored value of an example's entity slot, looked up in the data);
- ``concept``: a column or table, by the set of objects that declare the word as a name or
  synonym (two words mean the same only when exactly the same columns declare them);
- ``class``: a question word of one of ``words.CLASSES`` (how-many, top, each, not, …);
- ``modal``: a word of ``words.MODALS``; ``measure``: a measure word of ``words.MEASURES``;
- ``word``: anything else, compared as written (English by lemma).

Fillers (``words.FILLERS``) are skipped. A question is a paraphrase of an example when

1. every slot is filled by exactly one word of the question of the slot's kind (a period of
   the slot's kind, a whole number in range, a code of the slot's column, a stored value of
   the slot's column) — two candidates for a slot, or none, and it is not;
2. every other word of the question is a word of the example (nothing added: another value,
   period, number, metric, grouping, negation, comparison or plain word is another question);
3. every word of the example is in the question, except a table's name or synonym naming the
   people an example counts (``员工`` in ``绩效为D的员工有多少人``), which a question that
   counts people too (``有几个人``) may leave implied, and a table's noun beside a word naming
   columns of that table alone (on either side: it says nothing more). Any other noun left out
   may change what is listed (``销售额最高的10个`` could be customers or products), so it is
   not implied;
4. the score — the example's words found in the question, over the example's words — is at
   least ``THRESHOLD``; and no other example also qualifies;
5. a plain word the example writes against a column slot's value (``区`` in ``华东区``) is,
   when the question has it, written against the same slot's value on the same side (order
   may change, attachment not: ``研发部区在职的华东员工`` swaps the values);
6. a comparison or negation stands between the same words as in the example
   (``销售额小于1000万且回款周期超过60天`` swaps the example's two comparisons);
7. the question's measure words count what the example counts (``words.MEASURES``: 份 and 笔
   things, 家 organisations, 位 and 名 people, as 人 does): ``上个季度有多少家签了合同`` counts
   customers where ``上个季度签了多少份合同`` counts contracts;
8. a question asking for several (``which-many``: 哪些, 哪几) does not paraphrase an example that
   ranks with no number (``销售额最高的产品是什么``: its plan gives the first row); one or several
   (哪家, 哪些) are never the same word, while 什么, 谁 and which stand for both.

9. a question choosing among a set (``words.AMONG``: 中, among) has an example that chooses
   among one too, with every word on the same side of it (``金额最大的5份合同中哪些是2024年签约的``
   ranks, then filters; the example filters, then ranks); ``5个项目中有哪些`` chooses nothing;
10. the first question word asks for the same thing: a word naming a table or people after it,
    else a column word after it, else the same before it (``参与项目的员工中…有哪些`` lists
    employees, ``绩效为A的员工都参与了哪些项目`` projects);
11. a stored value (a person, a project, a product) stays on the same side of each plain word of
    the example (``哪些周报写了李玲倩`` is about her, ``李玲倩…写了哪些周报`` by her).

A modal word (``words.MODALS``: 要签, 会是, will, should) is a word like any other: a question
that has one its example lacks asks about a plan, a target or a forecast, and adds a word.

The result says which words matched and which were implied (``Paraphrase.why``), so an answer
planned from it can show why.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from structq.capabilities.slots import PERIOD_KINDS

from .fillers import Filled, Lookup, chinese_number, read_integer, read_period
from .pattern import Hole, Template
from .text import match_text
from .words import AMONG, CLASSES, FILLERS, MEASURES, MODALS, SAME, lemma, number_word

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Example
    from structq.periods import PeriodMatch

__all__ = ["THRESHOLD", "Paraphrase", "Paraphrases", "Word"]

#: The least share of an example's words a paraphrase must contain (rule 4). Calibrated on the
#: demo's question sets (``bench/templates.py``): every near-miss there is refused at any value
#: (the other rules refuse them), and 0.8 is the highest value that keeps every paraphrase that leaves
#: one noun implied among six words (0.83); a question leaving more of a short example implied
#: is planned afresh.
THRESHOLD = 0.8

#: The longest entity a question may name, in words (``智能 BI 分析平台`` is three).
ENTITY_WORDS = 4

_UNIT = re.compile(r"[a-z0-9]+(?:[&.][a-z0-9]+)*|\S")
_CJK_NUMERAL = set("一二两三四五六七八九十")
#: ``which`` (什么, 谁) asks for one or several: it stands for ``which-one`` (哪家) and
#: ``which-many`` (哪些), which never stand for each other.
_WHICH = frozenset({"which", "which-one", "which-many"})


@dataclass(frozen=True)
class Word:
    """One meaningful word of a question, where it stands in the match text."""

    kind: str
    #: What two words must share to be the same: a frozenset of (column, code) pairs for a
    #: value, the objects for a concept, the class name, the number, the lemma.
    key: Any
    text: str
    start: int
    end: int
    period: PeriodMatch | None = None

    @property
    def soft(self) -> bool:
        """A table's noun: may be left implied by a paraphrase that counts people (rule 3)."""
        return self.kind == "concept" and all(o.count(".") == 1 for o in self.key)

    def same(self, other: Word) -> bool:
        """Whether the two mean the same: values sharing a column's code (优秀 and A), periods
        of the same days, anything else by its key."""
        if self.kind != other.kind:
            return False
        if self.kind == "value":
            return bool(self.key & other.key)
        if self.kind == "period":
            return (self.key[1], self.key[2]) == (other.key[1], other.key[2])
        if self.kind == "class" and "which" in (self.key, other.key):
            return {self.key, other.key} <= _WHICH
        return bool(self.key == other.key)


@dataclass(frozen=True)
class Paraphrase:
    """An example the question paraphrases, its slots' values, and why."""

    template: Template
    filled: dict[str, Filled]
    score: float
    #: The example's words found in the question, as ``question word ~ example word``.
    matched: tuple[str, ...]
    #: The example's subject nouns the question leaves implied.
    implied: tuple[str, ...]

    @property
    def why(self) -> str:
        """One line for people: the score and what it rests on."""
        slots = ", ".join(f"{name} = {f.shown}" for name, f in self.filled.items())
        implied = f"; implied: {', '.join(self.implied)}" if self.implied else ""
        return (f"paraphrase, score {self.score:.2f} ({len(self.matched)} of {len(self.matched) + len(self.implied)}"
                f" words{implied})" + (f"; slots: {slots}" if slots else ""))


@dataclass(frozen=True)
class _Verdict:
    """One example against the question: a paraphrase, or the rule that refused it."""

    found: Paraphrase | None
    reason: str


class Vocabulary:
    """The manifests' words (concepts and coded values) and the built-in ones, by their units."""

    def __init__(self, capabilities: CapabilitySet) -> None:
        self.entries: dict[tuple[str, ...], tuple[str, Any]] = {}
        concepts: dict[str, dict[str, set[str]]] = {"column": {}, "table": {}}
        values: dict[str, set[tuple[str, str]]] = {}
        #: Short Latin codes (``A``) as written → their entry: they match only so, never an
        #: article's ``a`` (which stays what the other entries make it, a filler).
        self.cased: dict[str, tuple[str, Any]] = {}
        cased: dict[str, str] = {}
        for manifest in capabilities:
            for obj in manifest.objects:
                owner = f"{manifest.source}.{obj.name}"
                for term in (obj.name, *getattr(obj, "synonyms", ())):
                    concepts["table"].setdefault(_fold(term), set()).add(owner)
                for name, member in obj.flat_members().items():
                    column = f"{owner}.{name}"
                    for term in (name, *getattr(member, "synonyms", ())):
                        concepts["column"].setdefault(_fold(term), set()).add(column)
                    for code, meaning in (getattr(member, "values", None) or {}).items():
                        for text in {str(code), str(meaning or code)}:
                            values.setdefault(_fold(text), set()).add((column, str(code)))
                            if text.isascii() and len(text) <= 2:
                                cased[_fold(text)] = text
        for name, members in CLASSES.items():
            for term in members:
                self._add(term, ("class", name))
        for term in FILLERS:
            self._add(term, ("filler", term))
        for term in MODALS:
            self._add(term, ("modal", "modal"))
        for term, counted in MEASURES.items():
            self._add(term, ("measure", counted))
        for term in AMONG:
            self._add(term, ("among", "among"))
        # The manifests' words last: a column's synonym wins over a built-in word (数量).
        for term, tables in concepts["table"].items():
            self._add(term, ("concept", frozenset(tables)))
        for term, columns in concepts["column"].items():
            self._add(term, ("concept", frozenset(columns)))
        for term, pairs in values.items():
            if term in cased:
                self.cased[cased[term]] = ("value", frozenset(pairs))
            else:
                self._add(term, ("value", frozenset(pairs)))
        # Words written two ways: read as the other way, a manifest's word when it is one (卖 → 销售).
        for term, same in SAME.items():
            self._add(term, self.entries.get(tuple(u for u, _, _ in _units(_fold(same))), ("word", _fold(same))))
        self.longest = max((len(k) for k in self.entries), default=1)

    def _add(self, term: str, entry: tuple[str, Any]) -> None:
        units = [u for u, _, _ in _units(_fold(term))]
        if units:
            self.entries[tuple(units)] = entry
            # English words are looked up by lemma too (the question's ``sold`` meets ``sales``).
            self.entries[tuple(lemma(u) if u.isalpha() else u for u in units)] = entry

    def read(self, text: str, today: dt.date) -> list[Word]:
        """``text`` (a match text) as words, fillers included (``kind`` ``filler``)."""
        from structq.periods import find_periods

        periods = find_periods(text, today)
        units = _units(text.lower())
        out: list[Word] = []
        i = 0
        while i < len(units):
            unit, start, end = units[i]
            period = next((p for p in periods if p.start <= start < p.end), None)
            if period is not None:
                while i < len(units) and units[i][1] < period.end:
                    i += 1
                out.append(Word("period", (period.kind, period.first, period.last), period.text, period.start,
                                period.end, period))
                continue
            size, entry = self._longest(units, i, text)
            if entry is not None:
                kind, key = entry
                last = units[i + size - 1][2]
                out.append(Word(kind, key, text[start:last], start, last))
                i += size
                continue
            if unit.isdigit() or (unit.replace(".", "", 1).isdigit() and unit.count(".") == 1):
                out.append(Word("number", unit.lstrip("0") or "0", text[start:end], start, end))
                i += 1
                continue
            if number_word(unit) is not None:
                out.append(Word("number", str(number_word(unit)), text[start:end], start, end))
                i += 1
                continue
            if unit in _CJK_NUMERAL:
                j = i
                while j < len(units) and units[j][0] in _CJK_NUMERAL and self._longest(units, j, text)[1] is None:
                    j += 1
                value = chinese_number("".join(u for u, _, _ in units[i:j]))
                last = units[j - 1][2]
                out.append(Word("number", str(value), text[start:last], start, last) if value is not None
                           else Word("word", text[start:last], text[start:last], start, last))
                i = j
                continue
            if unit.isascii():
                out.append(Word("word", lemma(unit), text[start:end], start, end))
                i += 1
                continue
            # A run of characters no entry starts: one word (a name, a verb the lists lack).
            j = i + 1
            while (j < len(units) and not units[j][0].isascii() and units[j][0] not in _CJK_NUMERAL
                   and self._longest(units, j, text)[1] is None and not any(p.start <= units[j][1] < p.end for p in periods)):
                j += 1
            last = units[j - 1][2]
            out.append(Word("word", text[start:last], text[start:last], start, last))
            i = j
        return out

    def _longest(self, units: list[tuple[str, int, int]], i: int, text: str) -> tuple[int, tuple[str, Any] | None]:
        for size in range(min(self.longest, len(units) - i), 0, -1):
            window = units[i:i + size]
            # An entry never ends inside a Latin word or number (``A`` is not found in ``AB``).
            key = tuple(lemma(u) if u.isascii() and u.isalpha() else u for u, _, _ in window)
            entry = (self.cased.get(text[window[0][1]:window[-1][2]]) if size == 1 else None) \
                or self.entries.get(key) or self.entries.get(tuple(u for u, _, _ in window))
            if entry is not None:
                return size, entry
        return 0, None


def _fold(text: str) -> str:
    return match_text(text).lower()


def _units(text: str) -> list[tuple[str, int, int]]:
    """Latin words and numbers whole, every other character alone, with their offsets."""
    return [(m.group(), m.start(), m.end()) for m in _UNIT.finditer(text)]


@dataclass(frozen=True)
class _Shape:
    """An example read as words: its holes, and the words it fixes."""

    template: Template
    holes: tuple[Hole, ...]
    words: tuple[Word, ...]
    #: Words that stand in the example's steps as written (a searched phrase): never implied.
    literal: frozenset[str] = field(default_factory=frozenset)
    #: Slot → the example's words written against its value (``区`` in ``华东区``): in the
    #: question too, when it has them (rule 5).
    attached: dict[str, tuple[tuple[Word, str], ...]] = field(default_factory=dict)
    #: The example's words and holes in order (fillers left out), for rule 6.
    sequence: tuple[Word | Hole, ...] = ()
    #: What the example counts by its measure words (``MEASURES``) and people words, for rule 7.
    counts: frozenset[str] = frozenset()


class Paraphrases:
    """Every verified example that a paraphrase may plan from, read as words once."""

    def __init__(self, capabilities: CapabilitySet, templates: Sequence[Template]) -> None:
        self.vocabulary = Vocabulary(capabilities)
        self.templates = list(templates)
        self._shapes: dict[tuple[str, dt.date], _Shape] = {}

    def match(self, question: str, today: dt.date, lookup: Lookup | None) -> tuple[Paraphrase | None, str]:
        """The one example ``question`` paraphrases, or None and why."""
        text = match_text(question)
        verdicts = self._verdicts(text, today, lookup)
        found = [v.found for _, v in verdicts if v.found is not None]
        if len(found) == 1:
            return found[0], "matched"
        if len(found) > 1:
            return None, "paraphrases more than one example (" + "; ".join(repr(f.template.shape) for f in found) + ")"
        return None, _closest_refusal(text, verdicts)

    def explain(self, question: str, today: dt.date, lookup: Lookup | None) -> dict[str, str]:
        """Each example's shape → why ``question`` is not its paraphrase ("" when it is)."""
        return {t.shape: v.reason for t, v in self._verdicts(match_text(question), today, lookup)}

    def _verdicts(self, text: str, today: dt.date, lookup: Lookup | None) -> list[tuple[Template, _Verdict]]:
        asked = [w for w in self.vocabulary.read(text, today) if w.kind != "filler"]
        return [(t, self._judge(self._shape(t, today), asked, text, lookup)) for t in self.templates]

    def _shape(self, template: Template, today: dt.date) -> _Shape:
        key = (template.example.question, today)
        if key not in self._shapes:
            words: list[Word] = []
            sequence: list[Word | Hole] = []
            counts: list[str] = ["people"] if any(w.kind == "class" and w.key == "people" for w in
                                                  self.vocabulary.read(template.example.question, today)) else []
            attached: dict[str, list[tuple[Word, str]]] = {}
            parts = template.parts
            for at, part in enumerate(parts):
                if not isinstance(part, str):
                    sequence.append(part)
                    continue
                read = self.vocabulary.read(part, today)
                if not read:
                    continue
                words += [w for w in read if w.kind not in ("filler", "measure", "among")]
                sequence += [w for w in read if w.kind not in ("filler", "measure")]
                counts += [w.key for w in read if w.kind == "measure"]
                # A plain word against a column slot's value qualifies it (华东区, 星火项目组);
                # periods and numbers sit anywhere.
                before, after = (parts[at - 1] if at > 0 else None), (parts[at + 1] if at + 1 < len(parts) else None)
                if isinstance(before, Hole) and before.slot.kind == "column" and read[0].start == 0 \
                        and read[0].kind == "word":
                    attached.setdefault(before.name, []).append((read[0], "after"))
                if isinstance(after, Hole) and after.slot.kind == "column" and read[-1].end == len(part) \
                        and read[-1].kind == "word":
                    attached.setdefault(after.name, []).append((read[-1], "before"))
            literal = frozenset(w.text for w in words if w.kind == "word" and len(w.text) > 1
                                and w.text in _steps_text(template.example))
            self._shapes[key] = _Shape(template, tuple(template.holes), tuple(words), literal,
                                       {name: tuple(ws) for name, ws in attached.items()}, tuple(sequence),
                                       frozenset(counts))
        return self._shapes[key]

    def _judge(self, shape: _Shape, asked: list[Word], text: str, lookup: Lookup | None) -> _Verdict:
        """Rules 1–11 for one example (see the module docstring)."""
        # A word of the example the question lacks is a refusal no stored value can change:
        # known before any look-up (an entity slot's value is read from the data).
        lacking = next((w for w in shape.words if not w.soft and not any(a.same(w) for a in asked)), None)
        if lacking is not None:
            return _Verdict(None, f"the question does not say {lacking.text!r}")
        words = _with_entities(asked, shape.holes, text, lookup)
        # Rule 7: measure words say what is counted (份 contracts, 家 customers, 位 people).
        counts = {w.key for w in words if w.kind == "measure"}
        words = [w for w in words if w.kind != "measure"]
        if shape.counts and not counts <= shape.counts:
            return _Verdict(None, f"the question counts {', '.join(sorted(counts - shape.counts))}, "
                                  f"the example {', '.join(sorted(shape.counts))}")
        # Rule 8: several (哪些) where the example ranks and gives one (销售额最高的客户是哪家).
        if any(w.kind == "class" and w.key == "which-many" for w in words) and _gives_one(shape):
            return _Verdict(None, "the question asks for several, the example gives the first one")
        filled: dict[str, Filled] = {}
        used: set[int] = set()
        holes_at: list[int] = []
        for hole in shape.holes:
            fits = [(i, f) for i, w in enumerate(words) if i not in used and (f := _fill(hole, w)) is not None]
            if len(fits) != 1:
                return _Verdict(None, f"slot {hole.name!r}: {len(fits)} values in the question" if fits
                                else f"slot {hole.name!r}: no value of its kind in the question")
            used.add(fits[0][0])
            holes_at.append(fits[0][0])
            filled[hole.name] = fits[0][1]
            loose = _detached(shape.attached.get(hole.name, ()), words, words[fits[0][0]], text)
            if loose is not None:
                return _Verdict(None, f"{loose!r} is not written against the value of slot {hole.name!r}")
        at = {hole.name: i for hole, i in zip(shape.holes, holes_at, strict=True)}
        free = [i for i in range(len(words)) if i not in used]
        named = _tables_named(list(shape.words)), _tables_named([words[i] for i in free])
        # A table's noun beside a column only that table has says nothing more (either side).
        example = [(k, w) for k, w in enumerate(shape.sequence)
                   if isinstance(w, Word) and w.kind != "among" and not _implied(w, named[0])]
        rest = [i for i in free if words[i].kind != "among" and not _implied(words[i], named[1])]
        matched, implied = [f"{h.name} (slot)" for h in shape.holes], []
        # A noun for the people counted (员工 in 员工有多少人) adds nothing when both count people.
        people = all(any(w.kind == "class" and w.key == "people" for w in side)
                     for side in ([w for _, w in example], [words[i] for i in rest]))
        paired = {k: at[h.name] for k, h in enumerate(shape.sequence) if isinstance(h, Hole)}
        for k, word in example:
            pair = next((i for i in rest if words[i].same(word)), None)
            if pair is not None:
                rest.remove(pair)
                paired[k] = pair
                matched.append(word.text if words[pair].text == word.text else f"{words[pair].text}~{word.text}")
            elif people and word.soft and word.text not in shape.literal:
                implied.append(word.text)
            else:
                return _Verdict(None, f"the question does not say {word.text!r}")
        if rest:
            return _Verdict(None, "the question adds " + ", ".join(repr(words[i].text) for i in rest))
        loose = _unbound(shape.sequence, paired) or _chosen_elsewhere(shape.sequence, words, paired) \
            or _asks_another(shape.sequence, words) or _role_swapped(shape.sequence, paired)
        if loose is not None:
            return _Verdict(None, loose)
        score = len(matched) / (len(matched) + len(implied))
        if score < THRESHOLD:
            return _Verdict(None, f"score {score:.2f} below {THRESHOLD} (implied: {', '.join(implied)})")
        return _Verdict(Paraphrase(shape.template, filled, score, tuple(matched), tuple(implied)), "")


def _gives_one(shape: _Shape) -> bool:
    """Whether the example ranks (最高, lowest) with no number: its plan gives the first row."""
    return (any(w.kind == "class" and w.key in ("top", "bottom") for w in shape.words)
            and not any(w.kind == "number" for w in shape.words)
            and not any(h.slot.kind == "integer" for h in shape.holes))


def _detached(attached: Sequence[tuple[Word, str]], words: list[Word], value: Word, text: str) -> str | None:
    """An example word written against a slot's value (``区`` after ``华东``) that the question
    has, but not against that slot's value on the same side (``研发部区 … 华东员工``: swapped)."""
    for word, side in attached:
        found = [w for w in words if w.same(word)]
        if found and not any(w.start >= value.end and not text[value.end:w.start].strip() if side == "after"
                             else w.end <= value.start and not text[w.end:value.start].strip() for w in found):
            return word.text
    return None


def _steps_text(example: Example) -> str:
    return " ".join(s.query if isinstance(s.query, str) else json.dumps(s.slotted, ensure_ascii=False)
                    for s in example.steps)


def _tables_named(words: list[Word]) -> set[str]:
    """The tables a word of ``words`` names through columns of that table alone (``预算``, if
    only projects had a budget); a word naming columns of several tables (金额: of sales and
    of contracts) names none, so a table's noun beside it says which, and counts."""
    owners = [{c.rsplit(".", 1)[0] for c in w.key} for w in words if w.kind == "concept" and not w.soft]
    return {table for found in owners if len(found) == 1 for table in found}


def _implied(word: Word, tables: set[str]) -> bool:
    return word.soft and word.key <= tables


#: Question words that bind the words beside them: a comparison its column and its number
#: (销售额超过1000万), a negation what it negates.
BINDING = frozenset({"more-than", "less-than", "at-least", "at-most", "not"})


#: Question words that ask for something: what they ask for must be the same (rule 10).
ASKING = frozenset({"which", "which-one", "which-many", "how-many"})


def _unbound(sequence: Sequence[Word | Hole], paired: dict[int, int]) -> str | None:
    """Rule 6: a comparison or negation of the example stands between the same words in the
    question (``销售额小于1000万且回款周期超过60天`` swaps two comparisons; moving a whole
    condition is fine)."""
    for k, item in enumerate(sequence):
        if not (isinstance(item, Word) and item.kind == "class" and item.key in BINDING) or k not in paired:
            continue
        for side in (-1, 1):
            if k + side in paired and paired[k + side] != paired[k] + side:
                other = sequence[k + side]
                name = other.text if isinstance(other, Word) else "{" + other.name + "}"
                return f"{item.text!r} does not stand {'after' if side < 0 else 'before'} {name!r} as in the example"
    return None


def _role_swapped(sequence: Sequence[Word | Hole], paired: dict[int, int]) -> str | None:
    """Rule 11: a stored value (a person, a project) stays on the same side of each plain word
    of the example: ``李玲倩在2026年10月写了哪些周报`` asks what she wrote, ``2026年10月哪些周报
    写了李玲倩`` what was written about her."""
    holes = [k for k, h in enumerate(sequence) if isinstance(h, Hole) and h.slot.kind == "column" and not h.codes]
    plain = [k for k, w in enumerate(sequence) if isinstance(w, Word) and w.kind == "word"]
    for h in holes:
        for k in plain:
            if h in paired and k in paired and (h < k) != (paired[h] < paired[k]):
                return (f"the value of slot {sequence[h].name!r} is not on the same side of "  # type: ignore[union-attr]
                        f"{sequence[k].text!r} as in the example")  # type: ignore[union-attr]
    return None


def _chosen_elsewhere(sequence: Sequence[Word | Hole], words: list[Word], paired: dict[int, int]) -> str | None:
    """Rule 9: a question choosing among a set (中, among) its example does not choose among
    (``10个客户中销售额最高的``; ``5个项目中有哪些`` chooses nothing), or with a word on the other side of it than in the example
    (``金额最大的5份合同中哪些是2024年签约的`` ranks, then filters)."""
    asked = next((i for i, w in enumerate(words) if w.kind == "among"), None)
    if asked is None:
        return None
    among = next((k for k, w in enumerate(sequence) if isinstance(w, Word) and w.kind == "among"), None)
    if among is None:
        # 5个项目中有哪些 chooses nothing: only the question word follows.
        if all(w.kind == "class" and w.key in ASKING for w in words[asked + 1:]):
            return None
        return f"the question chooses among something ({words[asked].text!r}), the example does not"
    for k, i in paired.items():
        if (k < among) != (i < asked):
            item = sequence[k]
            name = item.text if isinstance(item, Word) else "{" + item.name + "}"
            return f"{name!r} is not on the same side of {words[asked].text!r} as in the example"
    return None


def _asked_for(words: Sequence[Word | Hole]) -> frozenset[str] | None:
    """What the first question word asks for: a word naming a table, or people, after it (哪些
    员工, 多少人), else another column or table word after it (哪些项目), else the last word naming
    a table or people before it (合同中金额最大的5份是哪些: contracts), else the last column or
    table word before it (的负责人是谁 … 项目); None without any."""
    at = next((i for i, w in enumerate(words) if isinstance(w, Word) and w.kind == "class" and w.key in ASKING), None)
    if at is None:
        return None
    def named(w: Word) -> bool:
        return w.kind == "concept" and any(o.count(".") == 1 for o in w.key) or (w.kind == "class" and w.key == "people")
    concepts = [(i, w) for i, w in enumerate(words) if isinstance(w, Word) and (w.kind == "concept" or named(w))]
    after = [w for i, w in concepts if i > at]
    before = [w for i, w in reversed(concepts) if i < at]
    found = next((w for w in after if named(w)), None) or next(iter(after), None) \
        or next((w for w in before if named(w)), None) or next(iter(before), None)
    if found is None:
        return None
    return frozenset(["people"]) if found.kind == "class" else frozenset(found.key)


def _asks_another(sequence: Sequence[Word | Hole], words: list[Word]) -> str | None:
    """Rule 10: the question word asks for the same thing as in the example: ``参与项目的员工中
    绩效为A的有哪些`` lists employees where ``绩效为A的员工都参与了哪些项目`` lists projects."""
    example, question = _asked_for(sequence), _asked_for(words)
    if example != question:
        return "the question asks for " + _named(question) + ", the example for " + _named(example)
    return None


def _named(asked: frozenset[str] | None) -> str:
    return ", ".join(sorted(a.rsplit(".", 1)[-1] for a in asked)) if asked else "nothing it names"


def _fill(hole: Hole, word: Word) -> Filled | None:
    """The hole's value from one word of the question, when the word is of the hole's kind."""
    kind = hole.slot.kind
    if kind == "integer":
        return read_integer(hole.name, hole.slot, word.key) if word.kind == "number" and word.key.isdigit() else None
    if kind in PERIOD_KINDS:
        return read_period(hole.name, hole.slot, word.period) if word.period is not None else None
    column = hole.slot.column or ""
    if word.kind == "value" and hole.codes:
        codes = {code for c, code in word.key if c == column}
        if len(codes) != 1:
            return None
        code = codes.pop()
        return Filled({hole.name: code}, code if code == word.text else f"{code} ({word.text})")
    if word.kind == "entity" and word.key[0] == column:
        stored = word.key[1]
        return Filled({hole.name: stored}, stored if stored == word.text else f"{stored} ({word.text})")
    return None


def _with_entities(words: list[Word], holes: Sequence[Hole], text: str, lookup: Lookup | None) -> list[Word]:
    """``words`` with each stored value of an entity hole's column that the question names as one
    word (the longest first; ``产品X`` is a concept and a letter until the data says it is a product)."""
    columns = [h.slot.column for h in holes if h.slot.kind == "column" and not h.codes and h.slot.column]
    if not columns or lookup is None:
        return words
    out = list(words)
    for column in columns:
        for start, end in sorted(_entity_spans(out), key=lambda s: (s[0] - s[1], s[0])):
            if end > len(out) or any(w.kind == "entity" for w in out[start:end]):
                continue
            written = text[out[start].start:out[end - 1].end]
            stored = lookup(column, written)
            if stored is not None:
                out[start:end] = [Word("entity", (column, stored), written, out[start].start, out[end - 1].end)]
                break
    return out


def _entity_spans(words: list[Word]) -> Iterator[tuple[int, int]]:
    """Runs of at most ``ENTITY_WORDS`` words that may name a stored value: a plain word in
    them, and no period or question word."""
    for start in range(len(words)):
        for end in range(start + 1, min(len(words), start + ENTITY_WORDS) + 1):
            run = words[start:end]
            if any(w.kind in ("period", "class", "entity") for w in run):
                break
            if any(w.kind == "word" for w in run):
                yield start, end


def _closest_refusal(question: str, verdicts: list[tuple[Template, _Verdict]]) -> str:
    """Why nothing matched, for the example whose fixed words are closest to the question's."""
    if not verdicts:
        return "no verified example to paraphrase"
    template, verdict = max(verdicts, key=lambda tv: SequenceMatcher(None, question.casefold(),
                                                                      tv[0].fixed.casefold(), autojunk=False).ratio())
    return f"not a paraphrase of {template.shape!r}: {verdict.reason}"
