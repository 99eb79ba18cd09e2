"""``structq check``: validate manifests (and, with ``--connect``, compare them with the sources)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .common import EXIT_CONFIG, EXIT_FAILED, console, errors_to_exit, print_json, resolve_manifests, shared_options


def _summary(manifest) -> dict:
    objects = manifest.objects
    fields = sum(len(o.members) for o in objects)
    return {
        "source": manifest.source,
        "kind": manifest.kind,
        "dialect": manifest.query_dialect,
        "file": str(manifest.path) if manifest.path else None,
        "objects": len(objects),
        "fields": fields,
        "examples": len(manifest.examples),
        "row_filters": len(manifest.policies.row_filters),
    }


@shared_options
def check(
    *, manifests,
    connect: Annotated[bool, typer.Option("--connect", help="Also connect to each source and report declared objects it lacks.")] = False,
    json_out, verbose,
) -> None:
    """Validate capability manifests and print one line per source.

    Reports every problem in every file in one run, each at file:line:column with the
    closest valid key or name; runs each verified example through the sandbox. Exit 3 on a
    manifest problem (--json prints the problems document then too), 1 when --connect finds
    a declared object missing.

    Example:  structq check -m capabilities --connect
    """
    from .checkup import collect, location

    with errors_to_exit(verbose):
        caps, problems = collect(resolve_manifests(manifests))
        summaries = [_summary(m) for m in caps] if caps else []
        if connect and caps and not problems:
            from structq.sync.verify import missing_objects

            for manifest in caps:
                problems += missing_objects(manifest)
        if json_out:
            print_json({"ok": not problems, "fingerprint": caps.fingerprint() if caps else None,
                        "sources": summaries, "problems": problems})
        else:
            out = console()
            for manifest, s in zip(caps or (), summaries):
                what = manifest.object_type.plural
                dialect = f", {s['dialect']}" if s["dialect"] else ""
                out.print(f"[green]ok[/] {s['source']} ({s['kind']}{dialect}): {s['objects']} {what}, "
                          f"{s['fields']} fields, {s['examples']} examples, {s['row_filters']} row filters")
            for p in problems:
                if p.get("kind") in ("manifest", "sandbox"):
                    text = p.get("text") or f"{location(p)}: {p['message']}" + (f" (hint: {p['hint']})" if p["hint"] else "")
                    sys.stderr.write(f"structq: error: {text}\n")
                else:
                    out.print(f"[red]missing[/] {p['source']}: {p['message']}")
        if any(p.get("kind") in ("manifest", "sandbox") for p in problems):
            raise typer.Exit(EXIT_CONFIG)
        if problems:
            raise typer.Exit(EXIT_FAILED)
