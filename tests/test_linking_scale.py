"""Linking on a large catalogue: bounded candidate sets with exact scores.

A common term (in more than ``NOMINATE`` documents) nominates only its best documents; every
candidate's score is still the full BM25 of the question. Proven by outcome against a
brute-force score over every document, never by timing.
"""

from __future__ import annotations

from typing import Any

import pytest

from structq.capabilities import CapabilitySet, Manifest
from structq.linking import LinkingIndex, select
from structq.linking.index import NOMINATE
from structq.linking.select import _query

QUESTION = "total invoice amount per ledger status"
PER_SOURCE = 100
#: More than twice as many tables as a common term nominates; table ``RARE`` alone says ``ledger``.
COUNT = 2 * NOMINATE + PER_SOURCE
RARE = COUNT - 7


def _manifest(source: str, first: int, count: int, *, rare: int | None = None) -> dict[str, Any]:
    """``count`` tables that all say ``invoice``, ``amount``, ``status`` and ``total``; table
    ``rare`` (if given) is the only one that also says ``ledger``."""
    tables = []
    for i in range(first, first + count):
        words = "ledger invoice" if i == rare else "invoice"
        tables.append({"name": f"t{i}", "description": f"{words} records",
                       "columns": [{"name": "id", "type": "integer", "primary_key": True},
                                   {"name": "amount", "type": "numeric", "description": f"total {words} amount"},
                                   {"name": "status", "type": "text"}]})
    return {"source": source, "kind": "sql", "url": "sqlite://", "tables": tables}


@pytest.fixture(scope="module")
def large() -> CapabilitySet:
    return CapabilitySet([Manifest.model_validate(_manifest(f"s{n}", n * PER_SOURCE, PER_SOURCE, rare=RARE))
                          for n in range(COUNT // PER_SOURCE)])


def _brute_force(bm25: Any, query: dict[str, float]) -> dict[int, float]:
    """BM25 of ``query`` over every document, as if no term were common."""
    out: dict[int, float] = {}
    for term, weight in query.items():
        for doc, factor in bm25.postings.get(term, {}).items():
            out[doc] = out.get(doc, 0.0) + weight * bm25.idf[term] * factor
    return out


def test_a_common_term_nominates_a_bounded_set_with_exact_scores(large: CapabilitySet) -> None:
    index = LinkingIndex.build(large)
    query = _query(QUESTION)
    common = [t for t in query if len(index.tables.postings.get(t, ())) > NOMINATE]
    assert {"invoice", "amount", "status", "total"} <= set(common)
    scored = index.tables.score(query)
    assert len(scored) < len(index.entities)
    assert len(scored) <= NOMINATE * len(common) + sum(len(index.tables.postings.get(t, ())) for t in query
                                                       if t not in common)
    exact = _brute_force(index.tables, query)
    assert scored == pytest.approx({doc: exact[doc] for doc in scored})
    rare = index.position[(f"s{RARE // PER_SOURCE}", f"t{RARE}")]
    assert rare in scored and scored[rare] == pytest.approx(max(exact.values()))


def test_the_table_a_rare_word_names_is_kept_among_thousands_that_share_the_rest(large: CapabilitySet) -> None:
    selection = select(QUESTION, large)
    assert selection.pruned
    assert selection.keeps(f"s{RARE // PER_SOURCE}", f"t{RARE}")
