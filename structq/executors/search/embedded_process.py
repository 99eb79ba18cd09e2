"""The embedded search server's child process: keeping its output drained and stopping it.

Both ways of running the server need this: in this process (``embedded_server.py``) and as the
per-user daemon (``server_daemon.py``). It lives here, below both, so that the daemon does not
import ``embedded_server.py``, which imports the daemon when the CLI switches to it.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any

__all__ = ["START_TIMEOUT_S", "drain_output", "start_server", "terminate"]

#: How long the search server may take to answer its first request.
START_TIMEOUT_S = 30.0


def start_server() -> Any:
    """A started ``osmem_server.OsmemServer`` on a free loopback port, under the memory bound
    (``config.search_memory_bound``), its output drained: the one way both the in-command
    server and the background daemon start it. ``osmem_server.OsmemError`` or ``OSError``
    when it does not start; ``ImportError`` when it is not installed."""
    from osmem_server import OsmemServer

    from structq.config import search_memory_bound

    with search_memory_bound():
        server = OsmemServer.start(addr="127.0.0.1:0", japanese=False, startup_timeout=START_TIMEOUT_S)
    drain_output(server.process)
    return server

#: How long a server told to stop may take before it is killed.
_STOP_GRACE_S = 5.0


def drain_output(process: subprocess.Popen[str]) -> None:
    """Keep reading the search server's stdout after start-up so a chatty search server never blocks."""
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
