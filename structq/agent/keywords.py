"""A plain keyword search for a question, built without a model: one search step per index.

What the question says is sorted into three parts, each used the way a search index can:

- **periods** (``structq.periods``: 2026年10月, 上个季度, last month) → a ``range`` filter on
  the index's date field (its first declared ``date`` field); several periods → any of them;
- **known values** → ``term``/``terms`` filters: a field's declared ``values`` codes written in
  the question (研发部), and stored values the value index finds exactly (星火 in
  ``projects_mentioned``); near matches are not used — a keyword search states what it
  searched, and a guessed spelling would be a guess;
- **the remaining words** → each must occur as a phrase (``multi_match`` of type ``phrase`` over
  the index's text fields). Question words (有哪些, what, which), function words, and the
  names and synonyms of the index and its fields (周报, 部门) are dropped: they say what to
  search, not what to search for. A question that names indices (周报, the wiki) searches
  only those; otherwise every declared index is searched, one step each.

The steps are ordinary plan steps: they go through the same sandbox (row filters, allowed
fields, size caps) and the same executor as any plan.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structq.linking.tokens import STOP_WORDS
from structq.linking.values import fold
from structq.periods import PeriodMatch, find_periods

from .plan import Plan

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Index, Manifest, SearchField
    from structq.linking.values import ValueIndex

__all__ = ["IndexSearch", "KeywordSearch", "keyword_search", "keywords"]

#: Hits per index: enough to see what the words find, few enough to read.
HITS = 20

#: Chinese question and function words (longest first when removed).
_ZH_STOP = sorted(
    """有哪些 哪些 什么 多少 是否 有没有 是不是 哪个 哪位 哪里 如何 怎么 怎样 为什么 请问 请 列出 查找 查询
    找出 找到 搜索 给我 显示 提到了 提到 提及 关于 包含 涉及 所有 全部 一下 相关 情况 分别 写了 写的 中的
    里的 之中 其中 以及 并且 还有 一共 总共 几份 几篇 有关 文档 文章 资料 记录 内容 信息
    的 了 吗 呢 吧 啊 和 与 及 或 被 把""".split(),
    key=len, reverse=True)
#: English question words beyond the linking stop words.
_EN_STOP = frozenset("mention mentions mentioned mentioning contain contains containing search find show "
                     "documents document written wrote write say says said talk talks record records "
                     "entries entry".split())
_CHUNK = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class IndexSearch:
    """The search on one index: its filters and phrases, and the plan step that runs it."""

    source: str
    index: str
    step: dict[str, Any]
    phrases: tuple[str, ...]
    filters: tuple[str, ...]  # readable: "week_start_date 2026-10-01…2026-10-31", "department = 研发部"
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeywordSearch:
    """What was recognised in the question and the searches built from it."""

    question: str
    periods: tuple[PeriodMatch, ...]
    searches: tuple[IndexSearch, ...] = field(default_factory=tuple)

    @property
    def plan(self) -> Plan:
        """The searches as a plan (one step per index); PlanError-free by construction."""
        return Plan.parse({"reasoning": "keyword search", "steps": [s.step for s in self.searches]})


def keywords(text: str, drop: list[str]) -> list[str]:
    """The words of ``text`` worth searching for: ``drop`` phrases, question words and function
    words removed; distinct, in order; single CJK characters left out (a character alone
    matches nearly every Chinese document)."""
    folded = fold(text)
    for phrase in sorted({fold(p) for p in drop if p.strip()}, key=len, reverse=True):
        folded = folded.replace(phrase, " ")
    for word in _ZH_STOP:
        folded = folded.replace(word, " ")
    out: list[str] = []
    for chunk in _CHUNK.findall(folded):
        if chunk.isascii() and (chunk in STOP_WORDS or chunk in _EN_STOP or chunk.rstrip("s") in _EN_STOP
                                or (len(chunk) < 2 and not chunk.isdigit())):
            continue
        if not chunk.isascii() and len(chunk) < 2:
            continue
        if chunk not in out:
            out.append(chunk)
    return out


def _fields(index: Index) -> dict[str, SearchField]:
    """The index's usable fields by path: not denied, not drafts, not inside a ``nested`` field
    (a clause on those needs a ``nested`` query around it, which a keyword search does not build)."""
    flat = index.flat_fields()
    nested = [p for p, f in flat.items() if f.type == "nested"]
    return {p: f for p, f in flat.items()
            if not (f.denied or f.draft) and not any(p.startswith(n + ".") for n in nested)}


def _names(index: Index) -> list[str]:
    """What names the index's fields (never content to search for)."""
    names: list[str] = []
    for path, f in index.flat_fields().items():
        names += [path, f.name, *f.synonyms]
    return names


def _code_in(folded_question: str, code: str) -> bool:
    """Whether a declared code is written in the question: CJK anywhere, latin as a whole word of
    at least two letters (a lone "A" is an article as often as a grade)."""
    target = fold(code)
    if len(target) < 2:
        return False
    if not target.isascii():
        return target in folded_question
    return re.search(rf"(?<![^\W_]){re.escape(target)}(?![^\W_])", folded_question) is not None


def _value_filters(question: str, manifest: Manifest, index: Index,
                   values: ValueIndex | None) -> tuple[dict[str, list[str]], list[str]]:
    """field → values to filter on, and the question text they explain."""
    folded = fold(question)
    found: dict[str, list[str]] = {}
    matched: list[str] = []
    for path, f in _fields(index).items():
        if f.type != "keyword" or not f.values:
            continue
        for code, meaning in f.values.items():
            for written in (code, meaning):
                if written and _code_in(folded, written) and code not in found.get(path, []):
                    found.setdefault(path, []).append(code)
                    matched.append(written)
    if values is not None:
        for m in values.match(question):
            usable = m.exact and m.source == manifest.source and m.table == index.name and m.column in _fields(index)
            if usable and m.value not in found.get(m.column, []):
                found.setdefault(m.column, []).append(m.value)
                matched.append(m.matched)
    return found, matched


def _date_field(index: Index) -> str | None:
    return next((p for p, f in _fields(index).items() if f.type == "date"), None)


def _text_fields(index: Index) -> list[str]:
    return [p for p, f in _fields(index).items() if f.type == "text"]


def _step_key(source: str, index: str) -> str:
    return "keywords_" + re.sub(r"\W", "_", f"{source}_{index}")


def _index_search(question: str, periods: list[PeriodMatch], manifest: Manifest, index: Index,
                  values: ValueIndex | None, size: int, index_names: list[str]) -> IndexSearch | None:
    filters: list[dict[str, Any]] = []
    readable: list[str] = []
    notes: list[str] = []
    date_field = _date_field(index)
    if periods and date_field:
        ranges = [{"range": {date_field: {"gte": p.first.isoformat(), "lte": p.last.isoformat()}}} for p in periods]
        filters.append(ranges[0] if len(ranges) == 1 else {"bool": {"should": ranges, "minimum_should_match": 1}})
        readable.append(f"{date_field} " + " or ".join(f"{p.first.isoformat()}…{p.last.isoformat()}" for p in periods))
    elif periods:
        notes.append(f"{manifest.source}.{index.name} has no date field: the period "
                     + ", ".join(repr(p.text) for p in periods) + " is not applied there")
    by_field, matched = _value_filters(question, manifest, index, values)
    for path, found in by_field.items():
        filters.append({"term": {path: found[0]}} if len(found) == 1 else {"terms": {path: found}})
        readable.append(f"{path} = " + " / ".join(found))
    phrases = keywords(question, [p.text for p in periods] + matched + _names(index) + index_names)
    text_fields = _text_fields(index)
    must = [{"multi_match": {"query": p, "fields": text_fields, "type": "phrase"}} for p in phrases] if text_fields else []
    if phrases and not text_fields:
        notes.append(f"{manifest.source}.{index.name} has no text field: the words are not searched there")
    if not must and not filters:
        return None
    body: dict[str, Any] = {"query": {"bool": {k: v for k, v in (("must", must), ("filter", filters)) if v}},
                            "size": size}
    if date_field and (not must or manifest.row_filters_for(index.name)):
        body["sort"] = [{date_field: {"order": "desc"}}]  # no relevance to rank by: newest first
    step = {"output_key": _step_key(manifest.source, index.name), "source": manifest.source, "index": index.name,
            "purpose": "keyword search: " + "; ".join([*(f"“{p}”" for p in phrases if must), *readable]),
            "query": body}
    return IndexSearch(manifest.source, index.name, step, tuple(phrases) if must else (), tuple(readable), tuple(notes))


def keyword_search(question: str, capabilities: CapabilitySet, today: dt.date,
                   values: ValueIndex | None = None) -> KeywordSearch:
    """The keyword searches for ``question`` over every declared search index (none when the
    question gives nothing to search for or filter on)."""
    periods = find_periods(question, today)
    indices = [(m, i) for m in capabilities for i in m.indices if not i.draft]
    folded = fold(question)
    named = [(m, i) for m, i in indices if any(_code_in(folded, n) for n in [i.name, *i.synonyms])]
    every_name = [n for _, i in indices for n in [i.name, *i.synonyms]]
    searches = []
    for manifest, index in named or indices:  # a question naming indices (周报, the wiki) searches only those
        size = min(HITS, manifest.limits.max_rows)
        search = _index_search(question, periods, manifest, index, values, size, every_name)
        if search is not None:
            searches.append(search)
    return KeywordSearch(question, tuple(periods), tuple(searches))
