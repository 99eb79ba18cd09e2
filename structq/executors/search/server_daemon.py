"""The embedded search server as a per-user daemon, so it outlives one command.

Without it every ``structq`` command that reads an ``embedded`` index starts its own search server and
re-indexes the documents (the demo's 12,854 reports: seconds and most of a gigabyte, every
time). With it, the first such command starts one search server in the background and later commands
reuse it:

- **start**: under the state folder's lock, the first command spawns ``python -m`` this module
  (the *supervisor*) in a session of its own; the supervisor starts osmem-server on a free
  loopback port, writes ``daemon.json`` and then only watches. Two commands started at once
  take the lock in turn: the second finds the first's search server;
- **load**: the command that needs an index loads it (under the lock) and records the documents
  file's size, modification time and the mapping's hash; a later command reloads the index only
  when one of them changed;
- **use**: a command holds a lease for as long as it uses the search server; the supervisor never
  stops while a live process holds one;
- **stop**: the supervisor stops the search server when no lease is live and nothing took or gave
  back the search server for its idle period (``STRUCTQ_SEARCH_DAEMON_IDLE``, default 15 minutes), when
  ``structq search-server stop`` signals it, or when the search server died; osmem-server itself stops when
  its supervisor dies;
- **stale**: a state file whose supervisor is gone, is not ours (a recycled pid) or whose port
  no longer answers is replaced by a fresh search server.

The in-process search server of ``embedded_server.py`` stays the default for the Python API (an application
owns its process); the CLI chooses the daemon unless ``--no-daemon`` or
``STRUCTQ_SEARCH_DAEMON=0`` says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from structq.config import search_memory
from structq.errors import ConfigError, SourceUnavailable
from structq.executors.search import daemon_state, embedded_index, embedded_process
from structq.executors.search.daemon_state import DaemonState, IndexRecord

if TYPE_CHECKING:
    from structq.capabilities.model import Index, Manifest

__all__ = ["DEFAULT_IDLE_S", "SearchServerDaemon", "parse_idle", "status", "stop_daemon"]

DEFAULT_IDLE_S = 15 * 60.0
_SPAWN_TIMEOUT_S = 45.0
_STOP_TIMEOUT_S = 10.0
_LOG_TAIL = 20


def parse_idle(text: str) -> float:
    """``900``, ``90s``, ``15m`` or ``1h`` → seconds (``STRUCTQ_SEARCH_DAEMON_IDLE``)."""
    value = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(value[-1:], 0)
    number = value[:-1] if scale else value
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ConfigError(f"STRUCTQ_SEARCH_DAEMON_IDLE={text!r} is not a duration",
                          hint="write seconds (900) or a number with s, m or h (15m)")
    return seconds


# ---------------------------------------------------------------------------------------------
# The client side: what a command uses instead of the in-process search server
# ---------------------------------------------------------------------------------------------


class SearchServerDaemon:
    """The per-user daemon behind the interface of :class:`embedded.EmbeddedSearchServer`."""

    def __init__(self, idle_s: float = DEFAULT_IDLE_S,
                 on_start: Callable[[DaemonState], None] | None = None) -> None:
        """``on_start`` is told when this process started the search server (the CLI says so once:
        a process left running in the background should never be a surprise)."""
        self._idle_s = idle_s
        self._on_start = on_start
        self._lock = threading.RLock()
        self._holders = 0

    @property
    def url(self) -> str | None:
        """The daemon's URL while its supervisor runs."""
        state = daemon_state.read_state(daemon_state.daemon_dir())
        return state.url if state is not None and _supervisor_alive(state) else None

    @property
    def loaded(self) -> dict[str, Path]:
        state = daemon_state.read_state(daemon_state.daemon_dir())
        if state is None:
            return {}
        return {name: Path(record.documents) for name, record in state.indices.items()}

    def acquire(self, manifest: Manifest, progress: embedded_index.LoadProgress | None = None) -> str:
        """Start the daemon if needed, load what changed of ``manifest``'s indices, hold a lease."""
        folder = daemon_state.daemon_dir()
        with self._lock, daemon_state.exclusive(folder):
            state, started = _ensure_running(folder, self._idle_s)
            if started and self._on_start is not None:
                self._on_start(state)
            client = _client(state.url)
            try:
                for index in manifest.indices:
                    if _refresh(client, state, manifest, index, progress):
                        daemon_state.write_state(folder, state)
            finally:
                client.close()
            daemon_state.add_lease(folder)
            self._holders += 1
            return state.url

    def release(self) -> None:
        """One holder is done; the last one gives the lease back (the daemon keeps running)."""
        with self._lock:
            self._holders = max(0, self._holders - 1)
            if self._holders == 0:
                daemon_state.drop_lease(daemon_state.daemon_dir())

    def stop(self) -> None:
        """This process lets go (interpreter exit); the daemon is stopped by its idle clock or
        ``structq search-server stop``, never by one of its users."""
        with self._lock:
            if self._holders:
                self._holders = 0
                daemon_state.drop_lease(daemon_state.daemon_dir())


def _client(url: str) -> Any:
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=120, max_retries=0)


def _mapping_hash(index: Index) -> str:
    body = json.dumps(embedded_index.index_body(index), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _refresh(client: Any, state: DaemonState, manifest: Manifest, index: Index,
             progress: embedded_index.LoadProgress | None) -> bool:
    """Load ``index`` unless the search server already holds it from the same file and mapping;
    whether it loaded."""
    name = embedded_index.physical_index(manifest, index.name)
    path = embedded_index.documents_path(manifest, index)
    stat = path.stat() if path is not None and path.is_file() else None
    wanted = (str(path or ""), stat.st_size if stat else 0, stat.st_mtime_ns if stat else 0,
              _mapping_hash(index))
    record = state.indices.get(name)
    if record is not None and (record.documents, record.size, record.mtime_ns,
                               record.mapping_hash) == wanted:
        return False
    if record is not None:
        client.indices.delete(index=name, ignore_unavailable=True)
        del state.indices[name]
    count = embedded_index.load_index(client, manifest, index, progress)
    state.indices[name] = IndexRecord(wanted[0], wanted[1], wanted[2], wanted[3], time.time(), count)
    return True


def _ensure_running(folder: Path, idle_s: float) -> tuple[DaemonState, bool]:
    """The running daemon's state, after replacing a stale one or starting one, and whether
    it was started now; the caller holds the folder's lock."""
    state = daemon_state.read_state(folder)
    if state is not None and _healthy(state):
        return state, False
    if state is not None:
        _kill(state)
        daemon_state.remove_state(folder)
    return _spawn(folder, idle_s), True


def _supervisor_alive(state: DaemonState) -> bool:
    return daemon_state.pid_alive(state.supervisor_pid) and daemon_state.is_daemon_process(
        state.supervisor_pid)


def _healthy(state: DaemonState) -> bool:
    if not (_supervisor_alive(state) and daemon_state.pid_alive(state.server_pid)):
        return False
    address = urlsplit(state.url)
    try:
        with socket.create_connection((address.hostname or "127.0.0.1", address.port or 80),
                                      timeout=2):
            return True
    except OSError:
        return False


def _kill(state: DaemonState) -> None:
    """Stop what a stale state file names — only processes that are really ours."""
    if _supervisor_alive(state):
        _signal_and_wait(state.supervisor_pid)
    if daemon_state.pid_alive(state.server_pid) and _is_server(state.server_pid):
        _signal_and_wait(state.server_pid)


def _is_server(pid: int) -> bool:
    try:
        return b"osmem" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _signal_and_wait(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while daemon_state.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if daemon_state.pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _spawn(folder: Path, idle_s: float) -> DaemonState:
    """Start the supervisor in a session of its own and wait for its state file."""
    try:
        import osmem_server  # noqa: F401 - only to say what to install, before spawning
    except ImportError:
        raise ConfigError("the embedded search server is not installed",
                          hint='pip install "structq[embedded]"') from None
    search_memory()  # a wrong STRUCTQ_SEARCH_MEMORY is this command's ConfigError, not a daemon that fails
    log = folder / "daemon.log"
    with open(log, "ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", daemon_state.DAEMON_MODULE, "--state-dir", str(folder),
             "--idle", str(idle_s)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + _SPAWN_TIMEOUT_S
    while time.monotonic() < deadline:
        state = daemon_state.read_state(folder)
        if state is not None and state.supervisor_pid == process.pid:
            return state
        if process.poll() is not None:
            break
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    raise SourceUnavailable(
        "the embedded search server did not start"
        + _log_tail(log),
        hint="run the command again with --no-daemon to start it in-process, or reinstall "
             'it with pip install "structq[embedded]"',
    )


def _log_tail(log: Path) -> str:
    try:
        lines = log.read_text("utf-8", errors="replace").splitlines()[-_LOG_TAIL:]
    except OSError:
        return ""
    return (": " + " | ".join(line.strip() for line in lines if line.strip())) if lines else ""


# ---------------------------------------------------------------------------------------------
# status and stop, for `structq search-server`
# ---------------------------------------------------------------------------------------------


def status() -> dict[str, Any]:
    """What the daemon runs and holds, for ``structq search-server status``."""
    folder = daemon_state.daemon_dir()
    state = daemon_state.read_state(folder)
    if state is None or not _supervisor_alive(state):
        return {"running": False, "state_dir": str(folder)}
    return {
        "running": True,
        "state_dir": str(folder),
        "url": state.url,
        "supervisor_pid": state.supervisor_pid,
        "server_pid": state.server_pid,
        "uptime_s": round(time.time() - state.started_at, 1),
        "idle_s": round(daemon_state.idle_seconds(folder), 1),
        "idle_stop_after_s": state.idle_s,
        "memory_bytes": _resident_bytes(state.server_pid),
        "holders": daemon_state.live_leases(folder),
        "indices": {name: {"documents": record.documents, "documents_loaded": record.count,
                           "loaded_at": record.loaded_at}
                    for name, record in state.indices.items()},
    }


def _resident_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def stop_daemon() -> bool:
    """Stop the daemon now, whoever holds it; whether one was running."""
    folder = daemon_state.daemon_dir()
    with daemon_state.exclusive(folder):
        state = daemon_state.read_state(folder)
        if state is None:
            return False
        daemon_state.remove_state(folder)  # from here on, a new command starts a new search server
    running = _supervisor_alive(state)
    _kill(state)
    return running


# ---------------------------------------------------------------------------------------------
# The supervisor process
# ---------------------------------------------------------------------------------------------


def serve(folder: Path, idle_s: float) -> int:
    """Run the search server until it is idle, told to stop, or dies; clean the state up after."""
    stopping = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopping.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    server = embedded_process.start_server()
    try:
        daemon_state.write_state(folder, DaemonState(os.getpid(), server.process.pid, server.url,
                                                     time.time(), idle_s))
        daemon_state.touch(folder)
        poll_s = min(5.0, max(0.1, idle_s / 5))
        while not stopping.wait(poll_s):
            if server.process.poll() is not None or _disowned(folder) or _idle(folder, idle_s):
                break
    finally:
        embedded_process.terminate(server.process)
        with daemon_state.exclusive(folder, wait_s=1.0) as held:
            state = daemon_state.read_state(folder)
            if held and state is not None and state.supervisor_pid == os.getpid():
                daemon_state.remove_state(folder)
    return 0


def _disowned(folder: Path) -> bool:
    """The state file is gone or names another supervisor (``search-server stop``, a replaced stale
    state, or the whole state folder deleted): nobody can find this search server any more."""
    state = daemon_state.read_state(folder)
    return state is None or state.supervisor_pid != os.getpid()


def _idle(folder: Path, idle_s: float) -> bool:
    """No live holder and no use for ``idle_s``; decided under the lock so that no command
    takes the search server between the decision and the stop."""
    if daemon_state.idle_seconds(folder) < idle_s:
        return False
    with daemon_state.exclusive(folder):
        if daemon_state.live_leases(folder) or daemon_state.idle_seconds(folder) < idle_s:
            return False
        daemon_state.remove_state(folder)
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {daemon_state.DAEMON_MODULE}",
                                     description="The embedded search server's supervisor (started "
                                                 "by structq; not meant to be run by hand).")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--idle", type=float, default=DEFAULT_IDLE_S)
    arguments = parser.parse_args(argv)
    return serve(arguments.state_dir, arguments.idle)


if __name__ == "__main__":
    sys.exit(main())
