"""Reading the words in a slot's place as a value of the slot's kind — or not at all.

Each reader takes the whole text the template left for the slot and either reads all of it
as one value (``Filled``: the parameters the steps bind and a line for people) or returns
``None``. Nothing is guessed: a period phrase must be exactly one period of the slot's kind;
a number must be a whole number in range; a coded column's value must be one of its codes
or meanings; an entity must be found as stored in the data.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.capabilities.slots import PERIOD_KINDS, slot_params

if TYPE_CHECKING:
    from structq.capabilities.slots import Slot
    from structq.periods import PeriodMatch

__all__ = [
    "INTEGER_PATTERN",
    "Filled",
    "Lookup",
    "chinese_number",
    "period_value",
    "read_coded",
    "read_integer",
    "read_period",
]

#: ``lookup(column, text)``: the value as stored in ``column`` (``source.table.column``) that
#: ``text`` names, or None when the data holds no such value.
Lookup = Callable[[str, str], "str | None"]

#: Digits, or Chinese numerals up to 九十九 (top N).
INTEGER_PATTERN = r"[0-9]{1,7}|[一二两三四五六七八九十]{1,3}"
_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


@dataclass(frozen=True)
class Filled:
    """A slot's value: the parameters bound in the steps, and how it reads to a person."""

    params: dict[str, Any]
    shown: str


def chinese_number(text: str) -> int | None:
    """``五`` 5, ``十`` 10, ``十二`` 12, ``二十`` 20, ``三十五`` 35; anything else None."""
    if not text or any(c not in _DIGITS and c != "十" for c in text):
        return None
    if "十" not in text:
        return _DIGITS[text] if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    if len(tens) > 1 or len(ones) > 1 or "十" in ones:
        return None
    return (_DIGITS[tens] if tens else 1) * 10 + (_DIGITS[ones] if ones else 0)


def read_integer(name: str, slot: Slot, text: str) -> Filled | None:
    """A whole number from 1 to the slot's ``max``, in digits or Chinese numerals."""
    value = int(text) if text.isdigit() else chinese_number(text)
    if value is None or not 1 <= value <= slot.max:
        return None
    return Filled({name: value}, str(value))


def period_value(kind: str, first: dt.date, last: dt.date) -> str:
    """The canonical text of a period (what a slot's ``example`` may give)."""
    if kind == "date":
        return first.isoformat()
    if kind == "month":
        return first.isoformat()[:7]
    if kind == "quarter":
        return f"{first.year}-Q{(first.month - 1) // 3 + 1}"
    if kind == "year":
        return str(first.year)
    return f"{first.isoformat()}..{last.isoformat()}"


#: What each period slot accepts, by the date grammar's kinds. A ``date_range`` is any span.
_ACCEPTS = {
    "date": {"date"},
    "month": {"month"},
    "quarter": {"quarter"},
    "year": {"year"},
    "date_range": {"date", "month", "quarter", "year", "date_range", "week"},
}


def read_period(name: str, slot: Slot, period: PeriodMatch) -> Filled | None:
    """The period the date grammar read where the slot stands (in the question's context,
    resolved against its ``today``), when it is of a kind the slot accepts."""
    assert slot.kind in PERIOD_KINDS
    if period.kind not in _ACCEPTS[slot.kind]:
        return None
    if slot.kind == "date":
        return Filled({name: period.first.isoformat()}, f"{period.first.isoformat()} ({period.text})")
    start, end, after = slot_params(name, slot)
    shown = f"{period_value(slot.kind, period.first, period.last)} ({period.text})"
    return Filled({start: period.first.isoformat(), end: period.last.isoformat(),
                   after: (period.last + dt.timedelta(days=1)).isoformat()}, shown)


def coded_values(values: dict[str, str]) -> dict[str, str]:
    """Folded text → code, for a coded column: each code and each meaning, except a text two
    codes share (it could mean either)."""
    out: dict[str, str] = {}
    clash: set[str] = set()
    for code, meaning in values.items():
        for text in {code, meaning or code}:
            key = text.casefold()
            if key in out and out[key] != code:
                clash.add(key)
            out[key] = code
    return {k: v for k, v in out.items() if k not in clash}


def read_coded(name: str, texts: dict[str, str], text: str) -> Filled | None:
    """One of the column's codes or meanings (``A`` or ``优秀``); the code is bound."""
    code = texts.get(text.casefold())
    if code is None:
        return None
    return Filled({name: code}, code if code == text else f"{code} ({text})")


def coded_pattern(texts: dict[str, str]) -> str:
    """A regular expression matching exactly the accepted texts, longest first."""
    return "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True))
