"""``structq check``: validate manifests (and, with ``--connect``, compare them with the sources
and audit the account each one connects as: ``structq.sync.audit``)."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import EXIT_CONFIG, EXIT_FAILED, console, errors_to_exit, print_json, resolve_manifests, shared_options


def _review(manifest) -> dict:
    """What is left for a person: objects and members still ``draft: true`` (written by init or
    sync, not yet reviewed), and readable ones without a description (the model sees a bare
    name). A manifest can be valid and still mostly unreviewed: ``check`` says so."""
    drafts = undescribed = 0
    for obj in manifest.objects:
        drafts += bool(obj.draft)
        undescribed += not obj.description
        for member in obj.flat_members().values():
            drafts += bool(member.draft)
            undescribed += not member.denied and not member.description
    return {"drafts": drafts, "undescribed": undescribed}


def _to_review(s: dict) -> str | None:
    """The line that follows a source's ``ok`` when a person still has work to do on it."""
    parts = []
    if s["drafts"]:
        parts.append(f"{s['drafts']} drafts (grep -n 'draft: true' {s['file'] or s['source']})")
    if s["undescribed"]:
        folder = f" -m {Path(s['file']).parent}" if s["file"] else ""
        parts.append(f"{s['undescribed']} without a description (structq describe{folder} --source {s['source']} --dry-run)")
    return "  to review: " + "; ".join(parts) if parts else None


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
        **_review(manifest),
    }


#: PostgreSQL's insufficient_privilege; MySQL/MariaDB's table, column and database access denied.
_DENIED_SQLSTATES, _DENIED_MYSQL_CODES = frozenset({"42501"}), frozenset({1044, 1142, 1143})


def _permission_denied(error: BaseException | None) -> bool:
    args = getattr(error, "args", ())
    return (getattr(error, "sqlstate", None) in _DENIED_SQLSTATES
            or bool(args) and args[0] in _DENIED_MYSQL_CODES)


def _declared_objects_missing(missing_objects, manifest, findings: list[dict]) -> list[dict]:
    """``missing_objects(manifest)``; when the account may not read the tables' definitions,
    an ``unverified`` finding instead. A least-privilege MariaDB/MySQL account (column-level
    grants, ``structq grants``) cannot run the ``SHOW CREATE TABLE`` that reflection uses: that
    is the account working, not the source missing."""
    from sqlalchemy.exc import DBAPIError

    try:
        return missing_objects(manifest)
    except DBAPIError as exc:
        if not _permission_denied(exc.orig):
            raise
        cause = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        findings.append({"source": manifest.source, "kind": "unverified", "object": "tables",
                         "message": f"the declared tables could not be compared with the source as this "
                                    f"account ({cause}); run structq sync --check as an account that may "
                                    f"read table definitions"})
        return []


@shared_options
def check(
    *, manifests,
    connect: Annotated[bool, typer.Option(
        "--connect", help="Also connect to each source, report declared objects it lacks, and audit the "
                          "account: what it can do beyond the manifest.")] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="With --connect: exit 1 when the account can do anything beyond the manifest.")] = False,
    json_out, verbose,
) -> None:
    """Validate capability manifests and print one line per source.

    Reports every problem in every file in one run, each at file:line:column with the
    closest valid key or name; runs each verified example through the sandbox. Exit 3 on a
    manifest problem (--json prints the problems document then too), 1 when --connect finds
    a declared object missing.

    With --connect, each SQL source's account is audited with catalog reads only: write
    privileges, sessions that are not read-only, readable undeclared or denied columns,
    readable tables outside the declared ones, row filters without row-level security
    (PostgreSQL). Each finding is one "account" line; --strict makes any finding exit 1.
    `structq grants` prints the SQL for an account that audits clean.

    Example:  structq check -m capabilities --connect

    Example:  structq check -m capabilities --connect --strict
    """
    from .checkup import collect, location

    with errors_to_exit(verbose):
        caps, problems = collect(resolve_manifests(manifests))
        summaries = [_summary(m) for m in caps] if caps else []
        findings: list[dict] = []
        if connect and caps and not problems:
            from structq.sync.audit import audit_account
            from structq.sync.verify import missing_objects

            for manifest in caps:
                problems += _declared_objects_missing(missing_objects, manifest, findings)
                findings += [{"source": manifest.source, **vars(f)} for f in audit_account(manifest)]
        beyond = [f for f in findings if f["kind"] != "unverified"]
        if json_out:
            print_json({"ok": not problems and not (strict and beyond),
                        "fingerprint": caps.fingerprint() if caps else None,
                        "sources": summaries, "problems": problems, "account": findings})
        else:
            out = console()
            for manifest, s in zip(caps or (), summaries):
                what = manifest.object_type.plural
                dialect = f", {s['dialect']}" if s["dialect"] else ""
                out.print(f"[green]ok[/] {s['source']} ({s['kind']}{dialect}): {s['objects']} {what}, "
                          f"{s['fields']} fields, {s['examples']} examples, {s['row_filters']} row filters")
                if review := _to_review(s):
                    out.print(review, markup=False, highlight=False)
            for p in problems:
                if p.get("kind") in ("manifest", "sandbox"):
                    text = p.get("text") or f"{location(p)}: {p['message']}" + (f" (hint: {p['hint']})" if p["hint"] else "")
                    sys.stderr.write(f"structq: error: {text}\n")
                else:
                    out.print(f"[red]missing[/] {p['source']}: {p['message']}")
            if findings:
                from rich.markup import escape

                for f in findings:
                    label = "unverified" if f["kind"] == "unverified" else "account"
                    out.print(f"[yellow]{label}[/] {f['source']}: {escape(f['message'])}")
        if any(p.get("kind") in ("manifest", "sandbox") for p in problems):
            raise typer.Exit(EXIT_CONFIG)
        if problems or (strict and beyond):
            raise typer.Exit(EXIT_FAILED)
