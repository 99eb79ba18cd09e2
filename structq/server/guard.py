"""The API's front door: who is calling, then what they sent, before any route reads a byte.

An ASGI middleware on ``/v1/…`` that answers, in this order, before FastAPI parses the body:

1. **401** without a known token (so a malformed body from a stranger learns nothing of the
   API's validation);
2. **415** for a request body that is not ``application/json`` (a form post is no plan);
3. **400** for a body that is not strict JSON (``NaN``), holds text with no UTF-8 form or
   numbers no database or search server holds alike (``inputs.py``).

The body, once read, is handed on unchanged. Requests without a body (``GET``, ``HEAD``) go
through after step 1. The rate limit stays with the route (``app.caller``): it needs the
principal, which step 1 has checked but does not pass on.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from .config import bearer_token
from .errors import RequestRejected, error_body
from .inputs import strict_json
from .limits import replaying

if TYPE_CHECKING:
    from .config import ServerConfig

__all__ = ["RequestGuard", "send_error", "send_json", "GUARDED_PREFIX"]

#: The paths the guard stands in front of: the API (the page, health and MCP have their own rules).
GUARDED_PREFIX = "/v1/"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: Bodies up to this size are read on the event loop (well under a millisecond); larger ones,
#: up to ``max_body_bytes``, on a worker thread, so that no body delays ``/healthz``.
_READ_ON_LOOP = 16 * 1024


class RequestGuard:
    """ASGI middleware: authentication, content type and strict JSON on the API (module docstring)."""

    def __init__(self, app: Any, config: "ServerConfig") -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith(GUARDED_PREFIX):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        try:
            self._authenticate(headers.get("authorization"))
            if scope["method"] not in _BODY_METHODS:
                await self.app(scope, receive, send)
                return
            _content_type(headers.get("content-type"))
            body = await _read(receive)
            if len(body) > _READ_ON_LOOP:
                await asyncio.to_thread(strict_json, body)
            else:
                strict_json(body)
        except RequestRejected as exc:
            await send_error(send, exc)
            return
        await self.app(scope, replaying(body, receive), send)

    def _authenticate(self, header: str | None) -> None:
        if self.config.authenticate(bearer_token(header)) is None:
            said = "an unknown API token" if bearer_token(header) else "no API token"
            raise RequestRejected(401, "unauthorized", f"the request carries {said}",
                                  hint="send the header Authorization: Bearer <token> with a token from server.yaml")


def _content_type(header: str | None) -> None:
    media = (header or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise RequestRejected(415, "unsupported_media_type",
                              f"the body is {media or 'of no declared type'}, not application/json",
                              hint="send the body as JSON with the header Content-Type: application/json")


async def _read(receive: Any) -> bytes:
    """The whole request body (``BodyLimit``, outside this middleware, has capped its size)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: what arrived is all there is
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def send_error(send: Any, exc: RequestRejected) -> None:
    """``exc`` as the JSON error response, from ASGI middleware (no route, no FastAPI)."""
    headers = dict(exc.headers)
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    await send_json(send, exc.status, error_body(exc), headers)


async def send_json(send: Any, status: int, content: Any, headers: dict[str, str] | None = None) -> None:
    """``content`` as a complete JSON response with ``status``, from ASGI middleware."""
    payload = json.dumps(content, ensure_ascii=False).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
