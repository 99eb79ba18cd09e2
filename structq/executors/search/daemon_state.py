"""The embedded search server's daemon, as seen on disk: its state file, lock, leases and idle clock.

The daemon (``server_daemon.py``) and every command that uses it meet in one folder,
``<state dir>/search-server`` (``STRUCTQ_STATE_DIR`` moves it):

- ``daemon.json`` — who runs it (the supervisor's and the search server's pids, the URL) and what is
  loaded: per server-side index, the documents file, its size and modification time, and a
  hash of the mapping it was built with. A later command reloads an index only when one of
  those changed;
- ``daemon.lock`` — an exclusive ``flock`` held while starting the daemon or loading an index,
  so two commands started at once start one search server and load each index once;
- ``leases/<pid>`` — one file per process that holds the search server; the daemon never stops while
  a live process holds a lease (a ``structq chat`` left open for an hour keeps it);
- ``last_used`` — touched whenever a process takes or gives back the search server; the daemon stops
  when no lease is live and this is older than its idle period.

Everything here is plain files and pids, so it works without the daemon running, and a pid or
port left behind by a crash is recognised as stale (the pid is gone, or is not ours).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from structq.config import user_state_dir

__all__ = [
    "DAEMON_MODULE",
    "DaemonState",
    "IndexRecord",
    "daemon_dir",
    "exclusive",
    "read_state",
    "write_state",
    "remove_state",
    "add_lease",
    "drop_lease",
    "live_leases",
    "touch",
    "idle_seconds",
    "pid_alive",
    "is_daemon_process",
]

#: The module the supervisor runs as (``python -m …``); also how a pid is recognised as ours.
DAEMON_MODULE = "structq.executors.search.server_daemon"


@dataclass
class IndexRecord:
    """What a server-side index was loaded from."""

    documents: str
    size: int
    mtime_ns: int
    mapping_hash: str
    loaded_at: float
    count: int


@dataclass
class DaemonState:
    """The contents of ``daemon.json``."""

    supervisor_pid: int
    server_pid: int
    url: str
    started_at: float
    idle_s: float
    indices: dict[str, IndexRecord] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DaemonState:
        indices = {name: IndexRecord(**record) for name, record in data.get("indices", {}).items()}
        return cls(int(data["supervisor_pid"]), int(data["server_pid"]), str(data["url"]),
                   float(data["started_at"]), float(data["idle_s"]), indices)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def daemon_dir() -> Path:
    """The folder the daemon and its users share (created on demand)."""
    folder = user_state_dir() / "search-server"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def exclusive(folder: Path, wait_s: float | None = None) -> Iterator[bool]:
    """Hold the folder's lock: one starter, one loader at a time, across processes.

    Yields whether the lock is held: always True without ``wait_s``; with it, False when
    another process held the lock for that long (the supervisor's clean-up must not wait for a
    command that is itself waiting for the supervisor to exit).
    """
    with open(folder / "daemon.lock", "a+") as handle:
        held = _lock(handle, wait_s)
        try:
            yield held
        finally:
            if held:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _lock(handle: Any, wait_s: float | None) -> bool:
    if wait_s is None:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def read_state(folder: Path) -> DaemonState | None:
    """The state file's contents, or None when there is none (or it is unreadable: stale)."""
    try:
        return DaemonState.from_json(json.loads((folder / "daemon.json").read_text("utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(folder: Path, state: DaemonState) -> None:
    """Replace the state file atomically (a reader never sees half of it)."""
    temporary = folder / f"daemon.json.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(state.to_json(), ensure_ascii=False, indent=1), "utf-8")
    os.replace(temporary, folder / "daemon.json")


def remove_state(folder: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (folder / "daemon.json").unlink()


def _leases(folder: Path) -> Path:
    path = folder / "leases"
    path.mkdir(exist_ok=True)
    return path


def add_lease(folder: Path, pid: int | None = None) -> None:
    """Mark process ``pid`` (default: this one) as holding the search server."""
    (_leases(folder) / str(pid or os.getpid())).touch()
    touch(folder)


def drop_lease(folder: Path, pid: int | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        (_leases(folder) / str(pid or os.getpid())).unlink()
    touch(folder)


def live_leases(folder: Path) -> list[int]:
    """Pids that hold the search server and still run; leases of dead processes are removed."""
    alive = []
    for lease in _leases(folder).iterdir():
        if lease.name.isdigit() and pid_alive(int(lease.name)):
            alive.append(int(lease.name))
        else:
            with contextlib.suppress(FileNotFoundError):
                lease.unlink()
    return alive


def touch(folder: Path) -> None:
    """Reset the idle clock."""
    (folder / "last_used").touch()


def idle_seconds(folder: Path) -> float:
    """Seconds since the search server was last taken or given back."""
    try:
        return max(0.0, time.time() - (folder / "last_used").stat().st_mtime)
    except FileNotFoundError:
        return 0.0


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    return status.rsplit(")", 1)[-1].split()[0] != "Z"


def is_daemon_process(pid: int) -> bool:
    """Whether ``pid`` runs our supervisor — a recycled pid must never be signalled."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return DAEMON_MODULE.encode() in command
