"""Writing the answer from the results, with citations, and never with invented numbers.

With a model: the answer prompt holds the question, each step's result (capped) and the notes;
the reply is checked for figures that appear nowhere in the results, the question or the plan
(a wrong number is worse than no answer: such a reply is replaced by the deterministic rendering,
with a note; so is a failed or empty reply). The check is a net, not a proof: it reads Arabic
numerals only (not 三倍 or 两千) and cannot tell two real figures swapped. Without a model: a deterministic rendering, per-step tables and a one-line summary,
in the question's language.

Streaming (``streaming_answer``): a caller that shows the answer as it is written (the
server's event stream) sets a listener; the reply is then streamed through ``NumberGate``,
which passes text on only once every figure in it has been checked, so an invented figure is
never shown, not even for a moment. When the check fails the stream stops there and the
final text (the deterministic rendering) replaces what was shown.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from structq.errors import ModelError

from .llm import CallBounds, CallLog, invoke, reply_text
from .planner import template

if TYPE_CHECKING:
    from .engine import PlanResult, StepResult

__all__ = ["synthesize", "render_deterministic", "unsupported_numbers", "known_figures", "citations", "is_chinese",
           "streaming_answer", "NumberGate"]

#: Rows of each step shown to the answering model, and in the deterministic rendering.
PROMPT_ROWS = 50
TEXT_ROWS = 20

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def is_chinese(text: str) -> bool:
    """Whether ``text`` is written in Chinese, not merely quoting Chinese names or values:
    "How many reports did 张伟 write?" is English. Chinese characters must outnumber the
    Latin words two to one ("列出 SKU 为 A100 的订单" is Chinese)."""
    cjk = len(_CJK.findall(text))
    return cjk > 0 and cjk >= 2 * len(_LATIN_WORD.findall(text))


def _language_text(question: str, run: "PlanResult") -> str:
    """The text whose language the answer takes: the question, or for a plan run without one
    (``Agent.run``) the plan's own words (reasoning, purposes, answer_with)."""
    if question.strip():
        return question
    plan = run.plan
    return " ".join([plan.reasoning, plan.answer_with, *(step.purpose for step in plan.steps)])


def citations(run: "PlanResult") -> list[dict[str, Any]]:
    """One citation per step that ran: the step, its source, and the query that ran."""
    return [
        {"step": r.output_key, "source": r.source, "index": r.index, "purpose": r.purpose,
         "query": r.query, "row_count": r.row_count, "truncated": r.truncated}
        for r in run.steps.values()
        if r.skipped is None
    ]


# --- the number check --------------------------------------------------------------------


def _numbers_in(value: Any) -> set[Decimal]:
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, (int, float, Decimal)):
        return {Decimal(str(value))}
    if isinstance(value, (list, tuple)):
        return {n for v in value for n in _numbers_in(v)}
    if isinstance(value, dict):
        return {n for v in value.values() for n in _numbers_in(v)}
    found = set()
    for match in _NUMBER.finditer(str(value)):
        try:
            found.add(Decimal(match.group().replace(",", "")))
        except InvalidOperation:
            pass
    return found


def _variants(x: Decimal) -> set[Decimal]:
    """Ways an answer may legitimately write a result figure: rounded, in 万/亿, as a percent."""
    out = set()
    for scaled in (x, x / 10_000, x / 100_000_000, x * 100, x / 1000, x / 1_000_000):
        out.add(scaled.normalize())
        for digits in range(0, 5):
            out.add(scaled.quantize(Decimal(1).scaleb(-digits)).normalize())
    return out


def known_figures(run: "PlanResult", question: str = "") -> set[Decimal]:
    """Every figure an answer may state: the results' (with their roundings and scalings),
    row counts, the question's, the plan's, and small counts and ordinals."""
    known: set[Decimal] = set()
    for result in run.steps.values():
        known.add(Decimal(result.row_count))
        for row in result.rows:
            for value in row:
                for number in _numbers_in(value):
                    known |= _variants(number)
    known |= _numbers_in(question) | _numbers_in(run.plan.to_dict())
    known |= {Decimal(n) for n in range(0, 11)}  # small counts and ordinals ("前3名", "第1周")
    return known


def unsupported_numbers(text: str, run: "PlanResult", *, question: str = "") -> list[str]:
    """Figures in ``text`` that appear nowhere in the results, the question or the plan."""
    return _unknown_figures(text, known_figures(run, question))


def _unknown_figures(text: str, known: set[Decimal]) -> list[str]:
    missing = []
    for match in _NUMBER.finditer(_strip_citations(text)):
        try:
            value = Decimal(match.group().replace(",", "")).normalize()
        except InvalidOperation:
            continue
        if value not in known:
            missing.append(match.group())
    return missing


def _strip_citations(text: str) -> str:
    return re.sub(r"\[[A-Za-z_]\w*\]", "", text)


# --- the prompt --------------------------------------------------------------------------


def _result_block(result: "StepResult") -> str:
    head = f"[{result.output_key}] source {result.source}" + (f", purpose: {result.purpose}" if result.purpose else "")
    if result.skipped:
        return f"{head}\n  (not run: {result.skipped})"
    shown = result.rows[:PROMPT_ROWS]
    lines = [f"{head}\n  columns: {json.dumps(list(result.columns), ensure_ascii=False)}",
             f"  {result.row_count} rows{' (truncated: more exist)' if result.truncated else ''}"]
    lines += ["  " + json.dumps(list(row), ensure_ascii=False, default=str) for row in shown]
    if result.row_count > len(shown):
        lines.append(f"  … {result.row_count - len(shown)} more rows not shown here")
    return "\n".join(lines)


# --- streaming ---------------------------------------------------------------------------

#: Where the answer's text goes while it is written (set by ``streaming_answer``), if anywhere.
_listener: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "structq_answer_listener", default=None)

#: A run of characters at the end of streamed text that may still grow into a longer figure.
_OPEN_FIGURE = re.compile(r"[\d,.\-]+$")


@contextmanager
def streaming_answer(on_text: Callable[[str], None]) -> Iterator[None]:
    """Within this block (and the threads it hands work to), answers written by the model are
    streamed: checked pieces of text go to ``on_text`` as the model writes them. The final
    text (what ``synthesize`` returns) stays the one to keep: when the check rejects the
    reply it is the deterministic rendering, not what was streamed."""
    token = _listener.set(on_text)
    try:
        yield
    finally:
        _listener.reset(token)


class NumberGate:
    """Passes streamed text on once every figure in it is known (``known_figures``).

    Text ending in digits, commas, dots or a minus is held back: "12" may yet become "12.5"
    or "125". The first unknown figure closes the gate for good; nothing from it on is passed.
    What was passed is always a prefix of the reply, and the whole reply once ``finish`` finds
    it clean.
    """

    def __init__(self, known: set[Decimal], on_text: Callable[[str], None]) -> None:
        self.known = known
        self.on_text = on_text
        self.text = ""
        self.sent = 0
        self.closed = False

    def feed(self, piece: str) -> None:
        if self.closed:
            return
        self.text += piece
        open_figure = _OPEN_FIGURE.search(self.text)
        self._pass(open_figure.start() if open_figure else len(self.text))

    def finish(self) -> None:
        """The reply is complete: pass on what was held back, if it checks."""
        if not self.closed:
            self._pass(len(self.text))

    def _pass(self, end: int) -> None:
        if end <= self.sent:
            return
        if _unknown_figures(self.text[:end], self.known):
            self.closed = True
            return
        self.on_text(self.text[self.sent:end])
        self.sent = end


# --- with a model ------------------------------------------------------------------------


def synthesize(model: Any, question: str, run: "PlanResult", *, log: CallLog,
               bounds: "CallBounds | None" = None, context: str = "") -> tuple[str, list[str]]:
    """The model's answer and notes; falls back to the deterministic rendering when it invents figures.
    Streamed (checked piece by piece) when a ``streaming_answer`` listener is set. ``context``:
    the conversation's earlier turns, so a follow-up ("and in 2024 only?") is answered as meant;
    only this run's results count as figures the answer may quote."""
    from langchain_core.messages import HumanMessage, SystemMessage

    language = ("Chinese" if is_chinese(_language_text(question, run))
                else "the language the question is written in (names or values it quotes do not change it)")
    notes_text = "Notes:\n" + "\n".join(f"- {n}" for n in run.notes) if run.notes else ""
    messages = [
        SystemMessage(template("answer_system").substitute(language=language)),
        HumanMessage(template("answer_user").substitute(
            question=question + (f"\n\nEarlier in this conversation:\n{context}" if context else ""),
            answer_with=run.plan.answer_with or "a short, direct answer",
            results="\n\n".join(_result_block(r) for r in run.steps.values()),
            notes=notes_text,
        )),
    ]
    listener = _listener.get()
    gate = NumberGate(known_figures(run, question), listener) if listener is not None else None
    try:
        reply = invoke(model, messages, purpose="answer", log=log, bounds=bounds,
                       on_text=gate.feed if gate else None)
    except ModelError as exc:
        # The data was read and is correct: show it rather than lose it to a model failure.
        return render_deterministic(question, run), [f"the answer could not be written ({exc.message}); "
                                                     "showing the results instead"]
    text = reply_text(reply).strip()
    if not text:
        return render_deterministic(question, run), ["the model returned an empty answer; showing the results instead"]
    invented = unsupported_numbers(text, run, question=question)
    if invented:
        note = (f"the model's answer mentioned figures not found in the results ({', '.join(invented[:5])}); "
                "showing the results instead")
        return render_deterministic(question, run), [note]
    if gate is not None:
        gate.finish()
    return text, []


# --- without a model ---------------------------------------------------------------------


def _table(result: "StepResult") -> list[str]:
    columns = [str(c) for c in result.columns]
    rows = [[_cell(v) for v in row] for row in result.rows[:TEXT_ROWS]]
    widths = [max([_width(c)] + [_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    line = lambda cells: "| " + " | ".join(c + " " * (w - _width(c)) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "…"


def _width(text: str) -> int:
    """Display width: CJK characters take two columns."""
    return sum(2 if "\u2e80" <= ch <= "\uffef" else 1 for ch in text)


#: A final result this small is spelt out in the summary line itself.
INLINE_ROWS, INLINE_COLUMNS = 3, 4


#: Rows named in the summary of a longer result.
NAMED_ROWS = 10
#: Columns that identify a row to a machine, not to a person: skipped when naming rows.
_ID_COLUMN = re.compile(r"(^|_)(id|code|no|key|uuid)$|编号$|工号$", re.IGNORECASE)


def _label_column(final: "StepResult") -> int:
    """The column that names a row for a person: the first text column that is not an id."""
    columns = [str(c) for c in final.columns]
    texts = [i for i, _ in enumerate(columns) if any(isinstance(row[i], str) for row in final.rows[:NAMED_ROWS])]
    named = [i for i in texts if not _ID_COLUMN.search(columns[i])]
    return (named or texts or [0])[0]


def _summary_line(final: "StepResult", zh: bool) -> str:
    """One sentence: the single value, a few short rows in full, or the count and the first rows
    by name (``共 58 行结果：张三、李四、…（前 10 行）[engineers]。``)."""
    key = final.output_key
    more = ("（结果被截断，列表不完整）" if zh else " (truncated: the list is incomplete)") if final.truncated else ""
    if final.row_count == 1 and len(final.columns) == 1:
        column, value = final.columns[0], _cell(final.rows[0][0])
        return f"{column} 为 {value}{more} [{key}]。" if zh else f"{column} is {value}{more} [{key}]."
    if final.row_count <= INLINE_ROWS and len(final.columns) <= INLINE_COLUMNS:
        rows = ("；" if zh else "; ").join(
            ("，" if zh else ", ").join(f"{c} = {_cell(v)}" for c, v in zip(final.columns, row)) for row in final.rows
        )
        return f"结果：{rows}{more} [{key}]。" if zh else f"Result: {rows}{more} [{key}]."
    label = _label_column(final)
    names = [_cell(row[label]) for row in final.rows[:NAMED_ROWS]]
    shown = len(names)
    if zh:
        listed = "、".join(names) + (f"、…（前 {shown} 行）" if final.row_count > shown else "")
        return f"共 {final.row_count} 行结果{more}：{listed} [{key}]。"
    listed = ", ".join(names) + (f", … (first {shown})" if final.row_count > shown else "")
    return f"{final.row_count} rows{more}: {listed} [{key}]."


def render_deterministic(question: str, run: "PlanResult") -> str:
    """Per-step tables and a one-line summary, citing steps, without a model."""
    zh = is_chinese(_language_text(question, run))
    final = run.final
    if final.skipped:
        summary = (f"没有找到结果：步骤 [{final.output_key}] {final.skipped}。" if zh
                   else f"No result: step [{final.output_key}] {final.skipped}.")
    elif final.row_count == 0:
        summary = f"没有符合条件的数据 [{final.output_key}]。" if zh else f"Nothing matched [{final.output_key}]."
    else:
        summary = _summary_line(final, zh)
    lines = [summary, ""]
    for result in run.steps.values():
        title = f"[{result.output_key}] {result.purpose or result.source}"
        if result.skipped:
            lines += [title, f"  ({result.skipped})", ""]
            continue
        count = f"{result.row_count} 行" if zh else f"{result.row_count} rows"
        lines.append(f"{title} — {count}{' (truncated)' if result.truncated else ''}")
        if result.columns:
            lines += _table(result)
        if result.row_count > TEXT_ROWS:
            lines.append(f"… {result.row_count - TEXT_ROWS} more")
        lines.append("")
    if run.notes:
        lines += ["注意：" if zh else "Notes:"] + [f"- {n}" for n in run.notes]
    return "\n".join(lines).rstrip()
