"""Numbers as questions write them: Arabic digits, Chinese numerals (三, 十二, 二十一, 两),
Chinese digit strings for years (二〇二六), English words (three) and ordinals (third, 3rd).

The regular-expression fragments here are shared by the Chinese and English rules so a number
is recognised the same way wherever it appears.
"""

from __future__ import annotations

__all__ = ["EN_MONTH", "EN_NUMBER", "EN_ORDINAL", "NUM", "YEAR_DIGITS", "month_number", "to_int"]

_CN_DIGITS = {"零": 0, "〇": 0, "○": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
              "六": 6, "七": 7, "八": 8, "九": 9}
_EN_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
             "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
             "fifteen": 15, "twenty": 20, "thirty": 30, "sixty": 60, "ninety": 90}
_EN_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_EN_MONTHS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
              "sep": 9, "oct": 10, "nov": 11, "dec": 12}

#: A count or ordinal number: Arabic digits or Chinese numerals up to 百.
NUM = r"(?:\d{1,3}|[零〇一二两三四五六七八九十百]{1,4})"
#: A four-digit year, in Arabic digits or Chinese digit characters.
YEAR_DIGITS = r"(?:(?<!\d)\d{4}(?!\d)|[零〇○一二三四五六七八九]{4})"
#: An English month name or its abbreviation (``Sept.`` included).
EN_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
            r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?")
#: An English count: digits or a number word.
EN_NUMBER = r"(?:\d{1,3}|" + "|".join(sorted(_EN_WORDS, key=len, reverse=True)) + ")"
#: An English ordinal: word (first…fifth) or digits with a suffix (1st, 2nd, 3rd, 4th).
EN_ORDINAL = r"(?:first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th)"


def _chinese(text: str) -> int:
    """A Chinese numeral below 1000: 三 → 3, 十二 → 12, 二十一 → 21, 一百零五 → 105, 二〇二六 → 2026."""
    if all(ch in _CN_DIGITS for ch in text):  # a digit string (二〇二六) or a single digit
        value = 0
        for ch in text:
            value = value * 10 + _CN_DIGITS[ch]
        return value
    total, current = 0, 0
    for ch in text:
        if ch in _CN_DIGITS:
            current = _CN_DIGITS[ch]
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        elif ch == "百":
            total += (current or 1) * 100
            current = 0
        else:
            raise ValueError(f"not a Chinese numeral: {text!r}")
    return total + current


def to_int(text: str) -> int:
    """The value of a number in any form this module recognises; ``ValueError`` otherwise."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    if text in _EN_WORDS:
        return _EN_WORDS[text]
    if text in _EN_ORDINALS:
        return _EN_ORDINALS[text]
    if text[:-2].isdigit() and text[-2:] in ("st", "nd", "rd", "th"):
        return int(text[:-2])
    return _chinese(text)


def month_number(name: str) -> int:
    """1–12 for an English month name or abbreviation (``Sept.`` → 9)."""
    return _EN_MONTHS[name.strip().rstrip(".").lower()[:3]]
