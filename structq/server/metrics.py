"""Prometheus metrics of one server process (``GET /metrics``, the standard client library).

=========================================  ==========================  ==============================
metric                                     labels                      counts
=========================================  ==========================  ==============================
structq_requests_total                     route, status               requests answered
structq_request_duration_seconds           route, status               time to the last byte
structq_step_duration_seconds              source, kind                each step run (and look-up)
structq_rows_returned_total                source                      rows the steps returned
structq_sandbox_refusals_total             code                        queries the sandbox refused
structq_model_calls_total                  purpose, outcome            calls to the model (ok/error)
structq_model_tokens_total                 purpose, direction          tokens in and out
structq_model_call_duration_seconds        purpose, outcome            time per model call
structq_plans_total                        plan_source                 plans by origin
structq_plan_cache_hits_total              —                           plans from the plan cache
structq_source_breaker_open                source                      1 while a source's circuit is open
=========================================  ==========================  ==============================

Each application has its own registry (a test can run several). Routes are the route
templates (``/v1/ask``), never the raw path, so the label set stays small. With
``--workers N`` each worker has its own counters: scrape each, or use one worker per port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from structq.agent.engine import Engine
    from structq.agent.llm import ModelCall
    from structq.capabilities import CapabilitySet

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds: from a cached 2 ms plan to a 30 s model-written answer.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The counters of one server, written by the request middleware, the guarded engine and
    the model-call listener; breaker states are read from the engine at each scrape."""

    def __init__(self, capabilities: "CapabilitySet", engine: "Engine") -> None:
        self.registry = CollectorRegistry()
        self.capabilities = capabilities
        self.engine = engine
        r = self.registry
        self.requests = Counter("structq_requests", "Requests answered.", ["route", "status"], registry=r)
        self.request_seconds = Histogram("structq_request_duration_seconds", "Request duration.",
                                         ["route", "status"], buckets=_BUCKETS, registry=r)
        self.step_seconds = Histogram("structq_step_duration_seconds", "Duration of each step run.",
                                      ["source", "kind"], buckets=_BUCKETS, registry=r)
        self.rows = Counter("structq_rows_returned", "Rows returned by the steps.", ["source"], registry=r)
        self.refusals = Counter("structq_sandbox_refusals", "Queries the sandbox refused.", ["code"], registry=r)
        self.model_calls = Counter("structq_model_calls", "Calls to the model.", ["purpose", "outcome"], registry=r)
        self.model_tokens = Counter("structq_model_tokens", "Tokens sent to and received from the model.",
                                    ["purpose", "direction"], registry=r)
        self.model_seconds = Histogram("structq_model_call_duration_seconds", "Duration of each model call.",
                                       ["purpose", "outcome"], buckets=_BUCKETS, registry=r)
        self.plans = Counter("structq_plans", "Plans by where they came from.", ["plan_source"], registry=r)
        self.cache_hits = Counter("structq_plan_cache_hits", "Plans taken from the plan cache.", registry=r)
        self.breaker = Gauge("structq_source_breaker_open", "1 while the source's circuit breaker is open.",
                             ["source"], registry=r)

    # --- written as things happen ------------------------------------------------------------

    def request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.request_seconds.labels(route, str(status)).observe(seconds)

    def step(self, source: str, seconds: float, rows: int) -> None:
        self.step_seconds.labels(source, self.kind(source)).observe(seconds)
        self.rows.labels(source).inc(rows)

    def refusal(self, code: str) -> None:
        self.refusals.labels(code).inc()

    def model_call(self, call: "ModelCall", outcome: str) -> None:
        self.model_calls.labels(call.purpose, outcome).inc()
        self.model_seconds.labels(call.purpose, outcome).observe(call.elapsed_ms / 1000)
        for direction, tokens in (("input", call.input_tokens), ("output", call.output_tokens)):
            if tokens:
                self.model_tokens.labels(call.purpose, direction).inc(tokens)

    def plan(self, plan_source: str) -> None:
        self.plans.labels(plan_source).inc()
        if plan_source == "cache":
            self.cache_hits.inc()

    # --- read at a scrape ----------------------------------------------------------------------

    def exposition(self) -> bytes:
        for manifest in self.capabilities:
            self.breaker.labels(manifest.source).set(1 if self.engine.breaker.state(manifest.source) == "open" else 0)
        return generate_latest(self.registry)

    def kind(self, source: str) -> str:
        """The source's kind (the ``kind`` label of its steps)."""
        manifest = self.capabilities.get(source)
        return str(manifest.kind) if manifest is not None else source  # a built-in source is its own kind
