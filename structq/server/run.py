"""Starting the service: the agent and config from the command line (or, in each worker of
``--workers N``, from the environment the parent process wrote), then uvicorn.

Every check that can fail (manifests, server.yaml, a public address without tokens) runs in
the parent before uvicorn starts, so mistakes are one clear line, not a worker traceback.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError

from .config import ServerConfig, is_loopback_host
from .logs import configure_logging, log_format_from_env

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .service import Service

__all__ = ["ServeOptions", "make_service", "app_from_env", "serve"]

_ENV = "STRUCTQ_SERVE_OPTIONS"


@dataclass
class ServeOptions:
    """What ``structq serve`` and ``structq mcp`` were told."""

    manifests: str
    config: str | None = None
    llm: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    no_cache: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    #: Embedded search sources come from the per-user background search server (``server_daemon.py``),
    #: shared by every worker, rather than one search server (and one copy of the documents) per worker.
    daemon: bool = False
    #: The command that starts the service (``serve`` or ``mcp``), named in start-up errors.
    command: str = "serve"
    #: ``text`` or ``json`` (``logs.py``); None: ``STRUCTQ_LOG_FORMAT``, else text.
    log_format: str | None = None

    def load_config(self, sources: list[str]) -> ServerConfig:
        if self.config is None:
            return ServerConfig.local_only(self.vars)
        if self.vars:
            raise ConfigError("--var cannot be combined with --config",
                              hint="with a config file each token carries its own variables (tokens[].vars)")
        return ServerConfig.from_file(self.config, sources=sources)

    def check_host(self) -> None:
        if self.config is None and not is_loopback_host(self.host):
            raise ConfigError(
                f"refusing to listen on {self.host} without --config: anyone who can reach the port could read the data",
                hint="bind 127.0.0.1 (the default), or write a server.yaml with API tokens and pass --config "
                     "(docs/serving.md)")


def make_service(options: ServeOptions) -> "Service":
    """The warm service: manifests loaded, agent created, server.yaml checked."""
    from structq.capabilities import CapabilitySet
    from structq.config import Settings

    from .service import Service
    from .store import Store, StorePlanCache, resolve_store_url

    from .config import check_variables

    capabilities = CapabilitySet.from_path(options.manifests)
    config = options.load_config(capabilities.names)
    check_variables(config, capabilities, command=options.command)
    settings = Settings.from_env(llm=options.llm, cache_enabled=False if options.no_cache else None)
    store = Store(resolve_store_url(config.store))
    cache = StorePlanCache(store) if settings.cache_enabled else None
    return Service(Service.agent_for(capabilities, settings=settings, cache=cache), config, store)  # type: ignore[arg-type]


def app_from_env() -> "FastAPI":
    """uvicorn's factory in each worker process: the options the parent process checked."""
    from .app import create_app

    options = ServeOptions(**json.loads(os.environ[_ENV]))
    configure_logging(log_format_from_env(options.log_format))
    if options.daemon:  # a fresh process: the parent's choice of search server is not inherited
        from structq.executors.search import embedded_server
        from structq.executors.search.server_daemon import parse_idle

        idle = os.environ.get("STRUCTQ_SEARCH_DAEMON_IDLE")
        embedded_server.use_daemon(parse_idle(idle) if idle else None)
    return create_app(make_service(options))


def serve(options: ServeOptions) -> None:
    """Check everything, then run uvicorn until interrupted."""
    import uvicorn

    options.check_host()
    log_format = log_format_from_env(options.log_format)
    service = make_service(options)  # fails here, once, on a bad manifest or config
    configure_logging(log_format)
    where = f"http://{options.host}:{options.port}"
    users = "no token needed (loopback only)" if service.config.open else f"{len(service.config.tokens)} token(s)"
    print(f"structq serve: {where}  (page /, API /v1, OpenAPI /openapi.json, MCP /mcp; {users})", flush=True)
    # uvicorn keeps the loggers configured above (log_config=None); its own access log is off: ours has the user
    common = dict(host=options.host, port=options.port, log_level="warning", log_config=None, access_log=False,
                  proxy_headers=True)
    if options.workers <= 1:
        from .app import create_app

        uvicorn.run(create_app(service), **common)  # type: ignore[arg-type]
        return
    service.close()
    os.environ[_ENV] = json.dumps({**asdict(options), "manifests": str(Path(options.manifests).resolve())})
    uvicorn.run("structq.server.run:app_from_env", factory=True, workers=options.workers, **common)  # type: ignore[arg-type]
