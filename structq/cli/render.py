"""How results look for people: plans, highlighted queries, result tables, answers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from structq.agent import Answer, Plan, PlanResult, StepResult
    from structq.agent.plan import TemplateUse

#: Rows shown per step in the terminal (all rows are in --json).
TABLE_ROWS = 20


def _query_renderable(query: Any, *, sql: bool) -> Any:
    from rich.syntax import Syntax

    if sql and isinstance(query, str):
        return Syntax(query, "sql", word_wrap=True, theme="ansi_dark", background_color="default")
    text = query if isinstance(query, str) else json.dumps(query, ensure_ascii=False, indent=2)
    return Syntax(text, "json", word_wrap=True, theme="ansi_dark", background_color="default")


def panel(out: "Console", renderable: Any, **options: Any) -> Any:
    """A panel as wide as the terminal; in a pipe (a very wide console) as wide as its content."""
    from rich.panel import Panel

    return Panel(renderable, expand=out.is_terminal, **options)


def heading(out: "Console", text: str) -> None:
    """A section heading: a rule across the terminal, or one plain line in a pipe."""
    from rich.markup import escape
    from rich.rule import Rule

    if out.is_terminal:
        out.print(Rule(f"[bold]{escape(text)}", align="left"))
    else:
        out.print(f"── {escape(text)}")


def print_plan(out: "Console", plan: "Plan") -> None:
    """The plan: reasoning, then each step with its highlighted query."""
    from rich.markup import escape

    if plan.reasoning:
        out.print(f"[bold]Plan:[/] {escape(plan.reasoning)}")
    if plan.cannot_answer is not None:
        out.print(f"[bold yellow]Cannot answer:[/] {escape(plan.cannot_answer)}")
    for i, step in enumerate(plan.steps, 1):
        where = f"{step.source}/{step.index}" if step.index else step.source
        title = escape(f"{i}. {step.output_key} @ {where}" + (f" — {step.purpose}" if step.purpose else ""))
        out.print(panel(out, _query_renderable(step.query, sql=step.index is None), title=title, title_align="left"))


def print_step(out: "Console", result: "StepResult") -> None:
    """One step's result as a table (first rows), with its row count and truncation."""
    from rich.table import Table

    from rich.markup import escape

    title = escape(f"[{result.output_key}] {result.purpose or result.source}")
    if result.skipped:
        out.print(f"[yellow]{title}: {escape(result.skipped)}[/]")
        return
    flag = " [red](truncated)[/]" if result.truncated else ""
    startup = f" (+ {result.startup_ms:.0f} ms search server start-up)" if result.startup_ms else ""
    caption = f"{result.row_count} rows, {result.elapsed_ms:.0f} ms{startup}{flag}"
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for column in result.columns:
        table.add_column(str(column), overflow="fold")
    for row in result.rows[:TABLE_ROWS]:
        table.add_row(*(_cell(v) for v in row))
    if result.row_count > TABLE_ROWS:
        table.add_row(*(["…"] * len(result.columns)))
    out.print(table)


def print_queries(out: "Console", run: "PlanResult") -> None:
    """The queries exactly as they ran (after the sandbox's rewrite), highlighted."""
    for result in run.steps.values():
        if result.skipped:
            continue
        out.print(panel(out, _query_renderable(result.query, sql=result.index is None),
                        title=f"ran: {result.output_key}", title_align="left", border_style="dim"))


def print_results(out: "Console", run: "PlanResult") -> None:
    for result in run.steps.values():
        print_step(out, result)
    from rich.markup import escape

    for note in run.notes:
        out.print(f"[yellow]note:[/] {escape(note)}")


def print_answer(out: "Console", answer: "Answer", *, results_shown: bool = False) -> None:
    """The answer and its citations. When the result tables were just printed and the answer
    is the deterministic rendering (no model wrote it), only its summary line is repeated."""
    from rich.markup import escape
    from rich.text import Text

    text = answer.text
    if results_shown and answer.model_calls.count("answer") == 0:
        text = text.split("\n", 1)[0]
    out.print(panel(out, Text(text), title="Answer", title_align="left", border_style="green"))
    for c in answer.citations:
        where = f"{c['source']}/{c['index']}" if c.get("index") else c["source"]
        cited = escape(f"[{c['step']}] {where}")
        out.print(f"  [dim]{cited}: {c['row_count']} rows[/]")
    for note in answer.notes:
        if note not in answer.results.notes:
            out.print(f"[yellow]note:[/] {escape(note)}")


def _cell(value: Any) -> str:
    if value is None:
        return "[dim]∅[/]"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    from rich.markup import escape

    return escape(text if len(text) <= 200 else text[:197] + "…")


def print_template(out: Console, template: "TemplateUse") -> None:
    """Which verified example answered, and the value each of its slots took."""
    from rich.markup import escape

    slots = ", ".join(f"{name} = {value}" for name, value in template.slots.items())
    if template.how == "paraphrase":  # the words it rests on, so a reader can judge the match
        out.print(f"[dim]from the verified example {escape(template.example)!r} as a {escape(template.why)}[/]")
        return
    out.print(f"[dim]from the verified example {escape(template.example)!r} with {escape(slots)}[/]")
