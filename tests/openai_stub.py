"""A scripted OpenAI-compatible chat server on loopback, for tests that run ``structq serve``
as a real process: no real model may be called, and a subprocess cannot be handed a Python
scripted model, so the process gets ``--llm openai:stub`` and ``OPENAI_BASE_URL`` pointing here.

Planning requests (they carry ``tools``) are answered with a ``submit_plan`` tool call: the
plan of the rule whose text occurs last in the prompt (the question comes after the
conversation so far). Answer-writing requests get a short
text citing the first step named in the prompt, with no figure in it (so the answer check
never replaces it) — streamed a few characters at a time when the request asks for a stream.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OpenAIStub"]


class OpenAIStub:
    """``with OpenAIStub({"按品类": plan, ...}) as stub: stub.base_url``."""

    def __init__(self, rules: dict[str, dict[str, Any]], *, ignore_stream: bool = False) -> None:
        """``ignore_stream``: answer a streamed request with one JSON completion, as some
        OpenAI-compatible servers do."""
        self.rules = rules
        self.ignore_stream = ignore_stream
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                reply = stub.reply(body)
                if body.get("stream") and not stub.ignore_stream:
                    payload = stub.streamed(reply)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                else:
                    payload = json.dumps(reply).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "OpenAIStub":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def streamed(reply: dict[str, Any], piece: int = 2) -> bytes:
        """``reply`` as the chunks of a streamed completion (``stream: true``): its text a
        few characters at a time, then the finish reason, then ``[DONE]``."""
        choice = reply["choices"][0]
        text = choice["message"].get("content") or ""
        head = {"id": reply["id"], "object": "chat.completion.chunk", "created": 0, "model": reply["model"]}
        deltas = [{"role": "assistant", "content": ""}] + [{"content": text[i:i + piece]} for i in range(0, len(text), piece)]
        chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
        return b"".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        users = [m.get("content") or "" for m in body["messages"] if m["role"] == "user"]
        question = users[0] if users else ""
        if body.get("tools"):
            # the rule found last in the prompt: earlier turns of a conversation come before the question
            found = [(question.rfind(text), p) for text, p in self.rules.items() if text in question]
            plan = max(found, key=lambda f: f[0])[1] if found else None
            if plan is None:
                raise AssertionError(f"no scripted plan for: {question[-200:]}")
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "submit_plan", "arguments": json.dumps(plan, ensure_ascii=False)}}]}
            finish = "tool_calls"
        else:
            keys = re.findall(r"^\[(\w+)\] source", "\n".join(users), flags=re.M)
            cited = f" [{keys[-1]}]" if keys else ""
            message = {"role": "assistant", "content": f"结果如下表所示{cited}。"}
            finish = "stop"
        return {"id": "stub", "object": "chat.completion", "created": 0, "model": body.get("model", "stub"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
