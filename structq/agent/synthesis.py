"""Writing the answer from the results, with citations, and never with invented numbers.

With a model: the answer prompt holds the question, each step's result (capped) and the notes;
every figure of the reply — digits, Chinese and English number words — is traced to a result
cell, a row count, the question or a value derived from the cited steps (``figures.py``), and
every ``[key]`` must name a step that holds what is cited to it (a wrong number is worse than no
answer: a dangling or wrong citation gets one repair call; an unsupported figure, or a citation
still wrong, gives the deterministic rendering with a note; so does a failed or empty reply).
The check is a net, not a proof: it cannot tell two real figures swapped. Without a model: a
deterministic rendering, per-step tables and a one-line summary,
in the question's language.

Streaming (``streaming_answer``): a caller that shows the answer as it is written (the
server's event stream) sets a listener; the reply is then streamed through ``NumberGate``,
which passes text on only once every figure in it has been checked, so an invented figure is
never shown, not even for a moment. When the check fails the stream stops there and the
final text (the deterministic rendering) replaces what was shown.

The answer check (``figures``), the model's call (``llm``) and the prompts (``planner``) are
imported by the functions that use a model: a run with no model (``Agent.run``, ``structq
run``) renders its answer deterministically and loads none of them.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.errors import ModelError

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

    from .engine import PlanResult, StepResult
    from .figures import Evidence, FigureCheck
    from .llm import CallBounds, CallLog

__all__ = ["synthesize", "Written", "render_deterministic", "unsupported_numbers", "known_figures", "citations", "is_chinese",
           "streaming_answer", "NumberGate"]

#: Rows of each step in the deterministic rendering (the answering model is shown ``figures.SHOWN_ROWS``).
TEXT_ROWS = 20

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


# --- the figure check (``figures``) ------------------------------------------------------


def known_figures(run: "PlanResult", question: str = "") -> "Evidence":
    """What an answer's figures may come from (see ``figures``): the results' cells and counts,
    the question's numbers, figures derived from the cited steps, the dates read."""
    from .figures import Evidence

    return Evidence(run, question)


def unsupported_numbers(text: str, run: "PlanResult", *, question: str = "") -> list[str]:
    """Figures in ``text`` that nothing in the results, the question or a derivation holds."""
    from .figures import check_answer

    return [c.figure.text for c in check_answer(text, known_figures(run, question)).unsupported]


# --- the prompt --------------------------------------------------------------------------


#: The search server's own columns: a document's id in its index and its relevance score.
SEARCH_COLUMNS = ("_id", "_score")
_ASKS_FOR_SEARCH_COLUMNS = re.compile(r"\b(?:ids?|score|scores|relevance|ranking)\b|相关度|相关性|得分|文档编号|文档ID|_id|_score",
                                      re.IGNORECASE)


def shown_columns(result: "StepResult", question: str) -> list[int]:
    """The columns of ``result`` a reader is shown: all but the search server's ``_id`` and
    ``_score`` (an id the search server made up, a relevance number; neither is about the data),
    unless the question asks for ids or scores."""
    if _ASKS_FOR_SEARCH_COLUMNS.search(question):
        return list(range(len(result.columns)))
    return [i for i, c in enumerate(result.columns) if c not in SEARCH_COLUMNS]


def _result_block(result: "StepResult", question: str = "") -> str:
    head = f"[{result.output_key}] source {result.source}" + (f", purpose: {result.purpose}" if result.purpose else "")
    if result.skipped:
        return f"{head}\n  (not run: {result.skipped})"
    from .figures import SHOWN_ROWS

    keep = shown_columns(result, question)
    shown = result.rows[:SHOWN_ROWS]
    lines = [f"{head}\n  columns: {json.dumps([result.columns[i] for i in keep], ensure_ascii=False)}",
             f"  {result.row_count} rows{' (truncated: more exist)' if result.truncated else ''}"]
    lines += ["  " + json.dumps([row[i] for i in keep], ensure_ascii=False, default=str) for row in shown]
    if result.row_count > len(shown):
        lines.append(f"  … {result.row_count - len(shown)} more rows not shown here")
    return "\n".join(lines)


# --- streaming ---------------------------------------------------------------------------

#: Where the answer's text goes while it is written (set by ``streaming_answer``), if anywhere.
_listener: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "structq_answer_listener", default=None)

#: The end of streamed text that may still grow into a longer figure, a unit or a citation: a
#: number and the space after it, then digits, Chinese numerals or Latin letters ("12" may
#: become "12.5万", "三" "三十", "twen" "twenty"), or an open bracket.
_OPEN_FIGURE = re.compile(r"(?:\d[\d,.]*\s*)?[\d,.\-%％A-Za-z零〇一二两三四五六七八九十百千万亿]*\s*$|\[\w*$")


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
    """Passes streamed text on once every figure in it is known (``known_figures``) and every
    citation in it names a step.

    The last word is held back: "12" may yet become "12.5", "125" or "12万", "三" may become
    "三十". The first unknown figure closes the gate for good; nothing from it on is passed.
    What was passed is always a prefix of the reply, and the whole reply once ``finish`` finds
    it clean.
    """

    def __init__(self, known: "Evidence", on_text: Callable[[str], None]) -> None:
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
        from .figures import check_answer

        verdict = check_answer(self.text[:end], self.known)
        if verdict.unsupported or verdict.dangling:
            self.closed = True
            return
        self.on_text(self.text[self.sent:end])
        self.sent = end


# --- with a model ------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    """An answer: its text, the notes on it, and the verdict on each figure of the model's
    (last) reply — empty when no model wrote it."""

    text: str
    notes: list[str]
    checks: "tuple[FigureCheck, ...]" = ()


def synthesize(model: Any, question: str, run: "PlanResult", *, log: "CallLog",
               bounds: "CallBounds | None" = None, capabilities: "CapabilitySet | None" = None,
               context: str = "") -> Written:
    """The model's answer, checked (``figures``); a dangling or wrong citation gets one repair
    call; an unsupported figure, or a citation still wrong after the repair, gives the
    deterministic rendering with a note. Streamed (checked piece by piece) when a
    ``streaming_answer`` listener is set. ``context``: the conversation's earlier turns, so a
    follow-up ("and in 2024 only?") is answered as meant; only this run's results count as
    figures the answer may quote."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from .figures import ROUNDING_RULE, check_answer
    from .llm import invoke, reply_text
    from .planner import template

    language = ("Chinese" if is_chinese(_language_text(question, run))
                else "the language the question is written in (names or values it quotes do not change it)")
    notes_text = "Notes:\n" + "\n".join(f"- {n}" for n in run.notes) if run.notes else ""
    messages = [
        SystemMessage(template("answer_system").substitute(language=language, rounding=ROUNDING_RULE)),
        HumanMessage(template("answer_user").substitute(
            question=question + (f"\n\nEarlier in this conversation:\n{context}" if context else ""),
            answer_with=run.plan.answer_with or "a short, direct answer",
            results="\n\n".join(_result_block(r, question) for r in run.steps.values()),
            notes=notes_text,
        )),
    ]
    evidence = known_figures(run, question)
    def fallback(note: str, reply: str = "", checks: "Sequence[FigureCheck]" = ()) -> Written:
        return Written(render_deterministic(question, run, capabilities=capabilities,
                                            derived=derived_sentences(reply, checks)), [note], tuple(checks))

    listener = _listener.get()
    gate = NumberGate(evidence, listener) if listener is not None else None
    try:
        reply = invoke(model, messages, purpose="answer", log=log, bounds=bounds,
                       on_text=gate.feed if gate else None)
    except ModelError as exc:
        # The data was read and is correct: show it rather than lose it to a model failure.
        return fallback(f"the answer could not be written ({exc.message}); showing the results instead")
    text = reply_text(reply).strip()
    if not text:
        return fallback("the model returned an empty answer; showing the results instead")
    verdict = check_answer(text, evidence)
    if verdict.unsupported:
        figures = ", ".join(c.figure.text for c in verdict.unsupported[:5])
        return fallback(f"the model's answer mentioned figures not found in the results ({figures}); "
                        "showing the results instead", text, verdict.checks)
    if not verdict.ok:  # every figure is real, a citation is not: one repair call
        problems = verdict.problems()
        steps = ", ".join(f"[{k}]" for k in evidence.step_keys)
        repair = template("answer_repair").substitute(problems="\n".join(f"- {p}" for p in problems), steps=steps)
        try:
            reply = invoke(model, [*messages, AIMessage(text), HumanMessage(repair)], purpose="answer_repair",
                           log=log, bounds=bounds)
        except ModelError as exc:
            return fallback(f"the answer's citations were wrong ({'; '.join(problems[:3])}) and could not be "
                            f"repaired ({exc.message}); showing the results instead", text, verdict.checks)
        repaired = reply_text(reply).strip()
        again = check_answer(repaired, evidence)
        if not repaired or not again.ok:
            left = again.problems() if repaired else ["the repair was empty"]
            return fallback(f"the answer's citations were still wrong after one repair ({'; '.join(left[:3])}); "
                            "showing the results instead", repaired, again.checks)
        return Written(repaired, ["the answer's citations were repaired once: " + "; ".join(problems[:3])],
                       again.checks)
    if gate is not None:
        gate.finish()
    return Written(text, [], verdict.checks)


# --- without a model ---------------------------------------------------------------------


def _table(result: "StepResult", labels: "Labels", question: str) -> list[str]:
    keep = shown_columns(result, question)
    columns = [labels.column(result, result.columns[i]) for i in keep]
    rows = [[_cell(row[i], column=result.columns[i]) for i in keep] for row in result.rows[:TEXT_ROWS]]
    widths = [max([_width(c)] + [_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    line = lambda cells: "| " + " | ".join(c + " " * (w - _width(c)) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return out


def _cell(value: Any, *, big_units: bool = False, column: str = "") -> str:
    """A value as a person reads it: numbers with separators and sensible decimals (in 万/亿
    when ``big_units``: the question wrote amounts that way), long text cut."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_number(value, big_units=big_units, year=bool(_YEAR_COLUMN.search(column)))
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "…"


#: A column of years: its values are written without separators (2024, not 2,024).
_YEAR_COLUMN = re.compile(r"year|年", re.IGNORECASE)


def format_number(value: float | int, *, big_units: bool = False, year: bool = False) -> str:
    """``3008785678.0`` → ``3,008,785,678`` (or ``30.09亿``), ``7747`` → ``7,747``, ``0.210712``
    → ``0.2107``, ``85.333`` → ``85.33``; a year (``year``: a year column) stays ``2024``. Every
    form is one the answer check (``figures.ROUNDING_RULE``) accepts for the value."""
    number = float(value)
    if year and number == int(number):
        return str(int(number))
    if big_units and abs(number) >= 10_000:
        scaled, unit = (number / 1e8, "亿") if abs(number) >= 1e8 else (number / 1e4, "万")
        return f"{scaled:,.2f}".rstrip("0").rstrip(".") + unit
    if number == int(number) and abs(number) < 1e15:
        return f"{int(number):,}"
    if abs(number) >= 1:
        return f"{number:,.2f}".rstrip("0").rstrip(".")
    return f"{number:.4g}"


def _width(text: str) -> int:
    """Display width: CJK characters take two columns."""
    return sum(2 if "\u2e80" <= ch <= "\uffef" else 1 for ch in text)


#: How an aggregate's label reads: the described column, then this (SQL function → zh, en).
_AGGREGATES = {"sum": ("合计", "total"), "avg": ("平均", "average"), "max": ("最大", "max"),
               "min": ("最小", "min"), "count": ("数", "count")}


class Labels:
    """Column names as a person reads them: the manifest's description (its first clause) or
    first synonym of the column the step read; for an alias of an aggregate (``SUM(amount) AS
    total_amount``) the described column and the aggregate (成交金额合计); else the name."""

    def __init__(self, capabilities: "CapabilitySet | None", zh: bool) -> None:
        self.capabilities = capabilities
        self.zh = zh
        self._aliases: dict[str, dict[str, tuple[str, str | None]]] = {}

    def column(self, result: "StepResult", name: str) -> str:
        return self.described(result, name) or name

    def described(self, result: "StepResult", name: str) -> str | None:
        """The label of a column, or None when the manifests do not describe it."""
        manifest = self.capabilities.get(result.source) if self.capabilities is not None else None
        if manifest is None:
            return None
        found = self._member_label(manifest, result, name)
        if found is not None:
            return found
        column, aggregate = self._alias_of(manifest, result).get(name.lower(), (None, None))
        label = self._member_label(manifest, result, column) if column else None
        if label is None or aggregate is None:
            return label
        zh, en = _AGGREGATES[aggregate]
        return f"{label}{zh}" if self.zh else f"{label} ({en})"

    def _member_label(self, manifest: Any, result: "StepResult", name: str) -> str | None:
        # the tables the step's query names first: a column name may recur in other tables
        query = result.query if isinstance(result.query, str) else ""
        containers = [manifest.object(result.index)] if result.index else \
            sorted(manifest.objects, key=lambda o: not re.search(rf"\b{re.escape(o.name)}\b", query, re.IGNORECASE))
        for container in containers:
            member = container.flat_members().get(name) if container is not None else None
            if member is None:
                continue
            words = [member.description.split("，")[0].split(",")[0].split("（")[0].split("(")[0].strip(),
                     *member.synonyms]
            fitting = [w for w in words if w and len(w) <= 20 and is_chinese(w) == self.zh]
            return fitting[0] if fitting else None
        return None

    def _alias_of(self, manifest: Any, result: "StepResult") -> dict[str, tuple[str, str | None]]:
        """Each alias of the step's SELECT → the one column it reads and its aggregate (if any)."""
        if result.output_key not in self._aliases:
            self._aliases[result.output_key] = _select_aliases(result.query, manifest.sql_dialect) \
                if isinstance(result.query, str) and manifest.query_dialect else {}
        return self._aliases[result.output_key]


def _select_aliases(sql: str, dialect: str) -> dict[str, tuple[str, str | None]]:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return {}
    out: dict[str, tuple[str, str | None]] = {}
    for projection in getattr(tree, "expressions", []) if isinstance(tree, exp.Select) else []:
        if not isinstance(projection, exp.Alias):
            continue
        columns = {c.name for c in projection.find_all(exp.Column)}
        aggregates = [a for a in projection.find_all(exp.AggFunc)]
        kind = aggregates[0].key if len(aggregates) == 1 and aggregates[0].key in _AGGREGATES else None
        if len(columns) == 1 and (kind is not None or not aggregates):
            out[projection.alias.lower()] = (columns.pop(), kind)
    return out


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


def _summary_line(final: "StepResult", zh: bool, labels: Labels, big_units: bool, question: str,
                  generic: bool = False) -> str:
    """One sentence: the single value (named by the step's purpose), a few short rows in full,
    or the count and the first rows by name (``共 58 行结果：张三、李四、…（前 10 行）[engineers]。``)."""
    key = final.output_key
    more = ("（结果被截断，列表不完整）" if zh else " (truncated: the list is incomplete)") if final.truncated else ""
    cell = lambda v, i: _cell(v, big_units=big_units, column=final.columns[i])  # noqa: E731
    if final.row_count == 1 and len(final.columns) == 1:
        # a template's purposes are written for any of its values (某月…): not a name for this one
        label = final.purpose if final.purpose and is_chinese(final.purpose) == zh and not generic else \
            labels.described(final, final.columns[0]) or ("结果" if zh else "Result")
        value = cell(final.rows[0][0], 0)
        return f"{label}为 {value}{more} [{key}]。" if zh else f"{label}: {value}{more} [{key}]."
    keep = shown_columns(final, question)
    if final.row_count <= INLINE_ROWS and len(keep) <= INLINE_COLUMNS:
        pairs = [[(labels.column(final, final.columns[i]), cell(row[i], i)) for i in keep] for row in final.rows]
        rows = ("；" if zh else "; ").join(
            ("，" if zh else ", ").join(f"{c}为 {v}" if zh else f"{c} = {v}" for c, v in row) for row in pairs)
        return f"结果：{rows}{more} [{key}]。" if zh else f"Result: {rows}{more} [{key}]."
    label = _label_column(final)
    names = [cell(row[label], label) for row in final.rows[:NAMED_ROWS]]
    shown = len(names)
    if zh:
        listed = "、".join(names) + (f"、…（前 {shown} 行）" if final.row_count > shown else "")
        return f"共 {final.row_count} 行结果{more}：{listed} [{key}]。"
    listed = ", ".join(names) + (f", … (first {shown})" if final.row_count > shown else "")
    return f"{final.row_count} rows{more}: {listed} [{key}]."


def derived_sentences(text: str, checked: "Sequence[FigureCheck]") -> list[str]:
    """The clauses of a model's reply holding a derived figure that checked, every figure of
    the clause checked too: kept in the fallback, since structq verified them."""
    from .figures import clause_of

    out: list[str] = []
    for check in checked:
        if check.ok and check.basis == "derived":
            start, end = clause_of(text, check.figure.start)
            inside = [c for c in checked if start <= c.figure.start < end]
            clause = text[start:end].strip(" ，,；;。.\n")
            if all(c.ok for c in inside) and clause and clause not in out:
                out.append(clause)
    return out


def render_deterministic(question: str, run: "PlanResult", *, capabilities: "CapabilitySet | None" = None,
                         derived: Sequence[str] = ()) -> str:
    """The answer without a model, in the question's language: a summary sentence (columns
    named as the manifests describe them, numbers formatted), the derived figures checked in a
    rejected reply, the final result's table when the summary does not spell it out, one line
    per earlier step, and the notes."""
    zh = is_chinese(_language_text(question, run))
    labels = Labels(capabilities, zh)
    big_units = bool(re.search("[万亿]", question))
    final = run.final
    if final.skipped:
        summary = (f"没有找到结果：步骤 [{final.output_key}] {final.skipped}。" if zh
                   else f"No result: step [{final.output_key}] {final.skipped}.")
    elif final.row_count == 0:
        summary = f"没有符合条件的数据 [{final.output_key}]。" if zh else f"Nothing matched [{final.output_key}]."
    else:
        summary = _summary_line(final, zh, labels, big_units, question, generic=run.plan.template is not None)
    lines = [summary]
    if derived:
        lines += [("据此计算：" if zh else "Computed from these results: ") + "；".join(derived)
                  + ("。" if zh else ".")]
    lines.append("")
    for result in run.steps.values():
        title = f"[{result.output_key}] {result.purpose or result.source}"
        if result.skipped:
            lines += [title, f"  ({result.skipped})", ""]
            continue
        count = f"{result.row_count} 行" if zh else f"{result.row_count} rows"
        truncated = ("（已截断）" if zh else " (truncated)") if result.truncated else ""
        lines.append(f"{title} — {count}{truncated}")
        spelt_out = result is final and final.row_count <= INLINE_ROWS and \
            len(shown_columns(final, question)) <= INLINE_COLUMNS
        if result.columns and result.row_count and not spelt_out:
            lines += _table(result, labels, question)
            if result.row_count > TEXT_ROWS:
                lines.append(f"… 另有 {result.row_count - TEXT_ROWS} 行" if zh else f"… {result.row_count - TEXT_ROWS} more")
        lines.append("")
    if run.notes:
        lines += ["注意：" if zh else "Notes:"] + [f"- {n}" for n in run.notes]
    return "\n".join(lines).rstrip()
