"""The API's request and response shapes (pydantic), from which ``/openapi.json`` is generated.

Requests forbid unknown keys: a body that tries to carry ``vars`` (or anything else the
service does not take) is refused with 400 instead of being silently ignored — row-filter
variables come from the caller's token only.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AskRequest", "FeedbackRequest", "FeedbackResponse", "PlanRequest", "RunRequest", "AskResponse", "RunResponse", "ErrorResponse",
           "SourcesResponse", "ExamplesResponse", "ReadyResponse", "HealthResponse", "PlanResponse"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskRequest(_Request):
    question: str = Field(description="The question, in any language.", examples=["2025年各大区的销售额分别是多少？"])
    conversation: str | None = Field(default=None, description="Continue this conversation (an id from an earlier answer).")
    start_conversation: bool = Field(default=False, description="Start a conversation: the answer carries its id, "
                                     "to send as 'conversation' with a follow-up. Without it (and without "
                                     "'conversation') the question is asked on its own and nothing is kept.")
    today: dt.date | None = Field(default=None, description="Resolve relative dates (去年, last quarter) against this day.")
    no_answer: bool = Field(default=False, description="Return the results with a deterministic summary; no answer-writing model call.")


class FeedbackRequest(_Request):
    answer_id: str = Field(min_length=1, max_length=64, description="The answer_id of an answer this token received.")
    rating: Literal["up", "down"]
    comment: str | None = Field(default=None, max_length=2000, description="What was right or wrong, in any words.")


class FeedbackResponse(BaseModel):
    answer_id: str
    rating: str


class PlanRequest(_Request):
    question: str
    conversation: str | None = None
    today: dt.date | None = None


class RunRequest(_Request):
    plan: dict[str, Any] = Field(description="A plan as returned by /v1/plan: {reasoning, steps: [...], answer_with}.")
    question: str = ""


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable, machine-readable: forbidden, sandbox_refused, invalid_plan, query_timeout, …")
    message: str
    hint: str | None = None
    source: str | None = None
    step: str | None = None
    sandbox_code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class StepDocument(BaseModel):
    output_key: str
    source: str
    index: str | None = None
    purpose: str = ""
    query: Any = None
    params: dict[str, Any] = {}
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    elapsed_ms: float
    skipped: str | None = None


class AskResponse(BaseModel):
    """The document of ``structq ask --json``, plus the conversation id."""

    question: str
    answer: str
    citations: list[dict[str, Any]]
    plan: dict[str, Any]
    plan_source: str = Field(description="verified, cache, model or given")
    steps: list[StepDocument]
    notes: list[str]
    model_calls: list[dict[str, Any]]
    rounds: list[dict[str, Any]] = Field(default=[], description="re-planning rounds after empty results")
    checks: list[dict[str, Any]] = Field(default=[], description="the answer check's verdict on each figure of "
                                         "the model's reply: text, value, basis, steps, cited, ok, problem")
    conversation: str | None = Field(description="the conversation this answer belongs to; null for a question asked on its own")
    answer_id: str = Field(description="this answer's id, for POST /v1/feedback")


class PlanResponse(BaseModel):
    reasoning: str = ""
    steps: list[dict[str, Any]]
    answer_with: str = ""
    cannot_answer: str | None = Field(default=None, description="why the question cannot be answered (then no steps)")


class RunResponse(BaseModel):
    """The document of ``structq run --json``."""

    steps: list[StepDocument]
    notes: list[str]


class SourcesResponse(BaseModel):
    sources: list[dict[str, Any]]


class ExamplesResponse(BaseModel):
    examples: list[dict[str, Any]]


class ReadyResponse(BaseModel):
    ready: bool
    sources: dict[str, str]


class HealthResponse(BaseModel):
    status: str
    version: str
