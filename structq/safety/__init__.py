"""The sandbox: pure functions from (manifest, query) to a ``SafeQuery`` or a ``SandboxViolation``.

No I/O and no executor imports here: what the sandbox accepts is decided by the query and
the manifest alone. Where a query refers to earlier steps (``<key>``, ``<key.column>``) is
decided by one grammar, ``find_references`` (defined beside the step model in
``capabilities.references``, because manifests' examples are checked with it at load time);
plan validation, ``Engine``, the local executor and both sandboxes use it.

The search DSL's sandbox (``check_dsl``) is imported when a search step asks for it, so a plan
of SQL steps does not load it.
"""

from typing import Any

from structq.capabilities.references import Reference, find_references, local_inputs, replace_references

from .query import SafeQuery
from .sql import check_sql

__all__ = ["Reference", "SafeQuery", "check_dsl", "check_sql", "find_references", "local_inputs",
           "replace_references"]


def __getattr__(name: str) -> Any:
    if name == "check_dsl":
        from .dsl import check_dsl

        return check_dsl
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
