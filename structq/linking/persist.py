"""The linking index kept on disk between commands, by the catalogue's fingerprint.

Why: every CLI command is a new process, and building the index is most of linking's cost on a
large catalogue (BM25 postings over every table and column). The index depends only on the
manifests, so it is kept in the user's cache folder (``STRUCTQ_CACHE_DIR``; ``STRUCTQ_CACHE=0``
turns it off, like the plan and manifest caches) under the SHA-256 of the catalogue's
fingerprint, this format and the Python version: a changed manifest is a new entry.

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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .index import LinkingIndex

__all__ = ["cached", "entry_path", "folder", "KEEP"]

KEEP = 8
#: Raise when ``LinkingIndex`` or what it holds changes shape: old entries become misses.
_FORMAT = "structq-linking-index-2"


def folder() -> Path:
    """Where the entries are kept (whether or not the cache is on)."""
    from structq.config import user_cache_dir

    return user_cache_dir() / "linking"


def entries() -> int:
    """How many catalogues' indexes are kept."""
    return len(list(folder().glob("*.pickle")))


def clear() -> int:
    """Remove every kept index (``structq cache clear``); how many were removed."""
    removed = 0
    for entry in folder().glob("*.pickle"):
        entry.unlink(missing_ok=True)
        removed += 1
    return removed


def entry_path(fingerprint: str) -> Path | None:
    """The file of the index of ``fingerprint``, or None when the cache is off."""
    from structq.config import cache_enabled

    if not cache_enabled(os.environ):
        return None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    digest = hashlib.sha256(f"{_FORMAT}\0{version}\0{fingerprint}".encode("utf-8", "surrogatepass"))
    return folder() / f"{digest.hexdigest()}.pickle"


def cached(fingerprint: str, build: Callable[[], "LinkingIndex"]) -> "LinkingIndex":
    """The index kept for ``fingerprint``, else ``build()`` (kept for next time)."""
    entry = entry_path(fingerprint)
    if entry is None:
        return build()
    kept = _read(entry)
    if kept is not None:
        return kept
    index = build()
    _write(entry, index)
    return index


def _read(entry: Path) -> "LinkingIndex | None":
    from .index import LinkingIndex

    try:
        kept = pickle.loads(entry.read_bytes())
    except Exception:  # noqa: BLE001 - a damaged entry can raise anything unpickling; it is a miss
        return None
    if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == _FORMAT and isinstance(kept[1], LinkingIndex)):
        return None
    return kept[1]


def _write(entry: Path, index: "LinkingIndex") -> None:
    """Keep ``index``; silently nothing when it cannot."""
    from structq.capabilities.manifest_cache import write_entry

    try:
        write_entry(entry, pickle.dumps((_FORMAT, index), protocol=pickle.HIGHEST_PROTOCOL), KEEP)
    except (OSError, pickle.PicklingError, RecursionError):
        return
