"""Around every HTTP request: its id, its access line and its request metrics.

An ASGI middleware rather than a FastAPI one: it sees the end of a streamed answer (the
duration of an SSE request is the whole stream, not the time to its first byte) and the MCP
endpoint's requests alike. The route is the matched route's template (``/v1/ask``), known
only once the router has run; the user and the conversation are filled in by the request's
own handling (``logs.RequestInfo``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .logs import ACCESS, end_request, new_request

if TYPE_CHECKING:
    from .metrics import Metrics

__all__ = ["AccessLog", "REQUEST_ID_HEADER"]

REQUEST_ID_HEADER = "x-request-id"


class AccessLog:
    def __init__(self, app: Any, metrics: "Metrics") -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        info, token = new_request(headers.get(REQUEST_ID_HEADER))
        started = time.perf_counter()
        status = [500]

        async def sent(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", []),
                                                  (REQUEST_ID_HEADER.encode(), info.request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            seconds = time.perf_counter() - started
            route = _route(scope)
            self.metrics.request(route, status[0], seconds)
            ACCESS.info("%s %s %s", scope.get("method", ""), route, status[0], extra={
                "method": scope.get("method"), "route": route, "status": status[0],
                "duration_ms": round(seconds * 1000, 1), "user": info.user, "conversation": info.conversation,
                "request_id": info.request_id})
            end_request(token)


def _route(scope: dict[str, Any]) -> str:
    """The matched route's template; ``other`` for a path no route serves (no label per path)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else "other"
