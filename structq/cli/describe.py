"""``structq describe``: draft descriptions and synonyms for undescribed tables and columns."""

from typing import Annotated, Any

import typer

from .common import EXIT_USAGE, console, errors_to_exit, fail, print_json, shared_options

HELP = """Ask the configured chat model to describe draft tables and columns (or indices and fields).

The model sees names, types, keys, references and neighbouring tables — and, only with --samples, up to 5 distinct values per column, never from a denied column, a row-filtered table, or values that look secret or personal. Descriptions and synonyms are added only where none exist; everything stays draft: true for a person to review, and every comment and hand-written key is kept. Tables are sent in small batches. The previous file is saved under .history/<source>/.

Examples:

  structq describe -m capabilities --source shop --dry-run      # show the diff, write nothing

With --dry-run and no model configured, it shows what the model would be sent (each batch's prompt) and calls nothing.

  structq describe -m capabilities --samples --lang Chinese

  structq describe -m capabilities --languages zh,en            # descriptions in Chinese, synonyms in both

  structq describe -m capabilities --from target/manifest.json  # import from dbt (no model)

  structq describe -m capabilities --from dictionary.csv        # table,column,description[,synonyms]

--from imports descriptions and synonyms companies already have — a dbt manifest.json or schema.yml, or a CSV/JSON data dictionary — into draft tables and columns that have none, with a comment naming the origin; no model is called.
"""


def _ask(llm: str | None) -> Any:
    """The model as ``prompt → parsed JSON`` (one model call each)."""
    from langchain_core.messages import HumanMessage

    from structq.agent.llm import CallLog, invoke, reply_text, resolve_model
    from structq.agent.planner import extract_json
    from structq.errors import ModelError, PlanError

    model, log = resolve_model(llm), CallLog()

    def ask(prompt: str) -> Any:
        reply = invoke(model, [HumanMessage(prompt)], purpose="describe", log=log)
        try:
            return extract_json(reply_text(reply))
        except PlanError as err:
            raise ModelError(f"the model's descriptions are not one JSON object: {err.message}",
                             hint="try again, or a stronger model (--llm)") from None

    return ask


@shared_options
def describe(
    *, manifests,
    source: Annotated[str | None, typer.Option("--source", "-s", help="Only this source.")] = None,
    samples: Annotated[bool, typer.Option("--samples", help="Show the model up to 5 sample values per allowed column.")] = False,
    lang: Annotated[str | None, typer.Option("--lang", help="Language of the descriptions (default: the manifest's).")] = None,
    languages: Annotated[str | None, typer.Option(
        "--languages", help="Comma-separated language codes (zh,en): descriptions in the first, synonyms in each, "
                            "so questions in any of them link lexically.")] = None,
    from_file: Annotated[str | None, typer.Option(
        "--from", help="Import descriptions from a dbt manifest.json / schema.yml or a CSV/JSON data dictionary "
                       "(no model).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the diff; write nothing. Without a model: print what it would be sent.")] = False,
    llm, json_out, verbose,
) -> None:
    with errors_to_exit(verbose):
        _run(manifests, source, samples, lang, dry_run, llm, json_out, languages, from_file)


def _run(manifests: Any, source: str | None, samples: bool, lang: str | None, dry_run: bool, llm: str | None,
         json_out: bool, languages: str | None = None, from_file: str | None = None) -> None:
    from pathlib import Path

    from structq.capabilities import load_manifest, manifest_files
    from structq.errors import ConfigError
    from structq.sync.describe import describe_manifest, import_descriptions, language_names
    from structq.sync.dictionary import read_dictionary
    from structq.sync.history import replace_manifest

    loaded = [(path, load_manifest(path)[0]) for path in manifest_files(manifests)]
    if source is not None:
        loaded = [(p, m) for p, m in loaded if m.source == source]
        if not loaded:
            fail(f"no manifest for source {source!r} in {manifests}", code=EXIT_USAGE)
    dictionary = read_dictionary(Path(from_file)) if from_file else None
    wanted = language_names(languages or "")
    ask = None
    if dictionary is None:
        try:
            ask = _ask(llm)
        except ConfigError as err:
            if not dry_run:
                raise
            _preview(loaded, samples, lang, wanted, json_out, why=err.message)  # a dry run needs no model
            return
    out, entries = console(), []
    for path, manifest in loaded:
        if dictionary is not None:
            result = import_descriptions(path, manifest, dictionary)
        else:
            result = describe_manifest(path, manifest, ask, with_samples=samples, lang=lang,
                                       languages=wanted)
        written = False
        if not dry_run and result.after != result.before:
            written = replace_manifest(path, manifest.source, result.after.encode("utf-8"),
                                       expected=result.before.encode("utf-8")) is not None
        entries.append({"source": manifest.source, "file": str(path), "described": result.added,
                        "model_calls": result.calls, "written": written, "warnings": result.notes,
                        "origin": dictionary.origin if dictionary is not None else "model"})
        if json_out:
            continue
        how = f"imported from {dictionary.origin}" if dictionary is not None else f"drafted in {result.calls} model calls"
        out.print(f"{manifest.source} ({path}): {len(result.added)} descriptions {how}"
                  + ("; written, still draft: true — review them" if written else ""))
        for name in result.added:
            out.print(f"  + {name}", highlight=False)
        if dry_run:
            out.print(result.unified_diff(), markup=False, highlight=False, end="")
    if json_out:
        print_json({"sources": entries})


def _preview(loaded: list[tuple[Any, Any]], samples: bool, lang: str | None, languages: list[str], json_out: bool,
             *, why: str) -> None:
    """``--dry-run`` without a usable model: what each batch would send, and no model call."""
    from structq.sync.describe import prompts

    out, entries = console(), []
    for path, manifest in loaded:
        notes: list[str] = []
        sent = list(prompts(manifest, with_samples=samples, lang=lang, notes=notes, languages=languages))
        entries.append({"source": manifest.source, "file": str(path), "described": [], "model_calls": 0,
                        "written": False, "warnings": notes, "prompts": sent})
        if json_out:
            continue
        out.print(f"{manifest.source} ({path}): " + (
            f"{len(sent)} model call{'s' if len(sent) != 1 else ''} would draft its descriptions; "
            "what each would be sent:" if sent
            else "nothing to describe (no draft without a description)"), highlight=False)
        for number, prompt in enumerate(sent, 1):
            out.print(f"--- call {number} of {len(sent)} ---\n{prompt}", markup=False, highlight=False)
        for note in notes:
            out.print(f"  note: {note}", markup=False, highlight=False)
    if json_out:
        print_json({"sources": entries, "model": None, "why": why})
    else:
        console(stderr=True).print(f"dry run without a model ({why}): nothing was sent, nothing written; "
                                   "configure one (--llm, STRUCTQ_LLM or OPENAI_API_KEY) to draft the descriptions",
                                   markup=False, highlight=False)


describe.__doc__ = HELP
