"""SQL over earlier steps' results (``source: local``): intersections, growth rates, joins
across sources.

Each earlier ``output_key`` becomes a table with the columns its result returned. ``Engine``
describes those tables to the sandbox with ``local_manifest(results)``, checks the step's SQL
with ``check_sql(query, local_manifest(results), …)`` like any other source, then runs it with
``LocalExecutor(results).fetch(safe_query)``.

Why an in-memory SQLite rather than DuckDB: it is in the standard library (no extra
dependency, nothing to install for the demo), it is the dialect the demo company's database
and its examples already use, so the planner writes one SQL flavour, and loading plus querying
100k rows takes a fraction of a second. Every run gets a brand-new in-memory database, loaded
from the results and then switched to ``query_only``: nothing is shared between runs or
threads, and a run cannot see another's tables.

``inference.py`` turns results into typed tables (and the ``local`` manifest the sandbox
checks against); ``executor.py`` loads them into SQLite and runs the query.
"""

from __future__ import annotations

from .executor import DEFAULT_TIMEOUT_S, LocalExecutor
from .inference import LocalTable, describe_results, infer_column_type, local_manifest, manifest_for

__all__ = ["DEFAULT_TIMEOUT_S", "LocalExecutor", "LocalTable", "describe_results", "infer_column_type",
           "local_manifest", "manifest_for"]
