"""The embedded search server: ``url: embedded`` sources need no server of their own.

A search manifest whose ``url`` is ``embedded`` (the demo's default) is served by one
``osmem-server`` process (an in-memory, OpenSearch-compatible search server from the ``embedded``
extra), shared by every embedded source of this Python process:

- started lazily, under a lock, by the first executor that needs it; bound to 127.0.0.1 on
  a free port;
- each index is created from the manifest's field types (:func:`index_mapping`) and filled
  from the JSON-lines file named by its ``documents:`` — once per process, however many
  executors serve the source;
- stopped when the last executor holding it closes, at interpreter exit (``atexit``), and by
  the search server itself if this process dies (it watches its parent's pid and its stdin).

Loading is the only write path in structq, and it writes to this private search server only: the
executors themselves never call anything but search and count.

Document lines are JSON objects; an ``_id`` key, when present, becomes the document id.
Mappings and loading live in ``embedded_index.py``, the server process's output and stopping in
``embedded_process.py`` (both re-exported here); this module runs the search server.

Field types map one to one, except ``scaled_float``: it needs a ``scaling_factor``, which a
manifest cannot declare, and any factor rounds the stored values (a factor of 100 turns 12.345
into 12.35 for every search and aggregation, silently). The embedded search server maps it to
``double``, which keeps the documents' values; a real cluster uses its own mapping.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, SourceUnavailable

from .embedded_process import drain_output, start_server, terminate
from .embedded_index import (
    LoadProgress,
    documents_path,
    existing_documents,
    index_body,
    index_mapping,
    load_index,
    physical_index,
    read_documents,
)

if TYPE_CHECKING:
    from structq.capabilities.model import Index, Manifest

__all__ = [
    "LoadProgress",
    "EmbeddedSearchServer",
    "index_mapping",
    "index_body",
    "physical_index",
    "acquire",
    "release",
    "server_url",
    "loaded_indices",
    "stop",
    "use_daemon",
    "use_in_process",
    "documents_path",
    "existing_documents",
    "read_documents",
    "load_index",
    "drain_output",
    "terminate",
]

_INSTALL_HINT = 'pip install "structq[embedded]"'


# ---------------------------------------------------------------------------------------------
# The search server
# ---------------------------------------------------------------------------------------------


class EmbeddedSearchServer:
    """One osmem-server process and the indices loaded into it.

    The search server stays up for the life of the process once started (``atexit`` stops it), even
    when no executor holds it: every ``Agent`` builds its own executors, and stopping with the
    last one would reload every index for the next. ``acquire`` / ``release`` still count the
    holders, for diagnostics and tests.

    Each declared index is loaded under a physical name derived from its documents file
    (``weekly_reports--3f2a…``), so two manifests that declare the same index over different
    files (two demo folders in one process) never read each other's documents.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._server: Any = None
        self._client: Any = None
        self._holders = 0
        self._loaded: dict[str, Path] = {}

    @property
    def url(self) -> str | None:
        """The search server's URL while it runs."""
        with self._lock:
            return self._server.url if self._running() else None

    @property
    def loaded(self) -> dict[str, Path]:
        """Index name → the documents file loaded into it."""
        with self._lock:
            return dict(self._loaded)

    def acquire(self, manifest: Manifest, progress: LoadProgress | None = None) -> str:
        """Start the search server if needed, load ``manifest``'s indices once, and return its URL.

        Each ``acquire`` must be matched by one ``release``.
        """
        with self._lock:
            self._start()
            self._holders += 1
            try:
                for index in manifest.indices:
                    self._load(manifest, index, progress)
            except BaseException:
                self.release()
                raise
            return self._server.url

    def release(self) -> None:
        """One holder is done. The search server keeps running (see the class docstring)."""
        with self._lock:
            self._holders = max(0, self._holders - 1)

    def stop(self) -> None:
        """Stop the search server now, whoever holds it (interpreter exit, tests)."""
        with self._lock:
            server, self._server = self._server, None
            client, self._client = self._client, None
            self._loaded.clear()
            self._holders = 0
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a client of a stopping search server
                pass
        if server is not None:
            terminate(server.process)

    # -- internals ------------------------------------------------------------------------------

    def _running(self) -> bool:
        return self._server is not None and self._server.process.poll() is None

    def _start(self) -> None:
        if self._running():
            return
        if self._server is not None:  # it died: whatever it held is gone
            self.stop()
        try:
            from osmem_server import OsmemError
            from opensearchpy import OpenSearch
        except ImportError:
            raise ConfigError(
                "the embedded search server is not installed",
                hint=_INSTALL_HINT,
            ) from None
        try:
            server = start_server()
        except (OsmemError, OSError) as exc:
            raise SourceUnavailable(
                f"the embedded search server did not start: {exc}",
                hint=f"reinstall it with {_INSTALL_HINT}",
            ) from None
        self._server = server
        self._client = OpenSearch(hosts=[server.url], timeout=60, max_retries=0)

    def _load(self, manifest: Manifest, index: Index, progress: LoadProgress | None) -> None:
        name = physical_index(manifest, index.name)
        if name in self._loaded:
            return
        load_index(self._client, manifest, index, progress)
        self._loaded[name] = documents_path(manifest, index) or Path()


# ---------------------------------------------------------------------------------------------
# The process-wide search server
# ---------------------------------------------------------------------------------------------

#: The search server of the choice in force (``use_daemon``, ``use_in_process``), made when an
#: embedded source first needs it (``_server``): choosing costs nothing to a command that reads
#: none (the CLI chooses the daemon at every start; ``server_daemon`` loads only when it serves).
_SERVER: Any = None
_make: Callable[[], Any] = EmbeddedSearchServer
_chosen = "in_process"
_choice_lock = threading.Lock()


def _server() -> Any:
    global _SERVER
    with _choice_lock:
        if _SERVER is None:
            _SERVER = _make()
        return _SERVER


def _choose(kind: str, make: Callable[[], Any]) -> None:
    """Serve from ``kind`` from now on; a search server of another kind this process made is stopped."""
    global _SERVER, _make, _chosen
    with _choice_lock:
        if kind == _chosen:
            return
        if _SERVER is not None:
            _SERVER.stop()
        _SERVER, _make, _chosen = None, make, kind


@atexit.register
def _stop_at_exit() -> None:
    if _SERVER is not None:
        _SERVER.stop()


def use_daemon(idle_s: float | None = None, on_start: Callable[[Any], None] | None = None) -> None:
    """Serve embedded sources from the per-user daemon from now on (``server_daemon.py``): the
    CLI's choice, so that one search server outlives one command. The Python API keeps the
    in-process search server unless it calls this. ``on_start`` is called with the daemon's state
    when this process starts it."""

    def daemon() -> Any:
        from structq.executors.search.server_daemon import DEFAULT_IDLE_S, SearchServerDaemon

        return SearchServerDaemon(DEFAULT_IDLE_S if idle_s is None else idle_s, on_start)

    _choose("daemon", daemon)


def use_in_process() -> None:
    """Serve embedded sources from a search server of this process (the default)."""
    _choose("in_process", EmbeddedSearchServer)


def acquire(manifest: Manifest, progress: LoadProgress | None = None) -> str:
    """The search server's URL, with ``manifest``'s indices loaded (see :meth:`EmbeddedSearchServer.acquire`)."""
    return _server().acquire(manifest, progress)


def release() -> None:
    """Give back one :func:`acquire`."""
    server = _SERVER
    if server is not None:  # none made: nothing was acquired
        server.release()


def server_url() -> str | None:
    """The search server's URL while it runs, else None (without making one to ask)."""
    server = _SERVER
    return server.url if server is not None else None


def loaded_indices() -> dict[str, Path]:
    """Index name → documents file, for what the search server has loaded (none made: nothing)."""
    server = _SERVER
    return server.loaded if server is not None else {}


def stop() -> None:
    """Stop this process's use of the search server now (it starts again on the next ``acquire``);
    the daemon itself is stopped by ``structq search-server stop`` or its idle clock."""
    if _SERVER is not None:
        _SERVER.stop()
