"""The search-DSL sandbox: allow/deny tables for every rule, the rewrites, and the rewritten
bodies run against a real OpenSearch-compatible search server (osmem-server)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import sandbox_support as support
from manifest_support import manifest_text

from structq.capabilities import load_manifest_text
from structq.capabilities.model import Manifest
from structq.errors import PlanError, SandboxViolation
from structq.safety import check_dsl
from structq.safety.dsl import MAX_TERMS
from structq.safety.query import SafeQuery

INDEX = "weekly_reports"
LIMIT = 101  # max_rows 100 + 1


READABLE_SOURCE = [
    "report_id", "author_id", "department", "week_start_date", "content", "title",
    "projects_mentioned", "tenant_id", "reviewer.name", "comments",
]


def manifest(index: str = INDEX) -> Manifest:
    return load_manifest_text(manifest_text("dsl_reports", index=index))[0]


REPORTS = manifest()
NO_FILTERS = Manifest.model_validate(
    {**REPORTS.model_dump(by_alias=True), "policies": {"row_filters": []}}
)


def check(body: Any, *, index: str = INDEX, source: Manifest = REPORTS, **kw: Any) -> SafeQuery:
    kw.setdefault("vars", {"tenant_id": 7})
    return check_dsl(body, source, index, **kw)


def refused(body: Any, *, code: str, **kw: Any) -> SandboxViolation:
    """``body`` is refused by the rule ``code`` names (see ``sandbox_support.refused``)."""
    return support.refused(check, body, code=code, **kw)


def original_query(safe: SafeQuery) -> Any:
    """The caller's query inside the row-filter wrapper."""
    return safe.body["query"]["bool"]["filter"][0]


# ==========================================================================================
# Allowed requests
# ==========================================================================================

ALLOWED: dict[str, dict[str, Any]] = {
    "empty body": {},
    "match": {"query": {"match": {"content": "星火"}}},
    "match long form": {"query": {"match": {"content": {"query": "星火 项目", "operator": "and"}}}},
    "match_phrase": {"query": {"match_phrase": {"title": {"query": "weekly report", "slop": 1}}}},
    "multi_match with boosts": {"query": {"multi_match": {"query": "x", "fields": ["title^2", "content"]}}},
    "simple_query_string": {"query": {"simple_query_string": {"query": "a + b", "fields": ["content"]}}},
    "term": {"query": {"term": {"author_id": "e1"}}},
    "term long form": {"query": {"term": {"author_id": {"value": "e1", "boost": 2}}}},
    "terms": {"query": {"terms": {"author_id": ["e1", "e2"], "boost": 1.0}}},
    "range": {"query": {"range": {"week_start_date": {"gte": "2024-03-04", "lte": "now/d"}}}},
    "exists": {"query": {"exists": {"field": "projects_mentioned"}}},
    "prefix": {"query": {"prefix": {"report_id": "r-2024"}}},
    "wildcard inner": {"query": {"wildcard": {"report_id": {"value": "r-*-03"}}}},
    "ids": {"query": {"ids": {"values": ["1", "2"]}}},
    "match_all / match_none": {"query": {"bool": {"should": [{"match_all": {}}, {"match_none": {}}]}}},
    "bool everything": {"query": {"bool": {
        "must": {"match": {"content": "x"}}, "filter": [{"term": {"department": "eng"}}],
        "must_not": [{"exists": {"field": "reviewer.name"}}], "should": [], "minimum_should_match": 0}}},
    "constant_score": {"query": {"constant_score": {"filter": {"term": {"author_id": "e1"}}, "boost": 1.2}}},
    "dis_max": {"query": {"dis_max": {"queries": [{"match": {"title": "x"}}, {"match": {"content": "x"}}]}}},
    "boosting": {"query": {"boosting": {"positive": {"match": {"content": "x"}},
                                        "negative": {"term": {"department": "hr"}}, "negative_boost": 0.5}}},
    "nested": {"query": {"nested": {"path": "comments", "query": {"match": {"comments.text": "好"}}}}},
    "function_score": {"query": {"function_score": {
        "query": {"match": {"content": "x"}},
        "functions": [{"filter": {"term": {"department": "eng"}}, "weight": 2}], "boost_mode": "sum"}}},
    "keyword multi-field of a text field": {"query": {"term": {"title.keyword": "Weekly"}},
                                            "aggs": {"t": {"terms": {"field": "title.keyword"}}}},
    "object sub-field": {"query": {"term": {"reviewer.name": "li"}}},
    "sort forms": {"sort": ["_score", "author_id", {"week_start_date": "desc"},
                            {"report_id": {"order": "asc", "missing": "_last"}}]},
    "highlight": {"query": {"match": {"content": "x"}},
                  "highlight": {"fields": {"content": {"fragment_size": 80}}, "pre_tags": ["<b>"]}},
    "source list": {"_source": ["title", "author_id"]},
    "source false": {"_source": False, "size": 0},
    "source excludes": {"_source": {"excludes": ["content"]}},
    "fields and docvalue_fields": {"fields": ["title", {"field": "week_start_date", "format": "yyyy"}],
                                   "docvalue_fields": ["author_id"]},
    "collapse": {"collapse": {"field": "author_id"}},
    "post_filter and misc": {"post_filter": {"term": {"department": "eng"}}, "track_total_hits": True,
                             "search_after": [1, "x"], "sort": ["report_id"]},
    "bucket aggs": {"size": 0, "aggs": {
        "by_dept": {"terms": {"field": "department", "size": 10, "order": {"_count": "desc"}},
                    "aggs": {"weeks": {"date_histogram": {"field": "week_start_date", "calendar_interval": "week"}}}},
        "ranges": {"date_range": {"field": "week_start_date", "ranges": [{"from": "2024-01-01"}]}},
        "hist": {"histogram": {"field": "week_start_date", "interval": 10}},
        "eng": {"filter": {"term": {"department": "eng"}}},
        "split": {"filters": {"filters": {"a": {"match": {"content": "a"}}, "b": {"match_all": {}}}}},
        "comp": {"composite": {"size": 50, "sources": [{"dept": {"terms": {"field": "department"}}}]}},
        "nested": {"nested": {"path": "comments"},
                   "aggs": {"who": {"terms": {"field": "comments.author"},
                                    "aggs": {"back": {"reverse_nested": {}}}}}},
        "missing": {"missing": {"field": "projects_mentioned"}}}},
    "metric aggs": {"size": 0, "aggs": {
        "n": {"cardinality": {"field": "author_id"}}, "c": {"value_count": {"field": "report_id"}},
        "s": {"stats": {"field": "week_start_date"}}, "e": {"extended_stats": {"field": "week_start_date"}},
        "p": {"percentiles": {"field": "week_start_date", "percents": [50]}},
        "lo": {"min": {"field": "week_start_date"}}, "hi": {"max": {"field": "week_start_date"}},
        "a": {"avg": {"field": "week_start_date"}}, "t": {"sum": {"field": "week_start_date"}}}},
    "top_hits": {"size": 0, "aggs": {"by_author": {"terms": {"field": "author_id"}, "aggs": {
        "latest": {"top_hits": {"size": 1, "sort": [{"week_start_date": "desc"}], "_source": ["title"]}}}}}},
    "include list": {"aggs": {"t": {"terms": {"field": "department", "include": ["eng", "sales"]}}}},
}


@pytest.mark.parametrize("body", ALLOWED.values(), ids=ALLOWED.keys())
def test_allowed(body: dict[str, Any]) -> None:
    safe = check(body)
    assert safe.kind == "search" and safe.index == INDEX and safe.tables == (INDEX,)
    assert safe.limit == LIMIT and safe.max_rows == 100
    assert "salary" not in json.dumps(safe.body)
    assert "reviewer.email" not in json.dumps(safe.body)


# ==========================================================================================
# Refused requests: (body, code, where the message must point)
# ==========================================================================================

DENIED: dict[str, tuple[dict[str, Any], str, str]] = {
    # scripts, at any depth
    "script query at depth": (
        {"query": {"bool": {"filter": [{"term": {"author_id": "e1"}}, {"script": {"script": "1"}}]}}},
        "script", "query.bool.filter[1].script"),
    "script_fields": ({"script_fields": {"x": {"script": "doc['salary']"}}}, "script", "script_fields"),
    "runtime_mappings": ({"runtime_mappings": {"x": {"type": "long"}}}, "script", "runtime_mappings"),
    "scripted_metric": ({"aggs": {"m": {"scripted_metric": {"map_script": "x"}}}}, "script", "aggs.m.scripted_metric"),
    "bucket_script": ({"aggs": {"t": {"terms": {"field": "author_id"}, "aggs": {"b": {"bucket_script": {}}}}}},
                      "script", "aggs.t.aggs.b.bucket_script"),
    "bucket_selector": ({"aggs": {"b": {"bucket_selector": {}}}}, "script", "aggs.b.bucket_selector"),
    "script_score function": ({"query": {"function_score": {"functions": [{"script_score": {}}]}}},
                              "script", "query.function_score.functions[0].script_score"),
    "script_score query": ({"query": {"script_score": {"query": {"match_all": {}}}}}, "script", "query.script_score"),
    "script in a terms agg": ({"aggs": {"t": {"terms": {"script": "x"}}}}, "script", "aggs.t.terms.script"),
    "script sort": ({"sort": [{"_script": {"type": "number"}}]}, "script", "sort[0]._script"),
    # lookups and clauses that read other documents or escape checks
    "terms lookup": ({"query": {"terms": {"author_id": {"index": "hr", "id": "1", "path": "ids"}}}},
                     "terms_lookup", "query.terms.author_id"),
    "query_string": ({"query": {"query_string": {"query": "salary:>1"}}}, "denied_clause", "query.query_string"),
    "regexp": ({"query": {"regexp": {"author_id": ".*"}}}, "denied_clause", "query.regexp"),
    "more_like_this": ({"query": {"more_like_this": {"like": [{"_id": "1"}]}}}, "denied_clause", "query.more_like_this"),
    "percolate": ({"query": {"percolate": {"field": "q"}}}, "denied_clause", "query.percolate"),
    "wrapper": ({"query": {"wrapper": {"query": "e30="}}}, "denied_clause", "query.wrapper"),
    "has_child": ({"query": {"has_child": {"type": "x", "query": {}}}}, "denied_clause", "query.has_child"),
    "unknown clause": ({"query": {"bool": {"must": [{"matchh": {"content": "x"}}]}}},
                       "denied_clause", "query.bool.must[0].matchh"),
    "two clauses in one object": ({"query": {"term": {"author_id": "a"}, "match": {"content": "b"}}},
                                  "invalid_body", "query"),
    # aggregations that escape the query
    "global": ({"aggs": {"all": {"global": {}}}}, "denied_aggregation", "aggs.all.global"),
    "significant_terms": ({"aggs": {"s": {"significant_terms": {"field": "author_id"}}}},
                          "denied_aggregation", "aggs.s.significant_terms"),
    "min_doc_count 0": ({"aggs": {"t": {"terms": {"field": "author_id", "min_doc_count": 0}}}},
                        "denied_value", "aggs.t.terms.min_doc_count"),
    "include regex": ({"aggs": {"t": {"terms": {"field": "author_id", "include": "e.*"}}}},
                      "denied_value", "aggs.t.terms.include"),
    # keys
    "stored_fields": ({"stored_fields": ["salary"]}, "denied_key", "stored_fields"),
    "profile": ({"profile": True}, "denied_key", "profile"),
    "explain": ({"explain": True}, "denied_key", "explain"),
    "suggest": ({"suggest": {"s": {"text": "x", "term": {"field": "title"}}}}, "denied_key", "suggest"),
    "pit": ({"pit": {"id": "x"}}, "denied_key", "pit"),
    "indices_boost": ({"indices_boost": [{"hr": 2}]}, "denied_key", "indices_boost"),
    "rescore": ({"rescore": {"query": {}}}, "denied_key", "rescore"),
    "inner_hits": ({"query": {"nested": {"path": "comments", "query": {"match_all": {}}, "inner_hits": {}}}},
                   "denied_key", "query.nested.inner_hits"),
    "collapse inner_hits": ({"collapse": {"field": "author_id", "inner_hits": {"name": "x"}}},
                            "denied_key", "collapse.inner_hits"),
    "unknown option": ({"query": {"match": {"content": {"query": "x", "rewrite": "top_terms_1"}}}},
                       "denied_key", "query.match.content.rewrite"),
    # fields: undeclared, denied, patterns, in every position
    "unknown field in term": ({"query": {"term": {"authr_id": "e1"}}}, "unknown_field", "query.term.authr_id"),
    "denied field in match": ({"query": {"match": {"salary": 1}}}, "denied_field", "query.match.salary"),
    "denied field in range": ({"query": {"range": {"salary": {"gt": 1}}}}, "denied_field", "query.range.salary"),
    "denied field in exists": ({"query": {"exists": {"field": "salary"}}}, "denied_field", "query.exists.field"),
    "denied field in terms": ({"query": {"terms": {"salary": [1]}}}, "denied_field", "query.terms.salary"),
    "denied sub-field": ({"query": {"term": {"reviewer.email": "x"}}}, "denied_field", "query.term.reviewer.email"),
    "denied field in sort": ({"sort": ["salary"]}, "denied_field", "sort[0]"),
    "denied field in sort object": ({"sort": [{"salary": "desc"}]}, "denied_field", "sort[0].salary"),
    "unknown field in sort": ({"sort": {"wk": "asc"}}, "unknown_field", "sort.wk"),
    "denied field in agg": ({"aggs": {"s": {"avg": {"field": "salary"}}}}, "denied_field", "aggs.s.avg.field"),
    "unknown field in agg": ({"aggs": {"d": {"terms": {"field": "dept"}}}}, "unknown_field", "aggs.d.terms.field"),
    "denied field in sub-agg": ({"aggs": {"d": {"terms": {"field": "department"},
                                                "aggs": {"m": {"max": {"field": "salary"}}}}}},
                                "denied_field", "aggs.d.aggs.m.max.field"),
    "denied field in _source list": ({"_source": ["title", "salary"]}, "denied_field", "_source[1]"),
    "denied field in _source string": ({"_source": "salary"}, "denied_field", "_source"),
    "denied field in _source includes": ({"_source": {"includes": ["salary"]}}, "denied_field", "_source.includes[0]"),
    "object hiding a denied field in _source": ({"_source": ["reviewer"]}, "denied_field", "_source[0]"),
    "pattern in _source": ({"_source": ["*"]}, "denied_field", "_source[0]"),
    "denied field in highlight": ({"highlight": {"fields": {"salary": {}}}}, "denied_field", "highlight.fields.salary"),
    "pattern in highlight": ({"highlight": {"fields": {"*": {}}}}, "denied_field", "highlight.fields.*"),
    "denied field in top_hits _source": ({"aggs": {"t": {"top_hits": {"_source": ["salary"]}}}},
                                         "denied_field", "aggs.t.top_hits._source[0]"),
    "denied field in top_hits sort": ({"aggs": {"t": {"top_hits": {"sort": ["salary"]}}}},
                                      "denied_field", "aggs.t.top_hits.sort[0]"),
    "denied field in multi_match with boost": ({"query": {"multi_match": {"query": "1", "fields": ["title", "salary^3"]}}},
                                               "denied_field", "query.multi_match.fields[1]"),
    "unknown field in multi_match with boost": ({"query": {"multi_match": {"query": "1", "fields": ["titel^2"]}}},
                                                "unknown_field", "query.multi_match.fields[0]"),
    "pattern in multi_match": ({"query": {"multi_match": {"query": "1", "fields": ["ti*"]}}},
                               "denied_field", "query.multi_match.fields[0]"),
    "denied field in simple_query_string": ({"query": {"simple_query_string": {"query": "1", "fields": ["salary"]}}},
                                            "denied_field", "query.simple_query_string.fields[0]"),
    "denied field in docvalue_fields": ({"docvalue_fields": [{"field": "salary"}]}, "denied_field", "docvalue_fields[0].field"),
    "denied field in fields": ({"fields": ["salary"]}, "denied_field", "fields[0]"),
    "denied field in collapse": ({"collapse": {"field": "salary"}}, "denied_field", "collapse.field"),
    "denied field in composite": ({"aggs": {"c": {"composite": {"sources": [{"s": {"terms": {"field": "salary"}}}]}}}},
                                  "denied_field", "aggs.c.composite.sources[0].s.terms.field"),
    "denied field in a filter agg": ({"aggs": {"f": {"filter": {"range": {"salary": {"gt": 1}}}}}},
                                     "denied_field", "aggs.f.filter.range.salary"),
    "denied field in highlight_query": ({"highlight": {"fields": {"content": {}},
                                                       "highlight_query": {"term": {"salary": 1}}}},
                                        "denied_field", "highlight.highlight_query.term.salary"),
    "keyword multi-field of a denied field": ({"aggs": {"n": {"terms": {"field": "private_notes.keyword"}}}},
                                             "denied_field", "aggs.n.terms.field"),
    "keyword suffix of a keyword field": ({"query": {"term": {"author_id.keyword": "e1"}}},
                                          "unknown_field", "query.term.author_id.keyword"),
    "nested path that is not nested": ({"query": {"nested": {"path": "reviewer", "query": {"match_all": {}}}}},
                                       "invalid_body", "query.nested.path"),
    "fields required in multi_match": ({"query": {"multi_match": {"query": "x"}}}, "missing_key", "query.multi_match"),
    "fields required in simple_query_string": ({"query": {"simple_query_string": {"query": "x"}}},
                                               "missing_key", "query.simple_query_string"),
    # enum values
    "enum term": ({"query": {"term": {"department": "engineering"}}}, "enum_value", "query.term.department"),
    "enum term long form": ({"query": {"term": {"department": {"value": "ops"}}}}, "enum_value",
                            "query.term.department.value"),
    "enum terms": ({"query": {"terms": {"department": ["eng", "ops"]}}}, "enum_value", "query.terms.department[1]"),
    "enum match": ({"query": {"match": {"department": "Engineering"}}}, "enum_value", "query.match.department"),
    # cost
    "leading wildcard": ({"query": {"wildcard": {"report_id": "*03"}}}, "leading_wildcard", "query.wildcard.report_id"),
    "leading ? wildcard": ({"query": {"wildcard": {"report_id": {"value": "?03"}}}}, "leading_wildcard",
                           "query.wildcard.report_id.value"),
    # sizes
    "terms agg size": ({"aggs": {"t": {"terms": {"field": "author_id", "size": 5000}}}}, "size_limit", "aggs.t.terms.size"),
    "composite size": ({"aggs": {"c": {"composite": {"size": 102, "sources": []}}}}, "size_limit", "aggs.c.composite.size"),
    "top_hits size": ({"aggs": {"t": {"top_hits": {"size": 500}}}}, "size_limit", "aggs.t.top_hits.size"),
    "from + size": ({"from": 90, "size": 20}, "size_limit", "from"),
    "from past the limit": ({"from": 200}, "size_limit", "from"),
    "negative size": ({"size": -1}, "invalid_body", "size"),
    "size as text": ({"size": "10"}, "invalid_body", "size"),
    # shapes
    "bool must a number": ({"query": {"bool": {"must": 3}}}, "invalid_body", "query.bool.must"),
    "term on two fields": ({"query": {"term": {"author_id": "a", "report_id": "b"}}}, "invalid_body", "query.term"),
    "range shorthand": ({"query": {"range": {"week_start_date": "2024"}}}, "invalid_body", "query.range.week_start_date"),
    "terms with one string": ({"query": {"terms": {"author_id": "e1"}}}, "invalid_body", "query.terms.author_id"),
    "term with an object value": ({"query": {"term": {"author_id": {"value": {"a": 1}}}}}, "invalid_body",
                                  "query.term.author_id.value"),
}


@pytest.mark.parametrize(("body", "code", "where"), DENIED.values(), ids=DENIED.keys())
def test_denied(body: dict[str, Any], code: str, where: str) -> None:
    exc = refused(body, code=code)
    assert f"at {where}" in exc.message
    assert exc.hint, "every refusal says what would be accepted"
    assert exc.source == "reports"


def test_refusals_list_what_is_allowed() -> None:
    exc = refused({"query": {"query_string": {"query": "x"}}}, code="denied_clause")
    assert "simple_query_string" in exc.message and "match_phrase" in exc.hint
    exc = refused({"query": {"match_phrse": {"title": "x"}}}, code="denied_clause")
    assert "did you mean 'match_phrase'" in exc.hint
    exc = refused({"aggs": {"a": {"global": {}}}}, code="denied_aggregation")
    assert "row filters" in exc.message and "date_histogram" in exc.hint
    exc = refused({"query": {"term": {"authr_id": "e1"}}}, code="unknown_field")
    assert "did you mean 'author_id'" in exc.hint
    exc = refused({"query": {"term": {"department": "ops"}}}, code="enum_value")
    assert "eng (Engineering)" in exc.hint and "hr (Human resources)" in exc.hint
    exc = refused({"sort": ["salary"]}, code="denied_field")
    assert "salary" not in exc.hint.split(":", 1)[1]
    exc = refused({"_source": ["reviewer"]}, code="denied_field")
    assert "reviewer.name" in exc.hint and "reviewer.email" not in exc.hint


def test_body_must_be_an_object() -> None:
    refused(["query"], code="invalid_body")


def test_too_deep_a_body_is_refused_before_walking() -> None:
    clause: dict[str, Any] = {"match_all": {}}
    for _ in range(200):
        clause = {"bool": {"must": clause}}
    refused({"query": clause}, code="invalid_body")


# ==========================================================================================
# The index
# ==========================================================================================

@pytest.mark.parametrize("name", [
    "weekly_*", "weekly_reports*", "weekly_report?", "weekly_reports,projects", "_all", "_search",
    "remote:weekly_reports", "<weekly_reports-{now/d}>", "-projects", "weekly_report", "WEEKLY_REPORTS",
    "weekly_reports/_doc", "", None,
])
def test_only_one_declared_index(name: Any) -> None:
    exc = refused({}, code="unknown_index", index=name)
    assert "weekly_reports" in (exc.hint or "")


def test_index_misspelling_suggests_the_declared_one() -> None:
    exc = refused({}, code="unknown_index", index="weekly_report")
    assert "did you mean 'weekly_reports'" in exc.hint


def test_a_sql_source_is_a_plan_error() -> None:
    sql = load_manifest_text("source: hr\nkind: sql\nurl: sqlite://\ntables:\n"
                             "  - {name: t, columns: [{name: a, type: text}]}\n")[0]
    with pytest.raises(PlanError):
        check_dsl({}, sql, "t")


# ==========================================================================================
# Rewrites: _source, size, row filters
# ==========================================================================================

@pytest.mark.parametrize("body", [{}, {"_source": True}])
def test_source_defaults_to_the_readable_fields(body: dict[str, Any]) -> None:
    safe = check(body)
    assert safe.body["_source"] == READABLE_SOURCE
    assert set(READABLE_SOURCE) <= set(safe.columns)


def test_source_includes_default_to_readable_fields() -> None:
    safe = check({"_source": {"excludes": ["content"]}})
    # the default includes leave the excluded field out: the search server refuses a field both ways
    readable = [p for p in READABLE_SOURCE if p != "content"]
    assert safe.body["_source"] == {"excludes": ["content"], "includes": readable}
    safe = check({"_source": {"includes": ["title"], "excludes": ["salary"]}})  # excluding a denied field is fine
    assert safe.body["_source"] == {"includes": ["title"], "excludes": ["salary"]}
    refused({"_source": {"excludes": ["salery"]}}, code="unknown_field")


def test_top_hits_source_defaults_to_the_readable_fields() -> None:
    safe = check({"aggs": {"t": {"top_hits": {"size": 3}}}})
    assert safe.body["aggs"]["t"]["top_hits"] == {"size": 3, "_source": READABLE_SOURCE}


@pytest.mark.parametrize(("body", "size"), [
    ({}, LIMIT),
    ({"size": 10}, 10),
    ({"size": 0}, 0),
    ({"size": 5000}, LIMIT),           # capped: the executor sees max_rows + 1 and reports truncation
    ({"from": 20}, LIMIT - 20),
    ({"from": 20, "size": 81}, 81),
])
def test_size_is_defaulted_and_capped(body: dict[str, Any], size: int) -> None:
    assert check(body).body["size"] == size


def test_max_rows_overrides_the_manifest() -> None:
    safe = check({"size": 50_000}, max_rows=100_000)
    assert (safe.limit, safe.max_rows, safe.body["size"]) == (100_001, 100_000, 50_000)
    refused({"aggs": {"t": {"terms": {"field": "author_id", "size": 11}}}}, code="size_limit", max_rows=9)


def test_row_filter_wraps_the_query() -> None:
    original = {"match": {"content": "星火"}}
    safe = check({"query": original})
    assert safe.body["query"] == {"bool": {"filter": [original, {"term": {"tenant_id": 7}}]}}
    assert safe.params == {"tenant_id": 7}


def test_row_filter_without_a_query() -> None:
    safe = check({"size": 0, "aggs": {"d": {"terms": {"field": "department"}}}})
    assert safe.body["query"] == {"bool": {"filter": [{"term": {"tenant_id": 7}}]}}
    assert safe.body["aggs"] == {"d": {"terms": {"field": "department"}}}


def test_row_filter_with_a_list_variable_is_terms() -> None:
    safe = check({}, vars={"tenant_id": [7, 8]})
    assert safe.body["query"] == {"bool": {"filter": [{"terms": {"tenant_id": [7, 8]}}]}}


@pytest.mark.parametrize("vars", [None, {}, {"tenant": 7}, {"tenant_id": None}])
def test_missing_variable_is_an_error_never_no_filter(vars: Any) -> None:
    with pytest.raises(SandboxViolation) as info:
        check_dsl({"query": {"match_all": {}}}, REPORTS, INDEX, vars=vars)
    assert info.value.code == "missing_variable"
    assert "tenant_id" in info.value.message and "--var tenant_id=" in info.value.hint


@pytest.mark.parametrize("value", [{"value": 7, "boost": 0}, [7, {"a": 1}], object()])
def test_row_filter_variable_must_be_term_values(value: Any) -> None:
    refused({}, code="invalid_variable", vars={"tenant_id": value})


def test_empty_list_variable_matches_nothing() -> None:
    assert check({}, vars={"tenant_id": []}).body["query"] == {"bool": {"filter": [{"terms": {"tenant_id": []}}]}}


def test_no_row_filters_leaves_the_query_alone() -> None:
    body = {"query": {"term": {"author_id": "e1"}}}
    assert check(body, source=NO_FILTERS, vars={}).body["query"] == body["query"]
    assert "query" not in check({}, source=NO_FILTERS, vars={}).body


def test_row_filter_applies_to_the_other_index_only_when_declared() -> None:
    safe = check({"query": {"term": {"name": "x"}}}, index="projects", vars={})
    assert safe.body["query"] == {"term": {"name": "x"}}
    assert safe.body["_source"] == ["name"]


# ==========================================================================================
# References
# ==========================================================================================

def test_reference_in_terms_is_the_whole_list() -> None:
    safe = check({"query": {"terms": {"author_id": "<top>"}}}, params={"top": ["e1", "e2"]})
    assert original_query(safe) == {"terms": {"author_id": ["e1", "e2"]}}
    assert safe.params == {"top": ["e1", "e2"], "tenant_id": 7}


def test_reference_to_a_column() -> None:
    safe = check({"query": {"terms": {"author_id": "<top.employee_id>"}}}, params={"top.employee_id": ["e9"]})
    assert original_query(safe) == {"terms": {"author_id": ["e9"]}}


def test_references_inside_a_list_are_spliced() -> None:
    safe = check({"query": {"terms": {"author_id": ["e0", "<a>", "<b>"]}}}, params={"a": ["e1", "e2"], "b": ["e3"]})
    assert original_query(safe) == {"terms": {"author_id": ["e0", "e1", "e2", "e3"]}}


def test_empty_reference_list_matches_nothing() -> None:
    safe = check({"query": {"terms": {"author_id": "<none>"}}}, params={"none": []})
    assert original_query(safe) == {"terms": {"author_id": []}}


def test_reference_values_are_json_values_not_text() -> None:
    hostile = 'x"}}, {"match_all": {}'
    safe = check({"query": {"term": {"author_id": "<a>"}}}, params={"a": [hostile]})
    assert original_query(safe) == {"term": {"author_id": hostile}}


def test_enum_is_not_applied_to_reference_values() -> None:
    safe = check({"query": {"terms": {"department": "<d>"}}}, params={"d": ["whatever"]})
    assert original_query(safe) == {"terms": {"department": ["whatever"]}}


def test_large_reference_list_is_split_in_one_bool() -> None:
    values = [f"e{i}" for i in range(MAX_TERMS * 2 + 10)]
    safe = check({"query": {"terms": {"author_id": "<many>", "_name": "authors"}}}, params={"many": values})
    split = original_query(safe)["bool"]
    assert split["minimum_should_match"] == 1 and split["_name"] == "authors"
    chunks = [c["terms"]["author_id"] for c in split["should"]]
    assert [len(c) for c in chunks] == [MAX_TERMS, MAX_TERMS, 10]
    assert sum(chunks, []) == values


def test_exactly_max_terms_is_not_split() -> None:
    values = list(range(MAX_TERMS))
    safe = check({"query": {"terms": {"author_id": "<v>"}}}, params={"v": values})
    assert original_query(safe) == {"terms": {"author_id": values}}


@pytest.mark.parametrize("body", [
    {"query": {"term": {"author_id": "<one>"}}},
    {"query": {"match": {"content": {"query": "<one>"}}}},
    {"query": {"range": {"week_start_date": {"gte": "<one>"}}}},
    {"query": {"multi_match": {"query": "<one>", "fields": ["title"]}}},
])
def test_scalar_reference(body: dict[str, Any]) -> None:
    safe = check(body, params={"one": ["2024-03-04"]})
    assert "2024-03-04" in json.dumps(safe.body) and "<one>" not in json.dumps(safe.body)


@pytest.mark.parametrize("rows", [[], ["a", "b"]])
def test_scalar_reference_needs_exactly_one_row(rows: list[str]) -> None:
    with pytest.raises(PlanError, match=f"returned {len(rows)} rows"):
        check({"query": {"term": {"author_id": "<one>"}}}, params={"one": rows})


@pytest.mark.parametrize("body", [
    {"query": {"terms": {"author_id": "<gone>"}}},
    {"query": {"term": {"author_id": "<gone>"}}},
    {"query": {"ids": {"values": "<gone>"}}},
])
def test_missing_reference_is_a_plan_error(body: dict[str, Any]) -> None:
    with pytest.raises(PlanError, match="<gone>"):
        check(body, params={"top": ["x"]})


def test_reference_inside_text_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="stands alone"):
        check({"query": {"match": {"content": "written by <top>"}}}, params={"top": ["x"]})


def test_reference_where_no_value_goes_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="no query value"):
        check({"search_after": ["<top>"], "sort": ["report_id"]}, params={"top": ["x"]})


# ==========================================================================================
# Output contract
# ==========================================================================================

def test_input_is_never_mutated() -> None:
    bodies = [*ALLOWED.values(), {"query": {"terms": {"author_id": "<top>"}}, "_source": {"excludes": ["salary"]}}]
    for body in bodies:
        before = copy.deepcopy(body)
        safe = check(body, params={"top": ["a"]})
        assert body == before
        assert safe.body is not body


def test_output_shares_no_mutable_part_with_the_input() -> None:
    body = {"query": {"bool": {"filter": [{"range": {"week_start_date": {"gte": "2024"}}}]}}, "search_after": [1]}
    safe = check(body)
    safe.body["search_after"].append(2)
    original_query(safe)["bool"]["filter"].clear()
    assert body == {"query": {"bool": {"filter": [{"range": {"week_start_date": {"gte": "2024"}}}]}}, "search_after": [1]}


def test_columns_are_the_fields_read() -> None:
    safe = check({"query": {"match": {"title.keyword": "x"}}, "sort": ["week_start_date"], "_source": ["author_id"],
                  "aggs": {"d": {"terms": {"field": "department"}}}})
    assert safe.columns == ("title", "week_start_date", "author_id", "department")


def test_the_body_is_json_serialisable() -> None:
    for body in ALLOWED.values():
        json.dumps(check(body).body)


# ==========================================================================================
# A real search server: osmem-server (OpenSearch-compatible)
# ==========================================================================================

ENGINE_INDEX = "sandbox_dsl_weekly_reports"
BIG = MAX_TERMS + 4_464  # 70,000 values: one chunk and a remainder


def _documents() -> list[dict[str, Any]]:
    docs = []
    for i in range(12):
        docs.append({
            "report_id": f"r{i}", "author_id": f"e{i}", "tenant_id": "7" if i % 3 else "8",
            "department": ["eng", "sales", "hr"][i % 3], "week_start_date": f"2024-03-{i + 1:02d}",
            "title": f"weekly report {i}", "content": f"星火 项目 进展 {i}", "projects_mentioned": ["星火"],
            "salary": 1000.0 + i, "reviewer": {"name": f"boss{i % 2}", "email": f"boss{i % 2}@corp"},
            "comments": [{"author": f"e{(i + 1) % 12}", "text": "好"}],
        })
    return docs


@pytest.fixture(scope="module")
def engine(search_server: Any) -> Any:
    """An index with two tenants (7 and 8) on the shared search server; dropped at the end."""
    from opensearchpy import OpenSearch, helpers

    client = OpenSearch(hosts=[search_server.url])
    client.indices.create(index=ENGINE_INDEX, body={"mappings": {"properties": {
        "report_id": {"type": "keyword"}, "author_id": {"type": "keyword"}, "tenant_id": {"type": "keyword"},
        "department": {"type": "keyword"}, "week_start_date": {"type": "date"},
        "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}}, "content": {"type": "text"},
        "projects_mentioned": {"type": "keyword"}, "salary": {"type": "double"},
        "reviewer": {"properties": {"name": {"type": "keyword"}, "email": {"type": "keyword"}}},
        "comments": {"type": "nested", "properties": {"author": {"type": "keyword"}, "text": {"type": "text"}}},
    }}})
    actions = [{"_index": ENGINE_INDEX, "_id": d["report_id"], **d} for d in _documents()]
    helpers.bulk(client, actions, refresh=True)
    yield client
    client.indices.delete(index=ENGINE_INDEX)


ENGINE_REPORTS = manifest(ENGINE_INDEX)
TENANT_7 = {d["report_id"] for d in _documents() if d["tenant_id"] == "7"}


def run(client: Any, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    kw.setdefault("vars", {"tenant_id": 7})
    safe = check_dsl(body, ENGINE_REPORTS, ENGINE_INDEX, **kw)
    return client.search(index=safe.index, body=safe.body)


def _ids(response: dict[str, Any]) -> set[str]:
    return {hit["_id"] for hit in response["hits"]["hits"]}


def test_search_server_row_filter_restricts_hits(engine: Any) -> None:
    assert len(engine.search(index=ENGINE_INDEX, body={"query": {"match_all": {}}})["hits"]["hits"]) == 10
    assert _ids(run(engine, {})) == TENANT_7
    assert _ids(run(engine, {"query": {"match": {"content": "星火"}}})) == TENANT_7
    assert _ids(run(engine, {"query": {"term": {"report_id": "r0"}}})) == set()  # r0 is tenant 8's
    assert _ids(run(engine, {}, vars={"tenant_id": 8})) == {"r0", "r3", "r6", "r9"}


def test_search_server_row_filter_restricts_aggregations(engine: Any) -> None:
    response = run(engine, {"size": 0, "aggs": {
        "tenants": {"terms": {"field": "tenant_id"}},
        "depts": {"terms": {"field": "department"}},
        "authors": {"cardinality": {"field": "author_id"}},
        "nested": {"nested": {"path": "comments"}, "aggs": {"who": {"terms": {"field": "comments.author", "size": 20}}}},
    }})
    aggs = response["aggregations"]
    assert [(b["key"], b["doc_count"]) for b in aggs["tenants"]["buckets"]] == [("7", 8)]
    assert {b["key"] for b in aggs["depts"]["buckets"]} == {"sales", "hr"}
    assert aggs["authors"]["value"] == 8
    assert aggs["nested"]["doc_count"] == 8
    assert response["hits"]["total"]["value"] == 8


def test_search_server_source_keeps_denied_fields_out(engine: Any) -> None:
    response = run(engine, {"size": 20, "aggs": {"t": {"top_hits": {"size": 3}}}})
    hits = response["hits"]["hits"] + response["aggregations"]["t"]["hits"]["hits"]
    assert hits
    for hit in hits:
        assert "salary" not in hit["_source"]
        assert hit["_source"]["reviewer"] == {"name": hit["_source"]["reviewer"]["name"]}
        assert "title" in hit["_source"] and "comments" in hit["_source"]


def test_search_server_split_terms_returns_the_right_documents(engine: Any) -> None:
    wanted = ["e1", "e2", "e4", "e0"]  # e0 is tenant 8's: the row filter still applies
    values = [f"nobody{i}" for i in range(BIG - len(wanted))] + wanted   # the real ones land in the last chunk
    body = {"query": {"terms": {"author_id": "<authors>"}},
            "aggs": {"depts": {"terms": {"field": "department"}}}}
    safe = check_dsl(body, ENGINE_REPORTS, ENGINE_INDEX, params={"authors": values}, vars={"tenant_id": 7})
    assert len(original_query(safe)["bool"]["should"]) == 2
    response = engine.search(index=safe.index, body=safe.body)
    assert _ids(response) == {"r1", "r2", "r4"}
    assert sum(b["doc_count"] for b in response["aggregations"]["depts"]["buckets"]) == 3


def test_search_server_highlight_and_keyword_multi_field(engine: Any) -> None:
    response = run(engine, {"query": {"bool": {"must": [{"match": {"content": "星火"}}],
                                              "filter": [{"term": {"title.keyword": "weekly report 1"}}]}},
                            "highlight": {"fields": {"content": {}}}})
    assert _ids(response) == {"r1"}


# --- reference values are plain data ---------------------------------------------------


@pytest.mark.parametrize("value", [{"value": "x*", "case_insensitive": True}, ["a", "b"],
                                   {"script": {"source": "return true"}}], ids=["object", "list", "script"])
@pytest.mark.parametrize("body", [
    {"query": {"term": {"author_id": "<p>"}}},
    {"query": {"terms": {"author_id": "<p>"}}},
    {"query": {"wildcard": {"author_id": "<p>"}}},
    {"query": {"range": {"week_start_date": {"gte": "<p>"}}}},
    {"query": {"ids": {"values": ["<p>"]}}},
], ids=["term", "terms", "wildcard", "range", "ids"])
def test_reference_values_that_are_not_plain_are_plan_errors(body: dict[str, Any], value: Any) -> None:
    with pytest.raises(PlanError, match="reference <p> .*carries an? (object|list) value; only plain values"):
        check(body, params={"p": [value]})


def test_plain_reference_values_including_null_are_substituted() -> None:
    safe = check({"query": {"terms": {"author_id": "<p>"}}}, params={"p": ["e1", 2, 1.5, True, None]})
    assert original_query(safe) == {"terms": {"author_id": ["e1", 2, 1.5, True, None]}}


# --- top_hits in buckets, histogram bounds, _source excludes ------------------------------


@pytest.mark.parametrize(("aggs", "size"), [
    ({"terms": {"field": "author_id", "size": 11}}, 10),                 # 110 documents
    ({"terms": {"field": "author_id"}}, 11),                             # default terms size 10: 110
    ({"range": {"field": "week_start_date", "ranges": [{"to": 1}, {"from": 1}]}}, 51),   # 102
    ({"histogram": {"field": "week_start_date", "interval": 10}}, 2),    # unknown count: LIMIT × 2
], ids=["terms", "default terms size", "range", "histogram"])
def test_top_hits_in_buckets_stay_within_the_limit(aggs: dict[str, Any], size: int) -> None:
    body = {"aggs": {"a": {**aggs, "aggs": {"t": {"top_hits": {"size": size}}}}}}
    error = refused(body, code="size_limit")
    assert "aggs.a.aggs.t.top_hits" in error.message and f"at most {LIMIT}" in (error.hint or "")


def test_top_hits_limit_multiplies_along_the_nesting_path() -> None:
    inner = {"t": {"top_hits": {"size": 5}}}
    ok = {"aggs": {"a": {"terms": {"field": "author_id", "size": 4},
                         "aggs": {"b": {"terms": {"field": "department", "size": 5}, "aggs": inner}}}}}
    assert check(ok).body["aggs"]["a"]["aggs"]["b"]["aggs"]["t"]["top_hits"]["size"] == 5   # 4 × 5 × 5 = 100
    ok["aggs"]["a"]["terms"]["size"] = 5                                                    # 5 × 5 × 5 = 125
    refused(ok, code="size_limit")
    single = {"aggs": {"n": {"nested": {"path": "comments"}, "aggs": {"t": {"top_hits": {"size": LIMIT}}}}}}
    check(single)   # a single-bucket aggregation does not multiply


@pytest.mark.parametrize("kind", ["histogram", "date_histogram"])
def test_histogram_extended_bounds_need_min_doc_count(kind: str) -> None:
    interval = {"interval": 1} if kind == "histogram" else {"fixed_interval": "1d"}
    options = {"field": "week_start_date", **interval, "extended_bounds": {"min": 0, "max": 60_000}}
    for min_doc_count in ({}, {"min_doc_count": 0}):
        error = refused({"aggs": {"h": {kind: {**options, **min_doc_count}}}}, code="size_limit")
        assert "min_doc_count" in (error.hint or "")
    check({"aggs": {"h": {kind: {**options, "min_doc_count": 1}}}})
    check({"aggs": {"h": {kind: {"field": "week_start_date", **interval, "hard_bounds": {"min": 0, "max": 9}}}}})


def test_source_excluding_every_readable_field_returns_no_source() -> None:
    excludes = ["report_id", "author_id", "department", "week_start_date", "content", "title",
                "projects_mentioned", "tenant_id", "reviewer", "comments"]
    assert check({"_source": {"excludes": excludes}}).body["_source"] is False
    assert check({"_source": []}).body["_source"] is False   # empty includes would mean every field
    nested_out = check({"_source": {"excludes": ["reviewer"]}}).body["_source"]["includes"]
    assert "reviewer.name" not in nested_out and "title" in nested_out


def test_search_server_accepts_source_excludes(engine: Any) -> None:
    response = run(engine, {"_source": {"excludes": ["content"]}, "size": 2})
    sources = [hit["_source"] for hit in response["hits"]["hits"]]
    assert sources and all("content" not in s and "title" in s and "salary" not in s for s in sources)
