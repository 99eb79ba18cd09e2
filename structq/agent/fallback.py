"""The keyword fallback: when a question cannot be planned, search for its words instead, and say
so.

It runs only when asked for (``Settings.fallback == "keywords"``: ``structq ask --fallback
keywords`` or ``STRUCTQ_FALLBACK=keywords``) and only where planning failed:

- no model is configured and no verified example matches (the ``ConfigError`` saying so), or
- a model is configured and planning failed (``ModelError``: no working plan after every
  repair, or the model unreachable).

Anything else — a sandbox refusal of a verified plan, an unavailable source, a missing caller
variable — is not a planning failure and is raised as before. So is the planning failure itself
when the question gives nothing to search for or no search source is declared, with the reason
the fallback could not stand in added to its message (the caller asked for the fallback: "no
language model is configured" alone would not tell them why they did not get it).

The result is labelled in the text, the notes and ``plan_source: "keywords"`` as what it is: the
documents that contain the question's words, not an answer to the question. No model writes an
answer from it.

The agent decides whether its planning failure is one the fallback answers (``wants_fallback``,
from its settings, its model and its verified examples); the fallback itself needs only the
sources and the engine that runs its plan.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, ModelError, StructqError

from .keywords import KeywordSearch, keyword_search
from .synthesis import is_chinese, render_deterministic

if TYPE_CHECKING:
    from collections.abc import Callable

    from structq.capabilities import CapabilitySet

    from .engine import Engine
    from .plan import Plan
    from .results import PlanResult

__all__ = ["FALLBACKS", "keyword_fallback", "label", "wants_fallback"]

#: Values ``STRUCTQ_FALLBACK`` / ``--fallback`` accept ("off" is no fallback).
FALLBACKS = ("keywords", "off")


def wants_fallback(fallback: str, failure: BaseException, *, has_model: bool, verified: "Callable[[], bool]") -> bool:
    """Whether ``failure`` is a planning failure the keyword fallback is configured to answer
    (``fallback``: ``Settings.fallback``; ``verified()``: whether a verified example matched the
    question, asked only when the answer depends on it)."""
    if fallback != "keywords":
        return False
    if isinstance(failure, ModelError):
        return True
    # Without a model the only ConfigError left is "no language model is configured", unless a
    # verified example matched (its plan ran and failed on something else).
    return isinstance(failure, ConfigError) and not has_model and not verified()


def label(search: KeywordSearch, failure: BaseException) -> str:
    """The line that says what this is: a keyword search, what it searched, and why."""
    zh = is_chinese(search.question)
    reason = failure.message if isinstance(failure, StructqError) else str(failure)
    reason = reason.splitlines()[0]
    parts = []
    for s in search.searches:
        what = ", ".join([*(f"“{p}”" for p in s.phrases), *s.filters])
        parts.append(f"{s.source}.{s.index}" + (f"（{what}）" if zh else f" ({what})"))
    if zh:
        return (f"这是关键词检索的结果，不是对问题的回答（无法为问题制定查询计划：{reason}）。"
                f"检索了 {'；'.join(parts)}。")
    return (f"Keyword search, not an answer to the question (the question could not be planned: {reason}). "
            f"Searched {'; '.join(parts)}.")


def _why_not(failure: BaseException, capabilities: CapabilitySet) -> BaseException:
    """``failure`` with the reason the keyword fallback did not run added to its first line; the
    same error otherwise (its type, code and exit status stay the caller's contract)."""
    declared = [(f"{m.source}.{i.name}", i.draft) for m in capabilities for i in m.indices]
    searchable = [name for name, draft in declared if not draft]
    if not declared:
        sources = ", ".join(f"{m.source} ({m.kind})" for m in capabilities)
        why = f"no search source is declared (the sources are {sources}), so there is nothing to search"
    elif not searchable:
        why = (f"every search index is still a draft ({', '.join(name for name, _ in declared)}); "
               "describe them and remove draft: true to search them")
    else:
        why = (f"the question leaves no word or known value to search {', '.join(searchable)} for "
               "(question words and the indices' own names are left out)")
    if isinstance(failure, StructqError):
        first, _, rest = failure.message.partition("\n")
        failure.message = f"{first}; the keyword fallback did not run: {why}" + (f"\n{rest}" if rest else "")
        failure.args = (failure.message, *failure.args[1:])
    return failure


async def keyword_fallback(question: str, capabilities: CapabilitySet, engine: Engine, *, vars: dict[str, Any],
                           today: dt.date, failure: BaseException) -> tuple[Plan, PlanResult, str, list[str]]:
    """Run the keyword search for ``question`` in place of a failed plan (once the agent found
    that ``wants_fallback``): (plan, results, text, notes). Raises ``failure``, with the reason
    added, when the question gives nothing to search."""
    from structq.linking import load_values

    search = keyword_search(question, capabilities, today, values=load_values(capabilities))
    if not search.searches:
        raise _why_not(failure, capabilities)
    plan = search.plan
    results = await engine.arun(plan, vars=vars)
    note = label(search, failure)
    notes = [note, *(n for s in search.searches for n in s.notes), *results.notes]
    return plan, results, f"{note}\n\n{render_deterministic(question, results)}", notes
