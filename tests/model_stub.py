"""An OpenAI-compatible chat server on loopback that replays a scripted sequence, for tests
that go through a real HTTP client (``ChatOpenAI``, the CLI's ``--llm openai:…``) without
reaching any network. (``openai_stub.py`` answers by rules, for a ``structq serve`` process.)

Each request to ``/v1/chat/completions`` takes the next scripted action: a text reply, an HTTP
error status, or ``HANG`` (accept the request and never answer, until the server stops).
``requests`` keeps every request body, so tests can read what the model was sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG = "hang"


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        stub = self.server.stub
        with stub.lock:
            stub.requests.append(json.loads(body or b"{}"))
            action = stub.actions.pop(0) if stub.actions else 500
        if action == HANG:
            stub.stopped.wait()
            return
        if isinstance(action, int):
            self._send(action, {"error": {"message": f"scripted status {action}", "type": "server_error"}})
            return
        self._send(200, {
            "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "stub",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": action}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: "ScriptedServer"


class ScriptedServer:
    """The scripted actions, the requests received, and the server's base URL."""

    def __init__(self, actions: list[str | int]) -> None:
        self.actions = list(actions)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.base_url = ""

    def prompt_text(self, request: int) -> str:
        return "\n".join(str(m.get("content")) for m in self.requests[request].get("messages", []))


@contextmanager
def scripted_server(*actions: str | int) -> Iterator[ScriptedServer]:
    """Serve ``actions`` (reply texts, status codes, ``HANG``) on a free loopback port."""
    stub = ScriptedServer(list(actions))
    server = _Server(("127.0.0.1", 0), _Handler)
    server.stub = stub
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.stopped.set()
        server.shutdown()
        server.server_close()
