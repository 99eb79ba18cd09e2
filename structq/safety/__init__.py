"""The sandbox: pure functions from (manifest, query) to a ``SafeQuery`` or a ``SandboxViolation``.

No I/O and no executor imports here: what the sandbox accepts is decided by the query and
the manifest alone.
"""

from .dsl import check_dsl
from .query import SafeQuery
from .sql import check_sql

__all__ = ["SafeQuery", "check_dsl", "check_sql"]
