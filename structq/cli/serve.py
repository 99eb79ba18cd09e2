"""``structq serve`` (HTTP API, web page, MCP over HTTP) and ``structq mcp`` (MCP over stdio)."""

from pathlib import Path
from typing import Annotated

import typer

from .common import errors_to_exit, load_capabilities, parse_vars, resolve_manifests, shared_options

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="server.yaml: API tokens (as hashes) → user, fixed variables, sources; limits.",
                 envvar="STRUCTQ_SERVER_CONFIG"),
]


def _server_extra() -> None:
    """A clear line when the ``server`` extra is missing."""
    from structq.errors import ConfigError

    try:
        import fastapi  # noqa: F401
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"structq serve needs packages that are not installed ({exc.name})",
                          hint='pip install "structq[server]"') from None


@shared_options
def serve(
    ctx: typer.Context,
    *, manifests,
    host: Annotated[str, typer.Option("--host", help="Address to listen on; anything but loopback needs --config.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=1, max=65535)] = 8000,
    config: ConfigOpt = None,
    workers: Annotated[int, typer.Option("--workers", help="Worker processes (each keeps its own warm agent; they share "
                                                         "the store and the background search server).", min=1)] = 1,
    llm, var, no_cache,
    new_token: Annotated[str | None, typer.Option("--new-token", metavar="USER",
                                                  help="Print a new API token for USER and its server.yaml entry, then exit.")] = None,
    log_format: Annotated[str | None, typer.Option("--log-format", metavar="text|json", envvar="STRUCTQ_LOG_FORMAT",
                                                   help="Logs on stderr: text for a person (default), json for a "
                                                        "log system (one object per line).")] = None,
    verbose,
) -> None:
    """Serve the HTTP API (/v1, /openapi.json), the web page (/) and MCP (/mcp) from one warm process.

    Without --config only this machine may connect (loopback) and --var sets the variables.
    With --config every request needs a token; each token's variables are fixed in the file,
    requests can never set them.

    Example:  structq serve -m capabilities/ --port 8000

    Example:  structq serve --new-token alice >> tokens.txt
    """
    if new_token is not None:
        _print_new_token(new_token, manifests)
        return
    with errors_to_exit(verbose):
        from structq.server.run import ServeOptions
        from structq.server.run import serve as run_server

        from .search_server import daemon_wanted

        # every worker uses the one background search server, unless `structq --no-daemon serve`
        daemon = daemon_wanted(bool(ctx.find_root().params.get("no_daemon")))
        options = ServeOptions(manifests=str(resolve_manifests(manifests)), config=str(config) if config else None,
                               llm=llm, vars=parse_vars(var), no_cache=no_cache, host=host, port=port, workers=workers,
                               daemon=daemon, log_format=log_format)
        options.check_host()  # before anything slow: a refusal should be instant
        _server_extra()
        run_server(options)


def _print_new_token(user: str, manifests: Path) -> None:
    """The token and its server.yaml entry, with every row-filter variable the manifests need
    as an empty placeholder: ``serve`` refuses to start until each has a value."""
    from structq.errors import StructqError
    from structq.server.config import hash_token, new_token, required_variables

    try:
        needed = required_variables(load_capabilities(manifests))
    except StructqError:
        needed = {}
    token = new_token()
    typer.echo(f"token for {user} (give it to them; it is not stored anywhere):\n  {token}\n")
    typer.echo("server.yaml entry (under tokens:):")
    typer.echo(f"  - sha256: {hash_token(token)}\n    user: {user}")
    by_variable: dict[str, list[str]] = {}
    for source, names in needed.items():
        for name in names:
            by_variable.setdefault(name, []).append(source)
    if by_variable:
        typer.echo("    vars:             # fill in each value; structq serve refuses to start while one is empty")
        for name, sources in sorted(by_variable.items()):
            typer.echo(f"      {name}:         # row filter of {', '.join(sources)}")
    else:
        typer.echo("    vars: {}          # the manifests' row filters need no variables")
    typer.echo("    # sources: [hr]  # omit for every source")


@shared_options
def mcp(*, manifests, llm, var, no_cache, verbose) -> None:
    """Serve MCP over stdio for an assistant (Claude Desktop, Cursor, any MCP client).

    Tools: ask, plan, run_plan, list_sources, describe_source. Row-filter variables come from
    --var on this command line, never from the calling model.

    Example:  structq mcp -m capabilities/ --var tenant_id=7
    """
    with errors_to_exit(verbose):
        _server_extra()
        from structq.server.logs import configure_logging, log_format_from_env
        from structq.server.mcp import build_mcp
        from structq.server.run import ServeOptions, make_service

        configure_logging(log_format_from_env())  # stderr; stdout carries the protocol

        service = make_service(ServeOptions(manifests=str(resolve_manifests(manifests)), llm=llm,
                                            vars=parse_vars(var), no_cache=no_cache, command="mcp"))
        try:
            build_mcp(service, http=False, principal=service.config.local).run("stdio")
        finally:
            service.close()
