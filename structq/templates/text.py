"""Question text as matching sees it: width folded, sentence punctuation dropped, blanks squeezed.

``normalise_question`` also folds case: it keys verified questions and the plan cache.
``match_text`` keeps case, so that a slot's words reach the value lookup as the person wrote
them (``产品X``); templates compare their fixed words without regard to case.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["match_text", "normalise_question"]

#: Punctuation that carries no meaning in a question: quotes, brackets, sentence marks.
#: Math symbols (``>``, ``<``, ``+``, ``%``), ``-`` and separators inside numbers are kept:
#: "销售额>100" and "销售额<100" must never share a plan.
_DROPPED = re.compile(r"[\s\"'`“”‘’「」『』《》〈〉()（）\[\]【】{}?？!！。、，,;；:：~～…·]+")
_NUMBER_SEPARATOR = re.compile(r"(?<=\d)[.,](?=\d)")


def match_text(question: str) -> str:
    """Width folded (NFKC), quotes and sentence punctuation dropped, blanks squeezed; case kept.

    ``1,500`` and ``1.500`` (or ``>`` and ``<``) stay different.
    """
    folded = unicodedata.normalize("NFKC", question)
    protected = _NUMBER_SEPARATOR.sub(lambda m: "\x00" if m.group() == "." else "\x01", folded)
    words = _DROPPED.sub(" ", protected).split()
    return " ".join(words).replace("\x00", ".").replace("\x01", ",")


def normalise_question(question: str) -> str:
    """Fold width and case, drop quotes and sentence punctuation, collapse whitespace.

    ``“‘星火’项目组里…？”`` and ``'星火'项目组里…?`` normalise to the same text; ``1,500`` and
    ``1.500`` (or ``>`` and ``<``) do not.
    """
    return match_text(unicodedata.normalize("NFKC", question).casefold())
