"""structq: answers about company data from checked, read-only query plans.

    question → plan (steps, each a query on one source) → run (each query through the sandbox
    as a safe query, fetched by its source's executor) → results → answer (+ audit line)

The words, each naming one thing (the full glossary is in ``structq.agent``): a **plan** is a
``Plan`` of steps (``Step``); a step's **query** becomes a ``SafeQuery`` in the sandbox; to **run**
is to execute a plan's steps (``Agent.run``, ``Engine.run``, ``structq run``) and nothing
else; an executor **fetches** one safe query into a ``ResultSet``; a step's rows in a run are
a ``StepResult``, a whole run's a ``PlanResult``; an ``Answer`` carries the text, citations,
plan and ``PlanResult``.

The public surface is re-exported here lazily so that importing ``structq`` (and running
``structq --help``) does not load LangChain or database drivers.
"""

from __future__ import annotations

from typing import Any

from .errors import (
    ConfigError,
    ExecutionError,
    ManifestError,
    ModelError,
    PlanError,
    QueryTimeout,
    SandboxViolation,
    SourceUnavailable,
    StructqError,
    SynthesisError,
)

__version__ = "0.1.0"

_LAZY = {
    "Agent": "structq.agent",
    "Answer": "structq.agent",
    "Plan": "structq.agent",
    "CapabilitySet": "structq.capabilities",
}

__all__ = [
    "Agent",
    "Answer",
    "CapabilitySet",
    "ConfigError",
    "ExecutionError",
    "ManifestError",
    "ModelError",
    "Plan",
    "PlanError",
    "QueryTimeout",
    "SandboxViolation",
    "SourceUnavailable",
    "StructqError",
    "SynthesisError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'structq' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
