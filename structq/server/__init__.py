"""``structq serve``: the HTTP API (with Server-Sent Events), the web page and the MCP server,
one process around one warm ``Agent``.

    config.py   server.yaml: token hashes → user, fixed row-filter variables, allowed sources
    service.py  ask / plan / run / sources for a principal, on the shared agent
    observe.py  the engine that enforces a principal's sources and streams plan/step events
    app.py      the ASGI application (FastAPI): routes, auth, errors, limits, the page
    mcp.py      the MCP tools (stdio and streamable HTTP)
    static/     the web page: plain HTML, CSS and JavaScript, no build step, no CDN

Importing this package loads FastAPI only through ``create_app``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .service import Service

__all__ = ["create_app", "Service"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "Service":
        from .service import Service

        return Service
    raise AttributeError(f"module 'structq.server' has no attribute {name!r}")
