"""Numbers written as words: Chinese numerals (两, 三十, 一百二十, 三千五百万) and English
number words (twelve, forty-two, two hundred).

The answer check (``figures``) must see "共有三人" as the figure 3, exactly as it sees "共有 3
人": a figure the results do not hold is refused however it is written. A small parser
instead of a dependency: the check needs the value and where the words are in the text, and
it must not read idioms as numbers (一共 "altogether", 唯一 "the only", 十分 "very", "no one").

Chinese: a run of numeral characters is a number when it is longer than one character, follows
第 (an ordinal) or is followed by a measure word (一个, 三人, 两份); a run of place characters
alone (十, 千万) only before a measure word; never inside a listed idiom. English: cardinal words up to the billions, joined by spaces, hyphens
or "and"; "one" is not a number in "no one", "one of", "the one", "this one".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["WordNumber", "chinese_value", "english_value", "word_numbers", "CHINESE_NUMERALS"]

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_ZH_SMALL_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG_UNITS = {"万": 10_000, "亿": 100_000_000}
CHINESE_NUMERALS = "".join(_ZH_DIGITS) + "".join(_ZH_SMALL_UNITS) + "".join(_ZH_BIG_UNITS)

#: Measure words (and units of time) after which a single numeral is a count: 一个, 三人, 五月.
MEASURE_WORDS = "个名人位项份次件条家天年月日号周季度倍成元块笔张篇门类种组批台部所间座行列单届岁分秒点"
#: Words holding numeral characters that are not numbers.
ZH_IDIOMS = ("一共", "一起", "一些", "一下", "一直", "一样", "一般", "一致", "一定", "一切", "统一", "唯一", "之一",
             "万一", "十分", "一旦", "一边", "一同", "一律", "一并", "一向", "一点", "一会", "一再", "一度",
             "一贯", "一时", "一方面", "不一", "一一", "第一时间", "一览", "一经", "一流", "一心", "一体", "一线",
             "一番", "一概", "逐一", "一口气")

_ZH_RUN = re.compile(f"[{CHINESE_NUMERALS}]+")
_ZH_IDIOM = re.compile("|".join(sorted(map(re.escape, ZH_IDIOMS), key=len, reverse=True)))


def chinese_value(text: str) -> Decimal | None:
    """The value of a run of Chinese numerals: 十二 12, 一百零五 105, 三千五百万 35,000,000,
    二〇二六 2026 (digit by digit), 两 2; None when the run is not well formed."""
    if not text or any(c not in CHINESE_NUMERALS for c in text):
        return None
    if not any(c in _ZH_SMALL_UNITS or c in _ZH_BIG_UNITS for c in text):
        return Decimal("".join(str(_ZH_DIGITS[c]) for c in text))  # 二〇二六 → 2026
    total, section, digit = 0, 0, None
    last_small = 10_000
    for char in text:
        if char in _ZH_DIGITS:
            if digit is not None and _ZH_DIGITS[char] != 0:
                return None  # two digits in a row without a place: 三五百
            digit = _ZH_DIGITS[char] if _ZH_DIGITS[char] != 0 else None
        elif char in _ZH_SMALL_UNITS:
            unit = _ZH_SMALL_UNITS[char]
            if unit >= last_small:
                return None  # 百十: places must fall
            section += (digit if digit is not None else 1) * unit
            digit, last_small = None, unit
        else:
            unit = _ZH_BIG_UNITS[char]
            section += digit or 0
            if section == 0 and total == 0:
                return None
            if unit == 100_000_000 or total == 0:
                total = (total + section) * unit
            else:  # 万 after 亿: 三亿五千万
                total += section * unit
            section, digit, last_small = 0, None, 10_000
    return Decimal(total + section + (digit or 0))


_EN_ONES = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
            "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
            "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
            "ninety": 90}
_EN_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_EN_WORD = "|".join(sorted([*_EN_ONES, *_EN_TENS, *_EN_SCALES], key=len, reverse=True))
_EN_RUN = re.compile(rf"\b(?:{_EN_WORD})(?:(?:[\s-]+|\s+and\s+)(?:{_EN_WORD}))*\b", re.IGNORECASE)
#: "one" that is a pronoun, not a count.
_EN_NOT_ONE = re.compile(r"(?:\b(?:no|the|this|that|which|each|every|any|some)\s+one\b)|(?:\bone\s+(?:of|another)\b)",
                         re.IGNORECASE)


def english_value(text: str) -> Decimal | None:
    """The value of English number words: "forty-two" 42, "two hundred and five" 205,
    "three million" 3,000,000; None when they do not form one number."""
    words = [w for w in re.split(r"[\s-]+", text.lower()) if w and w != "and"]
    if not words:
        return None
    total, current = 0, 0
    for word in words:
        if word in _EN_ONES or word in _EN_TENS:
            current += _EN_ONES.get(word, _EN_TENS.get(word, 0))
        elif word == "hundred":
            current = (current or 1) * 100
        else:
            total += (current or 1) * _EN_SCALES[word]
            current = 0
    return Decimal(total + current)


@dataclass(frozen=True)
class WordNumber:
    """A number written in words: where it is, what it says, and its value."""

    start: int
    end: int
    text: str
    value: Decimal


def word_numbers(text: str) -> Iterator[WordNumber]:
    """The numbers written in words in ``text``, in order."""
    found: list[WordNumber] = []
    idioms = [(m.start(), m.end()) for m in _ZH_IDIOM.finditer(text)] if _ZH_RUN.search(text) else []
    for match in _ZH_RUN.finditer(text):
        if any(start < match.end() and match.start() < end for start, end in idioms):
            continue  # a numeral inside an idiom: not a number
        number = _chinese_number_at(text, match)
        if number is not None:
            found.append(number)
    pronouns = [(m.start(), m.end()) for m in _EN_NOT_ONE.finditer(text)]
    for match in _EN_RUN.finditer(text):
        if match.group().lower() == "one" and any(s <= match.start() < e for s, e in pronouns):
            continue
        value = english_value(match.group())
        if value is not None:
            found.append(WordNumber(match.start(), match.end(), match.group(), value))
    yield from sorted(found, key=lambda n: n.start)


def _chinese_number_at(text: str, match: re.Match[str]) -> WordNumber | None:
    start, end = match.start(), match.end()
    run = match.group()
    counted = end < len(text) and text[end] in MEASURE_WORDS
    ordinal = start > 0 and text[start - 1] == "第"
    if not any(c in _ZH_DIGITS for c in run):
        if not counted:  # 十, 千万 ("by all means") alone are words; 十人, 千万元 are numbers
            return None
    elif not (len(run) > 1 or counted or ordinal):
        return None
    value = chinese_value(run)
    return WordNumber(start, end, run, value) if value is not None else None
