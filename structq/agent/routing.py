"""The routing call: one bounded model call when schema linking is not confident.

``structq.linking`` decides *whether* to route (``Selection.confident``) and builds the prompt
and reads the reply (``linking.route``); this module makes the call, because linking calls no
model. At most one routing call per question: its answer is remembered by the planner for the
repair rounds and revisions of the same question. A failed call (timeout, provider error)
leaves the first selection in place — routing only ever adds tables to what the planner sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from structq.errors import ModelError

from .llm import CallBounds, CallLog, invoke, reply_text

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet
    from structq.linking import Selection
    from structq.linking.route import Route

__all__ = ["route_question"]


def route_question(model: Any, question: str, capabilities: "CapabilitySet", selection: "Selection", *,
                   budget_tokens: int, log: CallLog, bounds: CallBounds | None = None) -> "Route":
    """Ask the model where to look; an empty ``Route`` when the call fails or says nothing usable."""
    from langchain_core.messages import HumanMessage

    from structq.linking.route import ROUTE_PURPOSE, Route, parse_route, routing_prompt

    prompt = routing_prompt(question, capabilities, selection.confidence, budget_tokens)
    try:
        reply = invoke(model, [HumanMessage(prompt)], purpose=ROUTE_PURPOSE, log=log, bounds=bounds)
    except ModelError:
        return Route()
    return parse_route(reply_text(reply), capabilities)
