"""HTTP for API sources: one httpx client per source, with the source's limits.

- The host and base path come from the manifest's ``url`` only; a step gives a path below it
  (REST) or nothing (GraphQL). Redirects are not followed by httpx: one to the same scheme,
  host and port, below the base path, is followed (at most three); any other is an error.
- ``headers`` are expanded from the environment at each request (``${TOKEN}``), so a
  credential is never part of the loaded manifest, a prompt, a log or the audit log.
- Timeouts (``timeout_s`` for each request), bounded retries of 429 and 5xx honouring
  ``Retry-After`` (at most ``timeout_s`` of waiting), the response's size read as a stream and
  cut at ``max_response_bytes``, and a per-source request rate (``requests_per_second``)
  shared by every thread.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from structq.capabilities.model import Manifest
from structq.capabilities.yamlnodes import interpolate
from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable

from .urls import redact_url

__all__ = ["RETRIES", "ApiClient"]

#: Retries of a request answered 429 or 5xx (then the error stands).
RETRIES = 2
_RETRIED = frozenset({429, 500, 502, 503, 504})
_MAX_REDIRECTS = 3


class _Rate:
    """At most ``per_second`` requests start each second, across threads."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second
        self.next = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
        if start > now:
            time.sleep(start - now)


class ApiClient:
    """Requests to one API source (thread-safe: httpx's client is)."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.source = manifest.source
        self.base = manifest.url.rstrip("/")
        base = urlsplit(self.base)
        if base.scheme not in ("http", "https") or not base.netloc:
            raise ConfigError(f"source {manifest.source!r}: url must be an http(s) URL, not {redact_url(manifest.url)!r}")
        self._origin = (base.scheme, base.netloc)
        self._base_path = base.path.rstrip("/") + "/"
        self.limits = manifest.limits
        self._rate = _Rate(self.limits.requests_per_second)
        self._client = httpx.Client(timeout=httpx.Timeout(self.limits.timeout_s), follow_redirects=False)

    def close(self) -> None:
        self._client.close()

    def _headers(self) -> dict[str, str]:
        def missing(name: str) -> ConfigError:
            return ConfigError(f"source {self.source!r}: a header needs the environment variable {name}, which is not set",
                               hint=f"export {name}=… where structq runs")

        headers = {"Accept": "application/json"}
        headers.update({key: interpolate(value, os.environ, missing) for key, value in self.manifest.headers.items()})
        return headers

    def url(self, path: str) -> str:
        """The base URL joined with a path the sandbox built (never a host from a plan)."""
        return self.base + "/" + path.lstrip("/") if path else self.base

    def reach(self) -> int:
        """The HTTP status the base URL answers (any answer: the API is up)."""
        return self._send("GET", self.url(""), None, None)[0]

    def _allowed(self, url: str) -> bool:
        parts = urlsplit(url)
        return (parts.scheme, parts.netloc) == self._origin and (parts.path.rstrip("/") + "/").startswith(self._base_path)

    def request(self, method: str, url: str, *, params: Any = None, json_body: Any = None) -> Any:
        """The JSON of one response; raises ``ExecutionError`` (``SourceUnavailable``,
        ``QueryTimeout``) with what the source said."""
        for hop in range(_MAX_REDIRECTS + 1):
            status, headers, content = self._send(method, url, params, json_body)
            if status in (301, 302, 303, 307, 308):
                target = urljoin(url, headers.get("location", ""))
                if not self._allowed(target) or hop == _MAX_REDIRECTS:
                    raise ExecutionError(f"source {self.source!r} redirected to {redact_url(target)!r}, outside its url",
                                         source=self.source, hint="set the manifest's url to where the API answers")
                url, params = target, None
                continue
            break
        if status in (401, 403):
            raise SourceUnavailable(f"source {self.source!r} refused the credentials (HTTP {status})", source=self.source,
                                    hint="check the headers: in the manifest and the variables they read")
        if status >= 400:
            raise ExecutionError(f"source {self.source!r} answered HTTP {status}", source=self.source,
                                 cause=content[:500].decode("utf-8", "replace"))
        try:
            return json.loads(content)
        except ValueError:
            raise ExecutionError(f"source {self.source!r} did not answer JSON", source=self.source,
                                 cause=content[:200].decode("utf-8", "replace")) from None

    def _send(self, method: str, url: str, params: Any, json_body: Any) -> tuple[int, httpx.Headers, bytes]:
        waited = 0.0
        for attempt in range(RETRIES + 1):
            self._rate.wait()
            try:
                with self._client.stream(method, url, params=params, json=json_body, headers=self._headers()) as response:
                    if response.status_code in _RETRIED and attempt < RETRIES:
                        delay = _retry_after(response.headers.get("retry-after"), attempt)
                        if waited + delay <= self.limits.timeout_s:
                            waited += delay
                            time.sleep(delay)
                            continue
                    return response.status_code, response.headers, self._read(response)
            except httpx.TimeoutException:
                raise QueryTimeout(f"source {self.source!r} did not answer within {self.limits.timeout_s:g} s",
                                   source=self.source) from None
            except httpx.TransportError as exc:
                raise SourceUnavailable(f"source {self.source!r} is unreachable ({type(exc).__name__})",
                                        source=self.source, hint="check the manifest's url and that the API is up") from None
        raise AssertionError("unreachable")  # the last attempt always returns

    def _read(self, response: httpx.Response) -> bytes:
        cap = self.limits.max_response_bytes
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap:
                raise ExecutionError(f"source {self.source!r} answered more than max_response_bytes ({cap})",
                                     source=self.source, hint="ask for fewer rows or fields, or raise limits.max_response_bytes")
            chunks.append(chunk)
        return b"".join(chunks)


def _retry_after(value: str | None, attempt: int) -> float:
    """Seconds to wait before retrying: the server's ``Retry-After`` (seconds), else a backoff."""
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    return 0.2 * (2 ** attempt)
