"""The API's request and response shapes (pydantic), from which ``/openapi.json`` is generated.

Requests forbid unknown keys: a body that tries to carry ``vars`` (or anything else the
service does not take) is refused with 400 instead of being silently ignored — row-filter
variables come from the caller's token only.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema

from structq.agent.plan import Plan, TemplateUse

__all__ = ["AskRequest", "FeedbackRequest", "FeedbackResponse", "PlanRequest", "RunRequest", "AskResponse", "RunResponse", "ErrorResponse",
           "SourcesResponse", "ExamplesResponse", "ReadyResponse", "HealthResponse", "PlanResponse",
           "StreamEvent", "STREAM_FORMAT", "PLAN_DEFINITIONS"]

_COMPONENTS = "#/components/schemas/{model}"


def _plan_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON schema of a plan as ``/v1/run`` reads it (``Plan.parse``: 422 ``invalid_plan``
    otherwise), with ``template`` (which the model's schema leaves out) and the rule that a plan
    has steps or declines; and the definitions it refers to, for the document's components."""
    schema = Plan.model_json_schema(ref_template=_COMPONENTS)
    definitions = schema.pop("$defs", {})
    definitions["TemplateUse"] = TemplateUse.model_json_schema(ref_template=_COMPONENTS)
    schema["properties"]["template"] = {
        "anyOf": [{"$ref": _COMPONENTS.format(model="TemplateUse")}, {"type": "null"}], "default": None,
        "description": "Set on a plan made from a slotted verified example (as /v1/plan returns it): the "
                       "example and the values its :name parameters are bound to."}
    schema["anyOf"] = [{"required": ["steps"], "properties": {"steps": {"minItems": 1}}},
                       {"required": ["cannot_answer"]}]
    schema["description"] = ("A plan as returned by /v1/plan: {reasoning, steps: [...], answer_with}; at most "
                             "limits.max_steps steps (server.yaml, default 20).")
    return schema, definitions


_PLAN_SCHEMA, PLAN_DEFINITIONS = _plan_schema()
#: A question: some text that is not only spaces (at most ``limits.max_question_chars``).
_QUESTION = Field(min_length=1, pattern=r"\S", description="The question, in any language.",
                  examples=["2025年各大区的销售额分别是多少？"])
_CONVERSATION = Field(default=None, min_length=1, max_length=128,
                      description="Continue this conversation (an id from an earlier answer).")

STREAM_FORMAT = ("Server-Sent Events: blocks 'event: <name>' and 'data: <JSON>' separated by a blank line; "
                 "each block is one StreamEvent (components.schemas.StreamEvent).")


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskRequest(_Request):
    question: str = _QUESTION
    conversation: str | None = _CONVERSATION
    start_conversation: StrictBool = Field(default=False, description="Start a conversation: the answer carries its id, "
                                     "to send as 'conversation' with a follow-up. Without it (and without "
                                     "'conversation') the question is asked on its own and nothing is kept.")
    today: dt.date | None = Field(default=None, description="Resolve relative dates (去年, last quarter) against this day.")
    no_answer: StrictBool = Field(default=False, description="Return the results with a deterministic summary; no answer-writing model call.")


class FeedbackRequest(_Request):
    answer_id: str = Field(min_length=1, max_length=64, description="The answer_id of an answer this token received.")
    rating: Literal["up", "down"]
    comment: str | None = Field(default=None, max_length=2000, description="What was right or wrong, in any words.")


class FeedbackResponse(BaseModel):
    answer_id: str
    rating: str


class PlanRequest(_Request):
    question: str = _QUESTION
    conversation: str | None = _CONVERSATION
    today: dt.date | None = None


class RunRequest(_Request):
    plan: Annotated[dict[str, Any], WithJsonSchema(_PLAN_SCHEMA)]
    question: str = Field(default="", description="The question the plan answers (shown with the results).")


class StreamEvent(BaseModel):
    """One event of ``/v1/ask?stream=1``: ``event: <event>`` then ``data: <data as JSON>``."""

    event: Literal["plan", "step", "answer", "done", "error"]
    data: dict[str, Any] = Field(description=(
        "plan: the plan (again after a repair); step: {output_key, status (ok, skipped or failed), …}; "
        "answer: {delta} while the model writes, then {text, citations, replaces_stream}; done: the "
        "AskResponse document; error: an ErrorResponse, the last event"))


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
