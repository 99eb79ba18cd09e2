"""Golden file for the search-DSL sandbox's rewrites (``tests/fixtures/sandbox/rewrites_dsl.json``),
the counterpart of the SQL ones (``test_sandbox_golden.py``).

Each case gives a request body, the rewrite the sandbox must produce (row filter, filter
context, readable ``_source``, size cap, references bound) and, where the rewrite adds a row
filter, the same request written out by hand. As sqlglot's ``check_file`` executes its
fixtures, the expected rewrites run on the real search server (osmem-server) over the documents in
the file and must give the hits and aggregations the hand-written request gives — so a golden
rewrite that reads the wrong rows cannot be "blessed" by updating the file.

``STRUCTQ_UPDATE_GOLDEN=1 pytest tests/test_sandbox_dsl_golden.py`` rewrites the expected
bodies (when the tests run, never at import).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from golden_support import UPDATE
from manifest_support import manifest_text
from sandbox_support import FIXTURES
from search_support import load_declared, raw_client

from structq.capabilities import load_manifest_text
from structq.safety import check_dsl

GOLDEN = FIXTURES / "rewrites_dsl.json"
INDEX = "golden_weekly_reports"
REPORTS = load_manifest_text(manifest_text("dsl_reports", index=INDEX))[0]
DENIED = {"salary", "private_notes"}


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


CASES = _golden()["cases"]


def _rewrite(golden: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return check_dsl(body, REPORTS, INDEX, params=golden["params"], vars=golden["vars"]).body


def _dump(golden: dict[str, Any]) -> str:
    """The file's layout: one document per line, one case key per line, so diffs stay small."""
    line = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731
    documents = ",\n".join(f"    {line(d)}" for d in golden["documents"])
    cases = ",\n".join("    {\n" + ",\n".join(f"      {line(k)}: {line(v)}" for k, v in case.items()) + "\n    }"
                       for case in golden["cases"])
    comment = ",\n".join(f"    {line(c)}" for c in golden["comment"])
    return (f'{{\n  "comment": [\n{comment}\n  ],\n  "vars": {line(golden["vars"])},\n'
            f'  "params": {line(golden["params"])},\n  "documents": [\n{documents}\n  ],\n'
            f'  "cases": [\n{cases}\n  ]\n}}\n')


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    """Each case's expected rewrite as the file holds it when the tests run; rewritten first
    under ``STRUCTQ_UPDATE_GOLDEN=1``."""
    golden = _golden()
    if UPDATE:
        for case in golden["cases"]:
            case["expected"] = _rewrite(golden, case["input"])
        GOLDEN.write_text(_dump(golden), encoding="utf-8")
    return {case["title"]: case["expected"] for case in _golden()["cases"]}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["title"])
def test_rewrite_matches_golden(case: dict[str, Any], expected: dict[str, Any]) -> None:
    assert _rewrite(_golden(), case["input"]) == expected[case["title"]]


@pytest.fixture(scope="module")
def engine(search_server: Any) -> Any:
    url = load_declared(search_server.url, REPORTS, {INDEX: _golden()["documents"]})
    with raw_client(url) as client:
        yield client


def _outcome(response: dict[str, Any]) -> tuple[list[str], Any]:
    return sorted(hit["_id"] for hit in response["hits"]["hits"]), response.get("aggregations")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["title"])
def test_golden_rewrite_gives_the_hand_written_results(case: dict[str, Any], expected: dict[str, Any],
                                                       engine: Any) -> None:
    rewritten = engine.search(index=INDEX, body=expected[case["title"]])
    reference = engine.search(index=INDEX, body=case.get("by_hand") or case["input"])
    assert _outcome(rewritten) == _outcome(reference)
    assert rewritten["hits"]["hits"] or rewritten.get("aggregations"), "a case that finds nothing proves little"
    for hit in rewritten["hits"]["hits"]:
        assert not DENIED & set(hit["_source"]) and "email" not in hit["_source"].get("reviewer", {})
