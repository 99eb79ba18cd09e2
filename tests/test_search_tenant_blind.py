"""Tenant-blind search: on a row-filtered index, tenant t1's answer is identical whether or not
other tenants' documents exist — hits, order, scores, totals, aggregations.

Differential, on the real search server (osmem-server): every body is checked for ``tb_alone`` (only
t1's documents) and for ``tb_mixed`` (the same documents among many of t2's), and both
answers are compared — the rows the executor returns and the search server's raw response. A
parametrized table covers the classes of the DSL by hand (what must stay identical, and what
is refused, with which code), a hypothesis property covers generated bodies. Indices without
row filters keep relevance scoring, and the refused features, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings

from sandbox_support import refused
from search_support import load_indices, raw_client as opensearch_client, search_executor
from servers import SearchServer
from structq.errors import ExecutionError, SandboxViolation
from structq.executors.search import embedded_server
from structq.executors.search.executor import SearchExecutor
from structq.safety import check_dsl
from structq.safety.query import SafeQuery
from tenant_blind_support import ALONE, MIXED, T1_DOCS, bodies, make_manifest, mixed_documents

VARS = {"tenant_id": "t1"}
TB = make_manifest()
UNFILTERED = make_manifest(row_filters=False)


@pytest.fixture(scope="module")
def engine_url(search_server: SearchServer) -> str:
    mapping = embedded_server.index_mapping(TB.index(ALONE))
    load_indices(search_server.url, [(ALONE, mapping, T1_DOCS), (MIXED, mapping, mixed_documents())])
    return search_server.url


@pytest.fixture(scope="module")
def executor(engine_url: str) -> Iterator[SearchExecutor]:
    with search_executor(make_manifest(engine_url)) as ex:
        yield ex


@pytest.fixture(scope="module")
def raw_client(engine_url: str) -> Iterator[Any]:
    with opensearch_client(engine_url) as client:
        yield client


def _without_index_names(value: Any) -> Any:
    """A response with what names the index or times the request taken out."""
    if isinstance(value, dict):
        return {k: _without_index_names(v) for k, v in value.items() if k not in ("_index", "took", "_shards")}
    if isinstance(value, list):
        return [_without_index_names(v) for v in value]
    return value


def answer(executor: SearchExecutor, client: Any, body: dict[str, Any], index: str) -> Any:
    """What t1 learns from ``body`` on ``index``: the refusal, the search server's error, or the rows,
    notes and the raw response."""
    try:
        safe = check_dsl(body, TB, index, vars=VARS)
    except SandboxViolation as exc:
        return ("refused", exc.code, exc.message.replace(index, "<index>"))
    try:
        result = executor.fetch(safe)
    except ExecutionError as exc:
        return ("error", type(exc).__name__, str(exc).replace(index, "<index>"))
    raw = client.search(index=index, body=safe.body)
    notes = tuple(note.replace(index, "<index>") for note in result.notes)
    return ("rows", result.columns, result.rows, result.truncated, notes, _without_index_names(raw))


def assert_tenant_blind(executor: SearchExecutor, client: Any, body: dict[str, Any]) -> Any:
    alone = answer(executor, client, body, ALONE)
    assert answer(executor, client, body, MIXED) == alone, body
    return alone


# --- the classes, by hand ------------------------------------------------------------------

#: Bodies whose answer must be identical (and is, once the query runs in filter context).
SAME: dict[str, dict[str, Any]] = {
    "match on a word both write": {"query": {"match": {"content": "apple"}}},
    "match on a word only t2 writes": {"query": {"match": {"content": "secretword apple"}}},
    "match operator and": {"query": {"match": {"content": {"query": "apple banana", "operator": "and"}}}},
    "match fuzziness 0": {"query": {"match": {"content": {"query": "apple", "fuzziness": 0}}}},
    "match_phrase": {"query": {"match_phrase": {"content": "apple banana"}}},
    "match_bool_prefix": {"query": {"match_bool_prefix": {"content": "banana ap"}}},
    "multi_match cross_fields": {"query": {"multi_match": {"query": "apple weekly", "fields": ["title^2", "content"],
                                                           "type": "cross_fields"}}},
    "simple_query_string with the fuzzy operator": {
        "query": {"simple_query_string": {"query": "appla~1 | banana", "fields": ["content"]}}},
    "prefix over t2's expansions": {"query": {"prefix": {"content": "app"}}},
    "wildcard over t2's expansions": {"query": {"wildcard": {"content": "ba*"}}},
    "sort by _score": {"query": {"match": {"content": "report"}}, "sort": ["_score"]},
    "track_scores with a field sort": {"query": {"match": {"content": "apple"}}, "track_scores": True,
                                       "sort": [{"n": "desc"}]},
    "dis_max and boosting": {"query": {"dis_max": {"queries": [
        {"boosting": {"positive": {"match": {"content": "apple"}}, "negative": {"match": {"content": "report"}},
                      "negative_boost": 0.1}}, {"match": {"title": "banana"}}]}}},
    "function_score without min_score": {"query": {"function_score": {
        "query": {"match": {"content": "cherry"}}, "functions": [{"field_value_factor": {"field": "n"}}]}}},
    "ties in index order, paged": {"query": {"match_all": {}}, "from": 2, "size": 4},
    "collapse": {"query": {"match": {"content": "apple"}}, "collapse": {"field": "author"}},
    "highlight ranked by score": {"query": {"match": {"content": "apple report"}},
                                  "highlight": {"order": "score", "fields": {"content": {"number_of_fragments": 1}}}},
    "plain highlighter": {"query": {"match": {"content": "apple"}},
                          "highlight": {"type": "plain", "fields": {"content": {"fragment_size": 10}}}},
    "count": {"size": 0, "query": {"match": {"content": "banana"}}},
    "total hits": {"track_total_hits": True, "query": {"prefix": {"content": "ch"}}},
    "terms agg with counts errors": {"size": 0, "aggs": {"t": {"terms": {"field": "author", "size": 2}}}},
    "cardinality": {"size": 0, "aggs": {"c": {"cardinality": {"field": "author", "precision_threshold": 1}}}},
    "percentiles": {"size": 0, "aggs": {"p": {"percentiles": {"field": "n"}}}},
    "histogram with empty buckets": {"size": 0, "aggs": {"h": {"histogram": {"field": "n", "interval": 3,
                                                                             "min_doc_count": 0}}}},
    "top_hits by score": {"size": 0, "query": {"match": {"content": "apple secretword"}},
                          "aggs": {"t": {"terms": {"field": "tag", "size": 3}, "aggs": {"h": {"top_hits": {"size": 1}}}}}},
}

#: Bodies refused on a row-filtered index (accepted without row filters when the code is
#: ``index_statistics``: those depend on other tenants' documents only through the filter).
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "min_score": ({"min_score": 0.01, "query": {"match": {"content": "secretword"}}}, "index_statistics"),
    "function_score min_score": ({"query": {"function_score": {"query": {"match": {"content": "apple"}},
                                                               "min_score": 0.5}}}, "index_statistics"),
    "match_phrase_prefix": ({"query": {"match_phrase_prefix": {"content": {"query": "banana ap",
                                                                           "max_expansions": 2}}}}, "index_statistics"),
    "multi_match phrase_prefix": ({"query": {"multi_match": {"query": "ap", "fields": ["content"],
                                                             "type": "phrase_prefix"}}}, "index_statistics"),
    "fuzzy": ({"query": {"fuzzy": {"content": {"value": "appla", "max_expansions": 1}}}}, "index_statistics"),
    "match fuzziness": ({"query": {"match": {"content": {"query": "appla", "fuzziness": "AUTO"}}}},
                        "index_statistics"),
    "multi_match fuzziness": ({"query": {"multi_match": {"query": "appla", "fields": ["content"], "fuzziness": 1}}},
                              "index_statistics"),
    "match_bool_prefix fuzziness": ({"query": {"match_bool_prefix": {"content": {"query": "appla b", "fuzziness": 1}}}},
                                    "index_statistics"),
    "simple_query_string FUZZY flag": ({"query": {"simple_query_string": {
        "query": "appla~1", "fields": ["content"], "flags": "FUZZY|OR"}}}, "index_statistics"),
    "in post_filter": ({"post_filter": {"fuzzy": {"content": "appla"}}}, "index_statistics"),
    "in an aggregation filter": ({"size": 0, "aggs": {"f": {"filter": {"match_phrase_prefix": {"content": "ap"}}}}},
                                 "index_statistics"),
    "in highlight_query": ({"highlight": {"highlight_query": {"fuzzy": {"content": "appla"}},
                                          "fields": {"content": {}}}}, "index_statistics"),
    "fvh highlighter": ({"highlight": {"type": "fvh", "fields": {"content": {}}}}, "index_statistics"),
    "fvh highlighter on one field": ({"highlight": {"fields": {"content": {"type": "fvh"}}}}, "index_statistics"),
    "deep inside a bool": ({"query": {"bool": {"should": [
        {"match": {"content": {"query": "x", "fuzziness": 2}}}]}}}, "index_statistics"),
    # Refused on every index for the same reason.
    "significant_terms": ({"size": 0, "aggs": {"s": {"significant_terms": {"field": "tag"}}}}, "denied_aggregation"),
    "significant_text": ({"size": 0, "aggs": {"s": {"significant_text": {"field": "content"}}}}, "denied_aggregation"),
    "terms min_doc_count 0": ({"size": 0, "aggs": {"t": {"terms": {"field": "tag", "min_doc_count": 0}}}},
                              "denied_value"),
    "global": ({"size": 0, "aggs": {"g": {"global": {}}}}, "denied_aggregation"),
    "more_like_this": ({"query": {"more_like_this": {"fields": ["content"], "like": "apple"}}}, "denied_clause"),
    "suggest": ({"suggest": {"s": {"text": "appla", "term": {"field": "content"}}}}, "denied_key"),
    "explain": ({"explain": True}, "denied_key"),
    "profile": ({"profile": True}, "denied_key"),
    "rescore": ({"rescore": {"query": {"rescore_query": {"match": {"content": "apple"}}}}}, "denied_key"),
    "query_string": ({"query": {"query_string": {"query": "appla~1"}}}, "denied_clause"),
}


@pytest.mark.parametrize("body", SAME.values(), ids=SAME.keys())
def test_the_answer_does_not_depend_on_other_tenants(executor: SearchExecutor, raw_client: Any,
                                                     body: dict[str, Any]) -> None:
    kind, *_ = assert_tenant_blind(executor, raw_client, body)
    assert kind == "rows"


@pytest.mark.parametrize(("body", "code"), REFUSED.values(), ids=REFUSED.keys())
def test_features_that_read_other_tenants_statistics_are_refused(body: dict[str, Any], code: str) -> None:
    error = refused(check_dsl, body, TB, ALONE, vars=VARS, code=code)
    assert error.hint
    if code == "index_statistics":
        assert "row-filtered index" in error.message
        check_dsl(body, UNFILTERED, ALONE)  # the same body is fine where no row filter applies


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_generated_bodies_answer_the_same_without_other_tenants(executor: SearchExecutor, raw_client: Any,
                                                                body: dict[str, Any]) -> None:
    kind, detail, *_ = assert_tenant_blind(executor, raw_client, body)
    event(f"{kind} {detail}" if kind != "rows" else kind)


# --- the mechanism -------------------------------------------------------------------------


def test_the_two_indices_tell_scored_queries_apart(raw_client: Any) -> None:
    """The differential can see the leak: scored beside the row filter (the former rewrite),
    a match on a word both tenants write ranks t1's documents with other scores."""
    body = {"query": {"bool": {"must": [{"match": {"content": "apple"}}], "filter": [{"term": {"tenant_id": "t1"}}]}}}
    scores = [[h["_score"] for h in raw_client.search(index=i, body=body)["hits"]["hits"]] for i in (ALONE, MIXED)]
    assert scores[0] and scores[0] != scores[1]


def test_the_query_runs_in_filter_context() -> None:
    safe = check_dsl({"query": {"match": {"content": "apple"}}}, TB, ALONE, vars=VARS)
    assert safe.body["query"] == {"bool": {"filter": [{"match": {"content": "apple"}}, {"term": {"tenant_id": "t1"}}]}}


@pytest.mark.parametrize(("flags", "sent"), [
    (None, "AND|ESCAPE|NEAR|NOT|OR|PHRASE|PRECEDENCE|PREFIX|SLOP|WHITESPACE"),
    ("ALL", "AND|ESCAPE|NEAR|NOT|OR|PHRASE|PRECEDENCE|PREFIX|SLOP|WHITESPACE"),
    ("or|prefix", "OR|PREFIX"),
    ("NONE", "NONE"),
])
def test_simple_query_string_loses_only_the_fuzzy_operator(flags: str | None, sent: str) -> None:
    clause = {"query": "appla~1", "fields": ["content"], **({"flags": flags} if flags else {})}
    safe = check_dsl({"query": {"simple_query_string": clause}}, TB, ALONE, vars=VARS)
    assert safe.body["query"]["bool"]["filter"][0]["simple_query_string"]["flags"] == sent
    unfiltered = check_dsl({"query": {"simple_query_string": clause}}, UNFILTERED, ALONE)
    assert unfiltered.body["query"]["simple_query_string"] == clause


@pytest.mark.parametrize(("extra", "noted"), [({}, True), ({"sort": [{"n": "desc"}], "track_scores": True}, False)],
                         ids=["unsorted", "sorted"])
def test_hits_of_a_row_filtered_index_have_no_score_and_say_why(executor: SearchExecutor, extra: dict[str, Any],
                                                                noted: bool) -> None:
    result = executor.fetch(check_dsl({"query": {"match": {"content": "apple"}}, **extra}, TB, MIXED, vars=VARS))
    at = result.columns.index("_score")
    assert result.rows and all(row[at] is None for row in result.rows)
    assert any("row filter" in note and "sort by a field" in note for note in result.notes) == noted


def test_indices_without_row_filters_keep_relevance(engine_url: str) -> None:
    """No row filter, no tenant to protect: the query is sent as written and ranked."""
    manifest = make_manifest(engine_url, row_filters=False)
    safe: SafeQuery = check_dsl({"query": {"match": {"content": "apple report"}}}, manifest, ALONE)
    assert safe.body["query"] == {"match": {"content": "apple report"}}
    with search_executor(manifest) as ex:
        result = ex.fetch(safe)
    scores = [row[result.columns.index("_score")] for row in result.rows]
    assert all(s is not None and s > 0 for s in scores) and len(set(scores)) > 1
    assert scores == sorted(scores, reverse=True) and not result.notes


def test_the_planner_is_told_before_it_plans() -> None:
    """The catalogue the model reads says what a row-filtered index does not do."""
    from structq.capabilities.render import render_manifest

    hint = "matches without relevance scores: sort by a field; no min_score, fuzzy"
    assert hint in render_manifest(TB) and hint not in render_manifest(UNFILTERED)
