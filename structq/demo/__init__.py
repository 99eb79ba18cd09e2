"""The demo company: a deterministic generator of a Chinese company's data.

``build_demo(directory)`` writes ``company.db`` (SQLite: employees, projects,
project_members, employee_performance, customers, products, sales, contracts) and
``weekly_reports.jsonl`` (documents for the ``weekly_reports`` search index). The bundled
capability manifests in ``capabilities/`` describe exactly these tables and fields.

The data flow, one module per job::

    vocab, phrases, timeline, story   constant words, calendar, planted facts
        → org, projects, commerce, sales, reports   generators (seeded streams)
        → schema   row types and DDL
        → store    SQLite / JSONL writers, atomic replacement
    builder.build_demo ties them together.
"""

from __future__ import annotations

from .builder import DATABASE_NAME, REPORTS_INDEX, REPORTS_NAME, DemoPaths, build_demo

__all__ = ["DATABASE_NAME", "REPORTS_INDEX", "REPORTS_NAME", "DemoPaths", "build_demo"]
