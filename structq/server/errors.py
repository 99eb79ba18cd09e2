"""Errors as HTTP: one JSON shape, ``{"error": {"code", "message", "hint"}}``, and one table
from the structq error tree to status codes, following the CLI's exit-code classes:

=========================  ======  ==========================================================
error                      status  why
=========================  ======  ==========================================================
unauthorized               401     no or an unknown API token (before the body is read)
bad request / validation   400     the caller's request is malformed (CLI: usage, exit 2):
                                   ``bad_request``, ``invalid_text``, ``invalid_value``, …
unsupported media type     415     a body that is not ``application/json``
AccessDenied               403     the token may not use a source the plan needs
PlanError, sandbox refusal 422     the question or plan cannot be answered safely (exit 1)
no working plan            422     the model's plans kept failing (repairs exhausted)
ExecutionError, ModelError 502     an upstream (database, model) failed on a valid request
ConfigError, unavailable   503     the service is not set up for this, or a source is down
QueryTimeout               504     a source took longer than its manifest allows
=========================  ======  ==========================================================

Anything else is a 500 with a generic message (the details go to the log, not the caller):
a failing source or a bug in one request never takes the process down.
"""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING, Any

from structq.errors import REPORTED_AS, SandboxViolation, StructqError, describe, reported_as
from structq.safety.bounds import refusal_of

if TYPE_CHECKING:
    from .public import Surface

__all__ = ["AccessDenied", "RequestRejected", "error_status", "error_body", "STATUS_OF"]

log = logging.getLogger("structq.server")


class AccessDenied(StructqError):
    """The caller's token does not grant a source the request needs. Never retried."""

    refuses_caller = True

    def __init__(self, source: str, user: str) -> None:
        super().__init__(f"user {user!r} may not use source {source!r}",
                         hint="ask the administrator to add it to this token's sources in server.yaml")
        self.source = source


class RequestRejected(StructqError):
    """A request the service refuses before doing any work: malformed, too big, too often."""

    def __init__(self, status: int, code: str, message: str, *, hint: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code
        self.headers = headers or {}


#: The first matching class decides (most specific first): (status, code). The server's own
#: errors, then the structq errors' (``structq.errors.REPORTED_AS``, shared with the CLI).
STATUS_OF: list[tuple[type[StructqError], int, str]] = [
    (AccessDenied, 403, "forbidden"),
    *((cls, status, code) for cls, _, status, code in REPORTED_AS),
]


def _known(exc: BaseException) -> BaseException:
    """A Python error that stands for a limit the request ran into (recursion, text with no
    UTF-8 form, a number too large: ``refusal_of``) as that refusal; any other as it is."""
    if isinstance(exc, StructqError):
        return exc
    return refusal_of(exc, None) or exc


def error_status(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and error code for ``exc``."""
    exc = _known(exc)
    if isinstance(exc, RequestRejected):
        return exc.status, exc.code
    for cls, status, code in STATUS_OF:
        if isinstance(exc, cls):
            return status, code
    if isinstance(exc, StructqError):
        return reported_as(exc)[1:]  # no row: the generic failure
    return 500, "internal"


#: Frames and characters of an internal error's traceback the log keeps: the innermost frames
#: say where it failed; a ``RecursionError``'s thousand frames would cost the event loop
#: seconds to render and the log hundreds of kilobytes.
TRACEBACK_FRAMES = 12
TRACEBACK_CHARS = 4000


def short_traceback(exc: BaseException) -> str:
    """``exc``'s innermost frames as plain text, at most ``TRACEBACK_CHARS`` characters."""
    text = "".join(traceback.format_exception(exc, limit=-TRACEBACK_FRAMES, chain=False))
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-TRACEBACK_CHARS:]


def error_body(exc: BaseException, surface: "Surface" = "api", *, open_server: bool = False) -> dict[str, Any]:
    """``{"error": {...}}`` for ``exc``, its hint in the words of ``surface`` and no URL, path
    or address in its text (``public.py``); internal errors say nothing about their cause (the
    log gets a short plain-text traceback, never a rendered one)."""
    from .public import hint_for, scrub

    exc = _known(exc)
    status, code = error_status(exc)
    if status == 500:
        log.error("internal error while serving a request: %s", short_traceback(exc))
        return {"error": {"code": code, "message": "internal error; the details are in the server log", "hint": None}}
    message, hint = describe(exc)  # type: ignore[arg-type]
    hint = hint_for(exc, surface, open_server=open_server) or hint
    body: dict[str, Any] = {"code": code, "message": scrub(message), "hint": scrub(hint)}
    for attr in ("source", "step"):
        value = getattr(exc, attr, None)
        if value is not None:
            body[attr] = value
    if isinstance(exc, SandboxViolation):
        body["sandbox_code"] = exc.code
    return {"error": body}
