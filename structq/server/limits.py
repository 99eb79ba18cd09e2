"""Request limits: a token bucket per caller, and a cap on request bodies.

The rate limiter keeps its buckets in the shared store (``store.py``), not in the process:
with ``--workers N``, or servers on several hosts sharing a PostgreSQL store, a token gets the
configured rate in all, not N times it. Spending a request is one atomic statement (an upsert
that refills and takes a token only when one is there), so concurrent workers cannot both
spend the last token. It costs one small write per request; the clock is each server's own
(hosts sharing a store should keep time, as any cluster does). The body cap is an ASGI
middleware so that it holds for every route, the MCP endpoint included, before any JSON is
parsed; a body larger than the cap is never read past the cap.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .errors import RequestRejected

if TYPE_CHECKING:
    from .store import Store

__all__ = ["RateLimiter", "BodyLimit", "replaying"]


class RateLimiter:
    """``per_minute`` requests per minute per key, with bursts of up to ``burst``, counted in
    ``store`` for every worker that shares it."""

    def __init__(self, per_minute: float, burst: int, store: "Store", *,
                 clock: Callable[[], float] = time.time) -> None:
        self.per_second = per_minute / 60.0
        self.burst = burst
        self.store = store
        self._clock = clock

    def take(self, key: str) -> None:
        """Spend one request of ``key``'s allowance, or raise a 429 saying when to retry."""
        left = self.store.take_request(key, per_second=self.per_second, burst=self.burst, now=self._clock())
        if left is None:
            return
        wait = max(1, math.ceil((1.0 - left) / self.per_second))
        raise RequestRejected(429, "rate_limited", f"too many requests: this token may make "
                              f"{self.per_second * 60:g} per minute (bursts of {self.burst})",
                              hint=f"retry after {wait} s", headers={"Retry-After": str(wait)})


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the application ``body`` (read already, whole), then whatever
    ``receive`` has next (a disconnect)."""
    replayed = False

    async def replay() -> dict[str, Any]:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` with a 413 JSON error."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

    async def _refuse(self, send: Send) -> None:
        payload = json.dumps({"error": {
            "code": "body_too_large",
            "message": f"the request body is larger than {self.max_bytes} bytes",
            "hint": "send a shorter question or plan (limits.max_body_bytes in server.yaml)",
        }}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
