"""``structq ask`` and ``structq plan``: questions in, answers (or plans) out."""

from typing import Annotated

import typer

from .common import console, errors_to_exit, make_agent, parse_today, parse_vars, print_json, shared_options


def _question(value: str) -> str:
    """An empty or blank question is a usage error (exit 2), not a question for the model."""
    if not value.strip():
        raise typer.BadParameter("the question is empty; ask something, e.g. \"华东区有多少员工？\"")
    return value


QuestionArg = Annotated[str, typer.Argument(help="The question, in any language.", callback=_question)]


@shared_options
def ask(
    question: QuestionArg,
    *, manifests, llm, var, today,
    show_plan: Annotated[bool, typer.Option("--show-plan", help="Print the plan and the queries that ran.")] = False,
    no_answer: Annotated[bool, typer.Option("--no-answer", help="Return the raw results; no answer-writing model call.")] = False,
    no_cache, adaptive,
    fallback: Annotated[str | None, typer.Option(
        "--fallback", metavar="keywords|off",
        help="When the question cannot be planned (no model and no verified example, or no working plan after "
             "the repairs): 'keywords' searches the search indices for its words, dates and known values "
             "instead, labelled as a keyword search, not an answer (default: $STRUCTQ_FALLBACK, else off).")] = None,
    json_out, verbose,
) -> None:
    """Answer a question: plan it, run the plan through the sandbox, answer with citations.

    Verified example questions, and questions of the same shape as a verified example with
    slots (other months, grades, projects, top N), need no model; without a model, any other
    question lists the closest verified questions and exits 3 — or, with --fallback keywords,
    searches for the question's words. Otherwise configure a model with --llm or STRUCTQ_LLM (or
    OPENAI_API_KEY). --json prints {"answer", "citations", "plan", "plan_source", "steps",
    "notes", "model_calls"}.

    Example:  structq ask "去年第三季度在华东区销售额最高的产品是什么？" --show-plan

    Example:  structq ask "上个月有哪些周报提到了灰度发布？" --fallback keywords
    """
    variables = parse_vars(var)
    day = parse_today(today)
    with errors_to_exit(verbose):
        with make_agent(manifests, llm, no_cache=no_cache, adaptive=adaptive, fallback=fallback) as agent:
            answer = agent.ask(question, vars=variables, today=day, answer=not no_answer, use_cache=not no_cache)
        if json_out:
            print_json(answer.to_dict())
            return
        from .render import print_answer, print_plan, print_queries, print_results

        out = console()
        if show_plan:
            print_plan(out, answer.plan)
            print_queries(out, answer.results)
        if no_answer or show_plan:
            print_results(out, answer.results)
        if not no_answer:
            print_answer(out, answer, results_shown=no_answer or show_plan)
        out.print(f"[dim]plan: {answer.plan_source}; model calls: {answer.model_calls.count()}[/]")
        if answer.plan.template is not None:
            from .render import print_template

            print_template(out, answer.plan.template)


@shared_options
def plan(
    question: QuestionArg,
    *, manifests, llm, today, no_cache,
    explain_linking: Annotated[bool, typer.Option(
        "--explain-linking", help="Show which tables, columns and stored values schema linking keeps for the "
        "question, and why; no model is called.")] = False,
    json_out, verbose,
) -> None:
    """Write the plan for a question without running it (save it and `structq run` it later).

    Example:  structq plan "华东区有多少员工？" --json > plan.json && structq run plan.json

    Example:  structq plan "星火项目有哪些成员？" --explain-linking
    """
    day = parse_today(today)
    with errors_to_exit(verbose):
        with make_agent(manifests, llm, no_cache=no_cache) as agent:
            if explain_linking:
                from .linking import print_linking

                selection = agent.link(question)
                print_json(selection.to_dict()) if json_out else print_linking(console(), selection)
                return
            result = agent.plan(question, today=day, use_cache=not no_cache)
        if json_out:
            print_json(result.to_dict())
            return
        from .render import print_plan

        print_plan(console(), result)
