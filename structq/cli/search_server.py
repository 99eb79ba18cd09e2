"""``structq search-server``: the embedded search server that commands share in the background.

The first command that reads an ``embedded`` index starts one search server per user and later
commands reuse it (see ``structq/executors/search/server_daemon.py``); these commands show what it
holds and stop it. ``structq --no-daemon …`` (or ``STRUCTQ_SEARCH_DAEMON=0``) starts a search server
inside one command instead, as before.
"""

import os
from datetime import datetime

import typer

from .common import JsonOpt, console, errors_to_exit, print_json

search_server_app = typer.Typer(
    help="The embedded search server that commands share (started by the first command that "
         "needs it, stopped after STRUCTQ_SEARCH_DAEMON_IDLE of disuse, default 15m).\n\n"
         "Example:  structq search-server status",
    no_args_is_help=True,
)


def daemon_wanted(no_daemon: bool) -> bool:
    """Whether embedded sources come from the per-user daemon: yes, unless ``--no-daemon`` or
    ``STRUCTQ_SEARCH_DAEMON=0`` says otherwise."""
    return not no_daemon and os.environ.get("STRUCTQ_SEARCH_DAEMON", "1").lower() not in ("0", "off", "false", "no")


def configure_daemon(no_daemon: bool) -> None:
    """Called by the root command: serve embedded sources from the per-user daemon when wanted."""
    if not daemon_wanted(no_daemon):
        return
    from structq.executors.search import embedded_server

    idle = os.environ.get("STRUCTQ_SEARCH_DAEMON_IDLE")
    with errors_to_exit(False):
        if idle:  # the daemon's module loads when it serves, or to read a setting it owns
            from structq.executors.search.server_daemon import parse_idle

            idle_s = parse_idle(idle)
        else:
            idle_s = None
        embedded_server.use_daemon(idle_s, on_start=lambda state: _say_started(state.url, state.idle_s))


def _say_started(url: str, idle_s: float) -> None:
    """One line on stderr: a process that stays behind in the background is never a surprise."""
    import sys

    sys.stderr.write(f"structq: started the embedded search server in the background at {url}; it "
                     f"stops after {_duration(idle_s)} unused (structq search-server status | stop)\n")


@search_server_app.command("status")
def status(json_out: JsonOpt = False) -> None:
    """Whether the search server runs, what it has loaded, its memory and how long it has been idle.

    Example:  structq search-server status --json
    """
    from structq.executors.search.server_daemon import status as daemon_status

    with errors_to_exit(False):
        report = daemon_status()
    if json_out:
        print_json(report)
        return
    out = console()
    if not report["running"]:
        out.print(f"not running (state in {report['state_dir']})")
        return
    memory = report["memory_bytes"]
    out.print(f"running at {report['url']} (pid {report['server_pid']}), "
              f"up {_duration(report['uptime_s'])}, idle {_duration(report['idle_s'])} "
              f"of {_duration(report['idle_stop_after_s'])}"
              + (f", {memory / 2**20:,.0f} MiB" if memory else "")
              + f", {len(report['holders'])} command(s) using it", soft_wrap=True)
    for name, index in sorted(report["indices"].items()):
        loaded = datetime.fromtimestamp(index["loaded_at"]).strftime("%Y-%m-%d %H:%M:%S")
        out.print(f"  {name}: {index['documents_loaded']:,} documents from {index['documents']} "
                  f"(loaded {loaded})", soft_wrap=True)


@search_server_app.command("stop")
def stop(json_out: JsonOpt = False) -> None:
    """Stop the search server now; the next command that needs it starts it again.

    Example:  structq search-server stop
    """
    from structq.executors.search.server_daemon import stop_daemon

    with errors_to_exit(False):
        stopped = stop_daemon()
    if json_out:
        print_json({"stopped": stopped})
    else:
        console().print("stopped" if stopped else "not running")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
