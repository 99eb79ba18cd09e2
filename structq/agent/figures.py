"""The answer check: every figure a model writes is traced to where it comes from, or refused.

A figure in an answer is a number written in digits ("135", "3,008.79万", "21.07%") or in
words ("三人", "一百二十", "twelve"), a date ("2026-03-02", "2026年3月", "三月"), or an ordinal
("第3名", "2nd"). Each one gets a verdict (``FigureCheck``) with its basis:

- ``cell``: a value in a step's rows, written as is or rounded and scaled the ways the answer
  prompt allows (``ROUNDING_RULE``): rounded half up to fewer decimals, keeping at least two
  significant digits; in 万/亿 (or thousand/k, million/M, billion/B) when the unit is written
  after it; as a percentage ("%", "个百分点") of a ratio, or a value that already is one;
  without its sign when the words carry it ("下降 5%");
- ``count``: a step's row count, how many distinct values a column holds, or how many rows
  hold one value (only for results that are complete); an ordinal up to a row count;
- ``question``: a number the user wrote in the question (in digits or words, with its unit);
- ``derived``: computed from the cited steps' values (below);
- dates: ``cell`` (a date in the rows), ``question``, or ``query`` (a date literal the plan's
  queries filtered on — the period the data was read for, not a figure about it).

Nothing else passes: not small integers, not numbers from the plan's reasoning or purposes.

Derived figures: structq computes the candidates itself, a bounded search over the cited
steps' values, rather than asking the model to write an expression for structq to evaluate.
Why: a search needs nothing from the model (any model, any prompt, answers already written
in the usual way are checked the same), the answer reads naturally (no formulas shown to
the user), and an expression would still need every operand traced to a cell, i.e. this same
check plus a parser. The search is bounded so that a wrong figure rarely matches by chance:
it runs only for a figure written as a ratio (%, 倍, times) or with decimals, or with a word of
derivation in its clause (增长, 占, 平均, 相差, growth, share, average, difference, …), and then
its candidates are a+b, a−b, a/b, (a−b)/b for every ordered pair of operands and each numeric
column's sum, mean and each cell's share of the sum; with only a word of total (共, 合计,
total, …) the candidates are the sums alone (a+b, a column's sum). The operands are the
numbers of the steps the clause cites (of every step when it cites none) and their row
counts, at most ``DERIVED_OPERANDS`` of them.

Citations: ``[key]`` must name a step of the plan (else "dangling"), and a figure in a clause
that cites steps must be held by one of them — by its rows for ``cell``/``count``, by their
values for ``derived`` (else "miscited"). A figure in a clause without a citation (a table
row, say) is checked against every step. The clause is the text between Chinese commas or
sentence ends; a clause without citations takes its sentence's.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from .numerals import CHINESE_NUMERALS, chinese_value, word_numbers

if TYPE_CHECKING:
    from .engine import PlanResult

__all__ = ["FigureCheck", "AnswerCheck", "Evidence", "check_answer", "figures_in", "Figure", "ROUNDING_RULE",
           "DERIVED_OPERANDS", "SHOWN_ROWS", "CITATION", "IDENTIFIER", "clause_of"]

#: What the answer prompt tells the model about rounding and units; the check accepts exactly this.
ROUNDING_RULE = ("You may round a figure half up to fewer decimals, keeping at least two significant digits; "
                 "write a large amount in 万/亿 or in thousand/million/billion with the unit "
                 "right after the number; write a ratio as a percentage. A figure you compute (a share, ratio, "
                 "difference, growth rate, sum or average) must come from the values of the steps you cite "
                 "in the same sentence.")

#: Numbers of the cited steps a derived figure may be computed from (the first ones, in order).
DERIVED_OPERANDS = 60
#: Rows of each step the answering model is shown: only in these are numbers inside text read
#: (a report's "下降75%"); numeric cells count in every row.
SHOWN_ROWS = 50

CITATION = re.compile(r"\[([A-Za-z_]\w*)\]")

_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_NUMBER = re.compile(rf"(?<![A-Za-z0-9_.])(-|−)?({_DIGITS})")
_UNITS: list[tuple[str, str, tuple[Decimal, ...]]] = [  # pattern, unit, the scales a value may be written at
    (r"\s?(?:个百分点|percentage points?|pp\b)", "pp", (Decimal("0.01"), Decimal(1))),
    (r"\s?(?:%|％|percent\b|per cent\b)", "%", (Decimal("0.01"), Decimal(1))),
    (r"万亿", "万亿", (Decimal(10) ** 12,)),
    (r"亿", "亿", (Decimal(10) ** 8,)),
    (r"千万", "千万", (Decimal(10) ** 7,)),
    (r"百万", "百万", (Decimal(10) ** 6,)),
    (r"万", "万", (Decimal(10) ** 4,)),
    (r"千(?=[个名人位项份次件条家元块笔张篇])", "千", (Decimal(1000),)),
    (r"\s?(?:thousand\b|k\b|K\b)", "thousand", (Decimal(1000),)),
    (r"\s?(?:million\b|mn\b|M\b)", "million", (Decimal(10) ** 6,)),
    (r"\s?(?:billion\b|bn\b|B\b)", "billion", (Decimal(10) ** 9,)),
    (r"\s?(?:倍|times\b)", "times", (Decimal(1),)),
]
_UNIT = re.compile("|".join(f"(?P<u{i}>{pattern})" for i, (pattern, _, _) in enumerate(_UNITS)))
_ORDINAL_AFTER = re.compile(r"(?:st|nd|rd|th)\b")

#: Dates written in answers and stored in cells: (pattern, the parts it gives).
_DATES = [
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), "ymd"),
    (re.compile(r"(?<!\d)(\d{4})\s?年\s?(\d{1,2})\s?月\s?(\d{1,2})\s?[日号]"), "ymd"),
    (re.compile(r"(?<!\d)(\d{4})\s?年\s?(\d{1,2})\s?月"), "ym"),
    (re.compile(r"(?<!\d)(\d{4})-(\d{2})(?![-\d])"), "ym"),
    (re.compile(r"(?<![\d年])(\d{1,2})\s?月\s?(\d{1,2})\s?[日号]"), "md"),
    (re.compile(r"(?<!\d)(\d{4})\s?年"), "y"),
    (re.compile(rf"(?<![\d年{CHINESE_NUMERALS}])(\d{{1,2}}|[{CHINESE_NUMERALS}]{{1,3}})\s?月(?!份?[\d{CHINESE_NUMERALS}])"), "m"),
    (re.compile(r"(?<![\d月])(\d{1,2})\s?[日号](?!\w)"), "d"),
    (re.compile(r"第?([1-4]|[一二三四])\s?季度|(?<![\w])Q([1-4])\b"), "q"),
]
_MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], 1)}
_EN_DATE = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b(?:\s+(\d{1,2})(?:st|nd|rd|th)?)?(?:,?\s+(\d{4}))?",
                      re.IGNORECASE)

#: Words that say a figure in their clause is computed: any derived figure may match there.
_DERIVATION = re.compile(
    "增长|增加|增幅|上涨|涨幅|同比|环比|下降|下跌|减少|降幅|降低|提高|上升|占|比例|比率|比重|份额|平均|均值|人均|"
    "相差|差额|差距|差值|多出|高出|低于|高于|超出|少了|多了|比.{0,12}[多少高低]|"
    r"\b(?:growth|grew|grow|grows|increase[sd]?|decrease[sd]?|rose|risen|fell|fallen|drop(?:ped)?|share|ratio|"
    r"proportion|percent(?:age)?|average|mean|per|difference|more|fewer|less|higher|lower|than|up|down)\b",
    re.IGNORECASE)
#: Words that say a figure is a total: a sum (of a column, or of two values) may match there.
_TOTAL = re.compile(r"共|合计|总计|总和|之和|总数|总额|加起来|\b(?:total|sum|combined|altogether|overall)\b",
                    re.IGNORECASE)
_CLAUSE_END = re.compile(r"[，,；;。！？!?\n]|\.(?=\s|$)")
_SENTENCE_END = re.compile(r"[；;。！？!?\n]|\.(?=\s|$)")
#: Columns whose values identify rows (ids, codes, the search server's ``_id`` and ``_score``):
#: their numbers are not figures an answer may state.
IDENTIFIER = re.compile(r"(^|_)(id|code|no|key|uuid)$|^_|编号$|工号$|代码$", re.IGNORECASE)
#: A Markdown list marker ("1. ", "2) ") at the start of a line: numbering, not a figure.
_LIST_MARKER = re.compile(r"^[ \t]*(\d{1,3})[.)、][ \t]", re.MULTILINE)


# --- figures as written --------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One figure in an answer: where, as written, its number, decimals and unit."""

    text: str
    start: int
    end: int
    number: Decimal | None = None
    decimals: int = 0
    unit: str = ""
    scales: tuple[Decimal, ...] = (Decimal(1),)
    kind: str = "number"  # number | ordinal | date
    date: tuple[str, tuple[int, ...]] | None = None
    negative: bool = False

    @property
    def value(self) -> Decimal | None:
        """The figure in the results' units (a percentage as the ratio it states)."""
        if self.number is None:
            return None
        signed = -self.number if self.negative else self.number
        return signed * self.scales[0]

    @property
    def significant(self) -> int:
        """Significant digits as written ("0.05" 1, "21.07" 4, "30" 2, "二十一点零七" 4)."""
        if self.number is None:
            return 1
        digits = format(abs(self.number), "f").replace(".", "").lstrip("0")
        return len(digits) or 1


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def _dates_in(text: str) -> Iterator[tuple[int, int, tuple[str, tuple[int, ...]]]]:
    """(start, end, (parts, values)) of each date in ``text``, longest forms first, no overlaps."""
    taken: list[tuple[int, int]] = []
    found = []
    for pattern, parts in _DATES:
        for match in pattern.finditer(text):
            if any(s < match.end() and match.start() < e for s, e in taken):
                continue
            groups = [g for g in match.groups() if g is not None]
            values = tuple(_small_int(g) for g in groups)
            if any(v is None for v in values) or not _plausible(parts, values):  # type: ignore[arg-type]
                continue
            taken.append((match.start(), match.end()))
            found.append((match.start(), match.end(), (parts, values)))
    for match in _EN_DATE.finditer(text):
        if any(s < match.end() and match.start() < e for s, e in taken):
            continue
        month = _MONTHS[match.group(1).lower()]
        day, year = match.group(2), match.group(3)
        if match.group(1).lower() == "may" and not (day or year):
            continue  # the verb
        parts, values = ("ymd", (int(year), month, int(day))) if year and day else \
            ("ym", (int(year), month)) if year else ("md", (month, int(day))) if day else ("m", (month,))
        taken.append((match.start(), match.end()))
        found.append((match.start(), match.end(), (parts, values)))
    yield from sorted(found)


def _small_int(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    value = chinese_value(text)
    return int(value) if value is not None else None


def _plausible(parts: str, values: tuple[int, ...]) -> bool:
    named = dict(zip(parts, values))
    return (1900 <= named.get("y", 2000) <= 2200 and 1 <= named.get("m", 1) <= 12 and 1 <= named.get("d", 1) <= 31
            and 1 <= named.get("q", 1) <= 4)


_PER_HUNDRED = re.compile(rf"百分之(\d+(?:\.\d+)?|[{CHINESE_NUMERALS}]+(?:点[{CHINESE_NUMERALS}]+)?)")


def _chinese_decimal(text: str) -> Decimal | None:
    """二十一点零七 → 21.07."""
    whole, _, fraction = text.partition("点")
    value = chinese_value(whole)
    digits = [chinese_value(c) for c in fraction]
    if value is None or any(d is None or d > 9 for d in digits):
        return None
    return Decimal(f"{value}.{''.join(str(d) for d in digits)}") if digits else value


def figures_in(text: str) -> list[Figure]:
    """Every figure in ``text`` (citations and list markers are not figures), in order."""
    masked = CITATION.sub(lambda m: " " * len(m.group()), text)
    masked = _LIST_MARKER.sub(lambda m: m.group().replace(m.group(1), " " * len(m.group(1))), masked)
    figures: list[Figure] = []
    taken: list[tuple[int, int]] = []
    for start, end, date in _dates_in(masked):
        figures.append(Figure(text[start:end], start, end, kind="date", date=date))
        taken.append((start, end))
    for match in _PER_HUNDRED.finditer(masked):  # 百分之二十一点零七, 百分之21.07
        number = _decimal(match.group(1)) if match.group(1)[0].isdigit() else _chinese_decimal(match.group(1))
        if number is not None:
            decimals = len(match.group(1).replace("点", ".").split(".")[1]) if re.search(r"[.点]", match.group(1)) else 0
            figures.append(Figure(text[match.start():match.end()], match.start(), match.end(), number, decimals, "%",
                                  _UNITS[1][2]))
            taken.append((match.start(), match.end()))
    for match in _NUMBER.finditer(masked):
        start, end = match.start(), match.end()
        if any(s < end and start < e for s, e in taken):
            continue
        number = _decimal(match.group(2))
        if number is None:
            continue
        decimals = len(match.group(2).split(".")[1]) if "." in match.group(2) else 0
        unit, scales = "", (Decimal(1),)
        if _ORDINAL_AFTER.match(masked, end) or (start > 0 and masked[start - 1] in "第#"):
            figures.append(Figure(text[start:end], start, end, number, kind="ordinal"))
            taken.append((start, end))
            continue
        unit_match = _UNIT.match(masked, end)
        if unit_match:
            index = int(unit_match.lastgroup[1:])  # type: ignore[index]
            unit, scales = _UNITS[index][1], _UNITS[index][2]
            end = unit_match.end()
        figures.append(Figure(text[start:end], start, end, number, decimals, unit, scales,
                              negative=match.group(1) is not None))
        taken.append((start, end))
    for word in word_numbers(masked):
        if any(s < word.end and word.start < e for s, e in taken):
            continue
        ordinal = word.start > 0 and masked[word.start - 1] == "第"
        unit_match = _UNIT.match(masked, word.end) if not ordinal else None
        unit, scales, end = "", (Decimal(1),), word.end
        if unit_match:
            index = int(unit_match.lastgroup[1:])  # type: ignore[index]
            unit, scales, end = _UNITS[index][1], _UNITS[index][2], unit_match.end()
        figures.append(Figure(text[word.start:end], word.start, end, word.value, 0, unit, scales,
                              kind="ordinal" if ordinal else "number"))
        taken.append((word.start, end))
    return sorted(figures, key=lambda f: f.start)


# --- what the results hold -------------------------------------------------------------------


@dataclass
class _Values:
    """Numbers, sorted, each with the steps that hold it: found by interval in O(log n)."""

    numbers: list[float] = field(default_factory=list)
    steps: list[tuple[str, ...]] = field(default_factory=list)

    @classmethod
    def of(cls, pairs: Iterable[tuple[float, tuple[str, ...]]]) -> "_Values":
        ordered = sorted(pairs)
        return cls([p[0] for p in ordered], [p[1] for p in ordered])

    def between(self, low: float, high: float) -> Iterator[tuple[float, tuple[str, ...]]]:
        at = bisect.bisect_left(self.numbers, low)
        while at < len(self.numbers) and self.numbers[at] <= high:
            yield self.numbers[at], self.steps[at]
            at += 1


def _cell_numbers(value: Any) -> Iterator[Decimal]:
    """The numbers in a cell: the value itself, or the numbers written in a text (dates aside)."""
    if isinstance(value, bool) or value is None or isinstance(value, (dt.date, dt.datetime, dt.time)):
        return
    if isinstance(value, (int, float, Decimal)):
        try:
            yield Decimal(str(value))
        except InvalidOperation:
            pass
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _cell_numbers(item)
        return
    if isinstance(value, dict):
        for item in value.values():
            yield from _cell_numbers(item)
        return
    text = str(value)
    whole = _decimal(text.strip())
    if whole is not None:
        yield whole
        return
    for figure in figures_in(text):
        if figure.kind == "number" and figure.value is not None:
            yield figure.value


def _cell_dates(value: Any) -> Iterator[tuple[str, tuple[int, ...]]]:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        yield "ymd", (value.year, value.month, value.day)
    elif isinstance(value, str):
        for _, _, date in _dates_in(value):
            yield date
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _cell_dates(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _cell_dates(item)


def _date_atoms(date: tuple[str, tuple[int, ...]]) -> set[tuple[str, tuple[int, ...]]]:
    """A date and every coarser way of writing it: 2026-03-02 is also 2026-03, 3月2日, 2026年, 三月, Q1, 2日."""
    parts, values = date
    named = dict(zip(parts, values))
    atoms = {date}
    if "y" in named:
        atoms.add(("y", (named["y"],)))
    if "m" in named:
        atoms |= {("m", (named["m"],)), ("q", ((named["m"] - 1) // 3 + 1,))}
        if "y" in named:
            atoms.add(("ym", (named["y"], named["m"])))
        if "d" in named:
            atoms.add(("md", (named["m"], named["d"])))
    if "d" in named:
        atoms.add(("d", (named["d"],)))
    return atoms


class Evidence:
    """What an answer's figures may come from: the run's results, the question, the plan's dates."""

    def __init__(self, run: "PlanResult", question: str = "") -> None:
        self.run = run
        self.step_keys = tuple(s.output_key for s in run.plan.steps)
        cells: list[tuple[float, tuple[str, ...]]] = []
        counts: list[tuple[float, tuple[str, ...]]] = []
        self.operands: dict[str, list[float]] = {}
        self.columns: dict[str, list[list[float]]] = {}
        self.dates: dict[tuple[str, tuple[int, ...]], tuple[str, tuple[str, ...]]] = {}
        self.max_rows: dict[str, int] = {}
        for key, result in run.steps.items():
            if result.skipped is not None:
                continue
            self.max_rows[key] = result.row_count
            counts.append((float(result.row_count), (key,)))
            numbers: list[float] = []
            by_column: list[list[float]] = [[] for _ in result.columns]
            names = [str(c) for c in result.columns]
            for at, row in enumerate(result.rows):
                for i, value in enumerate(row):
                    if i < len(names) and IDENTIFIER.search(names[i]):
                        continue  # an id is a name for a row, not a figure about it
                    if at >= SHOWN_ROWS and isinstance(value, (str, list, dict)):
                        continue  # text the model was not shown
                    for number in _cell_numbers(value):
                        cells.append((float(number), (key,)))
                        numbers.append(float(number))
                        if i < len(by_column) and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
                            by_column[i].append(float(number))
                    for date in _cell_dates(value):
                        for atom in _date_atoms(date):
                            self.dates.setdefault(atom, ("cell", (key,)))
            self.operands[key] = [*numbers, float(result.row_count)]
            if not result.truncated:
                self.columns[key] = [c for c in by_column if len(c) == result.row_count and c]
                for i in range(len(result.columns)):
                    tally: dict[str, int] = {}
                    for row in result.rows:
                        tally[repr(row[i])] = tally.get(repr(row[i]), 0) + 1
                    counts.append((float(len(tally)), (key,)))
                    counts += [(float(n), (key,)) for n in set(tally.values())]
        self.cells = _Values.of(cells)
        self.counts = _Values.of(counts)
        self.question: set[Decimal] = set()
        for figure in figures_in(question):
            if figure.kind == "date" and figure.date:
                for atom in _date_atoms(figure.date):
                    self.dates.setdefault(atom, ("question", ()))
            elif figure.number is not None:
                self.question |= {figure.number, *(figure.number * s for s in figure.scales)}
        for step in run.plan.steps:
            text = step.query_text + " " + " ".join(str(v) for v in (run.plan.template.params.values()
                                                                       if run.plan.template else ()))
            for _, _, date in _dates_in(text):
                if date[0] in ("ymd", "ym", "y"):
                    for atom in _date_atoms(date):
                        self.dates.setdefault(atom, ("query", (step.output_key,)))
        self._derived: dict[tuple[tuple[str, ...], bool], _Values] = {}

    # --- the verdicts ----------------------------------------------------------------------

    def derived(self, steps: tuple[str, ...], totals_only: bool = False) -> _Values:
        """The figures computable from ``steps``' values (see the module docstring), cached;
        ``totals_only``: sums alone (a column's, two values')."""
        if (steps, totals_only) not in self._derived:
            operands: list[tuple[float, str]] = []
            for key in steps:
                operands += [(v, key) for v in self.operands.get(key, [])]
            operands = operands[:DERIVED_OPERANDS]
            found: list[tuple[float, tuple[str, ...]]] = []
            for i, (a, ka) in enumerate(operands):
                for j, (b, kb) in enumerate(operands):
                    if i == j:
                        continue
                    used = tuple(dict.fromkeys((ka, kb)))
                    found.append((a + b, used))
                    if not totals_only:
                        found.append((a - b, used))
                        if b:
                            found += [(a / b, used), ((a - b) / b, used)]
            for key in steps:
                for column in self.columns.get(key, []):
                    total = sum(column)
                    found.append((total, (key,)))
                    if not totals_only:
                        found.append((total / len(column), (key,)))
                        if total:
                            found += [(v / total, (key,)) for v in column]
            self._derived[(steps, totals_only)] = _Values.of(found)
        return self._derived[(steps, totals_only)]

    def judge(self, figure: Figure, cited: tuple[str, ...], derivation: str | None) -> "FigureCheck":
        """The verdict on one figure, written in a clause citing ``cited``; ``derivation``:
        what the clause says is computed ("any", "total" or None)."""
        known_cited = tuple(k for k in cited if k in self.step_keys)
        if figure.kind == "date":
            found = self.dates.get(figure.date) if figure.date else None
            if found is None and figure.date and figure.date[0] == "y":  # a year column: 2025 → 2025年
                year = Figure(str(figure.date[1][0]), figure.start, figure.end, Decimal(figure.date[1][0]))
                holders = self._holders(year, self.cells)
                if holders:
                    return self._cited_check(figure, "cell", holders, known_cited)
            if found is None:
                return FigureCheck(figure, None, (), cited, "unsupported")
            return FigureCheck(figure, found[0], found[1], cited)
        if figure.kind == "ordinal":
            return self._judge_ordinal(figure, known_cited)
        for basis, values in (("cell", self.cells), ("count", self.counts)):
            holders = self._holders(figure, values)
            if holders:
                return self._cited_check(figure, basis, holders, known_cited)
        if figure.number in self.question or figure.value in self.question:
            return FigureCheck(figure, "question", (), cited)
        if figure.number is not None and figure.number == figure.number.to_integral() and figure.unit == "" and \
                1900 <= figure.number <= 2200 and ("y", (int(figure.number),)) in self.dates:
            basis, steps = self.dates[("y", (int(figure.number),))]
            return FigureCheck(figure, basis, steps, cited)
        if figure.unit in ("%", "pp", "times") or figure.decimals:
            derivation = "any"
        if derivation:
            for scope in ([known_cited] if known_cited else []) + [tuple(self.operands)]:
                holders = self._holders(figure, self.derived(scope, totals_only=derivation == "total"))
                if holders:
                    return self._cited_check(figure, "derived", holders, known_cited)
        return FigureCheck(figure, None, (), cited, "unsupported")

    def _judge_ordinal(self, figure: Figure, cited: tuple[str, ...]) -> "FigureCheck":
        n = figure.number or Decimal(0)
        if n in self.question:
            return FigureCheck(figure, "question", (), cited)
        ranked = [k for k in (cited or tuple(self.max_rows)) if 1 <= n <= self.max_rows.get(k, 0)]
        if ranked:
            return FigureCheck(figure, "count", tuple(ranked[:1]), cited)
        return FigureCheck(figure, None, (), cited, "unsupported")

    def _cited_check(self, figure: Figure, basis: str, holders: set[str], cited: tuple[str, ...]) -> "FigureCheck":
        if cited and not holders & set(cited):
            return FigureCheck(figure, basis, tuple(sorted(holders)), cited, "miscited")
        steps = tuple(k for k in self.step_keys if k in holders and (not cited or k in cited))
        return FigureCheck(figure, basis, steps, cited)

    @staticmethod
    def _holders(figure: Figure, values: _Values) -> set[str]:
        """The steps holding a value the figure writes (see ``ROUNDING_RULE``)."""
        if figure.number is None:
            return set()
        half = float(Decimal("0.5").scaleb(-figure.decimals))
        written = float(figure.number)
        holders: set[str] = set()
        for scale in figure.scales:
            s = float(scale)
            for sign in ((-1.0,) if figure.negative else (1.0, -1.0)):
                low, high = sorted((sign * s * (written - half), sign * s * (written + half)))
                slack = 1e-9 * max(abs(low), abs(high), 1e-12)
                for number, steps in values.between(low - slack, high + slack):
                    exact = abs(number - sign * s * written) <= slack
                    if exact or figure.significant >= 2:
                        holders.update(steps)
        return holders


@dataclass(frozen=True)
class FigureCheck:
    """The verdict on one figure: its basis and steps, or the problem (unsupported, miscited)."""

    figure: Figure
    basis: str | None
    steps: tuple[str, ...]
    cited: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_dict(self, with_values: bool = True) -> dict[str, Any]:
        """The ``checks`` entry of ``--json``; ``with_values=False`` (the audit log without the
        answer) leaves out what the figure says."""
        value = self.figure.value
        out: dict[str, Any] = {"basis": self.basis, "steps": list(self.steps), "cited": list(self.cited),
                               "ok": self.ok, "problem": self.problem}
        if with_values:
            shown: Any = None if value is None else (int(value) if value == value.to_integral() else float(value))
            if self.figure.kind == "date" and self.figure.date:
                shown = "-".join(f"{v:02d}" for v in self.figure.date[1])
            out = {"text": self.figure.text, "value": shown, **out}
        return out


@dataclass(frozen=True)
class AnswerCheck:
    """Every figure's verdict, and the citations that name no step of the plan."""

    checks: tuple[FigureCheck, ...]
    dangling: tuple[str, ...]

    @property
    def unsupported(self) -> list[FigureCheck]:
        return [c for c in self.checks if c.problem == "unsupported"]

    @property
    def miscited(self) -> list[FigureCheck]:
        return [c for c in self.checks if c.problem == "miscited"]

    @property
    def ok(self) -> bool:
        return not self.dangling and all(c.ok for c in self.checks)

    def problems(self) -> list[str]:
        """Each problem in a sentence, for the repair call and the notes."""
        out = [f"[{key}] names no step of the plan" for key in self.dangling]
        out += [f"{c.figure.text!r} is not in the results" for c in self.unsupported]
        out += [f"{c.figure.text!r} is cited to {', '.join(f'[{k}]' for k in c.cited)}, but it comes from "
                f"{', '.join(f'[{k}]' for k in c.steps)}" for c in self.miscited]
        return out


def _spans(text: str, ends: re.Pattern[str]) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in ends.finditer(text):
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    return spans


def _span_at(spans: list[tuple[int, int]], at: int) -> tuple[int, int]:
    return next((s for s in spans if s[0] <= at < s[1]), spans[-1])


def clause_of(text: str, at: int) -> tuple[int, int]:
    """The clause of ``text`` around position ``at`` (start, end)."""
    return _span_at(_spans(text, _CLAUSE_END), at)


def check_answer(text: str, evidence: Evidence) -> AnswerCheck:
    """The verdict on every figure and citation of ``text``."""
    dangling = tuple(dict.fromkeys(k for k in CITATION.findall(text) if k not in evidence.step_keys))
    clauses, sentences = _spans(text, _CLAUSE_END), _spans(text, _SENTENCE_END)
    checks = []
    for figure in figures_in(text):
        clause = _span_at(clauses, figure.start)
        cited = tuple(dict.fromkeys(CITATION.findall(text[clause[0]:clause[1]])))
        if not cited:
            sentence = _span_at(sentences, figure.start)
            cited = tuple(dict.fromkeys(CITATION.findall(text[sentence[0]:sentence[1]])))
        words = text[clause[0]:clause[1]]
        derivation = "any" if _DERIVATION.search(words) else "total" if _TOTAL.search(words) else None
        checks.append(evidence.judge(figure, cited, derivation))
    return AnswerCheck(tuple(checks), dangling)
