"""What a caller of the service is told: nothing about the infrastructure, hints it can act on.

The structq errors are written for the command line (``--llm``, ``vars={…}``). A caller of
the service cannot pass either: an API caller's variables come from its token, a stdio MCP
server's from the command line that started it. ``hint_for`` rewrites the few hints that
name a way to act into the words of the *surface* the caller uses:

==========  ==========================================================================
api         the HTTP API (``/v1``)
page        the web page (it says so with the ``X-Structq-Client: page`` header)
mcp-http    MCP over HTTP (``/mcp``: the token sets the variables)
mcp-stdio   MCP over stdio (``structq mcp``: its ``--var`` sets the variables)
==========  ==========================================================================

``scrub`` takes database URLs, file paths and IP addresses out of any text a caller sees
(the full text stays in the server log).
"""

from __future__ import annotations

import re
from typing import Literal

from structq.errors import ConfigError, SandboxViolation

__all__ = ["Surface", "SURFACES", "scrub", "hint_for", "surface_of_header"]

Surface = Literal["api", "page", "mcp-http", "mcp-stdio"]
SURFACES: tuple[Surface, ...] = ("api", "page", "mcp-http", "mcp-stdio")

#: The header by which the page names itself (its errors then speak of the page).
CLIENT_HEADER = "x-structq-client"

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
#: An absolute path of two segments or more (``/var/lib/x.db``), not a route of this service.
_PATH = re.compile(r"(?<![\w.:/~-])~?/(?!v1/|mcp\b|static/)(?:[^\s/'\"<>(),]+/)+[^\s/'\"<>(),]*")
_IP = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b")
_VARIABLE = re.compile(r"variable '([A-Za-z_]\w*)'")


def scrub(text: str | None) -> str | None:
    """``text`` without URLs, absolute paths and IP addresses."""
    if not text:
        return text
    return _IP.sub("<address>", _PATH.sub("<path>", _URL.sub("<url>", text)))


def surface_of_header(value: str | None) -> Surface:
    return "page" if (value or "").strip().lower() == "page" else "api"


def hint_for(exc: BaseException, surface: Surface, *, open_server: bool = False) -> str | None:
    """The hint for ``exc`` in the words of ``surface``; None keeps the error's own."""
    if isinstance(exc, SandboxViolation) and exc.code == "missing_variable":
        found = _VARIABLE.search(exc.message)
        name = found.group(1) if found else "…"
        if surface == "mcp-stdio":
            return f"start structq mcp with --var {name}=VALUE (the server's command line sets the variables)"
        if open_server:
            return f"start structq serve with --var {name}=VALUE (without a config the command line sets the variables)"
        return (f"your API token carries no value for {name!r}: ask the administrator to add it to this token's "
                "vars in server.yaml (requests cannot set variables)")
    if isinstance(exc, ConfigError) and exc.message == "no language model is configured":
        suggestions: list[str] = getattr(exc, "suggestions", [])
        such = (" such as " + "; ".join(f"“{s}”" for s in suggestions) + " ({…} is a value you choose)") if suggestions else ""
        where = {"api": "the questions of GET /v1/examples", "page": "the example questions on this page",
                 "mcp-http": "the questions the examples give", "mcp-stdio": "the questions the examples give"}[surface]
        return (f"this server has no language model, so it answers {where} and questions of their shape{such}; "
                "its administrator can configure a model")
    return None
