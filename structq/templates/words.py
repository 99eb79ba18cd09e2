"""The words a paraphrase may change: those that carry no constraint, and those that mean the same.

Paraphrase matching (``paraphrase``) reads a question as a handful of meaningful words. The
manifests give the schema's words (column and table names and synonyms, coded values); this
module gives the question words every manifest shares, in Chinese and English:

- ``FILLERS``: particles, copulas, politeness, "total" and "all" — words that never change
  which rows a plan reads or how it aggregates them, and are skipped (还 and 仍, still, are not:
  还有哪些 asks what else, 仍为D who stayed D);
- ``CLASSES``: words grouped by what they ask for. Words of one class are interchangeable
  (最高 = 最多 = top, 各 = 每个 = each, 多少 = 几 = how many), and every class is a constraint:
  a question with a class its example lacks (a negation, an order, a comparison, another
  question word), or lacking one its example has, is not the example's question;
- ``MODALS``: a plan, a target, a forecast or an ability (要, 会, 计划, will): never filler;
- ``MEASURES``: measure words by what they count (份 things, 家 organisations, 位 people);
- ``AMONG``: words that choose among a set (合同中, among);
- ``SAME``: single words written two ways (签约 and 签, 人数 and 人).

English words are compared by ``lemma`` (sold → sale, customers → customer). A word nowhere in
these lists or the manifests is compared as written.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["AMONG", "CLASSES", "FILLERS", "MEASURES", "MODALS", "SAME", "lemma", "number_word"]

FILLERS = frozenset("""
    的 了 是 为 评为 被评为 有 在 吗 呢 吧 啊 请 帮我 帮忙 一下 都 也 就 我 我们 你
    公司 里 这 那 这些 那些 该 此 目前 现在 当前 个 得 地 所有 全部 一共 总共
    共 合计 总计 总 分别 过 着 呀 共计
    the a an of in on at to during within is are was were be been being did do does have has had
    there that this these those please me us i we our you your currently all total overall
    altogether with whose s what
""".split())

#: Modal words: a plan, a target, a forecast or an ability (要签, 会是, should, will) is another
#: question than what happened. Not a class (they may stand inside a stored name: 智能), but a
#: question with one its example lacks is refused like any added word.
MODALS = frozenset(["要", "会", "能", "想", "应", "应该", "应当", "可以", "可能", "将", "将会", "将要", "需要",
                    "计划", "预计", "预期", "预测", "目标", "打算", "will", "would", "should", "could", "can",
                    "might", "may", "shall", "plan", "planned", "expect", "expected", "target", "forecast",
                    "want", "wanted"])

#: Words that choose among a set (合同中金额最大的5份: the largest among the contracts signed then).
#: Skipped when only the example has one (2024年金额最大的3份签约合同 says the same); a question
#: with one its example lacks picks among something else (10个客户中), and what stands before and
#: after it stays there (金额最大的5份合同中哪些是2024年签约的 ranks first, then filters:
#: ``paraphrase`` rule 9). ``from`` is no filler either: before a period it starts a range.
AMONG = frozenset(["中", "其中", "当中", "之中", "among"])

#: Measure words, by what they count: things (份 合同, 笔 订单), organisations (家), people
#: (位, 名). ``个`` counts anything and is a filler. Skipped like fillers, except that a
#: question counting another kind than its example (上个季度有多少家签了合同: customers, where
#: the example counts contracts with 份) is refused (``paraphrase`` rule 7).
MEASURES: dict[str, str] = {"份": "things", "笔": "things", "条": "things", "项": "things", "篇": "things",
                            "家": "organisations", "位": "people", "名": "people"}

#: Class name → its words. Multi-word entries are matched as a phrase ("how many" before "how").
CLASSES: dict[str, frozenset[str]] = {
    "how-many": frozenset(["多少", "几", "how many", "number of", "count"]),
    # An amount, not a count: how much did customers buy is not how many customers bought.
    "how-much": frozenset(["how much"]),
    # A place: 客户在哪里 asks where the customer is, not which customer (哪 + 里).
    "where": frozenset(["哪里", "哪儿", "在哪", "在哪里", "在哪儿", "何处", "where"]),
    # A reason: 为什么 is not 什么 (what).
    "why": frozenset(["为什么", "为何", "why"]),
    # One or several: 哪家 and 哪些 ask different questions (the top customer, or customers);
    # ``which`` words say neither and stand for both (``Word.same``).
    "which": frozenset(["哪", "什么", "谁", "是谁", "列出", "给出", "显示", "找出", "查询", "which", "who", "whom",
                        "list", "show"]),
    "which-one": frozenset(["哪个", "哪家", "哪位", "哪名", "哪款", "哪一", "哪一个", "哪一家", "哪一位", "哪一名",
                            "哪一款"]),
    "which-many": frozenset(["哪些", "哪几", "哪几个", "哪几家", "哪几位", "哪几名", "哪几份", "哪几款"]),
    "people": frozenset(["人", "人数", "people", "person", "persons", "headcount"]),
    "top": frozenset(["最高", "最多", "最大", "最好", "最强", "前", "排前", "排名前", "top", "highest", "most", "largest", "biggest",
                      "best", "greatest"]),
    "bottom": frozenset(["最低", "最少", "最小", "最差", "lowest", "least", "fewest", "smallest", "worst", "bottom"]),
    "average": frozenset(["平均", "平均值", "均值", "average", "mean", "avg"]),
    "distinct": frozenset(["不同", "不重复", "去重", "different", "distinct", "unique"]),
    "not": frozenset(["不", "没", "没有", "未", "非", "无", "除了", "除", "不是", "not", "no", "without", "except",
                      "excluding", "never", "neither", "nor", "other than", "cannot",
                      # "n't" reaches matching as a word ending in n and a "t" (quotes are dropped)
                      "t", "didn", "doesn", "don", "isn", "aren", "wasn", "weren", "hasn", "haven", "hadn",
                      "couldn", "shouldn", "wouldn"]),
    "more-than": frozenset(["超过", "大于", "高于", "多于", "以上", "more than", "greater than", "over", "above",
                            "exceeding", "exceed", ">"]),
    "less-than": frozenset(["小于", "低于", "少于", "不到", "以下", "less than", "fewer than", "under", "below",
                            "<"]),
    "at-least": frozenset(["至少", "不少于", "不低于", "at least", ">="]),
    "at-most": frozenset(["至多", "不超过", "不多于", "at most", "<="]),
    "and": frozenset(["和", "与", "及", "以及", "并且", "且", "并", "同时", "and", "also", "both"]),
    "or": frozenset(["或", "或者", "还是", "or", "either"]),
    "by": frozenset(["按", "按照", "依", "根据", "by", "according to"]),
    "each": frozenset(["各", "各个", "每", "每个", "每一个", "each", "every", "per", "for each"]),
    "order": frozenset(["排序", "排列", "排名", "降序", "升序", "sort", "sorted", "order", "ordered", "rank",
                        "ranked"]),
    "share": frozenset(["占比", "比例", "百分比", "比率", "share", "percentage", "ratio", "proportion"]),
    "change": frozenset(["增长", "增长率", "变化", "同比", "环比", "下降", "growth", "change", "increase",
                         "decrease"]),
}

#: A word → the word it is read as (both then compare equal).
SAME: dict[str, str] = {
    "签约": "签", "签订": "签", "签署": "签", "sign": "签",
    "卖": "销售", "卖出": "销售", "售出": "销售",
    "提及": "提到", "mention": "提到",
    "写": "写", "撰写": "写", "write": "写",
    "参与": "参与", "参加": "参与",  # one word, not 参 and 与 (and)
}

#: English irregular forms → their lemma (the regular ones lose their endings in ``lemma``).
_IRREGULAR = {
    "sold": "sale", "sell": "sale", "sells": "sale", "selling": "sale", "sales": "sale",
    "bought": "buy", "buys": "buy", "buying": "buy",
    "left": "leave", "leaves": "leave", "leaving": "leave",
    "wrote": "write", "written": "write", "writes": "write", "writing": "write",
    "signed": "sign", "signs": "sign", "signing": "sign",
    "people": "people", "persons": "person", "children": "child", "men": "man", "women": "woman",
    "data": "data", "status": "status", "this": "this", "has": "has", "was": "was", "is": "is", "does": "does",
    "mentioned": "mention", "mentions": "mention", "mentioning": "mention",
}

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50,
    "hundred": 100,
}

_VOWEL_Y = re.compile(r"[aeiou]y$")


@lru_cache(maxsize=16384)
def lemma(word: str) -> str:
    """An English word without its inflection (``customers`` → ``customer``, ``bought`` →
    ``buy``); other words as given. Both sides of every comparison go through it."""
    if not word.isascii() or not word.isalpha() or len(word) <= 3:
        return _IRREGULAR.get(word, word)
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"), ("shes", "sh")):
        if word.endswith(suffix):
            return word[: -len(suffix)] + replacement
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    return word


def number_word(word: str) -> int | None:
    """``five`` → 5 (a few English number words); anything else None."""
    return _NUMBER_WORDS.get(word)
