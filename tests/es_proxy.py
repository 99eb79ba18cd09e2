"""A loopback proxy that lets the official Elasticsearch client talk to osmem-server.

elasticsearch-py 8/9 sends ``application/vnd.elasticsearch+json; compatible-with=N``, which
OpenSearch search servers refuse (406), and refuses any answer without the response header
``X-Elastic-Product: Elasticsearch``. The proxy rewrites the first and adds the second, so the
``elasticsearch`` executor runs the same behavioural tests as the ``opensearch`` one against a
real search server.

It also misbehaves on demand, for error-handling tests: answer with a 5xx, drop the connection
without answering, or wait before forwarding. It records every request it sees (method and
path), so tests can check which endpoints were called and how often.

    with EsProxy(osmem_url) as proxy:
        client = Elasticsearch(proxy.url)
        proxy.fail_next(503, count=5)
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self
from urllib.parse import urlsplit

__all__ = ["EsProxy"]

_COMPATIBLE = re.compile(r"application/vnd\.elasticsearch\+(json|x-ndjson)\s*;\s*compatible-with=\d+")
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                         "proxy-connection", "te", "trailer", "upgrade"})
# Written by the proxy itself; a second copy from upstream would be joined into "a, b".
_OWN_HEADERS = frozenset({"date", "server", "x-elastic-product"})


@dataclass
class _Fault:
    kind: Literal["status", "drop", "delay"]
    remaining: int
    status: int = 503
    seconds: float = 0.0


class EsProxy:
    """A threaded HTTP proxy on 127.0.0.1 in front of one upstream search server."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.requests: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="es-proxy", daemon=True)
        self._thread.start()

    # -- faults -----------------------------------------------------------------------------

    def fail_next(self, status: int = 503, count: int = 1) -> None:
        """Answer the next ``count`` requests with ``status`` and an error body as a search server writes one."""
        self._add(_Fault("status", count, status=status))

    def drop_next(self, count: int = 1) -> None:
        """Read the next ``count`` requests, then close the connection without answering."""
        self._add(_Fault("drop", count))

    def delay_next(self, seconds: float, count: int = 1) -> None:
        """Wait ``seconds`` before forwarding the next ``count`` requests."""
        self._add(_Fault("delay", count, seconds=seconds))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _add(self, fault: _Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self) -> _Fault | None:
        with self._lock:
            while self._faults and self._faults[0].remaining <= 0:
                self._faults.pop(0)
            if not self._faults:
                return None
            fault = self._faults[0]
            fault.remaining -= 1
            return fault

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the handler ------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass  # quiet test output

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                with proxy._lock:
                    proxy.requests.append((self.command, self.path))
                fault = proxy._take_fault()
                if fault is not None and fault.kind == "drop":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fault is not None and fault.kind == "status":
                    error = {"error": {"type": "injected_failure",
                                       "reason": f"injected HTTP {fault.status}"},
                             "status": fault.status}
                    self._answer(fault.status, {"Content-Type": "application/json"},
                                 json.dumps(error).encode())
                    return
                if fault is not None and fault.kind == "delay":
                    time.sleep(fault.seconds)
                headers = {
                    name: _COMPATIBLE.sub(lambda m: f"application/{m.group(1)}", value)
                    for name, value in self.headers.items()
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "host"
                }
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port,
                                                      timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                    reply = {k: v for k, v in response.getheaders()
                             if k.lower() not in _HOP_BY_HOP | _OWN_HEADERS}
                    status = response.status
                except OSError:
                    # The search server is gone: pass the silence on, as the search server itself would.
                    self.close_connection = True
                    return
                finally:
                    upstream.close()
                self._answer(status, reply, payload)

            def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("X-Elastic-Product", "Elasticsearch")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a timeout test)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        return Handler
