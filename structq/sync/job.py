"""One sync of one manifest file: introspect, diff, merge, check the result, then (maybe) write.

The merged text is checked before anything is written: it must load as a manifest, and a
second diff against the same snapshot must find nothing left to do. That makes ``--write``
idempotent by construction, and a bug in the merge refuses to write instead of corrupting a
file that people maintain.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from structq.errors import ManifestError, StructqError

from .coverage import measure_coverage
from .deny import find_denials
from .diff import SourceDiff, diff_manifest
from .history import Version, replace_manifest
from .infer import infer_references
from .introspect import introspect
from .merge import merge_text
from .profile import propose_values
from .snapshot import Snapshot

if TYPE_CHECKING:
    from structq.capabilities import Example, Manifest

__all__ = ["SyncError", "SyncPlan", "plan_sync", "write_sync"]


class SyncError(StructqError):
    """The merge produced something that must not be written (it says why; nothing was written)."""


@dataclass(frozen=True)
class SyncPlan:
    """What a sync of one manifest found and would write."""

    path: Path
    manifest: "Manifest"
    snapshot: Snapshot
    diff: SourceDiff
    before: bytes
    after: bytes
    #: Set once written: the history entry holding the previous version.
    saved: Version | None = None
    written: bool = False

    @property
    def source(self) -> str:
        return self.manifest.source

    def unified_diff(self) -> str:
        """The YAML change as a unified diff (empty when nothing would change)."""
        name = str(self.path)
        return "".join(difflib.unified_diff(
            self.before.decode("utf-8").splitlines(keepends=True),
            self.after.decode("utf-8").splitlines(keepends=True),
            fromfile=f"{name} (current)", tofile=f"{name} (synced)",
        ))


def _check_merged(text: str, plan_diff: SourceDiff, manifest: "Manifest", snapshot: Snapshot,
                  examples: Sequence["Example"] | None, env: Mapping[str, str] | None) -> None:
    from structq.capabilities.loader import load_manifest_text
    from structq.capabilities.validate import check_manifest

    file = plan_diff.file or manifest.source
    try:
        merged, positions = load_manifest_text(text, file, env=env)
        check_manifest(merged, positions)
    except ManifestError as exc:
        raise SyncError(f"source {manifest.source!r}: the synced manifest would not load ({exc}); nothing was written",
                        hint="fix the manifest by hand, or report this with the --check --diff output") from None
    left = [c for c in diff_manifest(merged, snapshot, examples=examples).changes if not c.held]
    if left:
        raise SyncError(f"source {manifest.source!r}: the merge left differences ({', '.join(c.name for c in left[:5])}); "
                        "nothing was written", hint="report this with the --check --diff output")


def plan_sync(path: Path, *, examples: Sequence["Example"] | None = None, profile_values: int | None = None,
              text: str | None = None, env: Mapping[str, str] | None = None,
              manifest: "Manifest | None" = None, infer_keys: bool = False) -> SyncPlan:
    """Read ``path`` (or take its would-be ``text``) and its source and work out the synced
    text; writes nothing. ``env`` replaces the process environment for ``${VAR}``s.
    ``manifest`` is ``text`` already loaded (the CLI loads every file once per command: a
    1,000-table manifest takes a second to load); without it the text is loaded here.

    New members that look secret or personal are written ``access: deny`` (``deny.py``).
    ``infer_keys`` (``structq init``): foreign keys the database does not declare are inferred
    and verified on the data (``infer.py``) and written with ``inferred: true``.
    Raises ``SourceUnavailable`` when the source cannot be reached, ``ManifestError`` when the
    manifest does not load, ``SyncError``/``YamlEditError`` when the merge cannot be done safely.
    """
    from structq.capabilities.loader import load_manifest_text

    before = path.read_bytes() if text is None else text.encode("utf-8")
    text = before.decode("utf-8")
    if manifest is None:
        manifest, _ = load_manifest_text(text, str(path), env=env)
    manifest._path = path.resolve()
    snapshot = introspect(manifest)
    inference_notes: list[str] = []
    if infer_keys:
        snapshot = infer_references(manifest, snapshot, inference_notes)
    found = diff_manifest(manifest, snapshot, examples=examples)
    if found.added:
        found = found.with_denials(*find_denials(manifest, found))
    found = measure_coverage(manifest, found)
    if profile_values:
        profile = propose_values(manifest, snapshot, found, profile_values)
        found = found.with_proposals(profile.proposals, profile.notes)
    if inference_notes:
        found = replace(found, warnings=(*found.warnings, *inference_notes))
    after = merge_text(text, manifest, found, str(path))
    if after != text:
        _check_merged(after, found, manifest, snapshot, examples, env)
    return SyncPlan(path, manifest, snapshot, found, before, after.encode("utf-8"))


def write_sync(plan: SyncPlan) -> SyncPlan:
    """Write the planned text (history first, atomic replace). No change → no write, no history."""
    if plan.after == plan.before:
        return plan
    saved = replace_manifest(plan.path, plan.source, plan.after, expected=plan.before)
    return replace(plan, saved=saved, written=saved is not None)
