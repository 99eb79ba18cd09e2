"""Search sources: checked query-DSL requests on Elasticsearch, OpenSearch and the embedded
search server.

- ``executor.py``        ``SearchExecutor`` (one implementation; ``ElasticsearchExecutor`` and
  ``OpenSearchExecutor`` only name their client flavour): the request sent, errors, rows;
- ``clients.py``         the two client libraries behind one ``ClientFlavour``;
- ``rows/``              search responses → rows (hits, counts, aggregation buckets);
- ``embedded_server.py`` ``EmbeddedSearchServer``: the ``osmem-server`` process that serves
  ``url: embedded`` sources, and the process-wide choice between it and the daemon;
- ``embedded_index.py``  what the embedded search server holds: mappings, documents loaded;
- ``embedded_process.py`` the server's child process: its output drained, its stop;
- ``server_daemon.py``   ``SearchServerDaemon``: one embedded search server per user, shared by
  the commands that need it (``structq search-server``);
- ``daemon_state.py``    the daemon as seen on disk: state file, lock, leases, idle clock.

The executors import lazily (``__getattr__``), so the daemon's supervisor and the CLI can use
the embedded search server's modules without importing the executor and its client code.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ElasticsearchExecutor", "OpenSearchExecutor", "SearchExecutor"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("structq.executors.search.executor"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
