"""Request limits: a token bucket per caller, and a cap on request bodies.

The rate limiter is per process: with ``--workers N`` each worker grants the configured rate,
so the whole server allows up to N times it (README says so). The body cap is an ASGI
middleware so that it holds for every route, the MCP endpoint included, before any JSON is
parsed; a body larger than the cap is never read past the cap.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import RequestRejected

__all__ = ["RateLimiter", "BodyLimit"]


class RateLimiter:
    """``rate`` requests per minute per key, with bursts of up to ``burst``."""

    def __init__(self, per_minute: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_minute / 60.0
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key → (tokens, when)
        self._lock = threading.Lock()

    def take(self, key: str) -> None:
        """Spend one request of ``key``'s allowance, or raise a 429 saying when to retry."""
        now = self._clock()
        with self._lock:
            tokens, when = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - when) * self.per_second)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return
            self._buckets[key] = (tokens, now)
        wait = max(1, math.ceil((1.0 - tokens) / self.per_second))
        raise RequestRejected(429, "rate_limited", f"too many requests: this token may make "
                              f"{self.per_second * 60:g} per minute (bursts of {self.burst})",
                              hint=f"retry after {wait} s", headers={"Retry-After": str(wait)})


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


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
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        payload = json.dumps({"error": {
            "code": "body_too_large",
            "message": f"the request body is larger than {self.max_bytes} bytes",
            "hint": "send a shorter question or plan (limits.max_body_bytes in server.yaml)",
        }}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
