"""Whether linking can trust its own choice for a question, and why not.

Lexical linking always returns *something*: the tables that share most words with the question.
That is right when the question and the names speak the same language, and confidently wrong
when they do not (a Chinese question over English names, an English one over German names),
or when the question names nothing the catalogue knows. Three signals, each with a reason a
person can read in ``structq plan --explain-linking``:

- **out of reach**: the question's language differs from the language some sources are named
  in, and nothing bridges them — no description or synonym in the question's language, no
  lexicon (``languages.py``, ``lexicon.py``). Those sources cannot be found by its words.
- **nothing found**: no table scored above ``MIN_SCORE`` (BM25 of the question's terms, in units
  of the catalogue's largest inverse document frequency, so the bar does not move with the
  catalogue's size) and no stored value matched.
- **too close to call**: a table left out for lack of budget scored within ``CLOSE`` of the best
  table kept, from a source none of whose tables was kept: the choice between two places was
  a coin toss.

The thresholds were calibrated on ``bench/linking.py``'s corpora: same-language questions stay
confident (≤ 10% flagged), cross-language questions either keep their tables or are flagged
(≥ 90%). A question flagged not confident is routed (``route.py``): one bounded model call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .languages import LANGUAGE_NAMES, question_language

if TYPE_CHECKING:
    from .index import LinkingIndex

__all__ = ["Confidence", "judge", "MIN_SCORE", "CLOSE"]

#: The best table's score, in units of the catalogue's largest idf, below which nothing was found.
MIN_SCORE = 0.5
#: A left-out table of an unseen source scoring at least this share of the best kept one is a tie.
CLOSE = 0.9


@dataclass(frozen=True)
class Confidence:
    """The verdict, the reasons against, and the measurements behind them."""

    confident: bool
    reasons: tuple[str, ...] = ()
    language: str = "en"
    #: Sources the question's language cannot reach (routing shows these first).
    unreachable: tuple[str, ...] = ()
    signals: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"confident": self.confident, "reasons": list(self.reasons), "language": self.language,
                "signals": self.signals}


def judge(index: "LinkingIndex", question: str, scores: dict[int, float],
          kept: set[int], *, matched_values: bool = False, bridged: frozenset[str] = frozenset(),
          notes: dict[str, Any] | None = None) -> Confidence:
    """The confidence of a selection: ``scores`` are the tables' linking scores, ``kept`` the
    tables kept; ``bridged`` the name languages a lexicon reached for this question; ``notes``
    more measurements to show with the verdict (the lexicon's words)."""
    reasons: list[str] = []
    language = question_language(question)
    reaches = index.reach
    unreachable = [r for r in reaches.values() if not r.reachable_from(language) and r.names not in bridged]
    if unreachable:
        tables = sum(r.tables for r in unreachable)
        named = sorted({LANGUAGE_NAMES.get(r.names, r.names) for r in unreachable})
        some = ", ".join(r.source for r in unreachable[:5]) + (", …" if len(unreachable) > 5 else "")
        reasons.append(f"the question is in {LANGUAGE_NAMES.get(language, language)}; {len(unreachable)} of "
                       f"{len(reaches)} sources ({tables} tables: {some}) are named in {' and '.join(named)} "
                       f"with no {LANGUAGE_NAMES.get(language, language)} description or synonym, so its words "
                       "cannot reach them (`structq describe --languages` adds synonyms)")
    unit = index.tables.max_idf
    best = max((scores.get(i, 0.0) for i in kept), default=0.0) if kept else max(scores.values(), default=0.0)
    strength = best / unit
    if strength < MIN_SCORE and not matched_values:
        reasons.append(f"no table or column matched the question's words well (best score {strength:.2f} < "
                       f"{MIN_SCORE}) and no stored value did")
    kept_sources = {index.source_of[i] for i in kept}
    rival = max((s for i, s in scores.items() if i not in kept and index.source_of[i] not in kept_sources),
                default=0.0)
    if best and rival >= CLOSE * best:
        reasons.append(f"too close to call: a table of a source not shown scored {rival / best:.0%} of the best "
                       "table kept")
    signals = {"strength": round(strength, 3), "rival": round(rival / best, 3) if best else 0.0,
               "unreachable_sources": len(unreachable), **(notes or {})}
    return Confidence(not reasons, tuple(reasons), language, tuple(r.source for r in unreachable), signals)
