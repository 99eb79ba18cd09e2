"""Executors run checked queries against sources; one registered class per source ``kind``.

The backends import lazily (``SqlExecutor`` pulls in SQLAlchemy, ``LocalExecutor`` sqlglot) so
importing this package stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Executor, ResultSet, create_executor, executor_class, register

__all__ = [
    "Executor",
    "LocalExecutor",
    "ResultSet",
    "SqlExecutor",
    "create_executor",
    "executor_class",
    "local_manifest",
    "register",
]

_LAZY = {
    "SqlExecutor": "structq.executors.sql",
    "LocalExecutor": "structq.executors.local",
    "local_manifest": "structq.executors.local",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
