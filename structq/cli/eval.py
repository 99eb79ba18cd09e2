"""``structq eval QUESTIONS.yaml``: regression runs over a question set."""

from pathlib import Path
from typing import Annotated

import typer

from .common import EXIT_FAILED, console, errors_to_exit, make_agent, print_json, shared_options


@shared_options
def eval_(
    questions: Annotated[Path, typer.Argument(help="Question set: today + questions with expect_sql/expect_rows.", metavar="QUESTIONS.yaml")],
    *, manifests, llm, json_out, verbose,
) -> None:
    """Ask every question of a set and compare the final rows with the expected ones.

    Prints pass/fail per item (with the plan on failure), the accuracy, model calls and time;
    exits 1 when any item fails. Without a model, the verified example questions run and the
    others are reported as skipped (exit 3 when nothing could run). Run it after changing a
    manifest or a model.

    Example:  structq eval capabilities/eval.yaml --llm openai:gpt-4o-mini
    """
    with errors_to_exit(verbose):
        from rich.markup import escape

        from structq.agent.evaluate import EvalSet, evaluate

        question_set = EvalSet.from_file(questions)
        out = console(stderr=json_out)

        def show(i: int, result) -> None:
            if result.skipped:
                out.print(f"[yellow]skip[/] {i + 1:>3}. {escape(result.item.question)}  [dim]({escape(result.reason)})[/]")
                return
            mark = "[green]pass[/]" if result.passed else "[red]FAIL[/]"
            out.print(f"{mark} {i + 1:>3}. {escape(result.item.question)}  [dim]({result.plan_source or '-'}, "
                      f"{result.model_calls} calls, {result.elapsed_ms:.0f} ms)[/]")
            if not result.passed:  # reasons and plans hold [codes] and [lists]: never markup
                out.print(f"      {escape(result.reason)}")
                if result.plan is not None:
                    out.print("      plan: " + escape(str(result.plan)).replace("\n", "\n      "))

        with make_agent(manifests, llm, no_cache=True) as agent:
            report = evaluate(agent, question_set, progress=show)
        if json_out:
            print_json(report.to_dict())
        else:
            skipped = f", {report.skipped} skipped" if report.skipped else ""
            out.print(f"\naccuracy {report.accuracy:.1%} ({report.passed}/{len(report.results) - report.skipped}{skipped}), "
                      f"{report.model_calls} model calls, {report.elapsed_ms / 1000:.1f} s")
        if report.skipped == len(report.results):
            from structq.errors import ConfigError

            raise ConfigError("no item of the question set could run without a model",
                              hint="configure one with --llm, STRUCTQ_LLM or OPENAI_API_KEY")
        if report.failed:
            raise typer.Exit(EXIT_FAILED)
