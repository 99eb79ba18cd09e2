"""What the search sandbox reads from an index declaration (``_context.IndexFacts``) is
derived once per index object, kept while it lives, and is what deriving it afresh gives; the
script walk skips plain values without giving up the depth limit.

Nothing here is timed; the tests count derivations.
"""

from __future__ import annotations

import gc
from typing import Any
from unittest import mock

import pytest
from manifest_support import manifest_text

from structq.capabilities import Manifest, load_manifest_text
from structq.errors import SandboxViolation
from structq.safety import check_dsl
from structq.safety.dsl import _context
from structq.safety.dsl._request import MAX_DEPTH

INDEX = "weekly_reports"


def _reports() -> Manifest:
    return load_manifest_text(manifest_text("dsl_reports", index=INDEX), env={})[0]


def _check(body: Any, source: Manifest) -> Any:
    return check_dsl(body, source, INDEX, vars={"tenant_id": 7})


def test_an_index_is_derived_once_however_often_it_is_checked() -> None:
    sources = [_reports() for _ in range(80)]
    with mock.patch.object(_context.IndexFacts, "of", side_effect=_context.IndexFacts.of) as derive:
        for _ in range(3):
            for source in sources:
                _check({"query": {"term": {"department": "eng"}}}, source)
    assert derive.call_count == len(sources)


def test_what_an_index_gave_goes_with_its_manifest() -> None:
    gc.collect()
    before = len(_context._facts)
    sources = [_reports() for _ in range(10)]
    for source in sources:
        _check({"query": {"match_all": {}}}, source)
    assert len(_context._facts) == before + 10
    del sources, source
    gc.collect()
    assert len(_context._facts) == before


def test_the_facts_kept_are_those_derived_afresh() -> None:
    source = _reports()
    index = source.index(INDEX)
    _check({"query": {"match_all": {}}}, source)
    kept = _context._facts.get(index, pytest.fail)  # kept: never derived again here
    assert kept == _context.IndexFacts.of(index)
    assert "salary" in kept.denied and "reviewer.email" in kept.denied and "reviewer" in kept.hiding
    assert "salary" not in kept.allowed_fields and "reviewer.name" in kept.allowed_fields


def _nested(depth: int, leaf: Any) -> Any:
    """``leaf`` inside ``depth`` lists."""
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("leaf", ["text", 3, None, {}, []])
def test_the_depth_limit_holds_for_plain_values_too(leaf: Any) -> None:
    source = _reports()
    # ``query`` is one level: the leaf below MAX_DEPTH lists sits at depth MAX_DEPTH + 1.
    with pytest.raises(SandboxViolation) as caught:
        _check({"query": _nested(MAX_DEPTH, leaf)}, source)
    assert caught.value.code == "invalid_body" and "deeper than" in str(caught.value)
    with pytest.raises(SandboxViolation) as caught:  # one level less: refused by the grammar
        _check({"query": _nested(MAX_DEPTH - 1, leaf)}, source)
    assert "deeper than" not in str(caught.value)


def test_a_script_beside_many_plain_values_is_found() -> None:
    source = _reports()
    body = {"query": {"match_all": {}}, "_source": ["title"] * 500 + [{"script": "1"}]}
    with pytest.raises(SandboxViolation) as caught:
        _check(body, source)
    assert caught.value.code == "script"
