"""The ASGI application: the HTTP API, the web page and the MCP endpoint on one ``Service``.

Why FastAPI (on Starlette, served by uvicorn): the API's request and response shapes are
pydantic models already, and FastAPI turns them into both the request validation and the
``/openapi.json`` document, so the published contract cannot drift from what the code
accepts. It adds one small package over Starlette, which the ``mcp`` SDK needs anyway for its
HTTP transport. uvicorn is the ASGI server both document and test with; ``--workers`` comes
with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from structq import __version__
from structq.errors import StructqError

from .config import Principal
from .errors import RequestRejected, error_body, error_status
from .access import AccessLog
from .limits import BodyLimit, RateLimiter
from .logs import current_request
from .metrics import CONTENT_TYPE
from .public import CLIENT_HEADER, surface_of_header
from .schemas import (
    AskRequest,
    AskResponse,
    ErrorResponse,
    ExamplesResponse,
    FeedbackRequest,
    FeedbackResponse,
    HealthResponse,
    PlanRequest,
    PlanResponse,
    ReadyResponse,
    RunRequest,
    RunResponse,
    SourcesResponse,
)

if TYPE_CHECKING:
    from .public import Surface
    from .service import Event, Service

__all__ = ["create_app", "STATIC_DIR"]

STATIC_DIR = Path(__file__).resolve().parent / "static"

_ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 403, 404, 413, 422, 429, 502, 503, 504)}


class JSON(JSONResponse):
    """UTF-8 JSON that keeps Chinese readable and turns dates and decimals into text."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, default=str).encode("utf-8")


def _error_response(exc: BaseException, request: Request | None = None, *, open_server: bool = False) -> JSON:
    status, _ = error_status(exc)
    headers = exc.headers if isinstance(exc, RequestRejected) else None
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSON(error_body(exc, _surface(request), open_server=open_server), status_code=status, headers=headers)


def _surface(request: Request | None) -> "Surface":
    """The page says so in a header; anything else is an API caller."""
    return surface_of_header(request.headers.get(CLIENT_HEADER) if request is not None else None)


def _sse(event: "Event") -> bytes:
    data = json.dumps(event.data, ensure_ascii=False, default=str)
    return f"event: {event.name}\ndata: {data}\n\n".encode("utf-8")


def create_app(service: "Service", *, mcp: bool = True) -> FastAPI:
    """The application for ``service``; ``mcp`` mounts the MCP endpoint at ``/mcp``."""
    config = service.config
    limiter = RateLimiter(config.limits.requests_per_minute, config.limits.burst, service.store)
    bearer = HTTPBearer(auto_error=False, description="An API token from server.yaml (not needed without a config).")
    mcp_app = None
    if mcp:
        from .mcp import McpHttp, build_mcp

        mcp_app = McpHttp(build_mcp(service, http=True), service, limiter)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warming = asyncio.ensure_future(asyncio.to_thread(service.warm))
        async with contextlib.AsyncExitStack() as stack:
            if mcp_app is not None:
                await stack.enter_async_context(mcp_app.session_manager.run())
            try:
                yield
            finally:
                warming.cancel()
                service.close()

    app = FastAPI(title="structq", version=__version__, lifespan=lifespan, default_response_class=JSON,
                  description="Questions about company data, answered by checked, read-only query plans. "
                              "Every error is JSON: {error: {code, message, hint}}.")

    def caller(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Principal:
        principal = config.authenticate(credentials.credentials if credentials else None)
        if principal is None:
            said = "an unknown API token" if credentials else "no API token"
            raise RequestRejected(401, "unauthorized", f"the request carries {said}",
                                  hint="send the header Authorization: Bearer <token> with a token from server.yaml")
        if not config.open:  # one local caller (no config) is not rate limited
            limiter.take(principal.key)
        info = current_request()
        if info is not None:
            info.user = principal.user
        return principal

    @app.exception_handler(StructqError)
    async def _structq_error(request: Request, exc: StructqError) -> Response:
        return _error_response(exc, request, open_server=config.open)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return _error_response(_validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error_response(RequestRejected(exc.status_code, code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        return _error_response(exc)

    # --- the API -------------------------------------------------------------------------

    @app.post("/v1/ask", response_model=AskResponse, responses={**_ERRORS, 200: {
        "description": "The answer document; with ?stream=1 a text/event-stream of events "
                       "plan, step (status ok, skipped or failed), answer {delta} pieces while the model "
                       "writes, answer {text, citations, replaces_stream}, done (or error).",
        "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
    async def ask(request: Request, body: AskRequest,
                  stream: bool = Query(False, description="Stream Server-Sent Events."),
                  principal: Principal = Depends(caller)) -> Response:
        """Plan, run and answer a question (the document of ``structq ask --json``)."""
        args = dict(conversation=body.conversation, start_conversation=body.start_conversation, today=body.today,
                    no_answer=body.no_answer)
        if not stream:
            return JSON(await service.ask(principal, body.question, **args))
        service.check_question(body.question)
        events = service.ask_stream(principal, body.question, surface=_surface(request), **args)
        return StreamingResponse((_sse(e) async for e in events), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @app.post("/v1/feedback", response_model=FeedbackResponse, responses=_ERRORS)
    async def feedback(body: FeedbackRequest, principal: Principal = Depends(caller)) -> Response:
        """Rate one of your answers (up or down, with a comment): reviewers turn good ones into
        verified examples and bad ones into regression questions (``structq feedback``)."""
        return JSON(await service.feedback(principal, body.answer_id, body.rating, body.comment))

    @app.post("/v1/plan", response_model=PlanResponse, responses=_ERRORS)
    async def plan(body: PlanRequest, principal: Principal = Depends(caller)) -> Response:
        """The plan for a question, not run."""
        return JSON(await service.plan(principal, body.question, conversation=body.conversation, today=body.today))

    @app.post("/v1/run", response_model=RunResponse, responses=_ERRORS)
    async def run(body: RunRequest, principal: Principal = Depends(caller)) -> Response:
        """Run a given plan through the sandbox (no model; the document of ``structq run --json``)."""
        return JSON(await service.run(principal, body.plan, question=body.question))

    @app.get("/v1/sources", response_model=SourcesResponse, responses=_ERRORS)
    async def sources(principal: Principal = Depends(caller)) -> Response:
        """The sources this token may use, as the manifests declare them (denied columns omitted)."""
        return JSON({"sources": service.sources(principal)})

    @app.get("/v1/examples", response_model=ExamplesResponse, responses=_ERRORS)
    async def examples(principal: Principal = Depends(caller)) -> Response:
        """Verified example questions this token may ask (answered without a model)."""
        return JSON({"examples": service.examples(principal)})

    @app.get("/healthz", response_model=HealthResponse)
    async def healthz() -> Response:
        """The process is up."""
        return JSON({"status": "ok", "version": __version__})

    @app.get("/readyz", response_model=ReadyResponse, responses={503: {"model": ReadyResponse}})
    async def readyz(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Response:
        """Every source answers (503 naming those that do not). Why one does not is told to a
        caller with a valid token (or on a server without tokens) only; the log always has it."""
        known = config.authenticate(credentials.credentials if credentials else None) is not None
        states = await asyncio.to_thread(service.readiness, details=known)
        ready = all(state == "ok" for state in states.values())
        return JSON({"ready": ready, "sources": states}, status_code=200 if ready else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Response:
        """Prometheus metrics: open on a server without tokens (loopback only), else for a
        token with ``metrics: true``."""
        principal = config.authenticate(credentials.credentials if credentials else None)
        if principal is None:
            raise RequestRejected(401, "unauthorized", "the request carries no valid API token",
                                  hint="send Authorization: Bearer <token> with a token that has metrics: true in server.yaml")
        if not principal.metrics:
            raise RequestRejected(403, "forbidden", f"user {principal.user!r} may not read the metrics",
                                  hint="give the monitoring system a token with metrics: true in server.yaml")
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE)

    # --- the page ------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    if mcp_app is not None:
        from starlette.routing import Route

        app.router.routes.append(Route("/mcp", endpoint=mcp_app, methods=["GET", "POST", "DELETE"],
                                       include_in_schema=False))
        app.mount("/mcp", mcp_app)
    app.add_middleware(BodyLimit, max_bytes=config.limits.max_body_bytes)
    app.add_middleware(AccessLog, metrics=service.metrics)
    return app


def _validation_error(exc: RequestValidationError) -> RequestRejected:
    """The first problem of a malformed request, in words; ``vars`` gets its own message."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    where = ".".join(loc) or "the body"
    if err.get("type") == "extra_forbidden" and loc and loc[-1] in ("vars", "var", "variables"):
        return RequestRejected(400, "vars_not_accepted", "a request cannot set row-filter variables",
                               hint="they are fixed by the API token in server.yaml")
    if err.get("type") == "extra_forbidden":
        return RequestRejected(400, "bad_request", f"unknown field {where!r}",
                               hint="see /openapi.json for the fields each endpoint takes")
    return RequestRejected(400, "bad_request", f"{where}: {err.get('msg')}",
                           hint="see /openapi.json for the fields each endpoint takes")
