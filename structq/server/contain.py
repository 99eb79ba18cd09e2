"""The last catch: an exception no handler turned into a response ends here, as a 500.

Starlette's outermost middleware answers an unhandled exception with the application's
handler and then raises it again, so that the server logs it: uvicorn then writes the whole
traceback (a ``RecursionError`` has a thousand frames: hundreds of kilobytes, seconds of the
event loop's time per request). ``Contained`` sits inside that middleware and keeps the
exception there: the 500 JSON error is sent (or, when the response had started, the response
ends) and the log gets ``error_body``'s short plain-text traceback, once.
"""

from __future__ import annotations

from typing import Any

from .errors import error_body, error_status
from .guard import send_json

__all__ = ["Contained"]


class Contained:
    """ASGI middleware: every exception below it becomes a logged 500, never re-raised."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:  # noqa: BLE001 - the point of this middleware
            body = error_body(exc)  # logs it, briefly
            if not started:
                await send_json(send, error_status(exc)[0], body)
