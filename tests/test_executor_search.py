"""Search executors against a real search server (osmem-server, OpenSearch-compatible, on loopback).

The same behavioural suite runs for both kinds: ``opensearch`` talks to the search server directly,
``elasticsearch`` (the official 9.x client) through ``es_proxy.EsProxy``, which translates its
compatibility media types and adds the product header. Fault tests put a proxy in front of
both kinds, so 5xx answers, dropped connections and slow answers are real HTTP behaviour.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from es_proxy import EsProxy
from manifest_support import manifest_text
from search_support import load_declared
from servers import SearchServer

from structq.capabilities import load_manifest, load_manifest_text
from structq.capabilities.model import Manifest
from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable
from structq.executors.base import ResultSet
from structq.executors.search import embedded_server
from structq.executors.search.executor import ElasticsearchExecutor, OpenSearchExecutor, SearchExecutor
from structq.executors.search.rows import aggregation_rows
from structq.safety.query import SafeQuery
from structq.sources import executor_for, kind_of

KINDS = ["opensearch", "elasticsearch"]
INDEX = "sq_exec_reports"
BIG_INDEX = "sq_exec_people"
MISSING_INDEX = "sq_exec_not_created"

DEPTS = ["研发", "市场", "销售"]
SENTENCES = [
    "星火项目本周完成了接口联调",
    "市场活动总结与下周计划",
    "客户拜访记录，签约进展顺利",
    "星火项目测试环境部署完毕",
    "weekly sync: budget review",
]

# --------------------------------------------------------------------------------------------
# Test data: 30 weekly reports, generated so expectations can be computed from the same list
# --------------------------------------------------------------------------------------------


def _report(i: int) -> dict[str, Any]:
    week = dt.date(2024, 3, 4) + dt.timedelta(days=7 * (i % 8))
    return {
        "_id": f"r{i:02d}",
        "author_id": f"E{i % 10:03d}",
        "dept": DEPTS[i % 3],
        "week_start_date": week.isoformat(),
        "score": round(1 + (i * 7 % 10) / 2, 1),
        "content": SENTENCES[i % len(SENTENCES)],
        "tags": [f"t{i % 4}", f"t{(i + 1) % 4}"],
        "salary": 10_000 + i,
        "meta": {"team": f"team{i % 2}", "secret": f"s{i}"},
        "comments": [{"by": f"E{(i + 1) % 10:03d}", "text": "好", "private": "x"}],
    }


REPORTS = [_report(i) for i in range(30)]


def make_manifest(kind: str, url: str, *, max_rows: int = 100, timeout_s: float = 5,
                  index: str = INDEX, max_count: int = 1_000_000) -> Manifest:
    text = manifest_text("search_executor", kind=kind, url=url, max_rows=max_rows, timeout_s=timeout_s,
                         max_count=max_count, index=index, big=BIG_INDEX, missing=MISSING_INDEX)
    manifest, _ = load_manifest_text(text, env={})
    return manifest


def search(body: dict[str, Any], *, max_rows: int = 100, index: str = INDEX) -> SafeQuery:
    """A SafeQuery as the sandbox would hand it over (size already capped at max_rows + 1)."""
    body = dict(body)
    if "size" in body:
        body["size"] = min(body["size"], max_rows + 1)
    elif not ("aggs" in body or "aggregations" in body):
        body["size"] = max_rows + 1
    return SafeQuery(source="reports", kind="search", limit=max_rows + 1, max_rows=max_rows,
                     body=body, index=index)


def _load(url: str) -> str:
    """This module's indices on the search server at ``url``, made again from the documents above."""
    big = [{"_id": f"p{i}", "person_id": f"P{i:05d}"} for i in range(0, 70_000, 7_000)]
    return load_declared(url, make_manifest("opensearch", url), {INDEX: REPORTS, BIG_INDEX: big})


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_url(search_server: SearchServer) -> str:
    return _load(search_server.url)


@pytest.fixture(scope="module")
def es_proxy(engine_url: str) -> Iterator[EsProxy]:
    with EsProxy(engine_url) as proxy:
        yield proxy


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def url_for(kind: str, engine_url: str, es_proxy: EsProxy) -> str:
    """Where a client of ``kind`` reaches the shared search server."""
    return engine_url if kind == "opensearch" else es_proxy.url


@pytest.fixture
def make_executor(kind: str, url_for: str) -> Iterator[Callable[..., SearchExecutor]]:
    made: list[SearchExecutor] = []

    def make(url: str | None = None, **options: Any) -> SearchExecutor:
        executor = executor_for(make_manifest(kind, url or url_for, **options))
        assert isinstance(executor, SearchExecutor)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close()


@pytest.fixture
def executor(make_executor: Callable[..., SearchExecutor]) -> SearchExecutor:
    return make_executor()


@pytest.fixture
def faulty(engine_url: str) -> Iterator[EsProxy]:
    """A proxy of this test's own, to break on purpose."""
    with EsProxy(engine_url) as proxy:
        yield proxy


def rows_as_dicts(result: ResultSet) -> list[dict[str, Any]]:
    return [dict(zip(result.columns, row)) for row in result.rows]


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def test_both_kinds_are_registered_on_one_implementation() -> None:
    for kind, executor in (("elasticsearch", ElasticsearchExecutor), ("opensearch", OpenSearchExecutor)):
        manifest = make_manifest(kind, "http://127.0.0.1:9")
        assert kind_of(manifest).executor_class(manifest) is executor
    assert issubclass(ElasticsearchExecutor, SearchExecutor)
    assert issubclass(OpenSearchExecutor, SearchExecutor)


# --------------------------------------------------------------------------------------------
# Hits
# --------------------------------------------------------------------------------------------


def test_cjk_match_finds_documents(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"query": {"match": {"content": {
        "query": "星火", "operator": "and"}}}}))
    expected = {r["_id"] for r in REPORTS if "星火" in r["content"]}
    assert {row[0] for row in result.rows} == expected
    assert len(expected) == 12 and not result.truncated


def test_hits_have_only_allowed_fields_in_manifest_order(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"query": {"term": {"author_id": "E003"}},
                                  "sort": [{"week_start_date": "asc"}]}))
    assert result.columns == ("_id", "_score", "author_id", "dept", "week_start_date", "score",
                              "content", "tags", "meta.team", "comments")
    first = rows_as_dicts(result)[0]
    source = REPORTS[3]
    assert first["_id"] == "r03"
    assert first["meta.team"] == source["meta"]["team"]
    assert first["tags"] == source["tags"]  # lists stay lists
    assert first["comments"] == [{"by": "E004", "text": "好"}]  # denied sub-field pruned
    flat = json.dumps(result.rows, ensure_ascii=False)
    assert "salary" not in flat and "secret" not in flat and "s3" not in flat


def test_source_filter_selects_columns(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"query": {"match_all": {}}, "_source": ["dept", "meta.team"],
                                  "size": 1}))
    assert result.columns == ("_id", "_score", "dept", "meta.team")


def test_highlight_column_joins_fragments(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"query": {"match_phrase": {"content": "星火"}},
                                  "highlight": {"fields": {"content": {}}}, "size": 3}))
    assert result.columns[-1] == "_highlight"
    for row in rows_as_dicts(result):
        assert row["_highlight"] == {"content": row["content"].replace(
            "星火", "<em>星</em><em>火</em>")}


def test_sort(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"query": {"term": {"dept": "市场"}},
                                  "sort": [{"score": "desc"}, {"week_start_date": "asc"}]}))
    expected = sorted((r for r in REPORTS if r["dept"] == "市场"),
                      key=lambda r: (-r["score"], r["week_start_date"]))
    assert [row[0] for row in result.rows] == [r["_id"] for r in expected]


def test_hits_truncation(executor: SearchExecutor) -> None:
    cut = executor.fetch(search({"query": {"match_all": {}}}, max_rows=5))
    assert cut.row_count == 5 and cut.truncated
    whole = executor.fetch(search({"query": {"match_all": {}}}, max_rows=30))
    assert whole.row_count == 30 and not whole.truncated


def test_size_zero_without_aggregations_counts(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"size": 0, "query": {"term": {"dept": "研发"}}}))
    assert result.columns == ("count",)
    assert result.rows == [(sum(r["dept"] == "研发" for r in REPORTS),)]


def test_size_zero_with_post_filter_counts_through_search(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"size": 0, "query": {"term": {"dept": "研发"}},
                                  "post_filter": {"term": {"author_id": "E000"}}}))
    assert result.rows == [(sum(r["dept"] == "研发" and r["author_id"] == "E000"
                                for r in REPORTS),)]
    assert result.query["track_total_hits"] == 1_000_000 and not result.truncated


# The search server honours an integer track_total_hits (relation "gte" at the bound), so the bound
# is checked end to end: 30 reports, counted up to bounds below, at and above 30.
@pytest.mark.parametrize(("bound", "shown", "stopped"), [(10, 10, True), (30, 30, True), (31, 30, False)])
@pytest.mark.parametrize("body", [{"size": 0}, {"size": 0, "post_filter": {"match_all": {}}},
                                  {"size": 0, "track_total_hits": True},
                                  {"size": 0, "track_total_hits": False}],
                         ids=["count", "post_filter", "track true", "track false"])
def test_a_count_is_bounded_and_says_at_least_at_the_bound(
        make_executor: Callable[..., SearchExecutor], body: dict[str, Any],
        bound: int, shown: int, stopped: bool) -> None:
    result = make_executor(max_count=bound).fetch(search(body))
    assert result.query["track_total_hits"] == bound
    assert result.rows == [(shown,)] and result.truncated is stopped
    assert result.notes == ((f"the count stopped at {shown:,} documents (limits.max_count): "
                             f"at least {shown:,} match",) if stopped else ())


@pytest.mark.parametrize(("asked", "sent"), [(True, 20), (5, 5), (20, 20), (10**9, 20), (-1, 20),
                                             ("true", 20), (False, False)])
def test_no_request_tracks_total_hits_past_the_bound(
        make_executor: Callable[..., SearchExecutor], asked: Any, sent: Any) -> None:
    result = make_executor(max_count=20).fetch(search({"query": {"match_all": {}}, "track_total_hits": asked}))
    assert result.query["track_total_hits"] == sent and result.row_count == 30


def test_70k_value_terms_split_into_bool_should(executor: SearchExecutor) -> None:
    values = [f"P{i:05d}" for i in range(70_000)]
    chunks = [values[i:i + 65_536] for i in range(0, len(values), 65_536)]
    body = {"query": {"bool": {"should": [{"terms": {"person_id": c}} for c in chunks],
                               "minimum_should_match": 1}}}
    result = executor.fetch(search(body, index=BIG_INDEX))
    assert sorted(row[0] for row in result.rows) == sorted(f"p{i}" for i in range(0, 70_000, 7_000))
    assert result.columns == ("_id", "_score", "person_id")


# --------------------------------------------------------------------------------------------
# Aggregations
# --------------------------------------------------------------------------------------------


def test_terms_date_histogram_avg_flatten(executor: SearchExecutor) -> None:
    body = {"size": 0, "aggs": {"by_dept": {
        "terms": {"field": "dept", "size": 10},
        "aggs": {"by_month": {
            "date_histogram": {"field": "week_start_date", "calendar_interval": "month"},
            "aggs": {"avg_score": {"avg": {"field": "score"}}}}}}}}
    result = executor.fetch(search(body))
    assert result.columns == ("by_dept", "by_month", "doc_count", "avg_score")
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in REPORTS:
        month = r["week_start_date"][:7] + "-01T00:00:00.000Z"
        groups[(r["dept"], month)].append(r["score"])
    got = {(row[0], row[1]): (row[2], row[3]) for row in result.rows}
    assert got == {k: (len(v), pytest.approx(sum(v) / len(v))) for k, v in groups.items()}
    assert not result.truncated


def test_metrics_only_give_one_row(executor: SearchExecutor) -> None:
    body = {"size": 0, "aggs": {
        "avg_score": {"avg": {"field": "score"}},
        "authors": {"cardinality": {"field": "author_id"}},
        "score_pct": {"percentiles": {"field": "score", "percents": [50, 99.5]}},
        "score_stats": {"stats": {"field": "score"}}}}
    result = executor.fetch(search(body))
    assert result.row_count == 1
    row = rows_as_dicts(result)[0]
    scores = [r["score"] for r in REPORTS]
    assert row["avg_score"] == pytest.approx(sum(scores) / len(scores))
    assert row["authors"] == 10
    assert {"score_pct.50", "score_pct.99.5"} <= set(row)
    assert row["score_stats.count"] == 30 and row["score_stats.max"] == max(scores)
    assert result.columns[:2] == ("avg_score", "authors")
    # 10 authors is far below the precision threshold: exact; percentiles never are
    assert result.notes == ("aggregation 'score_pct': percentiles are estimates (computed from a sketch "
                            "of the values), not exact",)


def test_a_cardinality_past_its_precision_threshold_is_noted(executor: SearchExecutor) -> None:
    body = {"size": 0, "aggs": {"authors": {"cardinality": {"field": "author_id", "precision_threshold": 5}}}}
    result = executor.fetch(search(body))
    assert result.notes == ("aggregation 'authors': the distinct count is an estimate (HyperLogLog++, exact "
                            "only below 5)",)


def test_composite_key_parts_become_columns(executor: SearchExecutor) -> None:
    body = {"size": 0, "aggs": {"pages": {"composite": {"size": 100, "sources": [
        {"dept": {"terms": {"field": "dept"}}},
        {"month": {"date_histogram": {"field": "week_start_date",
                                      "calendar_interval": "month"}}}]}}}}
    result = executor.fetch(search(body))
    assert result.columns == ("dept", "month", "doc_count")
    counts = Counter((r["dept"], r["week_start_date"][:7] + "-01T00:00:00.000Z") for r in REPORTS)
    assert {(row[0], row[1]): row[2] for row in result.rows} == dict(counts)
    assert not result.truncated


def test_composite_date_keys_are_shown_in_the_source_time_zone(executor: SearchExecutor) -> None:
    body = {"size": 0, "aggs": {"pages": {"composite": {"size": 100, "sources": [
        {"month": {"date_histogram": {"field": "week_start_date", "calendar_interval": "month",
                                      "time_zone": "+08:00"}}}]}}}}
    result = executor.fetch(search(body))
    counts = Counter(r["week_start_date"][:7] + "-01T00:00:00.000+08:00" for r in REPORTS)
    assert dict(result.rows) == dict(counts)


@pytest.mark.parametrize("zone,shown", [
    (None, "2024-02-29T16:00:00.000Z"),
    ("+08:00", "2024-03-01T00:00:00.000+08:00"),
    ("Asia/Shanghai", "2024-03-01T00:00:00.000+08:00"),
    ("-05:30", "2024-02-29T10:30:00.000-05:30"),
])
def test_composite_date_keys_without_a_search_server(zone: str | None, shown: str) -> None:
    march_in_shanghai = 1709222400000  # 2024-03-01T00:00+08:00
    histogram = {"field": "week_start_date", "calendar_interval": "month", **({"time_zone": zone} if zone else {})}
    body = {"aggs": {"pages": {"composite": {"sources": [{"month": {"date_histogram": histogram}},
                                                          {"formatted": {"date_histogram": histogram}}]}}}}
    response = {"aggregations": {"pages": {"buckets": [
        {"key": {"month": march_in_shanghai, "formatted": "2024-03"}, "doc_count": 2}]}}}
    assert aggregation_rows(response, body, _index(), 100).rows == [(shown, "2024-03", 2)]


def test_terms_count_errors_are_noted() -> None:
    body = {"aggs": {"by_dept": {"terms": {"field": "dept"}, "aggs": {"by_author": {"terms": {"field": "author_id"}}}}}}
    response = {"aggregations": {"by_dept": {"doc_count_error_upper_bound": 0, "buckets": [
        {"key": "a", "doc_count": 9, "by_author": {"doc_count_error_upper_bound": 2, "buckets": [
            {"key": "E1", "doc_count": 5}]}},
        {"key": "b", "doc_count": 7, "by_author": {"doc_count_error_upper_bound": 3, "buckets": [
            {"key": "E2", "doc_count": 4, "doc_count_error_upper_bound": 1}]}}]}}}
    table = aggregation_rows(response, body, _index(), 100)
    assert table.notes == ("aggregation 'by_author': the document counts per bucket may be off by up to 3 "
                           "(terms are counted shard by shard)",)
    response["aggregations"]["by_dept"]["doc_count_error_upper_bound"] = -1
    assert "could not bound" in aggregation_rows(response, body, _index(), 100).notes[0]


@pytest.mark.parametrize("size", ["5000", 5.0, True, [10]])
def test_a_size_that_is_not_an_integer_is_refused(size: Any) -> None:
    executor = executor_for(make_manifest("opensearch", "http://127.0.0.1:9"))
    with pytest.raises(ExecutionError, match="whole number"):
        executor.fetch(SafeQuery(source="reports", kind="search", limit=101, max_rows=100, index=INDEX,
                               body={"size": size, "query": {"match_all": {}}}))


def test_bucket_truncation(executor: SearchExecutor) -> None:
    few = executor.fetch(search({"size": 0, "aggs": {"a": {"terms": {"field": "author_id",
                                                                      "size": 3}}}}))
    assert few.row_count == 3 and few.truncated  # sum_other_doc_count > 0
    page = executor.fetch(search({"size": 0, "aggs": {"p": {"composite": {
        "size": 2, "sources": [{"a": {"terms": {"field": "author_id"}}}]}}}}))
    assert page.row_count == 2 and page.truncated  # a full composite page
    everything = executor.fetch(search({"size": 0, "aggs": {"a": {"terms": {
        "field": "author_id", "size": 50}}}}))
    assert everything.row_count == 10 and not everything.truncated
    capped = executor.fetch(search({"size": 0, "aggs": {"a": {"terms": {
        "field": "author_id", "size": 50}}}}, max_rows=4))
    assert capped.row_count == 4 and capped.truncated  # more buckets than max_rows


def test_aggregations_win_over_hits(executor: SearchExecutor) -> None:
    body = {"size": 5, "query": {"match_all": {}},
            "aggs": {"by_dept": {"terms": {"field": "dept"}}}}
    result = executor.fetch(search(body))
    assert result.columns == ("by_dept", "doc_count")
    assert dict(result.rows) == dict(Counter(r["dept"] for r in REPORTS))
    assert result.query["size"] == 0  # hits are not fetched only to be dropped


# --------------------------------------------------------------------------------------------
# Through the real sandbox: what check_dsl hands over runs as expected
# --------------------------------------------------------------------------------------------


def checked(body: dict[str, Any], index: str = INDEX, **options: Any) -> SafeQuery:
    from structq.safety import dsl

    return dsl.check_dsl(body, make_manifest("opensearch", "http://127.0.0.1:9"), index,
                         **options)


def test_sandboxed_70k_reference_terms(executor: SearchExecutor) -> None:
    ids = [f"P{i:05d}" for i in range(70_000)]
    query = checked({"query": {"terms": {"person_id": "<people>"}}}, BIG_INDEX,
                    params={"people": ids}, max_rows=1_000)
    result = executor.fetch(query)
    assert sorted(row[0] for row in result.rows) == sorted(f"p{i}" for i in range(0, 70_000, 7_000))


def test_sandboxed_hits_and_aggregations(executor: SearchExecutor) -> None:
    hits = executor.fetch(checked({"query": {"match_phrase": {"content": "星火"}},
                                 "highlight": {"fields": {"content": {}}}}))
    assert hits.row_count == 12 and hits.columns[-1] == "_highlight"
    assert "comments" in hits.columns and "salary" not in hits.columns
    aggs = executor.fetch(checked({"aggs": {"by_dept": {"terms": {"field": "dept"}}}}))
    assert dict(aggs.rows) == dict(Counter(r["dept"] for r in REPORTS))


# --------------------------------------------------------------------------------------------
# Errors from the search server
# --------------------------------------------------------------------------------------------


def test_malformed_query_is_a_retryable_error_with_the_search_server_reason(
        executor: SearchExecutor) -> None:
    with pytest.raises(ExecutionError) as info:
        executor.fetch(search({"query": {"no_such_clause": {"dept": "x"}}}))
    assert type(info.value) is ExecutionError and info.value.retryable
    assert "no_such_clause" in str(info.value) and "HTTP 400" in str(info.value)


def test_bad_field_use_names_the_root_cause(executor: SearchExecutor) -> None:
    with pytest.raises(ExecutionError) as info:
        executor.fetch(search({"query": {"match_all": {}}, "sort": [{"content": "asc"}]}))
    assert "Text fields are not optimised" in str(info.value)
    assert "all shards failed" not in str(info.value)


def test_index_missing_on_the_search_server(executor: SearchExecutor) -> None:
    with pytest.raises(ExecutionError) as info:
        executor.fetch(search({"query": {"match_all": {}}}, index=MISSING_INDEX))
    assert "index_not_found_exception" in str(info.value)
    assert MISSING_INDEX in str(info.value)


def test_undeclared_index_is_refused_before_any_request(executor: SearchExecutor) -> None:
    with pytest.raises(ExecutionError, match="not declared"):
        executor.fetch(search({"query": {"match_all": {}}}, index="other"))


# --------------------------------------------------------------------------------------------
# Faults: 5xx, dropped connections, slow answers, dead servers
# --------------------------------------------------------------------------------------------


def test_only_the_search_endpoint_is_called(
        make_executor: Callable[..., SearchExecutor], faulty: EsProxy) -> None:
    executor = make_executor(faulty.url)
    executor.fetch(search({"query": {"match_all": {}}}))
    executor.fetch(search({"size": 0}))
    executor.fetch(search({"size": 0, "aggs": {"a": {"terms": {"field": "dept"}}}}))
    assert faulty.requests == [("POST", f"/{INDEX}/_search")] * 3


@pytest.mark.parametrize(("status", "error"), [(500, ExecutionError), (503, SourceUnavailable)])
def test_server_error_is_clear_and_not_retried_endlessly(
        make_executor: Callable[..., SearchExecutor], faulty: EsProxy, status: int,
        error: type[ExecutionError]) -> None:
    executor = make_executor(faulty.url)
    faulty.fail_next(status, count=100)
    with pytest.raises(ExecutionError) as info:
        executor.fetch(search({"query": {"match_all": {}}}))
    assert type(info.value) is error and not info.value.retryable
    assert f"HTTP {status}" in str(info.value) and "injected" in str(info.value)
    assert "try again later" in str(info.value)
    assert 1 <= len(faulty.requests) <= 2
    faulty.clear_faults()
    assert executor.fetch(search({"query": {"match_all": {}}})).row_count == 30


def test_connection_lost_mid_request(make_executor: Callable[..., SearchExecutor],
                                     faulty: EsProxy) -> None:
    executor = make_executor(faulty.url)
    faulty.drop_next(count=100)
    with pytest.raises(SourceUnavailable) as info:
        executor.fetch(search({"query": {"match_all": {}}}))
    assert "unreachable" in str(info.value) and not info.value.retryable
    assert 1 <= len(faulty.requests) <= 2


def test_one_dropped_connection_is_retried(make_executor: Callable[..., SearchExecutor],
                                           faulty: EsProxy) -> None:
    executor = make_executor(faulty.url)
    faulty.drop_next(count=1)
    assert executor.fetch(search({"query": {"match_all": {}}})).row_count == 30


def test_slow_answer_is_a_timeout(make_executor: Callable[..., SearchExecutor],
                                  faulty: EsProxy) -> None:
    executor = make_executor(faulty.url, timeout_s=0.5)
    faulty.delay_next(3, count=100)
    with pytest.raises(QueryTimeout) as info:  # the proxy answers after 3 s: only the timeout ends it first
        executor.fetch(search({"query": {"match_all": {}}}))
    assert "0.5 s" in str(info.value)


def test_request_body_carries_the_search_server_timeout(executor: SearchExecutor) -> None:
    result = executor.fetch(search({"query": {"match_all": {}}, "size": 1}))
    assert result.query["timeout"] == "5000ms"


def test_stopped_server_is_unavailable_quickly(kind: str) -> None:
    server = SearchServer.start()
    proxy = EsProxy(server.url) if kind == "elasticsearch" else None
    try:
        _load(server.url)
        executor = executor_for(make_manifest(kind, proxy.url if proxy else server.url))
        try:
            assert executor.fetch(search({"size": 0})).rows == [(30,)]
            server.stop()
            if proxy is not None:
                proxy.close()
                proxy = None
            with pytest.raises(SourceUnavailable) as info:
                executor.fetch(search({"size": 0}))
            assert "unreachable" in str(info.value) and "check that the search server" in str(info.value)
        finally:
            executor.close()
    finally:
        if proxy is not None:
            proxy.close()
        server.stop()


def test_password_in_url_is_not_in_messages(kind: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    executor = executor_for(make_manifest(kind, f"http://admin:hunter2@127.0.0.1:{port}"))
    try:
        with pytest.raises(SourceUnavailable) as info:
            executor.fetch(search({"size": 0}))
        assert "hunter2" not in str(info.value)
        assert "admin:***@127.0.0.1" in str(info.value)
    finally:
        executor.close()


def test_elasticsearch_kind_on_an_opensearch_server_says_so(engine_url: str) -> None:
    executor = executor_for(make_manifest("elasticsearch", engine_url))
    try:
        with pytest.raises(SourceUnavailable) as info:
            executor.fetch(search({"query": {"match_all": {}}}))
        assert "kind: opensearch" in str(info.value) and not info.value.retryable
    finally:
        executor.close()


def test_missing_client_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opensearchpy", None)
    executor = OpenSearchExecutor(make_manifest("opensearch", "http://127.0.0.1:9"))
    with pytest.raises(ConfigError) as info:
        executor.fetch(search({"size": 0}))
    assert 'pip install "structq[opensearch]"' in str(info.value)


# --------------------------------------------------------------------------------------------
# Aggregation rows without a search server: shapes the search server tests above do not reach
# --------------------------------------------------------------------------------------------


def _index() -> Any:
    index = make_manifest("opensearch", "http://127.0.0.1:9").index(INDEX)
    assert index is not None
    return index


def test_filter_and_keyed_buckets_rows() -> None:
    body = {"aggs": {"march": {"filter": {"term": {"dept": "x"}},
                               "aggs": {"avg_score": {"avg": {"field": "score"}}}},
                     "ranges": {"range": {"field": "score", "keyed": True,
                                          "ranges": [{"to": 3}, {"from": 3}]}}}}
    response = {"aggregations": {
        "march": {"doc_count": 4, "avg_score": {"value": 2.5}},
        "ranges": {"buckets": {"*-3.0": {"doc_count": 2}, "3.0-*": {"doc_count": 5}}}}}
    table = aggregation_rows(response, body, _index(), 100)
    assert table.columns == ("ranges", "doc_count", "march", "avg_score")
    assert table.rows == [(None, None, 4, 2.5), ("*-3.0", 2, None, None), ("3.0-*", 5, None, None)]


def test_empty_aggregation_keeps_its_columns() -> None:
    body = {"aggs": {"by_dept": {"terms": {"field": "dept"},
                                 "aggs": {"m": {"max": {"field": "score"}}}}}}
    response = {"aggregations": {"by_dept": {"buckets": [], "sum_other_doc_count": 0}}}
    table = aggregation_rows(response, body, _index(), 100)
    assert table.columns == ("by_dept", "doc_count", "m") and table.rows == []


def test_top_hits_keep_only_allowed_fields() -> None:
    body = {"aggs": {"d": {"terms": {"field": "dept"},
                           "aggs": {"top": {"top_hits": {"size": 1}}}}}}
    response = {"aggregations": {"d": {"buckets": [{"key": "研发", "doc_count": 1, "top": {
        "hits": {"hits": [{"_source": {"dept": "研发", "salary": 1, "meta": {"secret": "s"}}}]}}}]}}}
    table = aggregation_rows(response, body, _index(), 100)
    assert table.rows == [("研发", 1, [{"dept": "研发"}])]


def test_nested_top_hits_return_their_allowed_sub_fields() -> None:
    body = {"aggs": {"c": {"nested": {"path": "comments"}, "aggs": {"top": {"top_hits": {"size": 2}}}}}}
    hit = {"_nested": {"field": "comments", "offset": 0}, "_source": {"by": "E1", "private": "x"}}
    response = {"aggregations": {"c": {"doc_count": 3, "top": {"hits": {"hits": [hit]}}}}}
    table = aggregation_rows(response, body, _index(), 100)
    assert table.rows == [(3, [{"by": "E1"}])]


def test_nested_top_hits_on_the_search_server(executor: SearchExecutor) -> None:
    body = {"aggs": {"c": {"nested": {"path": "comments"},
                           "aggs": {"top": {"top_hits": {"size": 2, "_source": ["comments.by", "comments.text"]}}}}}}
    (row,) = executor.fetch(search(body)).rows
    assert len(row[1]) == 2 and all(set(doc) == {"by", "text"} for doc in row[1])


def test_too_many_buckets_is_the_query_s_fault(executor: SearchExecutor) -> None:
    """The search server answers HTTP 503; the query asked for too many buckets, it can be fixed."""
    with pytest.raises(ExecutionError) as info:
        executor.fetch(search({"aggs": {"h": {"histogram": {"field": "score", "interval": 0.00001}}}}))
    assert type(info.value) is ExecutionError and info.value.retryable
    assert "too_many_buckets_exception" in str(info.value) and "fewer buckets" in (info.value.hint or "")


# --------------------------------------------------------------------------------------------
# The embedded search server
# --------------------------------------------------------------------------------------------


def write_embedded(tmp_path: Path, index: str, docs: list[dict[str, Any]] | None,
                   source: str = "reports") -> Manifest:
    """A manifest file beside its documents, so the relative ``documents:`` path resolves."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    if docs is not None:
        (tmp_path / "docs.jsonl").write_text(
            "\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n", encoding="utf-8")
    path = tmp_path / "reports.yaml"
    path.write_text(manifest_text("search_embedded", source=source, index=index, documents="docs.jsonl"),
                    encoding="utf-8")
    manifest, _ = load_manifest(path, env={})
    return manifest


EMBEDDED_DOCS = [
    {"_id": "w1", "author_id": "E001", "content": "星火项目周报", "week_start_date": "2024-03-04",
     "hours": 12.5, "author": {"name": "张三"}, "meta": {"team": "a"}, "comments": [{"by": "E2"}]},
    {"_id": "w2", "author_id": "E002", "content": "市场推广", "week_start_date": "2024-03-11",
     "hours": 8},
    {"_id": "w3", "author_id": "E003", "content": "星星之火", "week_start_date": "2024-03-18",
     "hours": 1},
]


@pytest.fixture
def embedded_engine() -> Iterator[None]:
    """Each embedded test starts from a stopped search server and leaves it stopped."""
    embedded_server.stop()
    yield
    embedded_server.stop()


def test_index_mapping_from_manifest_types(tmp_path: Path) -> None:
    manifest = write_embedded(tmp_path, "emb_mapping", None)
    index = manifest.index("emb_mapping")
    assert index is not None
    assert embedded_server.index_mapping(index) == {"dynamic": False, "properties": {
        "author_id": {"type": "keyword"},
        "content": {"type": "text"},
        "week_start_date": {"type": "date"},
        "hours": {"type": "double"},  # scaled_float: no factor to round by
        "author": {"type": "object", "properties": {"name": {"type": "keyword"}}},
        "meta": {"type": "object", "properties": {"team": {"type": "keyword"}}},
        "comments": {"type": "nested", "properties": {"by": {"type": "keyword"}}},
    }}


def test_embedded_source_loads_and_searches(tmp_path: Path, embedded_engine: None) -> None:
    from opensearchpy import OpenSearch

    manifest = write_embedded(tmp_path, "emb_load", EMBEDDED_DOCS)
    progress: list[tuple[str, int, int]] = []
    executor = OpenSearchExecutor(manifest, progress=lambda *a: progress.append(a))
    try:
        result = executor.fetch(SafeQuery(
            source="reports", kind="search", limit=11, max_rows=10, index="emb_load",
            body={"query": {"match": {"content": {"query": "星火", "operator": "and"}}},
                  "size": 11}))
        assert sorted(row[0] for row in result.rows) == ["w1", "w3"]
        assert progress == [("emb_load", 0, 3), ("emb_load", 3, 3)]
        # Intermediate steps may fetch past the search server's default 10,000-hit window.
        wide = executor.fetch(SafeQuery(source="reports", kind="search", limit=50_001,
                                      max_rows=50_000, index="emb_load",
                                      body={"query": {"match_all": {}}, "size": 50_001}))
        assert wide.row_count == 3 and not wide.truncated
        # Starting the search server and loading the index is reported apart from the search itself.
        assert result.startup_ms > 0
        assert wide.startup_ms == 0
        url = embedded_server.server_url()
        assert url is not None and url.startswith("http://127.0.0.1:")
        client = OpenSearch(hosts=[url])
        physical = embedded_server.physical_index(manifest, "emb_load")
        assert physical.startswith("emb_load--")
        mapping = client.indices.get_mapping(index=physical)[physical]["mappings"]
        assert mapping["properties"]["content"] == {"type": "text"}
        assert mapping["properties"]["comments"]["type"] == "nested"
        client.close()
    finally:
        executor.close()
    assert embedded_server.server_url() is not None  # kept for the next executor, stopped at exit


def test_second_executor_does_not_reload(tmp_path: Path, embedded_engine: None) -> None:
    manifest = write_embedded(tmp_path, "emb_once", EMBEDDED_DOCS)
    calls: list[tuple[str, int, int]] = []
    first = executor_for(manifest)
    second = OpenSearchExecutor(manifest, progress=lambda *a: calls.append(a))
    try:
        first.connect()
        second.connect()
        assert calls == []
        count = SafeQuery(source="reports", kind="search", limit=11, max_rows=10,
                          index="emb_once", body={"size": 0})
        assert first.fetch(count).rows == second.fetch(count).rows == [(3,)]
        physical = embedded_server.physical_index(manifest, "emb_once")
        assert embedded_server.loaded_indices() == {physical: (tmp_path / "docs.jsonl").resolve()}
        first.close()
        assert second.fetch(count).rows == [(3,)]  # still held by the second
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("ending", ["stopped", "killed", "refused"])
def test_a_restarted_embedded_search_server_is_found_again(tmp_path: Path, embedded_engine: None, ending: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The client of a dead search server is dropped: the search server starts again (on another port) and
    the query runs there, its indices reloaded. ``refused``: the death is only seen as a
    refused connection (the search server's URL looks unchanged), which is retried once."""
    manifest = write_embedded(tmp_path, "emb_restart", EMBEDDED_DOCS)
    count = SafeQuery(source="reports", kind="search", limit=11, max_rows=10, index="emb_restart",
                      body={"size": 0})
    executor = executor_for(manifest)
    try:
        assert executor.fetch(count).rows == [(3,)]
        old_url = embedded_server.server_url()
        if ending == "stopped":
            embedded_server.stop()
        else:
            embedded_server._SERVER._server.process.kill()
            embedded_server._SERVER._server.process.wait()
        if ending == "refused":
            monkeypatch.setattr(embedded_server, "server_url", lambda: old_url)
        assert executor.fetch(count).rows == [(3,)]
        assert embedded_server.server_url() is not None
    finally:
        executor.close()


def test_concurrent_first_use_starts_and_loads_once(tmp_path: Path,
                                                    embedded_engine: None) -> None:
    manifest = write_embedded(tmp_path, "emb_race", EMBEDDED_DOCS)
    calls: list[tuple[str, int, int]] = []
    executors = [OpenSearchExecutor(manifest, progress=lambda *a: calls.append(a))
                 for _ in range(6)]
    try:
        threads = [threading.Thread(target=e.connect) for e in executors]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert calls == [("emb_race", 0, 3), ("emb_race", 3, 3)]
        count = SafeQuery(source="reports", kind="search", limit=11, max_rows=10,
                          index="emb_race", body={"size": 0})
        assert {e.fetch(count).rows[0] for e in executors} == {(3,)}
    finally:
        for e in executors:
            e.close()


def test_embedded_kind_elasticsearch_uses_the_opensearch_client(
        tmp_path: Path, embedded_engine: None) -> None:
    text = (tmp_path / "reports.yaml")
    manifest = write_embedded(tmp_path, "emb_es", EMBEDDED_DOCS)
    text.write_text(text.read_text().replace("kind: opensearch", "kind: elasticsearch"))
    manifest, _ = load_manifest(text, env={})
    executor = executor_for(manifest)
    assert isinstance(executor, ElasticsearchExecutor)
    try:
        result = executor.fetch(SafeQuery(source="reports", kind="search", limit=11, max_rows=10,
                                        index="emb_es", body={"size": 0}))
        assert result.rows == [(3,)]
    finally:
        executor.close()


def test_missing_documents_file_says_how_to_build_it(tmp_path: Path,
                                                     embedded_engine: None) -> None:
    manifest = write_embedded(tmp_path, "emb_missing", None)
    executor = executor_for(manifest)
    with pytest.raises(SourceUnavailable) as info:
        executor.connect()
    assert "structq demo" in str(info.value) and "docs.jsonl" in str(info.value)
    assert not embedded_server.loaded_indices()  # nothing half-loaded stays behind
    executor.close()


def test_bad_document_names_its_line(tmp_path: Path, embedded_engine: None) -> None:
    docs = [*EMBEDDED_DOCS, {"author_id": "E9", "hours": "many"}]
    manifest = write_embedded(tmp_path, "emb_bad", docs)
    executor = executor_for(manifest)
    with pytest.raises(ConfigError) as info:
        executor.connect()
    assert "docs.jsonl:4" in str(info.value) and "hours" in str(info.value)
    executor.close()


def test_missing_embedded_extra_names_the_install(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "osmem_server", None)
    manifest = write_embedded(tmp_path, "emb_noextra", EMBEDDED_DOCS)
    with pytest.raises(ConfigError) as info:
        embedded_server.EmbeddedSearchServer().acquire(manifest)
    assert 'pip install "structq[embedded]"' in str(info.value)


_CHILD = textwrap.dedent("""
    import sys
    from structq.capabilities import load_manifest
    from structq.executors.search import embedded_server
    from structq.sources import executor_for
    manifest, _ = load_manifest(sys.argv[1], env={})
    executor_for(manifest).connect()
    print(embedded_server.server_url(), flush=True)
    if sys.argv[2] == "hang":
        import time
        time.sleep(60)
""")


def _port_closed(url: str, within_s: float) -> bool:
    host, port = url.rsplit("//", 1)[1].split(":")
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex((host, int(port))) != 0:
                return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_process_end_stops_the_search_server(tmp_path: Path, ending: str) -> None:
    write_embedded(tmp_path, "emb_child", EMBEDDED_DOCS)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path / "reports.yaml"),
         "hang" if ending == "sigkill" else "exit"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ},
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), child.stderr.read() if child.stderr else ""
        if ending == "sigkill":
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=20)
        assert _port_closed(url, within_s=10), f"the search server at {url} outlived its process"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_same_index_over_two_document_files_stays_apart(tmp_path: Path, embedded_engine: None) -> None:
    """Two demo folders in one process: each manifest reads its own documents."""
    first = write_embedded(tmp_path / "a", "emb_twice", EMBEDDED_DOCS)
    second = write_embedded(tmp_path / "b", "emb_twice", EMBEDDED_DOCS[:1])
    count = SafeQuery(source="reports", kind="search", limit=11, max_rows=10, index="emb_twice", body={"size": 0})
    executors = [executor_for(first), executor_for(second)]
    try:
        assert [e.fetch(count).rows for e in executors] == [[(3,)], [(1,)]]
    finally:
        for executor in executors:
            executor.close()
