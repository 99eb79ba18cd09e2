"""``structq sync``: keep manifests true to their databases (check for cron, write, roll back)."""

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    console,
    errors_to_exit,
    fail,
    print_json,
    shared_options,
)

if TYPE_CHECKING:
    from structq.capabilities import Manifest
    from structq.sync import SyncPlan

_SOURCE_LINE = re.compile(r"^source:\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)

HELP = """Compare manifests with their databases and search indices; report or apply the drift.

New tables, columns and fields are added with their types and the database's comments, marked draft: true (undescribed); dropped ones are removed; type changes are applied. Descriptions, values, synonyms, access flags, examples, policies and YAML comments are kept. Every write first saves the previous file under .history/<source>/.

Exit codes: 0 in sync (or written), 1 drift found by --check (or a failure), 2 usage, 3 manifest or configuration error, 4 a source is unavailable.

Examples:

  structq sync --check                  # report drift; exit 1 if any

  structq sync --check --diff -s hr     # also show the YAML --write makes

  structq sync --write --profile-values 20

  structq sync --rollback -s hr         # undo the last write

  structq sync --values                 # (re)build the value index for schema linking

For cron, use scripts/sync_cron.sh (docs/sync.md, "Cron"): absolute paths, an env file for the URLs, --quiet, and a mail that tells drift (1) from errors (3, 4).
"""


def _source_of(path: Path) -> str | None:
    """The ``source:`` of a manifest file without loading it (rollback must work on a broken one)."""
    match = _SOURCE_LINE.search(path.read_text(encoding="utf-8", errors="replace"))
    return match.group(1) if match else None


def _files(manifests: Path, source: str | None) -> list[Path]:
    from structq.capabilities import manifest_files

    files = manifest_files(manifests)
    if source is None:
        return files
    chosen = [f for f in files if _source_of(f) == source]
    if not chosen:
        known = ", ".join(s for s in (_source_of(f) for f in files) if s)
        fail(f"no manifest for source {source!r} in {manifests}", hint=f"sources: {known}", code=EXIT_USAGE)
    return chosen


def _load_all(files: list[Path]) -> dict[Path, tuple[str, "Manifest | None"]]:
    """Each manifest file read and loaded once for the whole command: its text, and its model
    (None when it does not load; ``plan_sync`` then reports why). The examples of every
    manifest and each synced source's own plan come from this one load."""
    from structq.capabilities import load_manifest_text
    from structq.errors import ManifestError

    loaded: dict[Path, tuple[str, Manifest | None]] = {}
    for f in files:
        try:
            text = f.read_bytes().decode("utf-8")  # bytes as they are: a CRLF file stays CRLF
        except (OSError, UnicodeDecodeError):
            continue  # plan_sync reads it again and says what is wrong
        try:
            loaded[f] = (text, load_manifest_text(text, str(f))[0])
        except ManifestError:
            loaded[f] = (text, None)
    return loaded


# --- output -----------------------------------------------------------------------------------


def _entry(plan: "SyncPlan") -> dict[str, Any]:
    d = plan.diff
    return {
        "source": plan.source,
        "file": str(plan.path),
        "drift": d.drift,
        "added": [c.as_dict() for c in d.added],
        "dropped": [c.as_dict() for c in d.dropped],
        "changed": [c.as_dict() for c in d.changed]
        + [{"object": p.name, "kind": p.kind, "attribute": "values", "from": None, "to": list(p.values)}
           for p in d.proposals if not p.refresh],
        "filled": [c.as_dict() for c in d.filled]
        + [{"object": p.name, "kind": p.kind, "attribute": "values", "to": list(p.values)} for p in d.proposals if p.refresh],
        "denied": [{"object": x.name, "kind": x.category, "reason": x.reason} for x in d.denials],
        "renames": list(d.renames),
        "warnings": list(d.warnings),
        "written": plan.written,
        "previous_version": str(plan.saved.path) if plan.saved else None,
        "error": None,
    }


def _patch(plan: "SyncPlan") -> str:
    """The YAML change as a unified diff that ``patch -p1`` applies in the manifest's folder
    (``a/hr.yaml`` / ``b/hr.yaml`` headers, a marked missing final newline)."""
    import difflib

    name = plan.path.name
    lines = []
    for line in difflib.unified_diff(plan.before.decode("utf-8").splitlines(keepends=True),
                                     plan.after.decode("utf-8").splitlines(keepends=True),
                                     fromfile=f"a/{name}", tofile=f"b/{name}"):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def _print_plan(out: Any, plan: "SyncPlan", *, write: bool, show_diff: bool) -> None:
    d = plan.diff
    if not d.drift:
        out.print(f"[green]in sync[/] {plan.source} ({plan.path})")
        for c in d.filled:
            out.print(f"  [cyan]+[/] {c.kind} {c.name}: {c.attribute} {c.new} (stated from the database)")
        for p in d.proposals:
            out.print(f"  [cyan]~[/] {p.kind} {p.name}: suggested values now ({', '.join(p.values)})")
        return
    out.print(f"[yellow]drift[/] {plan.source} ({plan.path})")
    for c in d.added:
        if c.obj is not None:
            members = ", ".join(f"{m.name} {m.type}" for m in c.obj.members)
            out.print(f"  [green]+[/] {c.kind} {c.name} ({members})", markup=True)
        else:
            out.print(f"  [green]+[/] {c.kind} {c.name} {c.type}")
    for c in d.dropped:
        held = " (kept: still needed, see warning)" if c.held else ""
        out.print(f"  [red]-[/] {c.kind} {c.name}{held}")
    for c in d.changed:
        if c.new is None:
            out.print(f"  [cyan]~[/] {c.kind} {c.name}: {c.attribute} {c.old} removed")
        else:
            out.print(f"  [cyan]~[/] {c.kind} {c.name}: {c.attribute} {c.old} → {c.new}")
    for c in d.filled:
        out.print(f"  [cyan]+[/] {c.kind} {c.name}: {c.attribute} {c.new} (stated from the database)")
    for p in d.proposals:
        out.print(f"  [cyan]~[/] {p.kind} {p.name}: values proposed ({', '.join(p.values)})")
    for x in d.denials:
        out.print(f"  [red]✗[/] {x.kind} {x.name}: access: deny ({x.reason})", highlight=False)
    for r in d.renames:
        out.print(f"  [magenta]?[/] {r}")
    for w in d.warnings:
        out.print(f"  [yellow]![/] {w}")
    if show_diff and plan.after != plan.before:
        out.file.flush()
        sys.stdout.write(_patch(plan))  # bytes as they are: a console would wrap long lines
        sys.stdout.flush()
    if write and plan.written:
        out.print(f"  wrote {plan.path}; previous version saved as {plan.saved.path if plan.saved else '-'}")
    elif write and plan.after == plan.before:
        out.print("  nothing written (only changes that need a person, see warnings)")


# --- commands -----------------------------------------------------------------------------------


@contextmanager
def _in_folder(folder: Path) -> Iterator[None]:
    """Run inside the manifest's folder, so a relative SQLite path resolves against it, as it
    does for ``check`` and ``ask`` (cron runs from the home folder)."""
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def _build_values(manifests: Path, source: str | None, max_distinct: int, json_out: bool) -> None:
    """Write ``.values/<source>.json`` for each manifest (see ``structq.sync.values``)."""
    from structq.capabilities import CapabilitySet
    from structq.sync.values import build_values

    chosen = {_source_of(f) for f in _files(manifests, source)}
    builds = [build_values(m, max_distinct=max_distinct) for m in CapabilitySet.from_path(manifests) if m.source in chosen]
    if json_out:
        print_json({"values": [b.to_dict() for b in builds]})
        return
    out = console()
    for b in builds:
        out.print(f"values {b.source}: {b.values} values of {b.columns} columns → {b.path}", markup=False)
        for note in b.notes:
            out.print(f"  ! {note}", markup=False)


def _rollback(manifests: Path, source: str | None, version: str | None, json_out: bool) -> None:
    from structq.sync.history import rollback

    files = _files(manifests, source)
    if len(files) != 1:
        fail("--rollback needs one manifest: name it with --source or point -m at the file", code=EXIT_USAGE)
    path = files[0]
    name = _source_of(path)
    if name is None:
        fail(f"{path}: no 'source:' line, so its history cannot be found", code=EXIT_USAGE)
    restored, saved = rollback(path, name, version)
    if json_out:
        print_json({"source": name, "file": str(path), "restored": str(restored.path),
                    "previous_version": str(saved.path) if saved else None})
    else:
        console().print(f"restored {path} from {restored.path}"
                        + (f"; the replaced version is saved as {saved.path}" if saved else " (it already held that version)"))


@shared_options
def sync(
    *, manifests,
    source: Annotated[str | None, typer.Option("--source", "-s", help="Only this source.")] = None,
    check: Annotated[bool, typer.Option("--check", help="Report drift and change nothing; exit 1 when a manifest drifted.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Apply the changes (previous version saved to .history/).")] = False,
    profile_values: Annotated[int | None, typer.Option("--profile-values", metavar="N", min=1,
                                                       help="Propose 'values' for text columns with at most N distinct values.")] = None,
    show_diff: Annotated[bool, typer.Option("--diff", help="Also print the unified diff of the YAML.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing for manifests in sync (for cron).")] = False,
    rollback: Annotated[bool, typer.Option("--rollback", help="Restore the previous saved version of one manifest "
                                           "(or VERSION, a name under .history/<source>/).")] = False,
    version: Annotated[str | None, typer.Argument(metavar="[VERSION]", help="With --rollback: the version to restore.",
                                                  show_default=False)] = None,
    values: Annotated[bool, typer.Option("--values", help="Build the value index schema linking reads "
                                         "(.values/<source>.json next to the manifests); alone or with --check/--write.")] = False,
    max_distinct: Annotated[int, typer.Option("--max-distinct", metavar="N", min=1,
                                              help="With --values: leave out columns with more distinct values.")] = 5000,
    json_out, verbose,
) -> None:
    from structq.errors import SourceUnavailable

    with errors_to_exit(verbose):
        if rollback:
            if check or write:
                fail("--rollback stands alone (no --check or --write)", code=EXIT_USAGE)
            _rollback(manifests, source, version, json_out)
            return
        if version is not None:
            fail(f"unexpected argument {version!r} (a VERSION goes with --rollback)", code=EXIT_USAGE)
        if values:
            _build_values(manifests, source, max_distinct, json_out and not (check or write))
            if not (check or write):
                raise typer.Exit(EXIT_OK)
        if check == write:
            fail("say --check (report only) or --write (apply)", hint="structq sync --help", code=EXIT_USAGE)
        from structq.sync import plan_sync, write_sync

        files = _files(manifests, source)
        loaded = _load_all(_files(manifests, None))
        # any manifest's verified examples may read a synced source
        examples = [e for _, m in loaded.values() if m is not None for e in m.examples]
        entries: list[dict[str, Any]] = []
        out = console()
        status_console = console(stderr=True)
        unavailable = drifted = False
        for path in files:
            label = _source_of(path) or path.name
            spinner = status_console.status(f"syncing {label}…") if sys.stderr.isatty() else nullcontext()
            absolute = path.resolve()  # before moving into its folder, where a relative path means another file
            try:
                with spinner, _in_folder(absolute.parent):
                    text, manifest = loaded.get(path, (None, None))
                    plan = plan_sync(absolute, examples=examples, profile_values=profile_values,
                                     text=text, manifest=manifest)
                    if write:
                        plan = write_sync(plan)
            except SourceUnavailable as exc:
                unavailable = True
                entries.append({"source": label, "file": str(path), "drift": None, "added": [], "dropped": [],
                                "changed": [], "renames": [], "warnings": [], "written": False,
                                "previous_version": None, "error": exc.message})
                sys.stderr.write(f"structq: error: {exc.message}\n" + (f"  hint: {exc.hint}\n" if exc.hint else ""))
                continue
            drifted = drifted or plan.diff.drift
            entries.append(_entry(plan))
            if not json_out and not (quiet and not plan.diff.drift):
                _print_plan(out, plan, write=write, show_diff=show_diff)
        if json_out:
            print_json({"sources": entries})
        if unavailable:
            raise typer.Exit(EXIT_UNAVAILABLE)
        raise typer.Exit(EXIT_FAILED if check and drifted else EXIT_OK)


sync.__doc__ = HELP
