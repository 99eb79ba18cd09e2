"""Terms for lexical linking: English words (names split) and Chinese character n-grams.

Why this tokenizer and not a segmenter such as jieba: the words that matter for linking are
the company's own — project names (星火), product codes, people's names, table names like
``employee_performance`` — and a general dictionary does not know them, so it segments them
unpredictably (and the question and the manifest may be segmented differently). Character
bigrams need no dictionary, match any shared two-character word on both sides, cost nothing
to import, and BM25's inverse document frequency discounts the bigrams that straddle word
boundaries (they are rare on the manifest side). Single CJK characters are kept as weaker
terms, for one-character words (男, 女, 省).

Latin text is split at non-letters, at camelCase humps and at snake_case underscores, lower-
cased, and reduced by a light plural/inflection stemmer (``singers`` → ``singer``,
``countries`` → ``country``), with English and German function words dropped. Words of six or
more letters also give weak character 4-grams (``#haus``, ``#aust``…), so compounds and
inflected forms share terms with their parts. Digits stay as terms (years, codes), but not
single digits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["terms", "latin_words", "is_cjk", "stem"]

#: CJK ideographs (unified, extension A, compatibility) — the scripts written without spaces.
CJK_RANGES = _CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_HUMP = re.compile(r"[A-Z]+s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+", re.UNICODE)
_CJK_CHAR = re.compile(rf"[{_CJK}]")

#: Function words that say nothing about which table a question needs.
STOP_WORDS = frozenset(
    """a an the of in on at to for from by with without and or not no is are was were be been
    being do does did has have had what which who whom whose when where why how many much
    all any each every this that these those there their them they it its as than then
    i me my we our you your he she his her show list give find return tell display get
    please also only just more most less least per about into over under between among
    can could would should will shall may might must if else some such both either neither
    s t""".split()
) | frozenset(  # German, the other language the measured corpora ask in
    """der die das den dem des ein eine einer eines einem einen und oder nicht kein keine ist sind
    war waren wie viel viele vielen was welche welcher welches welchen wer wen wem wo wann warum
    gibt es zu zum zur von vom mit für auf im an am bei aus nach über unter um alle allen jede
    jeder jedes jeden sie er ihr ihre ihren haben hat hatte werden wird wurde wurden als auch nur
    dass zeige zeigen finde finden nenne nennen gib geben liste mir uns lauten lautet heißt
    heißen diese dieser dieses sich noch mehr als insgesamt""".split()
)

#: Weight of a single CJK character relative to a bigram or a word.
UNIGRAM_WEIGHT = 0.3
#: Long latin words also yield character 4-grams at this weight each, so compounds and
#: inflections meet their parts (Haustierarten ~ haustiere, Automodell ~ modellliste).
GRAM_WEIGHT = 0.15
GRAM_MIN_WORD = 6


def is_cjk(text: str) -> bool:
    """Whether ``text`` contains a CJK ideograph."""
    return _CJK_CHAR.search(text) is not None


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stemmer: plurals and the commonest inflections, nothing clever.

    Enough that a question's ``singers``/``countries``/``addresses`` meets a manifest's
    ``singer``/``country``/``address``; both sides go through it, so over-stemming is harmless
    as long as it is consistent.
    """
    if len(word) <= 2 or not word.isalpha():
        return word
    if len(word) == 3:
        return word[:-1] if word.endswith("s") and not word.endswith("ss") else word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"), ("shes", "sh"),
                         ("ses", "s"), ("s", "")):
        if word.endswith(suffix) and not word.endswith(("ss", "us", "is")):
            word = word[: -len(suffix)] + repl
            break
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        word = word[:-2]
    return word


def latin_words(text: str) -> list[str]:
    """Lower-cased words of the non-CJK parts, split at camelCase humps and underscores."""
    out: list[str] = []
    for run in _RUN.findall(text):
        if is_cjk(run):
            continue
        out += [part.lower() for part in _HUMP.findall(run)]
    return out


def _cjk_terms(run: str) -> Iterator[tuple[str, float]]:
    for ch in run:
        yield ch, UNIGRAM_WEIGHT
    for i in range(len(run) - 1):
        yield run[i : i + 2], 1.0


def terms(text: str) -> list[tuple[str, float]]:
    """(term, weight) pairs of ``text``: stemmed latin words and CJK unigrams/bigrams.

    >>> [t for t, _ in terms("员工绩效 of singers")]
    ['员', '工', '绩', '效', '员工', '工绩', '绩效', 'singer']
    >>> [t for t, _ in terms("employeePerformance_grade")]
    ['employee', 'performance', 'grade']
    """
    return list(_terms(text))


@lru_cache(maxsize=65536)
def _terms(text: str) -> tuple[tuple[str, float], ...]:
    """``terms``, kept: a catalogue repeats the same names and descriptions (``id``, ``status``,
    ``created_at``) in every table, and the index tokenizes each of them once."""
    out: list[tuple[str, float]] = []
    for run in _RUN.findall(text):
        if is_cjk(run):
            out += _cjk_terms(run)
            continue
        for part in _HUMP.findall(run):
            word = part.lower()
            if word in STOP_WORDS or (word.isdigit() and len(word) < 2):
                continue
            stemmed = stem(word)
            if stemmed in STOP_WORDS:
                continue  # a word that stems to one (``hes`` → ``he``) says no more than it does
            out.append((stemmed, 1.0))
            if len(word) >= GRAM_MIN_WORD and word.isalpha():
                out += [("#" + word[i : i + 4], GRAM_WEIGHT) for i in range(len(word) - 3)]
    return tuple(out)
