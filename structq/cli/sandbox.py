"""``structq sandbox``: show what the sandbox makes of one query, without running it.

The query goes through exactly the check a plan step gets (its source kind's: ``check_sql``
for SQL sources, ``check_dsl`` for search sources), so this is the way to see why a query is refused, or what
the rewritten query, its bound values and its row cap look like.
"""

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    console,
    errors_to_exit,
    fail,
    load_capabilities,
    parse_vars,
    print_json,
    shared_options,
)

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest
    from structq.safety.query import SafeQuery



def _read_query(query: str | None) -> str:
    """The query argument, or stdin for ``-``."""
    if query == "-":
        query = sys.stdin.read()
    if query is None or not query.strip():
        fail("no query given", hint="pass the query as an argument, or '-' to read it from stdin", code=EXIT_USAGE)
    return query


def _pick_source(caps: "CapabilitySet", name: str) -> "Manifest":
    manifest = caps.get(name)
    if manifest is None:
        from structq.capabilities.hints import closest, listing

        suggestion = closest(name, caps.names)
        hint = f"did you mean {suggestion!r}?" if suggestion else f"sources: {listing(caps.names, near=name)}"
        fail(f"unknown source {name!r}", hint=hint, code=EXIT_USAGE)
    return manifest


def _check(manifest: "Manifest", text: str, index: str | None, vars: dict[str, Any]) -> "SafeQuery":
    """Run the sandbox of the source's kind (``structq.sources``) on the query as that kind
    reads it (SQL text, a JSON body)."""
    from structq.errors import PlanError
    from structq.sources import kind_of

    kind = kind_of(manifest)
    if kind.indexed and not index:
        names = ", ".join(o.name for o in kind.objects(manifest))
        fail(f"source {manifest.source!r} is a {kind.name} source: name the {kind.object_word}",
             hint=f"--index one of: {names}", code=EXIT_USAGE)
    if index and not kind.indexed:
        fail(f"--index applies to search sources; {manifest.source!r} is a {kind.name} source", code=EXIT_USAGE)
    try:
        payload = kind.read_payload(text)
    except PlanError as exc:
        fail(exc.message, hint=exc.hint, code=EXIT_USAGE)
    return kind.check(payload, manifest, index=index, params={}, vars=vars, max_rows=None)


def _document(safe: "SafeQuery") -> dict[str, Any]:
    """The stable ``--json`` shape of an accepted query."""
    return {
        "ok": True,
        "query": safe.sent,
        "index": safe.index,
        "params": safe.params,
        "tables": list(safe.tables),
        "columns": list(safe.columns),
        "limit": safe.limit,
    }


def _print_accepted(safe: "SafeQuery") -> None:
    """The rewritten query (highlighted on a terminal), then what it binds and reads."""
    out = console()
    document = _document(safe)
    if not sys.stdout.isatty():
        out.print(safe.sent_text if safe.kind == "sql" else json.dumps(safe.body, ensure_ascii=False, indent=2),
                  markup=False)
    elif safe.kind == "sql":
        from rich.syntax import Syntax

        out.print(Syntax(safe.sent_text or "", "sql", word_wrap=True, background_color="default"))
    else:
        from rich.json import JSON

        out.print(JSON.from_data(safe.body, ensure_ascii=False))
    for label in ("params", "tables", "columns", "limit"):
        value = document[label]
        shown = json.dumps(value, ensure_ascii=False, default=str) if label == "params" else (
            ", ".join(value) if isinstance(value, list) else str(value))
        out.print(f"{label}: {shown}", markup=False, highlight=False)


def _refused(code: str, message: str, hint: str | None, json_out: bool) -> None:
    if json_out:
        print_json({"ok": False, "code": code, "message": message, "hint": hint})
        raise typer.Exit(EXIT_FAILED)
    fail(f"refused [{code}]: {message}", hint=hint, code=EXIT_FAILED)


@shared_options
def sandbox(
    source: Annotated[str, typer.Option("--source", "-s", help="The source (manifest) to check the query against.")],
    query: Annotated[str | None, typer.Argument(
        help="SQL text, or the JSON body for a search source; '-' reads it from stdin.", show_default=False)] = None,
    index: Annotated[str | None, typer.Option("--index", "-i", help="The index, for a search source.")] = None,
    *, manifests, var, json_out, verbose,
) -> None:
    """Check one query as the sandbox would, and print the query that would run.

    Prints the rewritten query (row filters, row cap, allowed columns or _source), its bound values, what it reads and its row limit; a refused query prints the violation's code, message and hint. Nothing is sent to the source.

    Examples:

      structq sandbox -m capabilities --source hr --var tenant_id=7 "SELECT * FROM employees"

      structq sandbox --source reports --index weekly_reports --var tenant_id=7 '{"query": {"match": {"content": "星火"}}, "size": 5}'

      echo 'SELECT name FROM employees' | structq sandbox --source hr --var tenant_id=7 --json -

    Exit codes: 0 accepted, 1 refused, 2 usage, 3 manifests.
    """
    from structq.errors import PlanError, SandboxViolation

    vars = parse_vars(var)
    text = _read_query(query)
    with errors_to_exit(verbose):
        manifest = _pick_source(load_capabilities(manifests), source)
        try:
            safe = _check(manifest, text, index, vars)
        except SandboxViolation as exc:
            _refused(exc.code, exc.message, exc.hint, json_out)
        except PlanError as exc:
            _refused("plan_error", exc.message, exc.hint, json_out)
    if json_out:
        print_json(_document(safe))
    else:
        _print_accepted(safe)

