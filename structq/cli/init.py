"""``structq init``: draft a manifest for one database or cluster from what it holds."""

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from .common import DEFAULT_MANIFESTS, JsonOpt, VerboseOpt, console, errors_to_exit, print_json

if TYPE_CHECKING:
    from structq.sync.init import InitResult

HELP = """Draft a manifest for one source from the live database or search cluster.

Writes DIR/NAME.yaml with every table and view (or index) in scope: columns or fields (object and nested sub-fields too) with their types, primary keys, nullability, foreign keys as references, and the database's comments as descriptions. Everything is marked draft: true. Columns whose name or stored values look secret or personal (passwords, tokens, ID card numbers, salaries, phone numbers, emails, addresses, card numbers, IP addresses and the like) are written access: deny with a comment saying why, and listed at the end: review them.

The URL is not written into the file: the manifest reads it from the variable NAME_URL, whose value is printed once on stderr. An existing file is never overwritten (use structq sync to update it).

Examples:

  structq init --source shop --url sqlite:///shop.db -m capabilities

  structq init --source hr --url postgresql://reader@db/hr --schema people --exclude 'tmp_*'

  structq init --source logs --url http://localhost:9200 --kind opensearch --include 'app-*'

  structq init --source tracker --url https://tracker.internal/graphql --kind graphql

  structq init --source tickets --url https://tickets.internal/openapi.json --kind openapi

Then: structq check -m capabilities --connect, and structq sync --check.
"""

KindOpt = Literal["sql", "elasticsearch", "opensearch", "graphql", "openapi"]


def _summary(result: "InitResult") -> dict[str, Any]:
    plan = result.plan
    return {
        "source": plan.source,
        "file": str(result.path),
        "kind": plan.manifest.kind,
        "url_variable": result.variable,
        "objects": result.objects,
        "members": result.members,
        "references": result.references,
        "denied": [{"object": d.name, "kind": d.category, "reason": d.reason} for d in result.denials],
        "values_proposed": [p.name for p in plan.diff.proposals],
        "warnings": list(plan.diff.warnings),
    }


def _print(result: "InitResult") -> None:
    out = console()
    shape = result.plan.manifest.object_type  # keys (references) only where members carry them
    out.print(f"[green]wrote[/] {result.path}: {result.objects} {shape.plural}, {result.members} {shape.member_plural}"
              + (f", {result.references} references" if shape.keyed else "")
              + f", {len(result.denials)} denied, {len(result.plan.diff.proposals)} with proposed values")
    for warning in result.plan.diff.warnings:
        out.print(f"  [yellow]![/] {warning}", markup=True, highlight=False)
    if result.denials:
        out.print("denied (review each; change [bold]access: deny[/] to allow where it is harmless):")
        for d in result.denials:
            out.print(f"  [red]✗[/] {d.name}: {d.category} — {d.reason}", highlight=False)
    directory = result.path.parent
    out.print(f"next: structq check -m {shlex.quote(str(directory))} --connect   "
              f"(then structq sync --check -m {shlex.quote(str(directory))})", markup=False, highlight=False)


def init(
    source: Annotated[str, typer.Option("--source", "-s", help="Name of the new source (letters, digits, _).",
                                        show_default=False)],
    url: Annotated[str, typer.Option("--url", help="Database URL (sqlite:///shop.db, postgresql://user@host/db, "
                                     "mysql://user@host/db) or cluster URL (https://host:9200).", show_default=False)],
    manifests: Annotated[Path, typer.Option("-m", "--manifests", help="Folder to write NAME.yaml into.")] = DEFAULT_MANIFESTS,
    kind: Annotated[KindOpt | None, typer.Option("--kind", help="sql, elasticsearch, opensearch, graphql (the "
                                                 "endpoint) or openapi (the spec's URL or file) (default: sql for "
                                                 "database URLs; required for http URLs).")] = None,
    schema: Annotated[str | None, typer.Option("--schema", help="Database schema to read (SQL; default: the "
                                               "connection's default schema).")] = None,
    include: Annotated[list[str] | None, typer.Option("--include", metavar="GLOB",
                                                      help="Only objects matching this glob (repeatable).")] = None,
    exclude: Annotated[list[str] | None, typer.Option("--exclude", metavar="GLOB",
                                                      help="Leave out objects matching this glob (repeatable).")] = None,
    profile_values: Annotated[int, typer.Option("--profile-values", metavar="N", min=0,
                                                help="Suggest 'values' for coded text columns with at most N distinct "
                                                     "values (0: none).")] = 20,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    with errors_to_exit(verbose):
        if kind in ("graphql", "openapi"):
            _init_api(manifests, source, url, kind, json_out)
            return
        from structq.sync.init import init_manifest

        result = init_manifest(manifests, source, url, kind=kind, schema=schema, include=include or (),
                               exclude=exclude or (), profile_values=profile_values or None)
        # The only place the URL is shown: stderr, once; the file holds ${NAME_URL}.
        sys.stderr.write(f"the manifest reads its URL from ${result.variable}; set it where structq runs:\n"
                         f"  export {result.variable}={shlex.quote(result.url)}\n")
        if json_out:
            print_json(_summary(result))
        else:
            _print(result)


def _init_api(directory: Path, source: str, url: str, kind: str, json_out: bool) -> None:
    """An API source: introspection (GraphQL) or the OpenAPI description (``sync.api_init``)."""
    from structq.sync.api_init import init_api

    result = init_api(directory, source, url, kind)
    sys.stderr.write(f"the manifest reads its URL from ${result.variable}; set it where structq runs:\n"
                     f"  export {result.variable}={shlex.quote(result.url)}\n")
    if json_out:
        print_json({"source": source, "file": str(result.path), "kind": kind, "url_variable": result.variable,
                    "schema_file": str(result.schema_path) if result.schema_path else None,
                    "operations": result.operations, "fields": result.fields, "not_callable": result.not_callable,
                    "denied": [{"object": d.name, "kind": d.category, "reason": d.reason} for d in result.denials]})
        return
    out = console()
    saved = f" and {result.schema_path}" if result.schema_path else ""
    out.print(f"[green]wrote[/] {result.path}{saved}: {result.operations} operations, {result.fields} fields, "
              f"{result.not_callable} not callable, {len(result.denials)} denied", highlight=False)
    for d in result.denials:
        out.print(f"  [red]✗[/] {d.name}: {d.category} — {d.reason}", highlight=False)
    out.print(f"next: structq check -m {shlex.quote(str(directory))} --connect", markup=False, highlight=False)


init.__doc__ = HELP
