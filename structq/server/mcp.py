"""structq as an MCP server (the official ``mcp`` SDK, 2.x): tools for assistants.

Tools: ``ask``, ``plan``, ``run_plan``, ``list_sources``, ``describe_source``, ``feedback``. Results come back
as structured content (the same documents as the HTTP API) plus their JSON as text; a failure
(a sandbox refusal, a forbidden source) is a tool error whose text carries the code, the
message and the hint, so the calling model can correct itself.

The row-filter variables follow the same rule as the HTTP API: over HTTP (``/mcp`` on
``structq serve``) they come from the bearer token; over stdio (``structq mcp``) from the
command line that started the process. Never from the calling model: no tool takes them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import StrictBool

from .config import bearer_token
from .errors import RequestRejected, error_body
from .guard import send_error
from .logs import current_request

if TYPE_CHECKING:
    from .config import Principal
    from .limits import RateLimiter
    from .service import Service

__all__ = ["build_mcp", "McpHttp"]

INSTRUCTIONS = (
    "Answers questions about the company's data with checked, read-only query plans over SQL "
    "databases and search indices. Call list_sources or describe_source to learn what exists; "
    "ask answers a question (plan, run, answer with citations to steps); plan and run_plan split "
    "that in two. Errors carry a hint saying what would be accepted."
)


def _tool_error(exc: BaseException, *, http: bool, open_server: bool) -> Exception:
    from mcp.server.mcpserver.exceptions import ToolError

    err = error_body(exc, "mcp-http" if http else "mcp-stdio", open_server=open_server)["error"]
    text = f"{err['code']}: {err['message']}" + (f" (hint: {err['hint']})" if err.get("hint") else "")
    return ToolError(text)


def _today(value: str | None) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise RequestRejected(400, "bad_request", f"today={value!r} is not a date",
                              hint="write it as YYYY-MM-DD") from None


def build_mcp(service: "Service", *, http: bool, principal: "Principal | None" = None) -> MCPServer:
    """The MCP server over ``service``. Over HTTP the caller's principal comes from the
    request's bearer token; over stdio ``principal`` is the one fixed at start."""
    server = MCPServer("structq", instructions=INSTRUCTIONS, log_level="WARNING")

    def caller(ctx: Context) -> "Principal":
        if not http:
            assert principal is not None
            return principal
        found = service.config.authenticate(bearer_token((ctx.headers or {}).get("authorization")))
        if found is None:  # the HTTP wrapper refused it already; this is a second lock
            raise RequestRejected(401, "unauthorized", "the request carries no valid API token")
        return found

    async def guarded(work: Any) -> Any:
        try:
            return await work
        except Exception as exc:
            raise _tool_error(exc, http=http, open_server=service.config.open) from exc

    @server.tool(description="Answer a question about the data: plan, run the plan through the sandbox, "
                             "answer citing steps [key]. To follow up later, pass start_conversation=true, "
                             "then the answer's conversation id as conversation.")
    async def ask(question: str, ctx: Context, conversation: str | None = None, start_conversation: StrictBool = False,
                  today: str | None = None, no_answer: StrictBool = False) -> dict[str, Any]:
        return await guarded(service.ask(caller(ctx), question, conversation=conversation,
                                         start_conversation=start_conversation, today=_today(today),
                                         no_answer=no_answer))

    @server.tool(description="Rate an answer: its answer_id, rating 'up' or 'down', and optionally a comment "
                             "saying what was right or wrong. Reviewers use it to improve the answers.")
    async def feedback(answer_id: str, rating: str, ctx: Context, comment: str | None = None) -> dict[str, Any]:
        async def rate() -> dict[str, Any]:
            if rating not in ("up", "down"):
                raise RequestRejected(400, "bad_request", f"rating={rating!r} is not up or down",
                                      hint="rate an answer up or down")
            return await service.feedback(caller(ctx), answer_id, rating, comment)

        return await guarded(rate())

    @server.tool(description="The query plan for a question, without running it.")
    async def plan(question: str, ctx: Context, today: str | None = None) -> dict[str, Any]:
        return await guarded(service.plan(caller(ctx), question, today=_today(today)))

    @server.tool(description="Run a plan ({reasoning, steps: [{output_key, source, index?, purpose, query}]}) "
                             "through the sandbox; no model is involved.")
    async def run_plan(plan: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return await guarded(service.run(caller(ctx), plan))

    @server.tool(description="The sources you may use: tables and columns, or indices and fields.")
    async def list_sources(ctx: Context) -> dict[str, Any]:
        return {"sources": service.sources(caller(ctx))}

    @server.tool(description="One source's schema exactly as the planner sees it (text).")
    async def describe_source(source: str, ctx: Context) -> str:
        async def describe() -> str:
            return service.describe(caller(ctx), source)

        return await guarded(describe())

    return server


class McpHttp:
    """The MCP endpoint as an ASGI app: the token check (401 JSON) and the rate limit of the
    API in front of the SDK's streamable HTTP app. ``session_manager.run()`` must be entered
    for the application's lifetime."""

    def __init__(self, server: MCPServer, service: "Service", limiter: "RateLimiter") -> None:
        from mcp.server.transport_security import TransportSecuritySettings

        # DNS-rebinding protection is for servers without authentication; every call here
        # carries a bearer token (or the server listens on loopback only).
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.inner = server.streamable_http_app(streamable_http_path="/", stateless_http=True, json_response=True,
                                                transport_security=security)
        self.session_manager = server.session_manager
        self.config = service.config
        self.limiter = limiter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
            principal = self.config.authenticate(bearer_token(headers.get("authorization")))
            try:
                if principal is None:
                    raise RequestRejected(401, "unauthorized", "the request carries no valid API token",
                                          hint="send the header Authorization: Bearer <token> with a token from server.yaml")
                info = current_request()
                if info is not None:
                    info.user = principal.user
                if not self.config.open:
                    await asyncio.to_thread(self.limiter.take, principal.key)  # a store write
            except RequestRejected as exc:
                await send_error(send, exc)
                return
            if scope.get("path") == "/mcp" and not scope.get("root_path"):
                scope = {**scope, "path": "/"}  # served as a route (no redirect to /mcp/)
        await self.inner(scope, receive, send)
