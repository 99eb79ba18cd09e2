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
import gc
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from structq import __version__
from structq.errors import StructqError

from .config import Principal
from .contain import Contained
from .errors import RequestRejected, error_body, error_status
from .access import AccessLog
from .guard import RequestGuard
from .limits import BodyLimit, RateLimiter
from .logs import current_request
from .metrics import CONTENT_TYPE
from .public import CLIENT_HEADER, surface_of_header
from .schemas import (
    PLAN_DEFINITIONS,
    STREAM_FORMAT,
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
    StreamEvent,
)

if TYPE_CHECKING:
    from .public import Surface
    from .service import Event, Service

__all__ = ["create_app", "STATIC_DIR"]

STATIC_DIR = Path(__file__).resolve().parent / "static"

#: The error responses every operation documents (``ErrorResponse`` bodies): a body-taking
#: operation can also answer 413 (too large) and 415 (not JSON).
_ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 403, 404, 405, 422, 429, 500, 502, 503, 504)}
_BODY_ERRORS = {**_ERRORS, **{status: {"model": ErrorResponse} for status in (413, 415)}}


def render_json(content: Any) -> bytes:
    """Strict UTF-8 JSON that keeps Chinese readable and turns dates and decimals into text.

    Strict both ways a result could break a client's parser: a non-finite float (a database's
    ``'NaN'::float``, SQLite's ``1e999``) is written as null, never as the bare ``NaN`` no JSON
    parser reads, and text with no UTF-8 form (which the request checks keep out) as ``?``."""
    try:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        text = json.dumps(_finite(content), ensure_ascii=False, allow_nan=False, default=str)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class JSON(JSONResponse):
    """A response of ``render_json``."""

    def render(self, content: Any) -> bytes:
        return render_json(content)


def _error_response(exc: BaseException, request: Request | None = None, *, open_server: bool = False) -> JSON:
    status, _ = error_status(exc)
    headers = exc.headers if isinstance(exc, RequestRejected) else None
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSON(error_body(exc, _surface(request), open_server=open_server), status_code=status, headers=headers)


def _surface(request: Request | None) -> "Surface":
    """The page says so in a header; anything else is an API caller."""
    return surface_of_header(request.headers.get(CLIENT_HEADER) if request is not None else None)


def _too_large(size: int, cap: int) -> RequestRejected:
    return RequestRejected(422, "response_too_large", f"the response would be {size} bytes; at most {cap} are sent",
                           hint="ask for fewer rows or columns (limits.max_response_bytes in server.yaml)")


def _sse(event: "Event", cap: int) -> bytes:
    data = render_json(event.data)
    if len(data) > cap:
        data = render_json(error_body(_too_large(len(data), cap)))
        return b"event: error\ndata: " + data + b"\n\n"
    return b"event: " + event.name.encode() + b"\ndata: " + data + b"\n\n"


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
        warming.add_done_callback(lambda done: done.cancelled() or gc.freeze())
        gc.freeze()  # see _quiet_collections
        async with contextlib.AsyncExitStack() as stack:
            if mcp_app is not None:
                await stack.enter_async_context(mcp_app.session_manager.run())
            try:
                yield
            finally:
                warming.cancel()
                service.close()
                gc.unfreeze()  # a process that builds apps again (tests) collects the old ones

    app = FastAPI(title="structq", version=__version__, lifespan=lifespan, default_response_class=JSON,
                  description="Questions about company data, answered by checked, read-only query plans. "
                              "Every error is JSON: {error: {code, message, hint}}; the limits and the codes: "
                              "docs/limits-and-errors.md.")
    cap = config.limits.max_response_bytes

    async def document(content: Any) -> Response:
        """``content`` as the JSON response, unless it is larger than ``max_response_bytes``;
        written off the event loop (a response of megabytes takes tens of milliseconds)."""
        body = await asyncio.to_thread(render_json, content)
        if len(body) > cap:
            raise _too_large(len(body), cap)
        return Response(body, media_type="application/json")

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
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every route of the path, not only the first that matched
            headers["Allow"] = ", ".join(_allowed(app, request))
        return _error_response(RequestRejected(exc.status_code, code, str(exc.detail), headers=headers))

    # Any other exception: ``Contained`` (contain.py) answers it as a logged 500.

    # --- the API -------------------------------------------------------------------------

    @app.post("/v1/ask", response_model=AskResponse, responses={**_BODY_ERRORS, 200: {
        "description": "The answer document; with ?stream=1 a text/event-stream of events (schema: "
                       "StreamEvent) plan, step (status ok, skipped or failed), answer {delta} pieces while "
                       "the model writes, answer {text, citations, replaces_stream}, done (or error). An error "
                       "before the first event is answered as a plain JSON error with its status.",
        "content": {"text/event-stream": {"schema": {"type": "string", "description": STREAM_FORMAT}}}}})
    async def ask(request: Request, body: AskRequest,
                  stream: bool = Query(False, description="Stream Server-Sent Events."),
                  principal: Principal = Depends(caller)) -> Response:
        """Plan, run and answer a question (the document of ``structq ask --json``)."""
        args = dict(conversation=body.conversation, start_conversation=body.start_conversation, today=body.today,
                    no_answer=body.no_answer)
        if not stream:
            return await document(await service.ask(principal, body.question, **args))
        service.check_question(body.question)
        events = service.ask_stream(principal, body.question, surface=_surface(request), **args)
        first = await anext(events)
        if first.name == "error":  # nothing sent yet: the error with its own status
            return JSON(first.data, status_code=first.status or 500)

        async def stream_events() -> AsyncIterator[bytes]:
            yield _sse(first, cap)
            async for event in events:
                yield _sse(event, cap)

        return StreamingResponse(stream_events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @app.post("/v1/feedback", response_model=FeedbackResponse, responses=_BODY_ERRORS)
    async def feedback(body: FeedbackRequest, principal: Principal = Depends(caller)) -> Response:
        """Rate one of your answers (up or down, with a comment): reviewers turn good ones into
        verified examples and bad ones into regression questions (``structq feedback``)."""
        return JSON(await service.feedback(principal, body.answer_id, body.rating, body.comment))

    @app.post("/v1/plan", response_model=PlanResponse, responses=_BODY_ERRORS)
    async def plan(body: PlanRequest, principal: Principal = Depends(caller)) -> Response:
        """The plan for a question, not run."""
        return await document(await service.plan(principal, body.question, conversation=body.conversation, today=body.today))

    @app.post("/v1/run", response_model=RunResponse, responses=_BODY_ERRORS)
    async def run(body: RunRequest, principal: Principal = Depends(caller)) -> Response:
        """Run a given plan through the sandbox (no model; the document of ``structq run --json``)."""
        return await document(await service.run(principal, body.plan, question=body.question))

    @app.get("/v1/sources", response_model=SourcesResponse, responses=_ERRORS)
    async def sources(principal: Principal = Depends(caller)) -> Response:
        """The sources this token may use, as the manifests declare them (denied columns omitted)."""
        return await document({"sources": service.sources(principal)})

    @app.get("/v1/examples", response_model=ExamplesResponse, responses=_ERRORS)
    async def examples(principal: Principal = Depends(caller)) -> Response:
        """Verified example questions this token may ask (answered without a model)."""
        return await document({"examples": service.examples(principal)})

    @app.get("/healthz", response_model=HealthResponse, responses={405: {"model": ErrorResponse}})
    async def healthz() -> Response:
        """The process is up."""
        return JSON({"status": "ok", "version": __version__})

    @app.get("/readyz", response_model=ReadyResponse, responses={503: {"model": ReadyResponse}, 405: {"model": ErrorResponse}})
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

    for route in list(app.routes):  # HEAD wherever GET is (HTTP semantics; FastAPI adds none)
        if isinstance(route, APIRoute) and "GET" in route.methods:
            app.add_api_route(route.path, route.endpoint, methods=["HEAD"], include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    if mcp_app is not None:
        from starlette.routing import Route

        app.router.routes.append(Route("/mcp", endpoint=mcp_app, methods=["GET", "POST", "DELETE"],
                                       include_in_schema=False))
        app.mount("/mcp", mcp_app)
    app.add_middleware(RequestGuard, config=config)
    app.add_middleware(BodyLimit, max_bytes=config.limits.max_body_bytes)  # size first
    app.add_middleware(Contained)  # no exception reaches the server's log whole
    app.add_middleware(AccessLog, metrics=service.metrics)  # outermost: every answer's status, Contained's 500 too
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


# _quiet_collections: the objects a warm service holds for its lifetime (manifests, sqlglot's
# dialects and caches, pools, the embedded search server) are moved out of the collector's reach
# (``gc.freeze``) once built and once warm. Otherwise every full collection — which a request
# allocating many objects (a 5,000-token query) triggers every few requests — walks them all:
# 300 ms during which the event loop, and ``/healthz``, stand still.


def _allowed(app: FastAPI, request: Request) -> list[str]:
    """The methods some route of the request's path answers (a 405's ``Allow``)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if route.matches(request.scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, plus what it cannot see: the stream's event schema."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["StreamEvent"] = StreamEvent.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(PLAN_DEFINITIONS)
        app.openapi_schema = schema
    return app.openapi_schema


def _validation_error(exc: RequestValidationError) -> RequestRejected:
    """The first problem of a malformed request, in words; ``vars`` gets its own message."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    where = ".".join(loc) or "the body"
    if err.get("type") == "extra_forbidden" and loc and loc[-1] in ("vars", "var", "variables"):
        return RequestRejected(400, "vars_not_accepted", "a request cannot set row-filter variables",
                               hint="they are fixed by the API token in server.yaml")
    if loc == ["question"] and err.get("type") in ("string_too_short", "string_pattern_mismatch"):
        return RequestRejected(400, "empty_question", "the question is empty", hint="send a question")
    if err.get("type") == "extra_forbidden":
        return RequestRejected(400, "bad_request", f"unknown field {where!r}",
                               hint="see /openapi.json for the fields each endpoint takes")
    return RequestRejected(400, "bad_request", f"{where}: {err.get('msg')}",
                           hint="see /openapi.json for the fields each endpoint takes")
