"""A short follow-up that only changes a value: "那北斗呢？" after a slotted example's answer.

Without a model nothing reads the conversation, yet such a follow-up needs no reading: it is
the last templated question with one slot's value replaced. ``restated`` gives those
questions (one per slot whose value the earlier question spells out); the caller tries each
against the templates, and only a question the matcher accepts whole is answered — the new
value is still looked up in the data like any slot's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conversation import Turn

__all__ = ["restated"]

#: "那北斗呢？", "北斗呢", "换成北斗呢", "what about Beidou?", "and Beidou?" — the value alone.
_FOLLOW_UPS = (
    re.compile(r"^\s*(?:那么?|换成|改成|如果是)?\s*(?P<value>[^\s，,。？?]{1,30}?)\s*(?:的)?呢\s*[？?。.]?\s*$"),
    re.compile(r"^\s*(?:and|what about|how about)\s+(?P<value>[^?]{1,40}?)\s*\??\s*$", re.IGNORECASE),
)


def restated(question: str, turns: Sequence["Turn"]) -> list[str]:
    """The templated questions of the conversation, newest first, each with one slot's value
    replaced by the value ``question`` asks about; empty when ``question`` is not such a
    follow-up. (A follow-up of a follow-up: "那北斗呢？" restated is not a template's shape,
    the question before it is.)"""
    value = next((m.group("value") for p in _FOLLOW_UPS if (m := p.match(question))), None)
    if value is None:
        return []
    out: list[str] = []
    for turn in reversed(turns):
        template = turn.plan.get("template") or {}
        for shown in (template.get("slots") or {}).values():
            said = str(shown).split(" (", 1)[0]  # "2026-10 (上个月)" → "2026-10"
            if said and said != value and turn.question.count(said) == 1:
                asked = turn.question.replace(said, value)
                if asked not in out:
                    out.append(asked)
    return out
