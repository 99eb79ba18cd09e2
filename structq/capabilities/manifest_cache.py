"""The plain data of large manifests, kept between commands by the hash of their text.

Why: composing YAML is most of loading a large manifest (a 1,000-table manifest: ~0.16 s of
libyaml composing, tag resolution and building the data on a quiet core, ~0.4 s when the
machine is busy, against ~0.01-0.02 s to read back the same data with ``marshal``), and
every CLI command loads the manifests again although they rarely change.

What is kept is exactly what the PyYAML composer built from that text, before ``${VAR}``
expansion (with the paths to expand, so a changed environment still applies), keyed by the
SHA-256 of the text, this format, the keys that expand and PyYAML's version: a changed byte
is a miss. Positions
are not kept; an error composes them from the text (``loader._DeferredPositions``).

Only texts of at least ``MIN_CHARS`` characters are kept (below that, composing costs
little); at most ``KEEP`` entries, the least recently used removed first (a hit marks its entry
used), so that a catalogue of hundreds of manifests is kept whole and one that was not read
for a while makes room. Like the plan cache, it lives in
the user's cache folder (``STRUCTQ_CACHE_DIR``; ``STRUCTQ_CACHE=0`` turns both off) and is
trusted as the user's own files are. Every failure to read or write it is a miss: the
manifest is composed as if there were no cache.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .yamlnodes import EXPANDED_KEYS

__all__ = ["get", "put", "entries", "clear", "folder", "write_entry", "mark_used", "MIN_CHARS", "KEEP"]

#: Composing 8 KiB of YAML takes about 2 ms; reading its data back, a tenth of that. A 100-table
#: manifest written by ``structq init`` is about 40 KiB.
MIN_CHARS = 8 * 1024
#: Enough for a 10,000-table catalogue in manifests of ten tables or more.
KEEP = 2048
_FORMAT = "structq-manifest-data-1"


def folder() -> Path:
    """Where the entries are kept (whether or not the cache is on)."""
    from structq.config import user_cache_dir

    return user_cache_dir() / "manifests"


def _folder() -> Path | None:
    from structq.config import cache_enabled

    return folder() if cache_enabled(os.environ) else None


def _entry(text: str) -> Path | None:
    folder = _folder() if len(text) >= MIN_CHARS else None
    if folder is None:
        return None
    expanded = ",".join(sorted(EXPANDED_KEYS))
    digest = hashlib.sha256(f"{_FORMAT}\0{yaml.__version__}\0{expanded}\0{text}".encode("utf-8", "surrogatepass"))
    return folder / f"{digest.hexdigest()}.marshal"


def get(text: str) -> tuple[Any, list[tuple[str | int, ...]]] | None:
    """The data and expansion paths kept for ``text``, or None."""
    entry = _entry(text)
    if entry is None:
        return None
    try:
        kept = marshal.loads(entry.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not (isinstance(kept, tuple) and len(kept) == 3 and kept[0] == _FORMAT and isinstance(kept[2], list)):
        return None
    mark_used(entry)
    return kept[1], kept[2]


def mark_used(entry: Path) -> None:
    """Make ``entry`` the most recently used of its folder (``write_entry`` removes the least
    recently used first); nothing when the folder is read-only."""
    try:
        os.utime(entry)
    except OSError:
        pass


def put(text: str, data: Any, expansions: list[tuple[str | int, ...]]) -> None:
    """Keep ``data`` (not yet expanded) for ``text``; silently nothing when it cannot."""
    entry = _entry(text)
    if entry is None:
        return
    try:
        payload = marshal.dumps((_FORMAT, data, expansions))
    except ValueError:  # a date, a set or binary data: not marshal's; compose next time
        return
    try:
        write_entry(entry, payload, KEEP)
    except OSError:
        return


def write_entry(entry: Path, payload: bytes, keep: int) -> None:
    """Write a cache file atomically; when more than ``keep`` files of its kind are there, remove
    the least recently used (by modification time: ``mark_used`` sets it on a hit) down to
    three quarters of ``keep``.

    Shared with the linking index cache. Raises ``OSError``; callers treat it as nothing kept.
    """
    entry.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=entry.parent, suffix=".tmp", delete=False) as out:
        out.write(payload)
    try:
        os.replace(out.name, entry)  # atomic: a concurrent reader sees all of it or nothing
    finally:
        Path(out.name).unlink(missing_ok=True)
    with os.scandir(entry.parent) as listing:  # names only: the ages are read when some must go
        names = [item.path for item in listing if item.name.endswith(entry.suffix)]
    if len(names) <= keep:
        return
    # Down to three quarters, so that the ages are read and sorted once per many writes, not
    # at every write once the folder is full (2,048 files: ~7 ms, more than composing a file).
    for old in sorted(names, key=_age_key, reverse=True)[max(1, keep * 3 // 4):]:
        Path(old).unlink(missing_ok=True)


def _age_key(path: str) -> float:
    """When ``path`` was last written or used; one removed meanwhile counts as the oldest."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def entries() -> int:
    """How many manifests' data are kept."""
    return len(list(folder().glob("*.marshal")))


def clear() -> int:
    """Remove every kept entry (``structq cache clear``); how many were removed."""
    removed = 0
    for entry in folder().glob("*.marshal"):
        entry.unlink(missing_ok=True)
        removed += 1
    return removed
