"""The ``structq`` command line. Each command lives in its own module; heavy libraries
(LangChain, database drivers, search clients) are imported inside the commands, never here,
so ``structq --help`` stays instant.

The modules that declare commands do not postpone their annotations (no ``from __future__
import annotations``): typer reads every command's parameters at each start, whichever command
runs, and postponed annotations would be compiled and evaluated from their text every time
(about half of building the command line).
"""

import typer

from .ask import ask, plan
from .cache import cache_app
from .chat import chat
from .check import check
from .sandbox import sandbox
from .sync import sync
from .demo import demo
from .search_server import configure_daemon, search_server_app
from .eval import eval_
from .grants import grants
from .feedback import feedback_app
from .init import init
from .describe import describe
from .run import run
from .serve import mcp, serve

app = typer.Typer(
    name="structq",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _print_version(value: bool) -> None:
    if value:
        from structq import __version__

        typer.echo(f"structq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version),
    no_daemon: bool = typer.Option(
        False, "--no-daemon",
        help="Start the embedded search server inside this command instead of sharing the "
             "per-user background search server (also: STRUCTQ_SEARCH_DAEMON=0)."),
) -> None:
    """Answer questions about your company's data with checked, read-only query plans.

    Example:  structq demo            (the whole flow on a bundled demo company, offline)

    Example:  structq ask "去年第三季度在华东区销售额最高的产品是什么？" -m capabilities/
    """
    configure_daemon(no_daemon)


app.command()(demo)
app.command()(ask)
app.command()(plan)
app.command()(run)
app.command()(chat)
app.command()(init)
app.command()(describe)
app.command()(check)
app.command()(grants)
app.command()(sandbox)
app.command()(sync)
app.command("eval")(eval_)
app.command()(serve)
app.command()(mcp)
app.add_typer(cache_app, name="cache")
app.add_typer(search_server_app, name="search-server")
app.add_typer(feedback_app, name="feedback")


def main() -> None:
    """Console-script entry point: whatever escapes a command is still one line, not a traceback."""
    import sys

    from .common import errors_to_exit, plain_when_piped

    plain_when_piped(app)
    try:
        with errors_to_exit(verbose=bool({"-v", "--verbose"} & set(sys.argv[1:]))):
            app()
    except typer.Exit as exc:
        sys.exit(exc.exit_code)


__all__ = ["app", "main"]
