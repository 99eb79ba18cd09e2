"""The facade: ``Agent.ask`` plans, runs, repairs, answers and audits one question.

    question → verified example? → plan cache? → model (structured output)
             → run (sandbox + executors) ── retryable error ──→ repair (at most max_repairs)
             → empty? observe → revised plan (at most max_replans; see ``loop``)
             (adaptive: step by step, the model deciding after each; see ``adaptive``)
             → answer (model, or deterministic; a declining plan: its reason) → audit line

Only errors the model can fix go back to it (``PlanError``, ``SandboxViolation``, a query's
``ExecutionError``); an unavailable source or a timeout never does: the steps that need it
are left out with a note (a partial answer), or the question fails when nothing could be read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.config import Settings
from structq.errors import ConfigError, ModelError, StructqError

from .audit import AuditLog
from .bridge import run_sync
from .cache import PlanCache, VerifiedPlans
from .decline import decline_text
from .engine import Engine, RunResult
from .llm import CallLog, model_name, resolve_model
from .loop import Round, revise
from .plan import Plan
from .planner import Attempt, Planner
from .synthesis import citations, render_deterministic, synthesize

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel

    from structq.capabilities import CapabilitySet
    from structq.linking import Budget, Selection

    from .conversation import Conversation

__all__ = ["Agent", "Answer", "RepairsExhausted"]


class RepairsExhausted(ModelError):
    """The model's plans still failed after ``max_repairs`` repairs. ``attempts`` lists them all."""

    def __init__(self, attempts: list[Attempt]) -> None:
        listing = "\n".join(f"attempt {i}: {a.describe()}" for i, a in enumerate(attempts, 1))
        last = attempts[-1].error
        super().__init__(f"no working plan after {len(attempts)} attempts; last error: {last}\n{listing}",
                         hint="rephrase the question, or check that the manifests describe the data it needs")
        self.attempts = attempts


@dataclass
class Answer:
    """What ``ask`` returns: the text, its citations, the plan and every step's result."""

    question: str
    text: str
    plan: Plan
    results: RunResult
    citations: list[dict[str, Any]]
    notes: list[str]
    plan_source: str
    model_calls: CallLog = field(default_factory=CallLog)
    #: Each evaluation of a run that came back empty, and what came of it.
    rounds: list[Round] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The stable shape of ``structq ask --json``."""
        return {
            "question": self.question,
            "answer": self.text,
            "citations": self.citations,
            "plan": self.plan.to_dict(),
            "plan_source": self.plan_source,
            "steps": [s.to_dict() for s in self.results.steps.values()],
            "notes": self.notes,
            "model_calls": self.model_calls.to_list(),
            "rounds": [r.to_dict() for r in self.rounds],
        }


def _today(timezone: str | None) -> dt.date:
    """Today in the configured time zone (relative dates in questions resolve against it)."""
    if timezone and timezone != "local":
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {timezone!r}",
                              hint="set STRUCTQ_TIMEZONE to an IANA name such as Asia/Shanghai, or to 'local'") from None
        return dt.datetime.now(zone).date()
    return dt.date.today()


class Agent:
    """Answers questions over the sources described by a capability set."""

    def __init__(
        self,
        capabilities: "CapabilitySet",
        *,
        llm: "BaseChatModel | str | None" = None,
        settings: Settings | None = None,
        cache: PlanCache | None = None,
        audit: AuditLog | None = None,
        adaptive: bool | None = None,
    ) -> None:
        self.capabilities = capabilities
        self.settings = settings or Settings.from_env()
        if adaptive is not None:
            self.settings = dataclasses.replace(self.settings, adaptive=adaptive)
        self._llm_spec = llm if llm is not None else self.settings.llm
        self._model: Any = None
        self.engine = Engine(capabilities)
        self.verified = VerifiedPlans(capabilities)
        self.cache = cache if cache is not None else (self._default_cache() if self.settings.cache_enabled else None)
        self.audit = audit if audit is not None else (
            AuditLog(self.settings.audit_path, include_answer=self.settings.audit_answers)
            if self.settings.audit_enabled else None)

    @classmethod
    def from_path(cls, path: str | Path, *, llm: "BaseChatModel | str | None" = None, **kwargs: Any) -> "Agent":
        from structq.capabilities import CapabilitySet

        return cls(CapabilitySet.from_path(path), llm=llm, **kwargs)

    @staticmethod
    def _default_cache() -> PlanCache:
        from structq.config import user_cache_dir

        return PlanCache(user_cache_dir() / "plans.sqlite", best_effort=True)

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the model ----------------------------------------------------------------------

    @property
    def has_model(self) -> bool:
        """Whether a model is configured (without creating it)."""
        import os

        return self._model is not None or bool(self._llm_spec or os.environ.get("STRUCTQ_LLM") or os.environ.get("OPENAI_API_KEY"))

    @property
    def model(self) -> Any:
        """The chat model, created on first use; ``ConfigError`` when none is configured."""
        if self._model is None:
            self._model = resolve_model(self._llm_spec)
        return self._model

    def planner(self) -> Planner:
        return Planner(self.model, self.capabilities, timezone=self.settings.timezone or "local",
                       budget=self.link_budget())

    def link_budget(self) -> "Budget":
        """The schema-linking budget from the settings (``STRUCTQ_PROMPT_TOKENS``, ``STRUCTQ_LINK_TOKENS``)."""
        from structq.linking import Budget

        return Budget(prompt_tokens=self.settings.prompt_tokens, linked_tokens=self.settings.link_tokens)

    def link(self, question: str) -> "Selection":
        """The part of the catalogue the planner would be shown for ``question`` (no model call)."""
        from structq.linking import load_values, select

        return select(question, self.capabilities, budget=self.link_budget(), values=load_values(self.capabilities))

    # --- public API ---------------------------------------------------------------------

    def conversation(self) -> "Conversation":
        from .conversation import Conversation

        return Conversation(self)

    def plan(self, question: str, *, today: dt.date | None = None, use_cache: bool = True,
             conversation: "Conversation | None" = None) -> Plan:
        """A plan for ``question`` without running it (verified example, cache, or the model)."""
        today = today or _today(self.settings.timezone)
        context = conversation.context() if conversation else ""
        plan, _ = self._first_plan(question, today, use_cache, context)
        if plan is None:
            plan = self.planner().plan(question, today=today, log=CallLog(), context=context)
        return plan.validate_against(self.capabilities)

    def run(self, plan: Plan, *, vars: dict[str, Any] | None = None, question: str = "",
            answer: bool = False) -> Answer:
        """Run a given plan with no planning call; the answer is deterministic unless ``answer``."""
        log = CallLog()
        results = self.engine.run(plan, vars=vars)
        text, notes = self._answer(question, results, log, use_model=answer)
        return Answer(question, text, plan, results, citations(results), [*results.notes, *notes], "given", log)

    def ask(self, question: str, *, vars: dict[str, Any] | None = None, today: dt.date | None = None,
            answer: bool = True, use_cache: bool = True, conversation: "Conversation | None" = None) -> Answer:
        """Plan, run (repairing on retryable errors), answer with citations, and audit."""
        return run_sync(lambda: self.aask(question, vars=vars, today=today, answer=answer,
                                          use_cache=use_cache, conversation=conversation))

    async def aask(self, question: str, *, vars: dict[str, Any] | None = None, today: dt.date | None = None,
                   answer: bool = True, use_cache: bool = True, conversation: "Conversation | None" = None) -> Answer:
        vars = dict(vars or {})
        today = today or _today(self.settings.timezone)
        context = conversation.context() if conversation else ""
        log = CallLog()
        plan: Plan | None = None
        plan_source: str | None = None
        attempts: list[Attempt] = []
        results: RunResult | None = None
        rounds: list[Round] = []
        try:
            try:
                plan, plan_source, results, attempts, rounds = await self._plan_and_run(
                    question, vars, today, context, use_cache, log, with_values=answer)
            except (ConfigError, ModelError) as failure:  # planning failed: a keyword search, if configured
                from .fallback import keyword_fallback

                plan, results, text, notes = await keyword_fallback(self, question, vars=vars, today=today,
                                                                     failure=failure)
                plan_source = "keywords"
            else:
                text, notes = await asyncio.to_thread(self._answer, question, results, log, answer)
            result = Answer(question, text, plan, results, citations(results),
                            [*(r.note() for r in rounds), *results.notes, *notes], plan_source, log, rounds)
        except BaseException as exc:
            tried = len(getattr(exc, "attempts", ())) or len(attempts) + 1
            self._audit(question, vars, plan, plan_source, results, log, None, exc, tried, rounds)
            raise
        self._audit(question, vars, plan, plan_source, results, log, result.text, None, len(attempts) + 1, rounds)
        return result

    def as_tool(self, **kwargs: Any) -> Any:
        """This agent as a LangChain tool (see ``structq.langchain``)."""
        from structq.langchain import StructqTool

        return StructqTool.from_agent(self, **kwargs)

    # --- internals ----------------------------------------------------------------------

    def _first_plan(self, question: str, today: dt.date, use_cache: bool,
                    context: str) -> tuple[Plan | None, str | None]:
        """A plan that needs no model call: a verified example, then the cache."""
        if not context:
            verified = self.verified.get(question, today)
            if verified is not None:
                return verified, "verified"
        if use_cache and self.cache is not None and self.has_model:
            cached = self.cache.get(self._cache_key(question, today, context))
            if cached is not None:
                return cached, "cache"
        return None, None

    def _cache_key(self, question: str, today: dt.date, context: str) -> str:
        return PlanCache.key(question, fingerprint=self.capabilities.fingerprint(), model=model_name(self.model),
                             today=today.isoformat(), context=context)

    async def _plan_and_run(self, question: str, vars: dict[str, Any], today: dt.date, context: str,
                            use_cache: bool, log: CallLog, *, with_values: bool = True,
                            ) -> tuple[Plan, str, RunResult, list[Attempt], list[Round]]:
        plan, source = self._first_plan(question, today, use_cache, context)
        if plan is not None:
            # Verified and cached plans ran before; a failure now is the data's or the manifest's, not the model's.
            return plan, source or "verified", await self.engine.arun(plan, vars=vars), [], []
        planner = self.planner()
        attempts: list[Attempt] = []
        rounds: list[Round] = []
        while True:
            plan = None
            try:
                plan = await asyncio.to_thread(planner.plan, question, today=today, log=log, context=context, attempts=attempts)
                if self.settings.adaptive and not plan.declined:
                    from .adaptive import run_adaptive

                    plan, results, rounds = await run_adaptive(
                        planner, self.engine, question, plan, vars=vars, today=today, context=context, log=log,
                        max_replans=self.settings.max_replans, with_values=with_values)
                    break
                results = await self.engine.arun(plan, vars=vars)
            except StructqError as exc:
                if not exc.retryable:
                    raise
                attempts.append(Attempt(exc, plan, getattr(exc, "raw", None)))
                if len(attempts) > self.settings.max_repairs:
                    raise RepairsExhausted(attempts) from exc
                continue
            rounds = []
            if self.settings.max_replans and not plan.declined:
                plan, results, rounds = await revise(
                    planner, self.engine, question, plan, results, vars=vars, today=today, context=context, log=log,
                    max_replans=self.settings.max_replans, with_values=with_values)
            break
        # A refusal is not worth keeping; nor is a plan an adaptive run revised or cut short on
        # what this run's data showed (replayed later, it would skip the model's judgment).
        adapted = self.settings.adaptive and bool(rounds)
        if use_cache and self.cache is not None and not plan.declined and not adapted:
            self.cache.put(self._cache_key(question, today, context), question, plan)
        return plan, "model", results, attempts, rounds

    def _answer(self, question: str, results: RunResult, log: CallLog, use_model: bool) -> tuple[str, list[str]]:
        if results.plan.declined:  # ran nothing: the reason and what can be asked, no answer call
            return decline_text(question, results.plan, self.capabilities), []
        if use_model and self.has_model:
            return synthesize(self.model, question, results, log=log)
        return render_deterministic(question, results), []

    def _audit(self, question: str, vars: dict[str, Any], plan: Plan | None, plan_source: str | None,
               results: RunResult | None, log: CallLog, text: str | None, error: BaseException | None,
               plans_tried: int, rounds: "Sequence[Round]" = ()) -> None:
        if self.audit is None:
            return
        self.audit.record(question=question, vars=vars, plan=plan.to_dict() if plan else None, plan_source=plan_source,
                          run=results, model_calls=log.to_list(), answer=text, error=error, attempts=plans_tried,
                          rounds=[r.to_dict(with_values=self.audit.include_data) for r in rounds])
