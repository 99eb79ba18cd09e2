"""structq: answers about company data from checked, read-only query plans.

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
