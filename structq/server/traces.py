"""OpenTelemetry traces of one server process, when the standard ``OTEL_*`` variables ask for them.

A question is one span (``structq.question``); each step the engine settles and each model
call made for it are its children (``structq.step``, ``structq.model_call``), written from the
same observations the Prometheus metrics count (``GuardedEngine.on_step``, the model-call
listener), with the durations those measured:

======================  ===================================================================
span                    attributes
======================  ===================================================================
structq.question        ``structq.user``, ``structq.plan_source``, ``structq.steps``,
                        ``structq.outcome`` (``ok`` or the API's error code)
structq.step            ``structq.output_key``, ``structq.source``, ``structq.kind``,
                        ``structq.rows``, ``structq.outcome`` (``ok``, ``skipped``, the error's code:
                        a sandbox refusal's own, ``select_only``)
structq.model_call      ``structq.purpose``, ``structq.outcome`` (``ok``/``error``),
                        ``structq.input_tokens``, ``structq.output_tokens``
======================  ===================================================================

Traces are on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``; ``none``
turns them off) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (OTLP over HTTP, the exporter reading
the other ``OTEL_EXPORTER_OTLP_*`` variables itself); ``OTEL_SERVICE_NAME`` names the service
(default ``structq``). Without them — or without the ``otel`` extra installed — nothing of
OpenTelemetry is imported and every hook is a no-op.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structq.agent import Answer, Step, StepResult
    from structq.agent.llm import ModelCall
    from structq.errors import StructqError

__all__ = ["Traces", "QuestionSpan", "traces_wanted"]

log = logging.getLogger(__name__)


def traces_wanted(environ: Mapping[str, str] | None = None) -> list[str]:
    """The span exporters the ``OTEL_*`` variables ask for (none: no traces)."""
    env = os.environ if environ is None else environ
    named = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if named:
        return [n for n in named if n != "none"]
    return ["otlp"] if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else []


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise ValueError(f"unknown span exporter {name!r} (structq knows otlp, console, none)")


def _seconds_ago(ms: float) -> int:
    """The time ``ms`` milliseconds ago, in the nanoseconds spans are stamped with."""
    return time.time_ns() - int(ms * 1_000_000)


class QuestionSpan:
    """The span of one question, told how it ended (``answered``); a no-op without traces."""

    def __init__(self, span: Any = None) -> None:
        self.span = span

    def answered(self, answer: "Answer") -> None:
        if self.span is not None:
            self.span.set_attribute("structq.plan_source", answer.plan_source)
            self.span.set_attribute("structq.steps", len(answer.plan.steps))


class Traces:
    """The tracer of one service (its own provider: a test can run several)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("structq")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Traces | None:
        """The traces the ``OTEL_*`` variables ask for, or None (also when the ``otel`` extra
        is missing or an exporter is unknown: the server then says so in its log and runs)."""
        names = traces_wanted(environ)
        if not names:
            return None
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            env = os.environ if environ is None else environ
            provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "structq")}))
            for name in names:
                provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
        except (ImportError, ValueError) as exc:
            log.warning("traces are not sent: %s (pip install 'structq[otel]')", exc)
            return None
        return cls(provider)

    def close(self) -> None:
        """Send the spans still buffered."""
        self.provider.shutdown()

    @contextmanager
    def question(self, user: str) -> Iterator[QuestionSpan]:
        """The span of one question, current while it is answered (steps and model calls made
        in this context, on any thread the engine hands it to, become its children)."""
        from opentelemetry.trace import Status, StatusCode

        with self.tracer.start_as_current_span("structq.question", record_exception=False,
                                               set_status_on_exception=False) as span:
            span.set_attribute("structq.user", user)
            try:
                yield QuestionSpan(span)
            except Exception as exc:
                from .errors import error_status

                span.set_attribute("structq.outcome", error_status(exc)[1])  # the code the caller is told
                span.set_status(Status(StatusCode.ERROR))
                raise
            span.set_attribute("structq.outcome", "ok")

    def step(self, step: "Step", kind: str, result: "StepResult | None", error: "StructqError | None") -> None:
        """A settled step, as a span that lasted as long as the step ran."""
        elapsed = result.elapsed_ms if result is not None else 0.0
        outcome = "ok" if result is not None and result.skipped is None else (
            "skipped" if result is not None else (error.code if error is not None else "error"))
        attributes = {"structq.output_key": step.output_key, "structq.source": step.source, "structq.kind": kind,
                      "structq.rows": result.row_count if result is not None else 0, "structq.outcome": outcome}
        self._ended("structq.step", elapsed, attributes, failed=result is None)

    def model_call(self, call: "ModelCall", outcome: str) -> None:
        """A model call, as a span that lasted as long as the call."""
        attributes: dict[str, Any] = {"structq.purpose": call.purpose, "structq.outcome": outcome}
        for key, tokens in (("structq.input_tokens", call.input_tokens), ("structq.output_tokens", call.output_tokens)):
            if tokens is not None:
                attributes[key] = tokens
        self._ended("structq.model_call", call.elapsed_ms, attributes, failed=outcome != "ok")

    def _ended(self, name: str, elapsed_ms: float, attributes: dict[str, Any], *, failed: bool) -> None:
        """A span of something that just ended after ``elapsed_ms``, a child of the current span."""
        from opentelemetry.trace import Status, StatusCode

        span = self.tracer.start_span(name, start_time=_seconds_ago(elapsed_ms), attributes=attributes)
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        span.end()
