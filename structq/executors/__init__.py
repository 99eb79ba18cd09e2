"""Executors run checked queries against sources; one class per manifest ``kind:``, named by
its source kind (``structq.sources``).

The backends import lazily (``SqlExecutor`` pulls in SQLAlchemy, ``LocalExecutor`` sqlglot) so
importing this package stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Executor, ResultSet

__all__ = [
    "Executor",
    "LocalExecutor",
    "ResultSet",
    "SqlExecutor",
    "local_manifest",
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
