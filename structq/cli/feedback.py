"""``structq feedback``: what callers said about their answers, for a reviewer to act on."""

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import DEFAULT_MANIFESTS, JsonOpt, ManifestsOpt, console, errors_to_exit, print_json, resolve_manifests

feedback_app = typer.Typer(
    help="Ratings callers gave their answers (POST /v1/feedback, the page's 👍/👎, MCP feedback): list and\n"
         "read them, turn a good answer into a verified example, a bad one into an eval question.\n\n"
         "Example:  structq feedback list --store postgresql://structq@db.internal/structq",
    no_args_is_help=True,
)

StoreOpt = Annotated[str | None, typer.Option("--store", metavar="URL", envvar="STRUCTQ_STORE_URL",
                                              help="The server's store (default: the one structq serve uses here).")]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="The answer id (or its first characters).")]


def _store(url: str | None) -> Any:
    from structq.server.store import Store, resolve_store_url

    return Store(resolve_store_url(url))


def _entry(store_url: str | None, wanted: str) -> dict[str, Any]:
    from structq.server.feedback import find_feedback

    store = _store(store_url)
    try:
        return find_feedback(store, wanted)
    finally:
        store.close()


def _when(entry: dict[str, Any]) -> str:
    return dt.datetime.fromtimestamp(entry["created"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


@feedback_app.command("list")
def list_(store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """Every rating, newest first.

    Example:  structq feedback list --json
    """
    with errors_to_exit():
        opened = _store(store)
        try:
            entries = opened.list_feedback()
        finally:
            opened.close()
    if json_out:
        print_json({"feedback": entries})
        return
    out = console()
    if not entries:
        out.print("no feedback yet")
    for e in entries:
        mark = "👍" if e["rating"] == "up" else "👎"
        comment = f" — {e['comment']}" if e.get("comment") else ""
        out.print(f"{e['answer_id'][:12]}  {_when(e)}  {mark}  {e.get('user')}  [{e['plan_source']}]  "
                  f"{e['question']}{comment}", markup=False)


@feedback_app.command("show")
def show(answer_id: IdArg, store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """One rating: the question, who asked on which day, the comment, the plan and its row counts.

    Example:  structq feedback show 3f2a
    """
    import yaml

    with errors_to_exit():
        entry = _entry(store, answer_id)
    if json_out:
        print_json(entry)
        return
    lines = [f"answer {entry['answer_id']}  ({'👍 up' if entry['rating'] == 'up' else '👎 down'}, {_when(entry)})",
             f"question: {entry['question']}", f"asked by {entry.get('user')} for {entry['today']}",
             f"plan from: {entry['plan_source']}", f"comment: {entry.get('comment') or '—'}",
             "rows: " + ", ".join(f"[{k}] {n}" for k, n in entry.get("row_counts", {}).items()), "plan:",
             yaml.safe_dump(entry["plan"], allow_unicode=True, sort_keys=False, width=100).rstrip()]
    console().print("\n".join(lines), markup=False)


@feedback_app.command("promote")
def promote(answer_id: IdArg, manifests: ManifestsOpt = DEFAULT_MANIFESTS, store: StoreOpt = None,
            json_out: JsonOpt = False) -> None:
    """Make a good answer's plan a verified example (draft: true) in the manifest of its source.

    The manifest keeps its comments; the example answers its question without a model from the
    next start of the server. A value the question names that a step compares a column with
    becomes a slot where that is certain, so the example also answers the question about other
    values. Review it, then delete its draft line.

    Example:  structq feedback promote 3f2a -m capabilities/
    """
    from structq.server.feedback import promote as write_example

    with errors_to_exit():
        entry = _entry(store, answer_id)
        path, example = write_example(entry, resolve_manifests(manifests))
    if json_out:
        print_json({"manifest": str(path), "example": example})
        return
    slots = ", ".join(f"{name} ({slot['column']})" for name, slot in example.get("slots", {}).items())
    console().print(f"added a draft example to {path}: {example['question']}" + (f"; slots: {slots}" if slots else ""),
                    markup=False)


@feedback_app.command("to-eval")
def to_eval(
    answer_id: IdArg,
    eval_file: Annotated[Path, typer.Option("--eval", metavar="FILE", help="The eval file to append to.")] = Path("eval.yaml"),
    expect_sql: Annotated[str | None, typer.Option("--expect-sql", help="The query that gives the right rows; "
                                                   "without it the item is written commented out, to complete.")] = None,
    source: Annotated[str | None, typer.Option("--source", help="The source --expect-sql runs on (default: the plan's first).")] = None,
    store: StoreOpt = None,
) -> None:
    """Append a badly answered question to an eval file, for `structq eval` to keep checking.

    Example:  structq feedback to-eval 3f2a --eval capabilities/eval.yaml --expect-sql "SELECT count(*) FROM orders WHERE status = 'open'"
    """
    from structq.server.feedback import to_eval as append

    with errors_to_exit():
        entry = _entry(store, answer_id)
        text = append(entry, eval_file, expect_sql=expect_sql, source=source)
    console().print(f"appended to {eval_file}:\n{text}", markup=False)
