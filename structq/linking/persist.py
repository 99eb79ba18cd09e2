"""The linking index kept on disk between commands, by the catalogue's fingerprint.

Why: every CLI command is a new process, and building the index is most of linking's cost on a
large catalogue (BM25 postings over every table and column). The index depends only on the
manifests, so it is kept in the user's cache folder (``STRUCTQ_CACHE_DIR``; ``STRUCTQ_CACHE=0``
turns it off, like the plan and manifest caches) under the SHA-256 of the catalogue's
fingerprint, this format and the Python version: a changed manifest is a new entry. Each
manifest's share of the index (``parts.Part``) is kept too, in ``linking/parts/`` by that
manifest's fingerprint, so the new entry is built from the unchanged manifests' parts and the
changed one's alone.

The index is plain data (dataclasses, dicts, lists, sets), stored with ``pickle``. That is
safe here for the reason the other caches are trusted: the file lives in the user's own cache
folder and is written atomically (a temporary file, then ``os.replace``). Every failure to
read or write it is a miss: the index is built as if there were no cache.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cached", "cached_part", "entry_path", "folder", "KEEP"]

KEEP = 8
#: Raise when ``LinkingIndex``, ``Part`` or what they hold change shape: old entries become misses.
_FORMAT = "structq-linking-index-5"

T = TypeVar("T")


def folder() -> Path:
    """Where the entries are kept (whether or not the cache is on)."""
    from structq.config import user_cache_dir

    return user_cache_dir() / "linking"


def entries() -> int:
    """How many catalogues' indexes are kept."""
    return len(list(folder().glob("*.pickle")))


def clear() -> int:
    """Remove every kept index and part (``structq cache clear``); how many indexes were removed."""
    removed = 0
    for entry in folder().glob("*.pickle"):
        entry.unlink(missing_ok=True)
        removed += 1
    for entry in (folder() / "parts").glob("*.pickle"):
        entry.unlink(missing_ok=True)
    return removed


def _path(where: Path, fingerprint: str) -> Path | None:
    """The file kept for ``fingerprint`` in ``where``, or None when the cache is off."""
    from structq.config import cache_enabled

    if not cache_enabled(os.environ):
        return None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    digest = hashlib.sha256(f"{_FORMAT}\0{version}\0{fingerprint}".encode("utf-8", "surrogatepass"))
    return where / f"{digest.hexdigest()}.pickle"


def entry_path(fingerprint: str) -> Path | None:
    """The file of the index of ``fingerprint``, or None when the cache is off."""
    return _path(folder(), fingerprint)


def cached(fingerprint: str, build: Callable[[], T], kind: type[T]) -> T:
    """The index (a ``kind``) kept for ``fingerprint``, else ``build()`` (kept for next time).

    The kind is the caller's, so this module knows files and formats, not what the index holds."""
    return _cached(entry_path(fingerprint), build, kind, KEEP)


def cached_part(fingerprint: str, build: Callable[[], T], kind: type[T], keep: int) -> T:
    """The part (a ``kind``) kept for a manifest's ``fingerprint``, else ``build()`` (kept for next
    time, with the ``keep`` newest parts: room for two versions of every manifest of the catalogue)."""
    return _cached(_path(folder() / "parts", fingerprint), build, kind, max(keep, KEEP))


def _cached(entry: Path | None, build: Callable[[], T], kind: type[T], keep: int) -> T:
    if entry is None:
        return build()
    kept = _read(entry, kind)
    if kept is not None:
        return kept
    made = build()
    _write(entry, made, keep)
    return made


def _read(entry: Path, kind: type) -> Any:
    """What ``entry`` keeps, if it is a ``kind`` of this format."""
    try:
        kept = _unpickle(entry.read_bytes())
    except Exception:  # noqa: BLE001 - a damaged entry can raise anything unpickling; it is a miss
        return None
    if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == _FORMAT and isinstance(kept[1], kind)):
        return None
    from structq.capabilities.manifest_cache import mark_used

    mark_used(entry)
    return kept[1]


def _unpickle(data: bytes) -> Any:
    """``pickle.loads(data)``, the garbage collector paused: an index is hundreds of thousands of
    new objects that live as long as the process (``structq.collector``)."""
    from structq.collector import collector_paused

    with collector_paused():
        return pickle.loads(data)


def _write(entry: Path, value: object, keep: int) -> None:
    """Keep ``value``; silently nothing when it cannot."""
    from structq.capabilities.manifest_cache import write_entry

    try:
        write_entry(entry, pickle.dumps((_FORMAT, value), protocol=pickle.HIGHEST_PROTOCOL), keep)
    except (OSError, pickle.PicklingError, RecursionError):
        return
