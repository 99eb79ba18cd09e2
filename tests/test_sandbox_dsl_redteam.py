"""Red-team tests for the search-DSL sandbox, the search executor and references, run on the
real search server (osmem-server) through the real executor. (SQL over earlier results — the local
executor — has its own red team: ``test_sandbox_local_redteam.py``.)

Correctly blocked attacks are ordinary (parametrized) tests. The former holes (objects smuggled
in reference values, top_hits multiplying the row cap, unbounded histograms, deep bodies) are
tests asserting the SAFE behaviour, so a regression fails the run.

The search server accepts scripts (``test_the_search_server_really_runs_scripts`` shows it), so every
script refusal below is the only thing standing between a plan and code on the cluster.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sandbox_support as support
from es_proxy import EsProxy
from manifest_support import manifest_text
from search_support import load_declared, search_executor
from search_support import raw_client as opensearch_client
from servers import SearchServer

from structq.agent.engine import Engine
from structq.agent.plan import Plan, coerce_search_queries
from structq.capabilities import CapabilitySet, load_manifest_text
from structq.capabilities.model import Manifest
from structq.errors import (
    ExecutionError,
    PlanError,
    SandboxViolation,
    StructqError,
)
from structq.executors.base import ResultSet
from structq.executors.search.executor import SearchExecutor
from structq.safety import check_dsl
from structq.safety.query import SafeQuery
from structq.sources import executor_for

DOCS_INDEX = "rt_docs"
OTHER_INDEX = "rt_other"          # declared, holds another team's data
SECRET_INDEX = "rt_secret"        # on the search server, NOT declared anywhere
NOTES_INDEX = "rt_notes"          # an object field without declared sub-fields (planted data)
MAX_ROWS = 5
LIMIT = MAX_ROWS + 1


#: Tenant t1 sees d0..d4; t2's documents (d5..d9) carry markers that must never come back.
T2_MARKERS = ("t2", "E5", "E6", "E7", "E8", "E9", "T2ONLY")
DENIED_MARKERS = ("SSN-", "1000", "sec", "priv", "hidden", "PRIVATE-NOTE", "TOPSECRET", "OTHER-DATA")


def _doc(i: int) -> dict[str, Any]:
    t2 = i >= 5
    return {
        "_id": f"d{i}",
        "author_id": f"E{i}",
        "tenant_id": "t2" if t2 else "t1",
        "content": f"hello world {i}" + (" T2ONLY" if t2 else ""),
        "score": i * 1.5,
        "salary": 10_000 + i,
        "ssn": f"SSN-{i:03d}",
        "private_notes": f"PRIVATE-NOTE {i}",
        "undeclared": f"hidden{i}",
        "meta": {"team": f"team{i % 2}", "secret": f"sec{i}"},
        "comments": [{"by": f"C{i}", "private": f"priv{i}"}],
    }


DOCS = [_doc(i) for i in range(10)]
NOTES = [{"_id": f"n{i}", "author_id": f"E{i}", "attrs": {"k": i}} for i in range(10)] + [
    # A document an attacker managed to write: its object value looks like wildcard options.
    {"_id": "planted", "author_id": "planted", "attrs": {"value": "*", "case_insensitive": True}},
]


def make_manifest(url: str = "http://127.0.0.1:9") -> Manifest:
    manifest, _ = load_manifest_text(manifest_text("dsl_redteam", url=url), env={})
    return manifest


RT = make_manifest()


@pytest.fixture(scope="module")
def engine_url(search_server: SearchServer) -> str:
    """The red-team indices on the shared search server; SECRET_INDEX is there but undeclared, so it
    is made without a mapping."""
    return load_declared(search_server.url, RT, {DOCS_INDEX: DOCS, OTHER_INDEX: [{"_id": "o1", "x": "OTHER-DATA"}],
                                                SECRET_INDEX: [{"_id": "s1", "x": "TOPSECRET"}], NOTES_INDEX: NOTES})


@pytest.fixture(scope="module")
def manifest(engine_url: str) -> Manifest:
    return make_manifest(engine_url)


@pytest.fixture(scope="module")
def executor(manifest: Manifest) -> Iterator[SearchExecutor]:
    with search_executor(manifest) as ex:
        yield ex


def check(body: Any, index: str = DOCS_INDEX, **kw: Any) -> SafeQuery:
    kw.setdefault("vars", {"tenant_id": "t1"})
    return check_dsl(body, RT, index, **kw)


def run(executor: SearchExecutor, body: Any, index: str = DOCS_INDEX, **kw: Any) -> ResultSet:
    return executor.fetch(check(body, index, **kw))


def refused(body: Any, index: str = DOCS_INDEX, *, code: str, **kw: Any) -> SandboxViolation:
    """``body`` is refused by the rule ``code`` names (see ``sandbox_support.refused``)."""
    return support.refused(check, body, index, code=code, **kw)


def _text(result: ResultSet) -> str:
    return json.dumps([list(r) for r in result.rows], ensure_ascii=False, default=str)


# ==========================================================================================
# (0) The search server runs scripts: only the sandbox stands between a plan and code
# ==========================================================================================


def test_the_search_server_really_runs_scripts(engine_url: str) -> None:
    """Sent raw (no sandbox), a script field reads a denied value: the guard matters."""
    with opensearch_client(engine_url) as client:
        response = client.search(index=DOCS_INDEX, body={
            "size": 1, "_source": False, "sort": ["author_id"],
            "script_fields": {"s": {"script": {"source": "doc['salary'].value"}}}})
    assert response["hits"]["hits"][0]["fields"]["s"] == [10_000]


# ==========================================================================================
# (1) Scripts anywhere — blocked
# ==========================================================================================

SCRIPT_ATTACKS: dict[str, dict[str, Any]] = {
    "script query": {"query": {"script": {"script": {"source": "return true"}}}},
    "script query inside bool filter": {"query": {"bool": {"filter": [{"script": {"script": "true"}}]}}},
    "Script with capital S": {"query": {"Script": {"source": "true"}}},
    "script nested under Script": {"query": {"Script": {"script": {"source": "true"}}}},
    "key with trailing space": {"query": {"match_all": {}}, "script ": {"source": "1"}},
    "key with leading space": {"query": {" script": {"source": "1"}}},
    "unicode-escaped key (decoded)": json.loads('{"query": {"scr\\u0069pt": {"script": "true"}}}'),
    "duplicate keys (last wins on decode)": json.loads(
        '{"query": {"match_all": {}}, "query": {"script": {"script": "true"}}}'),
    "script_fields": {"script_fields": {"s": {"script": "doc['salary'].value"}}},
    "_script sort": {"sort": {"_script": {"type": "number", "script": {"source": "doc['salary'].value"}}}},
    "_script sort in list": {"sort": [{"_script": {"type": "number", "script": "1"}}]},
    "script in sort options": {"sort": [{"score": {"order": "asc", "script": {"source": "1"}}}]},
    "script as sort missing": {"sort": [{"score": {"missing": {"script": "1"}}}]},
    "script_score query": {"query": {"script_score": {"query": {"match_all": {}}, "script": {"source": "1"}}}},
    "function_score script_score": {"query": {"function_score": {"script_score": {"script": "1"}}}},
    "function_score functions script_score": {"query": {"function_score": {"functions": [
        {"script_score": {"script": "doc['salary'].value"}}]}}},
    "scripted_metric": {"aggs": {"a": {"scripted_metric": {"init_script": "", "map_script": "",
                                                           "combine_script": "", "reduce_script": ""}}}},
    "bucket_script": {"aggs": {"a": {"terms": {"field": "author_id"}, "aggs": {
        "b": {"bucket_script": {"buckets_path": {}, "script": "1"}}}}}},
    "bucket_selector": {"aggs": {"a": {"terms": {"field": "author_id"}, "aggs": {
        "b": {"bucket_selector": {"buckets_path": {}, "script": "1"}}}}}},
    "script in terms agg": {"aggs": {"a": {"terms": {"script": {"source": "doc['ssn'].value"}}}}},
    "script beside field in metric": {"aggs": {"a": {"max": {"field": "score", "script": "doc['salary'].value"}}}},
    "script in composite source": {"aggs": {"a": {"composite": {"sources": [
        {"s": {"terms": {"script": "doc['ssn'].value"}}}]}}}},
    "runtime_mappings": {"runtime_mappings": {"x": {"type": "keyword", "script": "emit('x')"}}},
    "runtime_mappings without script": {"runtime_mappings": {"x": {"type": "keyword"}}},
    "script in aggregation meta": {"aggs": {"a": {"terms": {"field": "author_id"}, "meta": {"script": "1"}}}},
    "script inside range agg ranges": {"aggs": {"a": {"range": {"field": "score", "ranges": [{"to": 5, "script": "1"}]}}}},
    "script inside composite after": {"aggs": {"a": {"composite": {"sources": [
        {"a": {"terms": {"field": "author_id"}}}], "after": {"a": {"script": "1"}}}}}},
    "script inside highlight option": {"highlight": {"fields": {"content": {}}, "type": {"script": "1"}}},
    "scripts key": {"query": {"match_all": {}}, "aggs": {"a": {"terms": {"field": "author_id", "scripts": 1}}}},
    "template query": {"query": {"template": {"source": "{\"match_all\": {}}"}}},
    "search template id": {"id": "stored-template", "params": {"x": 1}},
    "search template source": {"source": {"query": {"match_all": {}}}, "params": {}},
    "params at top level": {"params": {"x": 1}},
    "wrapper query (base64 body)": {"query": {"wrapper": {"query": "eyJtYXRjaF9hbGwiOnt9fQ=="}}},
    "terms_set (minimum_should_match_script)": {"query": {"terms_set": {"author_id": {
        "terms": ["E1"], "minimum_should_match_script": {"source": "1"}}}}},
    "decay function with script-free field key": {"query": {"function_score": {"functions": [
        {"gauss": {"salary": {"origin": 0, "scale": 1}}}]}}},
}


#: The refusal code of every attack row (by its name in SCRIPT_ATTACKS, FIELD_ATTACKS, INDEX_IN_BODY
#: and CAP_ATTACKS) that is not its table's default: script attacks a key/clause allowlist refuses
#: first (a misspelt or padded key, a template, a wrapper); an undeclared field (``unknown_field``)
#: or a key/clause outside the allowlists among the field attacks; and every row of the two tables
#: with no single rule (another index named in the body; size caps vs malformed or too deep bodies).
ATTACK_CODES: dict[str, str] = {
    "Script with capital S": "denied_clause",
    "key with trailing space": "denied_key",
    "key with leading space": "denied_clause",
    "template query": "denied_clause",
    "search template id": "denied_key",
    "search template source": "denied_key",
    "params at top level": "denied_key",
    "wrapper query (base64 body)": "denied_clause",
    "terms_set (minimum_should_match_script)": "denied_clause",
    "decay function with script-free field key": "denied_key",
    "_source undeclared": "unknown_field",
    "stored_fields": "denied_key",
    "top_hits stored_fields": "denied_key",
    "top_hits script_fields": "script",
    "inner_hits on nested": "denied_key",
    "collapse inner_hits": "denied_key",
    "terms agg on undeclared": "unknown_field",
    "terms agg on _index": "unknown_field",
    "terms agg on _id": "unknown_field",
    "significant_text": "denied_aggregation",
    "sort on _id": "unknown_field",
    "term on denied.keyword": "unknown_field",
    "regexp on denied": "denied_clause",
    "multi_match without fields": "missing_key",
    "query_string default_field": "denied_clause",
    "query_string field syntax": "denied_clause",
    "simple_query_string without fields": "missing_key",
    "term on undeclared": "unknown_field",
    "term on _index": "unknown_field",
    "more_like_this": "denied_clause",
    "span_term on denied": "denied_clause",
    "intervals on denied": "denied_clause",
    "combined_fields": "denied_clause",
    "nested sort path hiding (object) via _source exclude typo": "unknown_field",
    "terms lookup": "terms_lookup",
    "indices_boost": "denied_key",
    "_index term": "unknown_field",
    "_index terms agg": "unknown_field",
    "more_like_this other index": "denied_clause",
    "percolate": "denied_clause",
    "geo_shape indexed_shape": "denied_clause",
    "index key at top level": "denied_key",
    "msearch-like header": "denied_key",
    "pit": "denied_key",
    "has_child": "denied_clause",
    "from + size past the limit": "size_limit",
    "from past the limit": "size_limit",
    "negative size": "invalid_body",
    "size as string": "invalid_body",
    "terms agg size": "size_limit",
    "nested terms agg size": "size_limit",
    "composite size": "size_limit",
    "top_hits size": "size_limit",
    "deeply nested bool": "invalid_body",
    "deeply nested aggs": "invalid_body",
    "deeply nested data": "invalid_body",
}


def attack_rows(table: dict[str, Any], default: str | None = None) -> list[Any]:
    """``(body, code)`` parameters for an attack table, named by their row."""
    return [pytest.param(body, ATTACK_CODES.get(name, default), id=name) for name, body in table.items()]


@pytest.mark.parametrize("body,code", attack_rows(SCRIPT_ATTACKS, "script"))
def test_scripts_are_refused(body: dict[str, Any], code: str) -> None:
    refused(body, code=code)


# ==========================================================================================
# (2) Denied / undeclared fields — blocked, including every oracle (filter, sort, aggregate)
# ==========================================================================================

FIELD_ATTACKS: dict[str, dict[str, Any]] = {
    # returned values
    "_source *": {"_source": "*"},
    "_source includes *": {"_source": {"includes": ["*"]}},
    "_source includes s*": {"_source": {"includes": ["s*"]}},
    "_source include (singular) ssn": {"_source": {"include": ["ssn"]}},
    "_source object hiding a denied field": {"_source": ["meta"]},
    "_source nested hiding a denied field": {"_source": ["comments"]},
    "_source meta.*": {"_source": ["meta.*"]},
    "_source undeclared": {"_source": ["undeclared"]},
    "_source denied": {"_source": ["salary"]},
    "fields *": {"fields": ["*"]},
    "fields denied": {"fields": ["ssn"]},
    "fields object form denied": {"fields": [{"field": "salary", "format": "x"}]},
    "docvalue_fields denied": {"docvalue_fields": ["salary"]},
    "docvalue_fields pattern": {"docvalue_fields": ["sal*"]},
    "stored_fields": {"stored_fields": ["*"]},
    "highlight *": {"query": {"match": {"content": "hello"}}, "highlight": {"fields": {"*": {}}}},
    "highlight denied field": {"highlight": {"fields": {"private_notes": {}}}},
    "highlight list form denied": {"highlight": {"fields": [{"private_notes": {}}]}},
    "highlight object": {"highlight": {"fields": {"meta": {}}}},
    "highlight_query on denied": {"highlight": {"fields": {"content": {}},
                                                "highlight_query": {"term": {"ssn": "SSN-001"}}}},
    "highlight matched_fields denied": {"highlight": {"fields": {"content": {"matched_fields": ["private_notes"]}}}},
    "top_hits _source *": {"aggs": {"a": {"top_hits": {"_source": ["*"]}}}},
    "top_hits fields denied": {"aggs": {"a": {"top_hits": {"fields": ["ssn"]}}}},
    "top_hits docvalue denied": {"aggs": {"a": {"top_hits": {"docvalue_fields": ["salary"]}}}},
    "top_hits stored_fields": {"aggs": {"a": {"top_hits": {"stored_fields": ["*"]}}}},
    "top_hits script_fields": {"aggs": {"a": {"top_hits": {"script_fields": {}}}}},
    "inner_hits on nested": {"query": {"nested": {"path": "comments", "query": {"match_all": {}}, "inner_hits": {}}}},
    "collapse inner_hits": {"collapse": {"field": "author_id", "inner_hits": {"name": "x"}}},
    # aggregations reveal values
    "terms agg on denied": {"aggs": {"a": {"terms": {"field": "ssn"}}}},
    "terms agg on denied object child": {"aggs": {"a": {"terms": {"field": "meta.secret"}}}},
    "terms agg on undeclared": {"aggs": {"a": {"terms": {"field": "undeclared"}}}},
    "terms agg on _index": {"aggs": {"a": {"terms": {"field": "_index"}}}},
    "terms agg on _id": {"aggs": {"a": {"terms": {"field": "_id"}}}},
    "terms agg on denied nested child": {"aggs": {"n": {"nested": {"path": "comments"}, "aggs": {
        "p": {"terms": {"field": "comments.private"}}}}}},
    "max on denied": {"aggs": {"a": {"max": {"field": "salary"}}}},
    "stats on denied": {"aggs": {"a": {"stats": {"field": "salary"}}}},
    "percentiles on denied": {"aggs": {"a": {"percentiles": {"field": "salary"}}}},
    "cardinality on denied": {"aggs": {"a": {"cardinality": {"field": "ssn"}}}},
    "histogram on denied": {"aggs": {"a": {"histogram": {"field": "salary", "interval": 1}}}},
    "range agg on denied": {"aggs": {"a": {"range": {"field": "salary", "ranges": [{"to": 10003}]}}}},
    "missing agg on denied": {"aggs": {"a": {"missing": {"field": "ssn"}}}},
    "composite on denied": {"aggs": {"a": {"composite": {"sources": [{"s": {"terms": {"field": "ssn"}}}]}}}},
    "terms order by metric on denied": {"aggs": {"a": {"terms": {"field": "author_id", "order": {"m": "desc"}},
                                                       "aggs": {"m": {"max": {"field": "salary"}}}}}},
    "filter agg on denied": {"aggs": {"a": {"filter": {"range": {"salary": {"gte": 10003}}}}}},
    "filters agg on denied": {"aggs": {"a": {"filters": {"filters": {"x": {"prefix": {"ssn": "SSN-00"}}}}}}},
    "significant_text": {"aggs": {"a": {"significant_text": {"field": "private_notes"}}}},
    # sorting is an ordering oracle
    "sort on denied": {"sort": ["ssn"]},
    "sort on denied desc": {"sort": [{"salary": "desc"}]},
    "sort on denied object child": {"sort": [{"meta.secret": "asc"}]},
    "sort on _id": {"sort": ["_id"]},
    "sort nested filter on denied": {"sort": [{"comments.by": {"nested": {
        "path": "comments", "filter": {"term": {"comments.private": "priv1"}}}}}]},
    "collapse on denied": {"collapse": {"field": "ssn"}},
    # filters are boolean oracles
    "term on denied": {"query": {"term": {"ssn": "SSN-001"}}},
    "term on denied.keyword": {"query": {"term": {"ssn.keyword": "SSN-001"}}},
    "match on denied text .keyword": {"query": {"term": {"private_notes.keyword": "PRIVATE-NOTE 1"}}},
    "terms on denied": {"query": {"terms": {"ssn": ["SSN-001"]}}},
    "range on denied": {"query": {"range": {"salary": {"gte": 10003}}}},
    "prefix on denied": {"query": {"prefix": {"ssn": "SSN-00"}}},
    "wildcard on denied": {"query": {"wildcard": {"ssn": "SSN*"}}},
    "regexp on denied": {"query": {"regexp": {"ssn": "SSN.*"}}},
    "fuzzy on denied": {"query": {"fuzzy": {"ssn": "SSN-001"}}},
    "exists on denied": {"query": {"exists": {"field": "ssn"}}},
    "exists on hiding object": {"query": {"exists": {"field": "meta"}}},
    "exists on hiding nested": {"query": {"exists": {"field": "comments"}}},
    "match on denied": {"query": {"match": {"private_notes": "PRIVATE"}}},
    "match on wildcard field name": {"query": {"match": {"priv*": "PRIVATE"}}},
    "match_phrase_prefix on denied": {"query": {"match_phrase_prefix": {"private_notes": "PRIV"}}},
    "multi_match *": {"query": {"multi_match": {"query": "PRIVATE", "fields": ["*"]}}},
    "multi_match boosted pattern": {"query": {"multi_match": {"query": "PRIVATE", "fields": ["priv*^2"]}}},
    "multi_match denied": {"query": {"multi_match": {"query": "PRIVATE", "fields": ["private_notes"]}}},
    "multi_match without fields": {"query": {"multi_match": {"query": "PRIVATE"}}},
    "query_string default_field": {"query": {"query_string": {"query": "PRIVATE", "default_field": "private_notes"}}},
    "query_string field syntax": {"query": {"query_string": {"query": "ssn:SSN-001", "fields": ["content"]}}},
    "simple_query_string without fields": {"query": {"simple_query_string": {"query": "PRIVATE"}}},
    "simple_query_string on *": {"query": {"simple_query_string": {"query": "PRIVATE", "fields": ["*"]}}},
    "term on undeclared": {"query": {"term": {"undeclared": "hidden1"}}},
    "term on _index": {"query": {"term": {"_index": SECRET_INDEX}}},
    "nested query on denied child": {"query": {"nested": {"path": "comments", "query": {"term": {"comments.private": "priv1"}}}}},
    "field_value_factor on denied": {"query": {"function_score": {"field_value_factor": {"field": "salary"}}}},
    "random_score on denied": {"query": {"function_score": {"functions": [{"random_score": {"seed": 1, "field": "salary"}}]}}},
    "function filter on denied": {"query": {"function_score": {"functions": [{"filter": {"term": {"ssn": "SSN-001"}}, "weight": 9}]}}},
    "more_like_this": {"query": {"more_like_this": {"like": [{"_index": SECRET_INDEX, "_id": "s1"}]}}},
    "span_term on denied": {"query": {"span_term": {"ssn": "SSN-001"}}},
    "intervals on denied": {"query": {"intervals": {"private_notes": {"match": {"query": "PRIVATE"}}}}},
    "combined_fields": {"query": {"combined_fields": {"query": "PRIVATE", "fields": ["*"]}}},
    "post_filter on denied": {"post_filter": {"term": {"ssn": "SSN-001"}}},
    "nested sort path hiding (object) via _source exclude typo": {"_source": {"excludes": ["nope"]}},
}


@pytest.mark.parametrize("body,code", attack_rows(FIELD_ATTACKS, "denied_field"))
def test_denied_and_undeclared_fields_are_refused(body: dict[str, Any], code: str) -> None:
    refused(body, code=code)


ALLOWED_READS_ON_ENGINE: dict[str, dict[str, Any]] = {
    "default _source": {},
    "_source true": {"_source": True},
    "highlight require_field_match false": {
        "query": {"match": {"content": "hello"}},
        "highlight": {"require_field_match": False, "fields": {"content": {}}}},
    "top_hits default source": {"aggs": {"a": {"top_hits": {"size": 3}}}},
    "nested top_hits": {"aggs": {"n": {"nested": {"path": "comments"}, "aggs": {"t": {"top_hits": {"size": 3}}}}}},
    "terms agg on allowed": {"aggs": {"a": {"terms": {"field": "author_id"}}}},
    "simple_query_string with field:value syntax": {
        "query": {"simple_query_string": {"query": "ssn:SSN-001", "fields": ["content"]}}},
    "fields/docvalue on allowed": {"fields": ["author_id"], "docvalue_fields": ["score"]},
}


@pytest.mark.parametrize("body", list(ALLOWED_READS_ON_ENGINE.values()), ids=list(ALLOWED_READS_ON_ENGINE))
def test_allowed_requests_return_no_denied_or_undeclared_value(executor: SearchExecutor, body: dict[str, Any]) -> None:
    result = run(executor, body)
    text = _text(result) + json.dumps(result.columns)
    for marker in DENIED_MARKERS + ("private", "salary", "ssn", "undeclared"):
        assert marker not in text, (marker, text)


# ==========================================================================================
# (3) Other indices and other endpoints — blocked (sandbox and executor)
# ==========================================================================================

BAD_INDEX_NAMES = [
    f"{DOCS_INDEX},{SECRET_INDEX}", "*", "rt_*", "rt_doc?", "_all", "_cluster/settings#",
    f"{DOCS_INDEX}/_doc/d1", f"../{SECRET_INDEX}", f"{DOCS_INDEX}%2F..%2F{SECRET_INDEX}",
    f"{DOCS_INDEX}?pretty", f"{DOCS_INDEX}#", f"remote:{DOCS_INDEX}", f"<{DOCS_INDEX}-{{now/d}}>",
    f"-{DOCS_INDEX}", SECRET_INDEX, DOCS_INDEX.upper(), f" {DOCS_INDEX}", f"{DOCS_INDEX} ", "",
    f"{DOCS_INDEX}/_update_by_query", "_msearch", "_search/template", "_sql",
]


@pytest.mark.parametrize("name", BAD_INDEX_NAMES)
def test_index_names_other_than_one_declared_index_are_refused(name: str) -> None:
    refused({"query": {"match_all": {}}}, index=name, code="unknown_index")


@pytest.mark.parametrize("name", BAD_INDEX_NAMES)
def test_the_executor_refuses_hand_built_queries_for_other_indices(executor: SearchExecutor, name: str) -> None:
    safe = SafeQuery(source="rt", kind="search", limit=LIMIT, max_rows=MAX_ROWS,
                     body={"query": {"match_all": {}}}, index=name)
    with pytest.raises(ExecutionError, match="search queries|not declared"):
        executor.fetch(safe)


INDEX_IN_BODY: dict[str, dict[str, Any]] = {
    "terms lookup": {"query": {"terms": {"author_id": {"index": SECRET_INDEX, "id": "s1", "path": "x"}}}},
    "indices_boost": {"indices_boost": [{SECRET_INDEX: 2}]},
    "_index term": {"query": {"term": {"_index": SECRET_INDEX}}},
    "_index terms agg": {"aggs": {"i": {"terms": {"field": "_index"}}}},
    "more_like_this other index": {"query": {"more_like_this": {"like": [{"_index": SECRET_INDEX, "_id": "s1"}]}}},
    "percolate": {"query": {"percolate": {"field": "q", "index": SECRET_INDEX, "id": "s1"}}},
    "geo_shape indexed_shape": {"query": {"geo_shape": {"x": {"indexed_shape": {"index": SECRET_INDEX, "id": "s1"}}}}},
    "index key at top level": {"index": SECRET_INDEX, "query": {"match_all": {}}},
    "msearch-like header": {"index": SECRET_INDEX},
    "pit": {"pit": {"id": "x"}},
    "has_child": {"query": {"has_child": {"type": "x", "query": {"match_all": {}}}}},
}


@pytest.mark.parametrize("body,code", attack_rows(INDEX_IN_BODY))
def test_other_indices_named_in_the_body_are_refused(body: dict[str, Any], code: str) -> None:
    refused(body, code=code)


def test_only_search_and_count_endpoints_are_ever_called(engine_url: str) -> None:
    with EsProxy(engine_url) as proxy:
        ex = executor_for(make_manifest(proxy.url))
        try:
            for body in ({}, {"size": 0}, {"size": 0, "post_filter": {"match_all": {}}},
                         {"aggs": {"a": {"terms": {"field": "author_id"}}}},
                         {"query": {"match": {"content": "hello"}}, "highlight": {"fields": {"content": {}}}}):
                ex.fetch(check(body))
            for name in BAD_INDEX_NAMES:
                with pytest.raises(ExecutionError):
                    ex.fetch(SafeQuery(source="rt", kind="search", limit=LIMIT, max_rows=MAX_ROWS,
                                     body={"query": {"match_all": {}}}, index=name))
        finally:
            ex.close()
        paths = {path.split("?")[0] for _, path in proxy.requests}
        assert paths <= {f"/{DOCS_INDEX}/_search", f"/{DOCS_INDEX}/_count"}, paths
        assert {method for method, _ in proxy.requests} == {"POST"}


# ==========================================================================================
# (4) Row filters — hold on the search server
# ==========================================================================================

ROW_FILTER_ATTACKS: dict[str, dict[str, Any]] = {
    "should-only original query": {"query": {"bool": {"should": [{"term": {"tenant_id": "t2"}}]}}},
    "should with minimum_should_match 0": {"query": {"bool": {"should": [{"term": {"tenant_id": "t2"}}],
                                                                "minimum_should_match": 0}}},
    "must_not the own tenant": {"query": {"bool": {"must_not": [{"term": {"tenant_id": "t1"}}]}}},
    "post_filter other tenant": {"post_filter": {"term": {"tenant_id": "t2"}}},
    "min_score 0": {"min_score": 0, "query": {"match_all": {}}},
    "function_score min_score": {"query": {"function_score": {"query": {"match_all": {}}, "min_score": 0}}},
    "dis_max": {"query": {"dis_max": {"queries": [{"match_all": {}}, {"term": {"tenant_id": "t2"}}]}}},
    "boosting negative own tenant": {"query": {"boosting": {"positive": {"match_all": {}},
                                                            "negative": {"term": {"tenant_id": "t1"}},
                                                            "negative_boost": 0.1}}},
    "nested ignore_unmapped": {"query": {"nested": {"path": "comments", "query": {"match_all": {}},
                                                    "ignore_unmapped": True}}},
    "terms agg": {"aggs": {"t": {"terms": {"field": "tenant_id"}}}},
    "terms agg with include of other tenant": {"aggs": {"t": {"terms": {"field": "author_id", "include": ["E7", "E8"]}}}},
    "composite with missing_bucket": {"aggs": {"c": {"composite": {"sources": [
        {"a": {"terms": {"field": "author_id", "missing_bucket": True}}}], "size": 6}}}},
    "filters agg other_bucket": {"aggs": {"f": {"filters": {"filters": {"x": {"term": {"tenant_id": "t2"}}},
                                                             "other_bucket": True}}}},
    "histogram min_doc_count 0": {"aggs": {"h": {"histogram": {"field": "score", "interval": 1.5, "min_doc_count": 0}}}},
    "reverse_nested": {"aggs": {"n": {"nested": {"path": "comments"}, "aggs": {"b": {"terms": {"field": "comments.by"},
                       "aggs": {"r": {"reverse_nested": {}, "aggs": {"a": {"terms": {"field": "author_id"}}}}}}}}}},
    "top_hits": {"aggs": {"t": {"top_hits": {"size": 6}}}},
    "collapse": {"collapse": {"field": "author_id"}},
    "search_after past own docs": {"sort": ["author_id"], "search_after": ["E4"]},
    "terminate_after": {"terminate_after": 100},
    "track_total_hits": {"track_total_hits": True},
    "global agg": {"aggs": {"g": {"global": {}, "aggs": {"t": {"terms": {"field": "tenant_id"}}}}}},
    "terms min_doc_count 0": {"aggs": {"t": {"terms": {"field": "author_id", "min_doc_count": 0}}}},
    "significant_terms": {"aggs": {"s": {"significant_terms": {"field": "author_id"}}}},
    "suggest": {"suggest": {"s": {"text": "E7", "term": {"field": "author_id"}}}},
    "rescore": {"rescore": {"query": {"rescore_query": {"match_all": {}}}}},
    "sampler": {"aggs": {"s": {"sampler": {}, "aggs": {"t": {"terms": {"field": "tenant_id"}}}}}},
    "adjacency_matrix": {"aggs": {"m": {"adjacency_matrix": {"filters": {"a": {"match_all": {}}}}}}},
}


@pytest.mark.parametrize("body", list(ROW_FILTER_ATTACKS.values()), ids=list(ROW_FILTER_ATTACKS))
def test_row_filters_hold_on_the_search_server(executor: SearchExecutor, body: dict[str, Any]) -> None:
    try:
        result = run(executor, body)
    except SandboxViolation:
        return  # refused: fine
    text = _text(result)
    for marker in T2_MARKERS:
        assert marker not in text, (marker, text)
    if "doc_count" in result.columns:
        i = result.columns.index("doc_count")
        assert all((row[i] or 0) <= 5 for row in result.rows)


@pytest.mark.parametrize("body", [
    {"size": 0},
    {"size": 0, "post_filter": {"match_all": {}}},
    {"size": 0, "query": {"bool": {"should": [{"match_all": {}}], "minimum_should_match": 0}}},
    {"size": 0, "track_total_hits": True},
], ids=["count", "count post_filter", "count should msm 0", "count track_total_hits"])
def test_counts_see_only_the_own_tenant(executor: SearchExecutor, body: dict[str, Any]) -> None:
    assert run(executor, body).rows == [(5,)]


def test_a_missing_row_filter_variable_is_an_error_not_a_silent_no_filter() -> None:
    with pytest.raises(SandboxViolation) as info:
        check_dsl({"query": {"match_all": {}}}, RT, DOCS_INDEX, vars={})
    assert info.value.code == "missing_variable"
    support.refused(check_dsl, {}, RT, DOCS_INDEX, vars={"tenant_id": {"match_all": {}}}, code="invalid_variable")


# ==========================================================================================
# (5) Caps — blocked
# ==========================================================================================

CAP_ATTACKS: dict[str, dict[str, Any]] = {
    "from + size past the limit": {"from": 3, "size": 4},
    "from past the limit": {"from": 100},
    "negative size": {"size": -1},
    "size as string": {"size": "100"},
    "terms agg size": {"aggs": {"a": {"terms": {"field": "author_id", "size": LIMIT + 1}}}},
    "nested terms agg size": {"aggs": {"a": {"terms": {"field": "author_id"}, "aggs": {
        "b": {"terms": {"field": "tenant_id", "size": 10_000}}}}}},
    "composite size": {"aggs": {"a": {"composite": {"size": 10_000, "sources": [{"a": {"terms": {"field": "author_id"}}}]}}}},
    "top_hits size": {"aggs": {"a": {"top_hits": {"size": 100}}}},
    "deeply nested bool": None,  # filled below
    "deeply nested aggs": None,
    "deeply nested data": {"search_after": json.loads("[" * 150 + "]" * 150)},
}


def _deep_bool(n: int) -> dict[str, Any]:
    q: dict[str, Any] = {"match_all": {}}
    for _ in range(n):
        q = {"bool": {"must": [q]}}
    return {"query": q}


def _deep_aggs(n: int) -> dict[str, Any]:
    agg: dict[str, Any] = {"terms": {"field": "author_id"}}
    for _ in range(n):
        agg = {"terms": {"field": "author_id"}, "aggs": {"x": agg}}
    return {"aggs": {"x": agg}}


CAP_ATTACKS["deeply nested bool"] = _deep_bool(5_000)
CAP_ATTACKS["deeply nested aggs"] = _deep_aggs(5_000)


@pytest.mark.parametrize("body,code", attack_rows(CAP_ATTACKS))
def test_caps_are_enforced(body: dict[str, Any], code: str) -> None:
    refused(body, code=code)


def test_huge_size_is_capped_and_truncation_reported(executor: SearchExecutor) -> None:
    safe = check({"size": 10_000}, vars={"tenant_id": ["t1", "t2"]})
    assert safe.body["size"] == LIMIT
    result = executor.fetch(safe)
    assert result.row_count == MAX_ROWS and result.truncated


def test_hand_built_query_with_a_huge_size_is_capped_by_the_executor(executor: SearchExecutor) -> None:
    safe = SafeQuery(source="rt", kind="search", limit=LIMIT, max_rows=MAX_ROWS,
                     body={"size": 10_000}, index=DOCS_INDEX)
    result = executor.fetch(safe)
    assert result.row_count == MAX_ROWS and result.truncated


# ==========================================================================================
# (6) References — values stay data
# ==========================================================================================


def test_a_reference_value_that_looks_like_a_reference_stays_a_literal(executor: SearchExecutor) -> None:
    safe = check({"query": {"term": {"author_id": "<p>"}}}, params={"p": ["<q>"], "q": ["E1"]})
    assert safe.body["query"]["bool"]["filter"][0] == {"term": {"author_id": "<q>"}}
    assert executor.fetch(safe).rows == []


def test_a_reference_value_holding_script_text_stays_a_string(executor: SearchExecutor) -> None:
    text = '{"script": {"source": "return true"}}'
    safe = check({"query": {"terms": {"author_id": "<p>"}}}, params={"p": [text]})
    assert safe.body["query"]["bool"]["filter"][0] == {"terms": {"author_id": [text]}}
    assert executor.fetch(safe).rows == []


@pytest.mark.parametrize(("body", "params"), [
    ({"query": {"term": {"author_id": "<p>"}}}, {"p": ["E1", "E2"]}),            # scalar, 2 rows
    ({"query": {"term": {"author_id": "<missing>"}}}, {"p": ["E1"]}),             # unknown step
    ({"query": {"match": {"content": "hello <p>"}}}, {"p": ["x"]}),              # inside text
    ({"query": {"match_all": {"_name": "<p>"}}}, {"p": ["x"]}),                   # in an option
    ({"sort": [{"author_id": "<p>"}]}, {"p": ["desc"]}),                         # in a sort order
    ({"aggs": {"a": {"terms": {"field": "author_id", "order": {"_key": "<p>"}}}}}, {"p": ["asc"]}),
], ids=["scalar with two rows", "unknown step", "inside text", "in _name", "in sort", "in agg order"])
def test_references_outside_value_positions_are_plan_errors(body: dict[str, Any], params: dict[str, list[Any]]) -> None:
    with pytest.raises(PlanError):
        check(body, params=params)


def test_a_reference_cannot_name_a_field(executor: SearchExecutor) -> None:
    refused({"query": {"term": {"<p>": "x"}}}, params={"p": ["ssn"]}, code="unknown_field")
    refused({"aggs": {"a": {"terms": {"field": "<p>"}}}}, params={"p": ["ssn"]}, code="unknown_field")
    refused({"sort": ["<p>"]}, params={"p": ["ssn"]}, code="unknown_field")


def test_object_reference_values_are_refused_not_spliced_as_options(executor: SearchExecutor) -> None:
    params = {"p": [{"value": "*4", "case_insensitive": True}]}
    try:
        safe = check({"query": {"wildcard": {"author_id": "<p>"}}}, params=params)
    except (PlanError, SandboxViolation):
        return  # safe: a reference stands for a scalar value
    # Today: the body carries {"wildcard": {"author_id": {"value": "*4", ...}}} — a leading
    # wildcard the sandbox refuses as a literal — and the search server runs it.
    result = executor.fetch(safe)
    assert result.rows == [], result.rows


def test_script_objects_in_reference_values_never_reach_the_search_server(executor: SearchExecutor) -> None:
    params = {"p": [{"script": {"source": "return true"}}]}
    for body in ({"query": {"term": {"author_id": "<p>"}}}, {"query": {"terms": {"author_id": "<p>"}}},
                 {"query": {"range": {"score": {"gte": "<p>"}}}}, {"query": {"ids": {"values": "<p>"}}}):
        try:
            safe = check(body, params=params)
        except (PlanError, SandboxViolation):
            continue
        assert '"script"' not in json.dumps(safe.body), safe.body


def test_planted_document_cannot_shape_a_later_query(manifest: Manifest) -> None:
    plan = Plan.parse({"steps": [
        {"output_key": "p", "source": "rt", "index": NOTES_INDEX,
         "query": {"query": {"term": {"author_id": "planted"}}, "_source": ["attrs"]}},
        {"output_key": "q", "source": "rt", "index": NOTES_INDEX,
         "query": {"query": {"wildcard": {"author_id": "<p.attrs>"}}}},
    ]})
    with Engine(CapabilitySet([manifest])) as engine:
        try:
            result = engine.run(plan)
        except (PlanError, SandboxViolation):
            return  # safe
    # Today: step q sends {"wildcard": {"author_id": {"value": "*", "case_insensitive": true}}}
    # and returns every document.
    assert result.steps["q"].rows == [], result.steps["q"].query


# ==========================================================================================
# (5b) Cap holes
# ==========================================================================================


def test_top_hits_in_buckets_cannot_return_more_documents_than_max_rows(executor: SearchExecutor) -> None:
    body = {"aggs": {"a": {"terms": {"field": "tenant_id", "size": 2},
                           "aggs": {"t": {"top_hits": {"size": LIMIT}}}}}}
    try:
        result = run(executor, body, vars={"tenant_id": ["t1", "t2"]})
    except SandboxViolation:
        return
    documents = sum(len(row[result.columns.index("t")]) for row in result.rows)
    assert documents <= MAX_ROWS or result.truncated, (documents, MAX_ROWS)


def test_histogram_bucket_count_is_capped_by_the_sandbox() -> None:
    body = {"aggs": {"h": {"histogram": {"field": "score", "interval": 1, "min_doc_count": 0,
                                         "extended_bounds": {"min": 0, "max": 60_000}}}}}
    refused(body, code="size_limit")


# ==========================================================================================
# Deep nesting: crash (RecursionError) rather than refusal, before the sandbox runs
# ==========================================================================================


def test_deeply_nested_plan_bodies_are_plan_errors() -> None:
    query: dict[str, Any] = {"match_all": {}}
    for _ in range(sys.getrecursionlimit() + 100):
        query = {"bool": {"must": [query]}}
    with pytest.raises(PlanError, match="nests deeper"):
        Plan.parse({"steps": [{"output_key": "a", "source": "rt", "index": DOCS_INDEX, "query": {"query": query}}]})
    text = '{"query": ' * 5_000 + "1" + "}" * 5_000
    with pytest.raises(StructqError):
        coerce_search_queries({"steps": [{"output_key": "a", "query": text}]})


def test_attack_codes_name_only_existing_rows() -> None:
    """A renamed row cannot silently fall back to its table's default code."""
    rows = {*SCRIPT_ATTACKS, *FIELD_ATTACKS, *INDEX_IN_BODY, *CAP_ATTACKS}
    assert set(ATTACK_CODES) <= rows, set(ATTACK_CODES) - rows
