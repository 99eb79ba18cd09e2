"""``structq demo``: the whole flow on the bundled demo company, offline, with no API key.

Builds the demo data (once), starts the embedded search server, and answers every verified
example question: its plan, the queries as they ran, the result tables and the answer with
citations. With a model configured it also answers a question that is not an example.
"""

import datetime as dt
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from .common import bundled_manifests, console, errors_to_exit, shared_options

#: Relative dates in the demo resolve against this day, so answers stay inside the data.
DEMO_TODAY = dt.date(2026, 11, 30)
#: Asked only when a model is configured: not a verified example, so the model plans it.
OPEN_QUESTION = "2025年华北区销售额最高的三个产品分别卖了多少？"
#: Suggested at the end without a model: no example asks it word for word, but it has the shape
#: of a slotted one (北斗项目的负责人是谁？), so it is answered offline.
OFFLINE_QUESTION = "天宫项目的负责人是谁？"
#: Suggested at the end with a model: no example has its shape, so the model plans it.
MODEL_QUESTION = "华东区去年哪个季度销售额最高？"
#: Not verified examples, but of a slotted example's shape with other values: answered offline.
VARIANTS = (
    "上个月各部门绩效为良好的人数是多少？",
    "天宫项目的成员有哪些？",
    "去年销售额最高的3个客户是哪些？",
)
STAMP = "demo.json"


@shared_options
def demo(
    *,
    directory: Annotated[Path | None, typer.Option("--dir", help="Where to build the demo data (default: the user data folder).")] = None,
    scale: Annotated[float, typer.Option("--scale", help="Data size: 1.0 ≈ 220,000 sales rows; 0.1 for a quick look.", min=0.001, max=20)] = 1.0,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Build the data again even if it exists.")] = False,
    llm, verbose,
) -> None:
    """Run structq end to end on the demo company: no API key, no network.

    Example:  structq demo --dir /tmp/structq-demo --scale 0.2
    """
    from structq.config import default_demo_dir

    out = console()
    default_target = default_demo_dir().expanduser().resolve()
    target = _writable_folder((directory or default_target).expanduser().resolve())
    os.environ["STRUCTQ_DEMO_DIR"] = str(target)  # the bundled manifests point at ${STRUCTQ_DEMO_DIR}
    with errors_to_exit(verbose):
        _ensure_data(target, scale, rebuild, out)
        from structq.agent import Agent
        from structq.capabilities import CapabilitySet
        from structq.config import Settings

        manifests = bundled_manifests()
        settings = Settings.from_env(llm=llm, cache_enabled=False)
        with Agent(CapabilitySet.from_path(manifests), settings=settings) as agent:
            _answer_examples(agent, out)
            _answer_variants(agent, out)
            if agent.has_model:
                _answer_open_question(agent, out)
        _next_steps(out, manifests, target if target != default_target else None, with_model=agent.has_model)


def _writable_folder(target: Path) -> Path:
    """``--dir`` as a folder structq can write, or a usage error saying why not."""
    if target.exists() and not target.is_dir():
        raise typer.BadParameter(f"{target} is a file, not a folder", param_hint="--dir")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(f"cannot create the folder {target}: {exc.strerror or exc} "
                                 "(choose a folder you can write, e.g. --dir /tmp/structq-demo)",
                                 param_hint="--dir") from None
    if not os.access(target, os.W_OK):
        raise typer.BadParameter(f"cannot write in {target} (choose a folder you can write)", param_hint="--dir")
    return target


def _ensure_data(target: Path, scale: float, rebuild: bool, out) -> None:
    """Build the demo data unless the same scale is already there."""
    from structq.demo import DATABASE_NAME, REPORTS_NAME, build_demo

    stamp = target / STAMP
    wanted = {"scale": scale, "seed": 42}
    present = (target / DATABASE_NAME).exists() and (target / REPORTS_NAME).exists()
    if present and not rebuild and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        out.print(f"[dim]demo data: {target} (already built)[/]")
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out.print(f"Building the demo company in {target} (scale {scale:g}) …")
    with Progress(TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=out, transient=False) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=max(total, 1))
            bar.update(tasks[stage], completed=done, total=max(total, 1))

        build_demo(target, scale=scale, progress=progress)
    stamp.write_text(json.dumps(wanted))


def _answer_examples(agent, out) -> None:
    from .render import heading, print_answer, print_plan, print_queries, print_results

    from rich.markup import escape

    from structq.errors import ConfigError

    examples = [example for _, example in agent.capabilities.examples()]
    out.print(f"\nAnswering the {len(examples)} verified example questions (plans from the manifests, no model):")
    for i, example in enumerate(examples, 1):
        heading(out, f"{i}. {example.question}")
        try:
            with out.status("running the plan …"):
                answer = agent.ask(example.question, today=DEMO_TODAY, answer=True)
        except ConfigError as exc:  # e.g. the embedded search server is not installed: the others still run
            out.print(f"[yellow]skipped:[/] {escape(exc.message)}" + (f" ({escape(exc.hint)})" if exc.hint else ""))
            continue
        print_plan(out, answer.plan)
        print_queries(out, answer.results)
        print_results(out, answer.results)
        print_answer(out, answer, results_shown=True)


def _answer_variants(agent, out) -> None:
    """Three questions no example asks word for word: slots make the examples answer them."""
    from .render import heading, print_answer, print_template

    out.print("\nQuestions of the same shape with other values (slotted examples, no model):")
    for question in VARIANTS:
        heading(out, question)
        with out.status("running the plan …"):
            answer = agent.ask(question, today=DEMO_TODAY, answer=True)
        print_template(out, answer.plan.template)
        print_answer(out, answer)


def _answer_open_question(agent, out) -> None:
    from .render import heading, print_answer, print_plan

    heading(out, f"Your model plans a new question: {OPEN_QUESTION}")
    with out.status("planning with the model …"):
        answer = agent.ask(OPEN_QUESTION, today=DEMO_TODAY)
    print_plan(out, answer.plan)
    print_answer(out, answer)


def next_steps_text(manifests: Path, data: Path | None, *, with_model: bool) -> str:
    """What to do after the demo, as commands that work as printed from any folder.

    ``data`` is the demo folder when it is not the default one (the command then needs
    ``STRUCTQ_DEMO_DIR``). ``-m`` is written only when the default (``./capabilities``, else the
    bundled manifests) would read other manifests than the demo's. The bundled manifests are
    package data: they are offered as a copy to edit, never as files to edit in place."""
    from .common import DEFAULT_MANIFESTS, resolve_manifests

    prefix = f"STRUCTQ_DEMO_DIR={data} " if data is not None else ""
    same = resolve_manifests(DEFAULT_MANIFESTS).resolve() == manifests.resolve()
    where = "" if same else f" -m {manifests}"
    today = f" --today {DEMO_TODAY.isoformat()}"  # the demo's data ends there: relative dates stay inside it
    if with_model:
        ask = (f"Ask a question no example covers (your model plans it):\n"
               f"  {prefix}structq ask \"{MODEL_QUESTION}\"{where}{today} --show-plan\n")
    else:
        ask = (f"Ask another question; this one is answered offline, from a verified example with slots:\n"
               f"  {prefix}structq ask \"{OFFLINE_QUESTION}\"{where}{today} --show-plan\n"
               f"Questions no example covers need a model: --llm openai:gpt-4o-mini, or STRUCTQ_LLM, or\n"
               f"OPENAI_API_KEY (OPENAI_BASE_URL for any OpenAI-compatible server).\n")
    if manifests.parent.name == "_bundled":
        read = (f"The demo's manifests are installed with structq; to read or change them, copy them:\n"
                f"  cp -r {manifests} ./capabilities    (structq reads ./capabilities by default)\n")
    else:
        read = f"The demo's manifests are in {manifests}.\n"
    return (ask + read + "Your own databases: `structq init` drafts a manifest, `structq check --connect` checks it\n"
            "(docs/getting-started.md, \"Your own data in ten minutes\").")


def _next_steps(out, manifests: Path, data: Path | None, *, with_model: bool) -> None:
    from .render import panel

    out.print(panel(out, next_steps_text(manifests, data, with_model=with_model),
                    title="Next", title_align="left", border_style="cyan"))
