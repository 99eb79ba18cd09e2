"""Safe by default: new columns and fields that look secret or personal are written ``access: deny``.

Runs on what a sync (or ``structq init``) is about to add: every member of a new object and
every new member of a declared one. The name decides first (``sensitive.by_name``: it needs
no data); the members it leaves undecided whose type can hold such values are sampled
(``SAMPLE_SIZE`` distinct values each, through ``samples``) and judged by content. Members a
person already declared are never changed: their ``access`` is theirs to decide.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .diff import Denial, SourceDiff
from .profile import is_key_name
from .samples import Target, samples
from .sensitive import Verdict, by_content, by_name
from .snapshot import Member

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["find_denials", "SAMPLE_SIZE"]

#: Distinct values sampled per member for the content check.
SAMPLE_SIZE = 20
#: Member types whose values can look like secrets (text, or numbers stored as phone/ID numbers).
_SAMPLED = {"text", "keyword", "integer", "long", "numeric"}


def _added(diff: SourceDiff) -> Iterator[tuple[Target, Member]]:
    """(path, member) of every member the merge will write, sub-fields included."""
    def walk(path: Target, member: Member) -> Iterator[tuple[Target, Member]]:
        yield path, member
        for sub in member.members:
            yield from walk((*path, sub.name), sub)

    for change in diff.added:
        if change.obj is not None:
            for m in change.obj.members:
                yield from walk((change.obj.name, m.name), m)
        elif change.member is not None:
            yield from walk(change.path, change.member)


def find_denials(manifest: "Manifest", diff: SourceDiff, *, sample_size: int = SAMPLE_SIZE) -> tuple[list[Denial], list[str]]:
    """The new members to deny, and notes on what could not be read."""
    kind = manifest.member_word
    verdicts: dict[Target, Verdict] = {}
    undecided: list[Target] = []
    keys: set[Target] = set()
    for path, member in _added(diff):
        if member.type == "ip":
            verdicts[path] = Verdict("personal", "it is an IP address field")
        elif (verdict := by_name(member.name)) is not None:
            verdicts[path] = verdict
        elif member.type in _SAMPLED and not member.members:
            undecided.append(path)
            if member.primary_key or member.references or is_key_name(member.name):
                keys.add(path)
    notes: list[str] = []
    for path, values in samples(manifest, undecided, sample_size, notes).items():
        if (verdict := by_content(values, key=path in keys)) is not None:
            verdicts[path] = verdict
    denials = [Denial(kind, path, v.kind, v.reason) for path, v in verdicts.items()]
    return sorted(denials, key=lambda d: d.path), notes
