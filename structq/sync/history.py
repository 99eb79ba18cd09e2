"""Safe manifest writes: every old version kept, no half-written file, ever.

* ``atomic_write``: the new bytes go to a temporary file in the same folder, are fsynced, and
  ``os.replace`` swaps them in (atomic on POSIX), then the folder is fsynced. A crash or a kill
  at any moment leaves the old file or the new one, never a mix.
* Before a replace, the current bytes are saved as
  ``<manifest folder>/.history/<source>/<UTC timestamp>.yaml``.
* ``rollback`` restores a saved version byte for byte, saving the current one first (so a
  rollback can itself be rolled back).
* Writers take an exclusive lock per manifest, so overlapping cron runs cannot interleave, and
  refuse to replace a file that changed since it was read (someone was editing it).
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from structq.errors import StructqError

__all__ = [
    "HISTORY_DIR",
    "HistoryError",
    "Version",
    "atomic_write",
    "history_dir",
    "list_versions",
    "locked",
    "replace_manifest",
    "rollback",
    "save_version",
]

HISTORY_DIR = ".history"
_TMP_SUFFIX = ".sync-tmp"


class HistoryError(StructqError):
    """No version to restore, an unknown version, or a manifest that changed under us."""


@dataclass(frozen=True)
class Version:
    """One saved manifest version."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.stem


def history_dir(manifest_path: Path, source: str) -> Path:
    return manifest_path.parent / HISTORY_DIR / source


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte (``os.write`` may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old bytes or the new, never half."""
    folder = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TMP_SUFFIX, dir=folder)
    try:
        try:
            os.fchmod(fd, path.stat().st_mode & 0o7777)
        except FileNotFoundError:
            pass
        _write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _timestamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def save_version(manifest_path: Path, source: str, data: bytes) -> Version:
    """Keep ``data`` (the manifest as it is now) under ``.history/<source>/<timestamp>.yaml``."""
    folder = history_dir(manifest_path, source)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = _timestamp()
    target = folder / f"{stamp}.yaml"
    n = 1
    while target.exists():
        target = folder / f"{stamp}-{n}.yaml"
        n += 1
    atomic_write(target, data)
    return Version(target)


def list_versions(manifest_path: Path, source: str) -> list[Version]:
    """Saved versions, oldest first (names sort by time)."""
    folder = history_dir(manifest_path, source)
    if not folder.is_dir():
        return []
    return [Version(p) for p in sorted(folder.glob("*.yaml"))]


@contextmanager
def locked(manifest_path: Path, source: str) -> Iterator[None]:
    """Exclusive lock for writing one manifest; waits for another writer to finish."""
    folder = history_dir(manifest_path, source)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            _remove_stale_temporaries(manifest_path.parent, f".{manifest_path.name}.")
            _remove_stale_temporaries(folder, ".")
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _remove_stale_temporaries(folder: Path, prefix: str) -> None:
    """Temporary files of writers that were killed; safe to delete while we hold the lock."""
    for stale in folder.glob(f"{prefix}*{_TMP_SUFFIX}"):
        try:
            stale.unlink()
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise


def replace_manifest(manifest_path: Path, source: str, new: bytes, *, expected: bytes | None = None) -> Version | None:
    """Save the current version to history, then atomically write ``new``.

    ``expected`` is what the caller read and merged into; if the file no longer holds it,
    somebody edited it meanwhile and nothing is written. Returns the saved version, or None when
    ``new`` equals the current bytes (no write, no history entry).
    """
    with locked(manifest_path, source):
        current = manifest_path.read_bytes()
        if expected is not None and current != expected:
            raise HistoryError(f"{manifest_path} changed while sync was running; nothing was written",
                               hint="run structq sync again")
        if current == new:
            return None
        version = save_version(manifest_path, source, current)
        atomic_write(manifest_path, new)
        return version


def _pick(versions: list[Version], wanted: str | None) -> Version:
    if wanted is None:
        return versions[-1]
    name = Path(wanted).name.removesuffix(".yaml")
    for v in versions:
        if v.name == name:
            return v
    matches = [v for v in versions if v.name.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(v.name for v in versions[-5:])
    raise HistoryError(f"no single saved version matches {wanted!r}", hint=f"latest versions: {shown}")


def rollback(manifest_path: Path, source: str, version: str | None = None) -> tuple[Version, Version | None]:
    """Restore the latest (or the named) saved version, byte for byte.

    The current file is saved to history first. Returns (restored version, saved current),
    the second None when the file already held the restored bytes.
    """
    with locked(manifest_path, source):
        versions = list_versions(manifest_path, source)
        if not versions:
            raise HistoryError(f"no saved versions of source {source!r} under {history_dir(manifest_path, source)}",
                               hint="versions are saved by 'structq sync --write' and by rollbacks")
        target = _pick(versions, version)
        data = target.path.read_bytes()
        current = manifest_path.read_bytes() if manifest_path.exists() else None
        if current == data:
            return target, None
        saved = save_version(manifest_path, source, current) if current is not None else None
        atomic_write(manifest_path, data)
        return target, saved
