"""``structq check --connect``: declared tables, columns and fields the source does not have.

Only the declared objects are read (no scan for new ones), so the check stays cheap on large
schemas and says nothing about what sync would add.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .diff import diff_manifest
from .introspect import introspect

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["missing_objects"]


def missing_objects(manifest: "Manifest") -> list[dict[str, Any]]:
    """One entry per declared object that does not exist: ``source``, ``object``, ``kind``, ``message``.

    Raises ``SourceUnavailable`` when the source cannot be reached.
    """
    found = diff_manifest(manifest, introspect(manifest, declared_only=True), examples=[])
    return [
        {
            "source": manifest.source,
            "object": change.name,
            "kind": change.kind,
            "message": f"{change.kind} {change.name} is declared but does not exist",
        }
        for change in found.dropped
    ]
