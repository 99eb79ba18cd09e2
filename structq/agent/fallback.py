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
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError, ModelError, StructqError

from .keywords import KeywordSearch, keyword_search
from .synthesis import is_chinese, render_deterministic

if TYPE_CHECKING:
    from .agent import Agent
    from .results import PlanResult
    from .plan import Plan

__all__ = ["FALLBACKS", "keyword_fallback", "label", "wants_fallback"]

#: Values ``STRUCTQ_FALLBACK`` / ``--fallback`` accept ("off" is no fallback).
FALLBACKS = ("keywords", "off")


def wants_fallback(agent: Agent, question: str, today: dt.date, failure: BaseException) -> bool:
    """Whether ``failure`` is a planning failure the keyword fallback is configured to answer."""
    if agent.settings.fallback != "keywords":
        return False
    if isinstance(failure, ModelError):
        return True
    # Without a model the only ConfigError left is "no language model is configured", unless a
    # verified example matched (its plan ran and failed on something else).
    return isinstance(failure, ConfigError) and not agent.has_model and agent.verified.get(question, today) is None


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


def _why_not(failure: BaseException, agent: Agent) -> BaseException:
    """``failure`` with the reason the keyword fallback did not run added to its first line; the
    same error otherwise (its type, code and exit status stay the caller's contract)."""
    declared = [(f"{m.source}.{i.name}", i.draft) for m in agent.capabilities for i in m.indices]
    searchable = [name for name, draft in declared if not draft]
    if not declared:
        sources = ", ".join(f"{m.source} ({m.kind})" for m in agent.capabilities)
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


async def keyword_fallback(agent: Agent, question: str, *, vars: dict[str, Any], today: dt.date,
                           failure: BaseException) -> tuple[Plan, PlanResult, str, list[str]]:
    """Run the keyword search for ``question`` in place of a failed plan: (plan, results, text,
    notes). Raises ``failure`` when the fallback is not configured or does not apply."""
    if not wants_fallback(agent, question, today, failure):
        raise failure
    from structq.linking import load_values

    search = keyword_search(question, agent.capabilities, today, values=load_values(agent.capabilities))
    if not search.searches:
        raise _why_not(failure, agent)
    plan = search.plan
    results = await agent.engine.arun(plan, vars=vars)
    note = label(search, failure)
    notes = [note, *(n for s in search.searches for n in s.notes), *results.notes]
    return plan, results, f"{note}\n\n{render_deterministic(question, results)}", notes
