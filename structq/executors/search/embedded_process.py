"""The embedded search server's child process: keeping its output drained and stopping it.

Both ways of running the server need this: in this process (``embedded_server.py``) and as the
per-user daemon (``server_daemon.py``). It lives here, below both, so that the daemon does not
import ``embedded_server.py``, which imports the daemon when the CLI switches to it.
"""

from __future__ import annotations

import subprocess
import threading

__all__ = ["drain_output", "terminate"]

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
