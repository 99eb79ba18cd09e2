"""The embedded search engine: ``url: embedded`` sources need no server of their own.

A search manifest whose ``url`` is ``embedded`` (the demo's default) is served by one
``osmem-server`` process (an in-memory, OpenSearch-compatible engine from the ``embedded``
extra), shared by every embedded source of this Python process:

- started lazily, under a lock, by the first executor that needs it; bound to 127.0.0.1 on
  a free port;
- each index is created from the manifest's field types (:func:`index_mapping`) and filled
  from the JSON-lines file named by its ``documents:`` — once per process, however many
  executors serve the source;
- stopped when the last executor holding it closes, at interpreter exit (``atexit``), and by
  the engine itself if this process dies (it watches its parent's pid and its stdin).

Loading is the only write path in structq, and it writes to this private engine only: the
executors themselves never call anything but search and count.

Document lines are JSON objects; an ``_id`` key, when present, becomes the document id.

Field types map one to one, except ``scaled_float``: it needs a ``scaling_factor``, which a
manifest cannot declare, and any factor rounds the stored values (a factor of 100 turns 12.345
into 12.35 for every search and aggregation, silently). The embedded engine maps it to
``double``, which keeps the documents' values; a real cluster uses its own mapping.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, SourceUnavailable

if TYPE_CHECKING:
    from structq.capabilities.model import Index, Manifest, SearchField

__all__ = [
    "EMBEDDED_URL",
    "LoadProgress",
    "EmbeddedEngine",
    "is_embedded",
    "index_mapping",
    "index_body",
    "physical_index",
    "acquire",
    "release",
    "engine_url",
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

EMBEDDED_URL = "embedded"

#: ``progress(index, loaded, total)``: documents of ``index`` loaded so far, out of ``total``.
LoadProgress = Callable[[str, int, int], None]

_INSTALL_HINT = 'pip install "structq[embedded]"'
#: Documents per bulk request. The engine's cost is mostly per request: the demo's 11,830
#: reports load in about 3.6 s at 5,000 a request, 14 s at 2,000.
_BATCH = 5000
_START_TIMEOUT_S = 30.0
_STOP_GRACE_S = 5.0
# A step may pass up to ``max_intermediate_rows`` (≤ 10,000,000) rows on, fetched with
# ``size = rows + 1``; the engine's default window stops ``from + size`` at 10,000.
_MAX_RESULT_WINDOW = 10_000_001


def is_embedded(url: str) -> bool:
    """Whether a manifest ``url`` asks for the embedded engine."""
    return url.strip().lower() == EMBEDDED_URL


# ---------------------------------------------------------------------------------------------
# Mapping
# ---------------------------------------------------------------------------------------------


def _field_mapping(field: SearchField) -> dict[str, Any]:
    if field.type in ("object", "nested"):
        spec: dict[str, Any] = {"type": field.type}
        if field.fields:
            spec["properties"] = _properties(field.fields)
        return spec
    if field.type == "scaled_float":  # no factor to scale by: keep the values (module docstring)
        return {"type": "double"}
    # text uses the default (standard) analyzer, which splits CJK text per character, so a
    # match on 星火 finds 星火项目 as it would on a stock Elasticsearch.
    return {"type": field.type}


def _properties(fields: list[SearchField]) -> dict[str, Any]:
    """Mapping properties; a dotted name (``author.name``) becomes object properties."""
    properties: dict[str, Any] = {}
    for field in fields:
        *parents, leaf = field.name.split(".")
        target = properties
        for part in parents:
            holder = target.setdefault(part, {"type": "object"})
            target = holder.setdefault("properties", {})
        existing = target.get(leaf)
        spec = _field_mapping(field)
        if existing and "properties" in existing and "properties" in spec:
            spec["properties"] = {**existing["properties"], **spec["properties"]}
        target[leaf] = spec
    return properties


def index_mapping(index: Index) -> dict[str, Any]:
    """The OpenSearch mapping for a manifest index.

    ``dynamic: false``: fields the manifest does not declare stay in ``_source`` but are not
    indexed, so nothing undeclared is searchable — the manifest is the whole map.
    """
    return {"dynamic": False, "properties": _properties(index.fields)}


def index_body(index: Index) -> dict[str, Any]:
    """The create-index request for a manifest index: its mapping, and a result window wide
    enough for the largest row cap a manifest allows."""
    return {"settings": {"index": {"max_result_window": _MAX_RESULT_WINDOW}},
            "mappings": index_mapping(index)}


# ---------------------------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------------------------


def documents_path(manifest: Manifest, index: Index) -> Path | None:
    """The absolute documents file of ``index``, or None when it declares none."""
    return manifest.resolve_path(index.documents).resolve() if index.documents else None


def physical_index(manifest: Manifest, name: str) -> str:
    """The engine-side name of declared index ``name``: one per documents file."""
    index = manifest.index(name)
    path = documents_path(manifest, index) if index is not None else None
    if path is None:
        return name
    return f"{name}--{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"


def existing_documents(manifest: Manifest, index: Index) -> Path | None:
    """``documents_path``, which must exist when declared (``SourceUnavailable`` otherwise)."""
    path = documents_path(manifest, index)
    if path is not None and not path.is_file():
        raise SourceUnavailable(
            f"documents for embedded index {index.name!r} of source {manifest.source!r} "
            f"not found: {path}",
            source=manifest.source,
            hint="run `structq demo` to build the demo data, or fix `documents:` in the "
                 "manifest",
        )
    return path


def _count_documents(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def read_documents(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, document) for each non-blank line; a bad line is a ``ConfigError``."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                document = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{path}:{number}: not a JSON document ({exc})",
                                  hint="each line of a documents file is one JSON object") from None
            if not isinstance(document, dict):
                raise ConfigError(f"{path}:{number}: expected a JSON object, got "
                                  f"{type(document).__name__}")
            yield number, document


def _bulk_lines(index: str, batch: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for _, document in batch:
        action: dict[str, Any] = {"_index": index}
        if "_id" in document:
            document = dict(document)
            action["_id"] = str(document.pop("_id"))
        lines.extend(({"index": action}, document))
    return lines


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------


class EmbeddedEngine:
    """One osmem-server process and the indices loaded into it.

    The engine stays up for the life of the process once started (``atexit`` stops it), even
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
        """The engine's URL while it runs."""
        with self._lock:
            return self._server.url if self._running() else None

    @property
    def loaded(self) -> dict[str, Path]:
        """Index name → the documents file loaded into it."""
        with self._lock:
            return dict(self._loaded)

    def acquire(self, manifest: Manifest, progress: LoadProgress | None = None) -> str:
        """Start the engine if needed, load ``manifest``'s indices once, and return its URL.

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
        """One holder is done. The engine keeps running (see the class docstring)."""
        with self._lock:
            self._holders = max(0, self._holders - 1)

    def stop(self) -> None:
        """Stop the engine now, whoever holds it (interpreter exit, tests)."""
        with self._lock:
            server, self._server = self._server, None
            client, self._client = self._client, None
            self._loaded.clear()
            self._holders = 0
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a client of a stopping engine
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
            from osmem_server import OsmemError, OsmemServer
            from opensearchpy import OpenSearch
        except ImportError:
            raise ConfigError(
                "the embedded search engine is not installed",
                hint=_INSTALL_HINT,
            ) from None
        try:
            server = OsmemServer.start(addr="127.0.0.1:0", japanese=False,
                                       startup_timeout=_START_TIMEOUT_S)
        except (OsmemError, OSError) as exc:
            raise SourceUnavailable(
                f"the embedded search engine did not start: {exc}",
                hint=f"reinstall it with {_INSTALL_HINT}",
            ) from None
        drain_output(server.process)
        self._server = server
        self._client = OpenSearch(hosts=[server.url], timeout=60, max_retries=0)

    def _load(self, manifest: Manifest, index: Index, progress: LoadProgress | None) -> None:
        name = physical_index(manifest, index.name)
        if name in self._loaded:
            return
        load_index(self._client, manifest, index, progress)
        self._loaded[name] = documents_path(manifest, index) or Path()


def load_index(client: Any, manifest: Manifest, index: Index,
               progress: LoadProgress | None = None) -> int:
    """Create ``index`` in the engine ``client`` speaks to and fill it from its documents file;
    the number of documents loaded. A failed load leaves no half-filled index behind."""
    path = existing_documents(manifest, index)
    name = physical_index(manifest, index.name)
    client.indices.create(index=name, body=index_body(index))
    try:
        loaded = _bulk_load(client, name, path, progress, label=index.name) if path else 0
        client.indices.refresh(index=name)
    except BaseException:
        client.indices.delete(index=name, ignore_unavailable=True)
        raise
    return loaded


def _bulk_load(client: Any, name: str, path: Path, progress: LoadProgress | None, *,
               label: str) -> int:
    total = _count_documents(path)
    loaded = 0
    if progress:
        progress(label, loaded, total)
    documents = read_documents(path)
    while batch := list(itertools.islice(documents, _BATCH)):
        response = client.bulk(body=_bulk_lines(name, batch))
        if response.get("errors"):
            _raise_rejected(name, path, batch, response)
        loaded += len(batch)
        if progress:
            progress(label, loaded, total)
    return loaded


def _raise_rejected(name: str, path: Path, batch: list[tuple[int, dict[str, Any]]],
                    response: dict[str, Any]) -> None:
    """Name the first document the engine refused, with its line and the engine's reason."""
    for (number, _), item in zip(batch, response.get("items", [])):
        result = next(iter(item.values()), {}) if isinstance(item, dict) else {}
        error = result.get("error")
        if error:
            reason = error.get("reason") if isinstance(error, dict) else str(error)
            raise ConfigError(
                f"{path}:{number}: the embedded engine refused this document for index "
                f"{name!r}: {reason}",
                hint="make the document match the field types declared in the manifest",
            )
    raise ConfigError(f"{path}: the embedded engine refused documents for index {name!r}")


def drain_output(process: subprocess.Popen[str]) -> None:
    """Keep reading the engine's stdout after start-up so a chatty engine never blocks."""
    stream = process.stdout
    if stream is None:
        return
    threading.Thread(target=lambda: all(True for _ in stream), name="osmem-stdout",
                     daemon=True).start()


def terminate(process: subprocess.Popen[str]) -> None:
    """SIGTERM (quiet, immediate: the data is in memory), SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# ---------------------------------------------------------------------------------------------
# The process-wide engine
# ---------------------------------------------------------------------------------------------

_ENGINE: Any = EmbeddedEngine()


@atexit.register
def _stop_at_exit() -> None:
    _ENGINE.stop()


def use_daemon(idle_s: float | None = None, on_start: Callable[[Any], None] | None = None) -> None:
    """Serve embedded sources from the per-user daemon from now on (``engine_daemon.py``): the
    CLI's choice, so that one engine outlives one command. The Python API keeps the
    in-process engine unless it calls this. ``on_start`` is called with the daemon's state
    when this process starts it."""
    global _ENGINE
    from structq.executors.engine_daemon import DEFAULT_IDLE_S, DaemonEngine

    if not isinstance(_ENGINE, DaemonEngine):
        _ENGINE.stop()
        _ENGINE = DaemonEngine(DEFAULT_IDLE_S if idle_s is None else idle_s, on_start)


def use_in_process() -> None:
    """Serve embedded sources from an engine of this process (the default)."""
    global _ENGINE
    if not isinstance(_ENGINE, EmbeddedEngine):
        _ENGINE.stop()
        _ENGINE = EmbeddedEngine()


def acquire(manifest: Manifest, progress: LoadProgress | None = None) -> str:
    """The engine's URL, with ``manifest``'s indices loaded (see :meth:`EmbeddedEngine.acquire`)."""
    return _ENGINE.acquire(manifest, progress)


def release() -> None:
    """Give back one :func:`acquire`."""
    _ENGINE.release()


def engine_url() -> str | None:
    """The engine's URL while it runs, else None."""
    return _ENGINE.url


def loaded_indices() -> dict[str, Path]:
    """Index name → documents file, for what the engine has loaded."""
    return _ENGINE.loaded


def stop() -> None:
    """Stop this process's use of the engine now (it starts again on the next ``acquire``);
    the daemon itself is stopped by ``structq engine stop`` or its idle clock."""
    _ENGINE.stop()
