"""Search responses → rows: the tabular shape every later step (and ``source: local``) reads.

Pure functions over decoded JSON; no client, no I/O. Three shapes of answer:

- **hits** → one row per document: ``_id``, ``_score``, the allowed ``_source`` fields in
  manifest order, then ``_highlight`` when the request asked for highlighting;
- **aggregations** → one row per innermost bucket, the keys of the enclosing buckets as
  columns (see :func:`aggregation_rows`); a body with both hits and aggregations answers with
  the aggregation rows, because a question that aggregates is about the buckets;
- **count** → one row, one column ``count`` (a body with ``size: 0`` and no aggregations),
  counted up to a bound: past it the row says "at least" (:func:`count_rows`).

The manifest, not the search server, decides which fields leave this module: a field the manifest
denies (or does not declare) is dropped even if the search server returned it.

Some aggregations answer with estimates, and a number shown as exact when it is not is worse
than no number: ``SearchTable.notes`` says so for ``terms`` counts with a ``doc_count_error_upper_bound``
above 0, ``cardinality`` values at or above the ``precision_threshold`` (HyperLogLog++ counts
exactly, up to rare hash collisions, only below it) and percentiles (t-digest or HDR sketches).

``hits.py`` holds hits and counts (and ``SearchTable``, the rows both return);
``aggregations.py`` the bucket walk.
"""

from __future__ import annotations

from .aggregations import aggregation_rows
from .hits import HIGHLIGHT_COLUMN, HIGHLIGHT_SEPARATOR, SearchTable, count_rows, hit_rows

__all__ = ["HIGHLIGHT_COLUMN", "HIGHLIGHT_SEPARATOR", "SearchTable", "aggregation_rows", "count_rows", "hit_rows"]
