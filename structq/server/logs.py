"""The server's logs: one line per request (the access line), application events and errors,
as text for a person at a terminal or as one JSON object per line for a log system.

``--log-format json`` (or ``STRUCTQ_LOG_FORMAT=json``) writes every record of the ``structq``
and ``uvicorn`` loggers as JSON: ``time``, ``level``, ``logger``, ``message``, the request's
``request_id`` when there is one, the record's own fields (an access line: ``user``,
``route``, ``method``, ``status``, ``duration_ms``, ``conversation``) and, for an error, the
whole traceback as one ``traceback`` field — never a line of its own.

Each request gets an id (the caller's ``X-Request-ID`` when it is a plain short token, else a
new one), sent back in the response header and written in its access line and its audit
line, so the three can be joined.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Literal

from structq.errors import ConfigError

__all__ = ["RequestInfo", "current_request", "new_request", "JsonFormatter", "configure_logging",
           "log_format_from_env", "ACCESS", "LogFormat"]

LogFormat = Literal["text", "json"]
ENV = "STRUCTQ_LOG_FORMAT"

#: The logger of the access lines.
ACCESS = logging.getLogger("structq.access")

#: The fields the text format writes after an access line's message (``POST /v1/ask 200``).
ACCESS_FIELDS = ("duration_ms", "user", "conversation", "request_id")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass
class RequestInfo:
    """What is known about the request being served; filled in as it goes (who, which conversation)."""

    request_id: str
    user: str | None = None
    conversation: str | None = None


_current: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar("structq_request_info", default=None)


def current_request() -> RequestInfo | None:
    return _current.get()


def new_request(header: str | None) -> tuple[RequestInfo, contextvars.Token[RequestInfo | None]]:
    """The request's info (its id from ``header`` when that is a plain token), made current."""
    import uuid

    request_id = header if header and _REQUEST_ID.match(header) else uuid.uuid4().hex
    info = RequestInfo(request_id)
    return info, _current.set(info)


def end_request(token: contextvars.Token[RequestInfo | None]) -> None:
    _current.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    #: LogRecord attributes that are not the caller's fields.
    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "color_message"}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        info = current_request()
        if info is not None:
            entry["request_id"] = info.request_id
        entry.update({k: v for k, v in vars(record).items() if k not in self._STANDARD})
        if record.exc_info:
            entry["traceback"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """A line for a person: time, level, logger, message, then an access line's fields."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [f"{k}={getattr(record, k)}" for k in ACCESS_FIELDS if getattr(record, k, None) is not None]
        info = current_request()
        if info is not None and not hasattr(record, "request_id"):
            fields.append(f"request_id={info.request_id}")
        return f"{line} {' '.join(fields)}" if fields else line


def log_format_from_env(given: str | None = None) -> LogFormat:
    """``given`` (``--log-format``), else ``STRUCTQ_LOG_FORMAT``, else text."""
    value = (given or os.environ.get(ENV) or "text").strip().lower()
    if value not in ("text", "json"):
        raise ConfigError(f"unknown log format {value!r}", hint=f"use text or json (--log-format or {ENV})")
    return value  # type: ignore[return-value]


def configure_logging(log_format: LogFormat) -> None:
    """Every log record to stderr in ``log_format``: the ``structq`` and ``uvicorn`` loggers from
    INFO (access lines and events; uvicorn's own access log is off — ours has the user and the
    id), the libraries' (database and search clients) from WARNING. Called before the MCP
    server is built: its SDK then leaves the root logger as it is."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)
    for name in ("structq", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    logging.getLogger("uvicorn.access").disabled = True
