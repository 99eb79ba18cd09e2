"""Planning, running and answering: the agent and its parts.

Vocabulary (one word, one thing; the same in the code, the docs and the audit log)::

    question     what is asked, in natural language
    plan         a ``Plan``: the steps (``Step``) that answer a question — a verified example,
                 a cached plan, the model's, or one given to ``Agent.run``
    step         one query on one source (``local``: SQL over earlier steps' results), named by
                 its ``output_key``; later steps refer to it as ``<output_key>``
    query        a step's SQL text or search-DSL body, as planned
    safe query   a ``SafeQuery``: what the sandbox makes of a query (regenerated, row-filtered,
                 limited, references bound as parameters); the only thing an executor fetches
    run          running a plan's steps in dependency order, and nothing else: ``Engine.run``,
                 ``Agent.run`` (a given plan, then its answer), ``structq run``, ``POST /v1/run``
    fetch        one safe query on its source's executor, which returns a ``ResultSet``
    rows         ``ResultSet``: what an executor fetched for one safe query (executors)
                 ``StepResult``: one step's rows in a run, with its final query and parameters,
                 or why it did not run
                 ``PlanResult``: every step's result of one run, with the run's notes
    answer       an ``Answer``: text with citations, the plan, its ``PlanResult`` and the notes
    audit line   one JSON line per question or given plan, written whether it succeeded or not

The path of a question (``Agent``): plan (``_first_plan``: verified example, cache; else the
model, repaired on retryable errors) → run (``Engine``) → observe and revise (``loop``,
``adaptive``) → answer (``synthesis``) → audit line. ``ask``, ``aask``, ``run`` and
``Conversation.ask`` share it.
"""

from structq.errors import RepairsExhausted

from .agent import Agent
from .answer import Answer
from .engine import Engine
from .results import PlanResult, StepResult
from .plan import Plan, Step

__all__ = ["Agent", "Answer", "Engine", "Plan", "PlanResult", "RepairsExhausted", "Step", "StepResult"]
