"""Two indices for the tenant-blind search tests, and the generator of request bodies.

``tb_alone`` holds only tenant t1's documents; ``tb_mixed`` holds the same documents, in the
same relative order, among many of tenant t2's — which share some of t1's words, add words
that look like t1's (same prefixes, one edit away) and words t1 never writes. Both indices are
declared with the same fields and the same row filter, so one request body can be checked
for each and the two answers compared: on a row-filtered index they must be identical.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from structq.capabilities import load_manifest_text
from structq.capabilities.model import Manifest

ALONE, MIXED = "tb_alone", "tb_mixed"
MAX_ROWS = 8
LIMIT = MAX_ROWS + 1

_INDEX = """\
  - name: {name}
    fields:
      - {{name: tenant_id, type: keyword}}
      - {{name: author, type: keyword}}
      - {{name: tag, type: keyword}}
      - {{name: title, type: text}}
      - {{name: content, type: text}}
      - {{name: n, type: long}}
      - {{name: price, type: double}}
      - {{name: day, type: date}}
"""


def make_manifest(url: str = "http://127.0.0.1:9", *, row_filters: bool = True) -> Manifest:
    """Both indices, filtered on ``tenant_id`` (or not at all, for the relevance tests)."""
    filters = "".join(f'    - {{index: {name}, term: {{tenant_id: ":tenant_id"}}}}\n' for name in (ALONE, MIXED))
    text = (f"source: tb\nkind: opensearch\nurl: {url}\n"
            f"limits: {{max_rows: {MAX_ROWS}, timeout_s: 5}}\n"
            f"policies:\n  row_filters:{chr(10) + filters if row_filters else ' []' + chr(10)}"
            "indices:\n" + _INDEX.format(name=ALONE) + _INDEX.format(name=MIXED))
    return load_manifest_text(text, env={})[0]


T1_WORDS = ("apple", "banana", "cherry", "delta", "report")
#: Other tenants' words: prefixes of t1's (``app…``, ``ban…``), one edit from them (``appla``,
#: ``banena``), and words t1 never writes.
T2_WORDS = ("apricot", "applesauce", "appz", "appla", "bandana", "banena", "cherrypie", "secretword",
            "report", "apple")
WORDS = tuple(dict.fromkeys(T1_WORDS + T2_WORDS + ("zulu",)))


def _t1(i: int) -> dict[str, Any]:
    words = [T1_WORDS[(i + k) % len(T1_WORDS)] for k in range(1 + i % 3)]
    return {"_id": f"a{i:02d}", "tenant_id": "t1", "author": f"u{i % 4}", "tag": "xyz"[i % 3],
            "title": f"{T1_WORDS[i % 2]} weekly", "content": " ".join(words + ["report"] * (i % 2)),
            "n": i, "price": 1.5 * (i % 5), "day": f"2024-03-{1 + i:02d}"}


def _t2(i: int) -> dict[str, Any]:
    words = [T2_WORDS[(i * 3 + k) % len(T2_WORDS)] for k in range(1 + i % 4)]
    return {"_id": f"b{i:02d}", "tenant_id": "t2", "author": f"u{i % 6}", "tag": "xwv"[i % 3],
            "title": f"{T2_WORDS[i % len(T2_WORDS)]} monthly", "content": " ".join(words),
            "n": i % 20, "price": 2.5 * (i % 7), "day": f"2024-0{2 + i % 3}-{1 + i % 28:02d}"}


T1_DOCS = [_t1(i) for i in range(12)]
T2_DOCS = [_t2(i) for i in range(70)]


def mixed_documents() -> list[dict[str, Any]]:
    """t1's documents in their order, t2's before, between and after them."""
    out = T2_DOCS[:10]
    for i, doc in enumerate(T1_DOCS):
        out += [doc, *T2_DOCS[10 + 4 * i:14 + 4 * i]]
    return out + T2_DOCS[10 + 4 * len(T1_DOCS):]


# --- request bodies ------------------------------------------------------------------------

text_field = st.sampled_from(["content", "title"])
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
prefix = st.sampled_from(["ap", "app", "ban", "ch", "re", "z"])
fields = st.lists(st.sampled_from(["content", "title", "content^2"]), min_size=1, max_size=2, unique=True)
simple_text = st.sampled_from(["apple + report", "app*", "appla~1", "banana | zulu", "-apple", '"apple banana"~2',
                               "secretword", "cherry -report"])


def _leaves() -> st.SearchStrategy[dict[str, Any]]:
    """Leaf clauses; the expanding ones (refused on row-filtered indices) drawn less often, so
    most generated bodies are accepted and run."""
    one = st.builds
    plain = st.one_of(
        one(lambda f, t: {"match": {f: t}}, text_field, text),
        one(lambda f, t, op: {"match": {f: {"query": t, "operator": op}}}, text_field, text, st.sampled_from(["and", "or"])),
        one(lambda f, t: {"match_phrase": {f: t}}, text_field, text),
        one(lambda f, t: {"match_bool_prefix": {f: t}}, text_field, text),
        one(lambda t, fs, ty: {"multi_match": {"query": t, "fields": fs, "type": ty}}, text, fields,
            st.sampled_from(["best_fields", "most_fields", "cross_fields", "phrase"])),
        one(lambda t, fs: {"simple_query_string": {"query": t, "fields": fs}}, simple_text, fields),
        one(lambda v: {"term": {"tag": v}}, st.sampled_from("xyzwv")),
        one(lambda v: {"terms": {"author": v}}, st.lists(st.sampled_from([f"u{i}" for i in range(6)]), max_size=3)),
        one(lambda a, b: {"range": {"n": {"gte": a, "lt": a + b}}}, st.integers(0, 15), st.integers(1, 10)),
        one(lambda d: {"range": {"day": {"gte": f"2024-03-{d:02d}"}}}, st.integers(1, 20)),
        one(lambda f: {"exists": {"field": f}}, st.sampled_from(["title", "price"])),
        one(lambda p: {"prefix": {"content": p}}, prefix),
        one(lambda p: {"wildcard": {"content": p + "*"}}, prefix),
        one(lambda ids: {"ids": {"values": ids}}, st.lists(st.sampled_from(["a01", "a05", "b03"]), max_size=2)),
        st.just({"match_all": {}}),
    )
    expanding = st.one_of(
        one(lambda f, t, z: {"match": {f: {"query": t, "fuzziness": z}}}, text_field, text, st.sampled_from(["AUTO", 1, 0])),
        one(lambda f, t, k: {"match_phrase_prefix": {f: {"query": t, "max_expansions": k}}}, text_field, text,
            st.integers(1, 3)),
        one(lambda t: {"multi_match": {"query": t, "fields": ["content"], "type": "phrase_prefix"}}, text),
        one(lambda w: {"fuzzy": {"content": {"value": w, "max_expansions": 1}}}, st.sampled_from(WORDS)),
    )
    return st.one_of(*[plain] * 9, expanding)


def _compounds(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    some = st.lists(children, min_size=1, max_size=2)
    bool_parts = st.fixed_dictionaries({}, optional={"must": some, "should": some, "filter": some, "must_not": some})
    return st.one_of(
        bool_parts.map(lambda parts: {"bool": parts}),
        children.map(lambda c: {"constant_score": {"filter": c}}),
        some.map(lambda qs: {"dis_max": {"queries": qs, "tie_breaker": 0.3}}),
        st.tuples(children, children).map(lambda p: {"boosting": {"positive": p[0], "negative": p[1],
                                                                  "negative_boost": 0.2}}),
        st.tuples(children, st.sampled_from([None, 0.1])).map(lambda p: {"function_score": {
            "query": p[0], "functions": [{"field_value_factor": {"field": "n", "missing": 1}}], "boost_mode": "sum",
            **({"min_score": p[1]} if p[1] is not None else {})}}),
    )


clauses = st.recursive(_leaves(), _compounds, max_leaves=4)

_sort_entry = st.one_of(st.sampled_from(["_score", "n", "tag", "author"]),
                        st.builds(lambda f, o: {f: o}, st.sampled_from(["n", "price", "day", "tag"]),
                                  st.sampled_from(["asc", "desc"])))


def _aggregation() -> st.SearchStrategy[dict[str, Any]]:
    one = st.builds
    terms = one(lambda f, s, o: {"terms": {"field": f, "size": s, "order": o}}, st.sampled_from(["tag", "author"]),
                st.integers(1, 4), st.sampled_from([{"_count": "desc"}, {"_key": "asc"}]))
    sub = st.sampled_from([{"avg": {"field": "n"}}, {"top_hits": {"size": 1}},
                           {"top_hits": {"size": 1, "sort": [{"n": "desc"}]}}, {"max": {"field": "price"}}])
    return st.one_of(
        terms,
        one(lambda t, s: {**t, "aggs": {"sub": s}}, terms, sub),
        st.sampled_from([{"cardinality": {"field": "author"}}, {"avg": {"field": "n"}}, {"stats": {"field": "price"}},
                         {"histogram": {"field": "n", "interval": 5}}, {"percentiles": {"field": "n"}},
                         {"date_histogram": {"field": "day", "calendar_interval": "week"}},
                         {"value_count": {"field": "tag"}}, {"missing": {"field": "price"}}]),
        clauses.map(lambda c: {"filters": {"filters": {"f": c}}}),
        one(lambda c, s: {"filter": c, "aggs": {"sub": s}}, clauses, sub),
    )


bodies = st.fixed_dictionaries({}, optional={
    "query": clauses,
    "size": st.integers(0, LIMIT - 2),
    "from": st.integers(0, 2),
    "sort": st.lists(_sort_entry, min_size=1, max_size=2),
    "track_scores": st.booleans(),
    "track_total_hits": st.booleans(),
    "post_filter": clauses,
    "aggs": st.dictionaries(st.sampled_from(["a", "b"]), _aggregation(), min_size=1, max_size=2),
    "highlight": st.just({"fields": {"content": {}}}),
    "collapse": st.just({"field": "author"}),
})
